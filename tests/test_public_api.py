"""``import vqadiag`` exposes the API that mirrors the commands."""

from __future__ import annotations

from pathlib import Path

import pytest

import vqadiag

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "vqa2_tiny"


@pytest.mark.parametrize("name", vqadiag.__all__)
def test_every_public_name_resolves(name):
    assert getattr(vqadiag, name) is not None


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = vqadiag.nope


def test_api_returns_what_the_command_prints(run_cli):
    files = {
        "questions": EXAMPLE / "questions.json",
        "annotations": EXAMPLE / "annotations.json",
        "predictions": EXAMPLE / "predictions.json",
    }
    result = vqadiag.score_vqa(**files)
    cli = run_cli(
        "score", "vqa", *(x for k, v in files.items() for x in (f"--{k}", v)), "--json"
    ).json()
    assert result["overall"] == pytest.approx(67.5)
    assert cli["overall"] == result["overall"]
    assert cli["ci"]["overall"] == pytest.approx(result["ci"]["overall"])


def test_aliases_point_at_the_command_functions():
    from vqadiag.workflows import explain

    assert vqadiag.explain_train is explain.train
    assert vqadiag.explain_eval is explain.evaluate
    assert vqadiag.explain_show is explain.show
