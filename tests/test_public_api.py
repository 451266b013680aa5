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

    assert vqadiag.explain_train.__wrapped__ is explain.train
    assert vqadiag.explain_eval.__wrapped__ is explain.evaluate
    assert vqadiag.explain_show.__wrapped__ is explain.show


def test_report_stays_the_function_after_its_subpackage_loads():
    """Found in review: ``vqadiag.report`` is also a subpackage's name, and loading that
    subpackage (as ``summary_table`` does) rebound the name to the module: the next
    ``vqadiag.report(...)`` was "'module' object is not callable"."""
    import importlib
    import inspect

    from vqadiag.workflows.report import report

    importlib.import_module("vqadiag.report.tables")
    importlib.import_module("vqadiag.report.findings")
    assert vqadiag.summary_table is not None
    assert inspect.unwrap(vqadiag.report) is report
    # and the subpackage of that name is still reached through it
    import vqadiag.report.tables as tables

    assert tables.summary_table.__module__ == "vqadiag.report.tables"


def test_api_arguments_are_bounded_as_the_command_bounds_them(tmp_path):
    """Found in review: the API took what the command refuses: ``n_bootstrap=0`` gave
    NaN intervals, ``top=-1`` every answer but one, ``predict(batch_size=0)`` wrote an
    empty prediction file. Each is one line naming the option, before any work."""
    files = [EXAMPLE / "questions.json", EXAMPLE / "annotations.json", EXAMPLE / "predictions.json"]
    for given, says in (
        ({"n_bootstrap": 0}, "--n-bootstrap: must be at least 10, got 0"),
        ({"n_bootstrap": 2.5}, "--n-bootstrap: must be a whole number, got 2.5"),
        ({"seed": -1}, "--seed: must be at least 0, got -1"),
        ({"seed": 2**64}, "--seed: must be at most 9223372036854775807"),
    ):
        with pytest.raises(vqadiag.DataError, match=says):
            vqadiag.score_vqa(*files, **given)
    with pytest.raises(vqadiag.DataError, match="--top: must be at least 1, got -1"):
        vqadiag.balance_stats(EXAMPLE / "annotations.json", top=-1)
    with pytest.raises(vqadiag.DataError, match="--batch-size: must be at least 1, got 0"):
        vqadiag.predict(tmp_path / "run", tmp_path / "data", tmp_path / "p.json", batch_size=0)
    assert not (tmp_path / "p.json").exists()
    assert vqadiag.score_vqa(*files, seed=3)["overall"] == pytest.approx(67.5)
    pairs = (EXAMPLE / "annotations.json", EXAMPLE / "pairs.json", EXAMPLE / "predictions.json")
    for threshold in (-1, 1.5, float("nan")):  # -1 gave both_correct 100 for a model at 0
        with pytest.raises(vqadiag.DataError, match="--pair-threshold: must be from 0 to 1"):
            vqadiag.score_pairs(*pairs, pair_threshold=threshold)
    for alpha in (-5, float("nan")):  # every question went to the head
        with pytest.raises(vqadiag.DataError, match="--alpha: must be a finite number greater"):
            vqadiag.score_ood(tmp_path / "q.json", alpha=alpha)


def test_api_results_hold_null_where_json_does():
    """``--json`` and ``results.json`` write NaN and infinities as null; the API's dicts
    hold None there too (they held NaN and -inf: 12 keys of a diagnosis differed)."""
    import math

    import numpy as np

    from vqadiag.arguments import finite_or_null, public

    raw = {"a": math.nan, "b": [np.float64("-inf"), 1.5, (np.float32("nan"), 2)], "c": "x"}
    assert finite_or_null(raw) == {"a": None, "b": [None, 1.5, (None, 2)], "c": "x"}
    assert public(lambda: raw)() == finite_or_null(raw)
    assert math.isnan(public(lambda: [math.nan])()[0])  # only dicts are --json's objects


def test_a_path_given_alone_is_one_item_not_its_characters(tmp_path):
    """Found in review: ``noisy="noise_1.json"`` was 44 partitions of one character,
    ``include_types="reasoning"`` the types 'r', 'e', …, ``plugins="mine.py"`` module
    'm'. A string or path given where a list goes is one item."""
    from vqadiag.arguments import one_or_many
    from vqadiag.plugins import load_plugins

    assert one_or_many("noise_1.json") == ["noise_1.json"]
    assert one_or_many(tmp_path) == [tmp_path] and one_or_many(None) == []
    assert one_or_many(("a", "b")) == ["a", "b"]
    plugin = tmp_path / "mine_alone.py"
    plugin.write_text("LOADED = True\n")
    assert load_plugins(str(plugin)) == [str(plugin)]
