"""Validity of the FPVG and gain suites on a chat VLM that answers (docs/chat-vlm.md,
"What holds"): on the demo world, the trained chat VLM and its blind twin, each diagnosed
through ``hf:`` like any local transformers model, on every val question (the measured
figures of docs/chat-vlm.md, "What holds"). The twin's FPVG+ is 0 up to its
interval and its multi-modal gain interval contains 0; the chat VLM's FPVG+ interval lies
above the twin's and its gain interval above 0.

It trains both models on the full demo world and diagnoses every val question: about 40
minutes on 2 cores, past CI's budget, so it runs when ``VQADIAG_CHAT_VLM_VALIDITY=1`` is
set (``VQADIAG_CHAT_VLM_VALIDITY=1 python -m pytest tests/test_chat_vlm_validity.py``).
The fast checks of the chat VLM (loading, determinism, the blind twin ignoring images,
in-process = served) are in ``tests/test_models_chat_vlm_training.py`` and run in CI."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("VQADIAG_CHAT_VLM_VALIDITY") != "1",
        reason="40 minutes on 2 cores: set VQADIAG_CHAT_VLM_VALIDITY=1 to run it",
    ),
]


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory):
    from typer.testing import CliRunner

    from vqadiag.cli.main import app
    from vqadiag.synth import generate_world

    root = tmp_path_factory.mktemp("chat_validity")
    world = root / "world"
    generate_world(world, images=2000, seed=0, progress=False)
    runner = CliRunner()
    summaries = {}
    for name, extra in (("chat", []), ("blind", ["-o", "blind=true"])):
        run = root / "runs" / name
        got = runner.invoke(app, ["train", "--model", "chat-vlm", "--data", str(world),
                                  "--out", str(run), "--quiet", "--json", *extra])  # fmt: skip
        assert got.exit_code == 0, got.output
        got = runner.invoke(app, ["diagnose", "--data", str(world), "--model",
                                  f"hf:{run / 'model'}", "--out",
                                  str(root / "results" / name), "--suite", "accuracy,fpvg,gain",
                                  "--json"])  # fmt: skip
        assert got.exit_code == 0, got.output
        summaries[name] = json.loads(got.stdout)["summary"]
    return summaries


def test_the_blind_twin_is_not_grounded_and_gains_nothing_from_the_image(diagnosed):
    blind = diagnosed["blind"]
    assert blind["fpvg_plus"]["ci_low"] <= 0.0 <= blind["fpvg_plus"]["ci_high"]
    assert blind["gain_gqa"]["ci_low"] <= 0.0 <= blind["gain_gqa"]["ci_high"]


def test_the_chat_vlm_is_more_grounded_than_its_twin_and_uses_the_image(diagnosed):
    chat, blind = diagnosed["chat"], diagnosed["blind"]
    assert chat["fpvg_plus"]["ci_low"] > blind["fpvg_plus"]["ci_high"]
    assert chat["gain_gqa"]["ci_low"] > 0.0
    assert chat["accuracy"]["value"] > blind["accuracy"]["value"]
