"""``benchmarks/bench_hf_generate.py`` works before a GPU session spends its device time on
it: its tiny CPU path builds the model, diagnoses through ``hf:``, replays the batches
through the adapter alone and through a bare ``generate`` loop, and both send the same
inputs and get the same tokens (docs/diagnose.md, "Benchmark"). No timing
is checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_hf_generate.py"


def test_tiny_run_replays_the_same_inputs_and_tokens(tmp_path: Path) -> None:
    args = ["--size", "tiny", "--questions", "12", "--images", "30", "--device", "cpu"]
    done = subprocess.run(
        [sys.executable, str(BENCH), *args, "--keep", str(tmp_path)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    # every generate call of both replays got the diagnosis's tensors and settings and
    # returned its token ids (digests; decoded texts of random weights would hardly differ)
    assert summary["same_inputs"] is True
    # 12 plain questions, and relevant-only / irrelevant-only runs for those with objects
    assert summary["questions"] > 12 and summary["calls"] >= 3
    assert all(rate > 0 for rate in summary["q_per_s"].values())
    assert "gqa.rel" in done.stdout and "gqa.irrel" in done.stdout
    assert (tmp_path / "llava-tiny" / "config.json").is_file()
