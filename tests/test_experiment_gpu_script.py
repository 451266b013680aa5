"""``experiments/gpu_chat_vlm_pretrain_world.sh``, the prepared GPU run of the chat VLM
with its tower pre-trained on another world, run small on the CPU: every step runs and
leaves its figures in ``$OUT`` (docs/chat-vlm.md, "On a GPU")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_gpu_script_runs_every_step_small_on_the_cpu(tmp_path):
    env = {
        **os.environ, "OUT": str(tmp_path / "out"), "WORK": str(tmp_path / "work"),
        "PYTHON": sys.executable, "DEVICE": "cpu", "IMAGES": "30", "PRETRAIN_IMAGES": "20",
        "PRETRAIN_EPOCHS": "1", "EPOCHS": "1",
    }  # fmt: skip
    done = subprocess.run(
        ["bash", "experiments/gpu_chat_vlm_pretrain_world.sh"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "out"
    bench = (out / "bench.txt").read_text()
    assert "batch 32, device cpu" in bench and "batch 256, device cpu" in bench
    times = (out / "device.txt").read_text()
    assert "worlds:" in times and "train:" in times and "diagnose:" in times
    trained = json.loads((out / "train.json").read_text())
    assert trained["pretrain"]["images"] == 14  # the 20-image world's train split
    assert trained["val"]["questions"] > 0
    results = json.loads((out / "results.json").read_text())
    assert {"accuracy", "gain"} <= set(results["suites"])
    assert trained["pretrain"]["resumed_epochs"] == 0 and (out / "tower.pt").is_file()

    # the next call, on a fresh machine: the checkpoint carried back, the benchmark skipped
    again = {**env, "OUT": str(tmp_path / "again"), "WORK": str(tmp_path / "work2"),
             "RESUME": str(out / "tower.pt"), "BENCH": "0"}  # fmt: skip
    done = subprocess.run(
        ["bash", "experiments/gpu_chat_vlm_pretrain_world.sh"], cwd=ROOT, env=again,
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (tmp_path / "again" / "bench.txt").exists()
    resumed = json.loads((tmp_path / "again" / "train.json").read_text())
    assert resumed["pretrain"] == {**trained["pretrain"], "resumed_epochs": 1}
    assert resumed["val"] == trained["val"]  # the same worlds, tower and answers
