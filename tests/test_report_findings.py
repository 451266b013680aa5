"""The report's findings (docs/report.md, "Findings"): Holm's correction and the interval
test on hand-worked numbers, the rules on hand-made models, and the fixture report."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from vqadiag.report.findings import ALPHA, findings, holm, interval_p
from vqadiag.report.overview import goodness, overview
from vqadiag.suites.base import FindingRule

FIX = Path(__file__).parent / "fixtures"


def test_holm_adjusts_in_step_down_order():
    # sorted: .005 (×4 = .02), .01 (×3 = .03), .03 (×2 = .06), .04 (×1 = .04 → max .06)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.6, 0.7]) == [1.0, 1.0]  # capped at 1
    assert holm([]) == []
    assert holm([0.2]) == [0.2]


def test_interval_p_reads_a_95_interval_as_a_normal_one():
    # an interval whose end touches the threshold: z = 1.96, p = 0.05
    assert interval_p(0.3, 0.1, 0.5, 0.5) == pytest.approx(0.05, abs=1e-9)
    assert interval_p(0.3, 0.1, 0.5, 0.3) == pytest.approx(1.0)
    # se = 10 / 3.919928 = 2.551067; z = 10 / se = 3.919928 → p = 8.86e-5
    assert interval_p(60.0, 55.0, 65.0, 50.0) == pytest.approx(8.8574e-5, rel=1e-3)
    # an interval of width 0 (one unit, or all units alike) is no evidence: p = 1
    assert interval_p(0.0, 0.0, 0.0, 0.5) == 1.0
    assert interval_p(0.5, 0.5, 0.5, 0.5) == 1.0


def _model(label, visual, **figures):
    summary = {
        k: {"value": v, "ci_low": v - 2, "ci_high": v + 2, "n": 100} for k, v in figures.items()
    }
    return SimpleNamespace(
        label=label, summary=summary, results={"model": {"capabilities": {"visual": visual}}}
    )


def _cmp(a, b, key, diff, p):
    return {"a": a, "b": b, "metric": key, "paired": True, "p_value": p,
            "difference": {"value": diff}, "test": "mcnemar_exact"}  # fmt: skip


def _verdicts(result):
    return {m["model"]: sorted(i["verdict"] for i in m["items"]) for m in result["models"]}


def test_rules_against_the_blind_baseline_with_holm():
    qo = _model("qo", "none", accuracy=50.0, fpvg_plus=0.0)
    weak = _model("weak-prior", "none", accuracy=40.0, fpvg_plus=0.0)
    v1 = _model("v1", "objects", accuracy=60.0, fpvg_plus=40.0)
    v2 = _model("v2", "pixels", accuracy=52.0, fpvg_plus=8.0)
    comparisons = [
        _cmp("v1", "qo", "accuracy", 10.0, 0.004),
        _cmp("qo", "v2", "accuracy", -2.0, 0.3),  # stored as qo − v2: the sign flips
        _cmp("v1", "qo", "fpvg_plus", 40.0, 0.001),
        _cmp("v2", "qo", "fpvg_plus", 8.0, 0.01),
        _cmp("v1", "weak-prior", "accuracy", 20.0, 1e-9),  # not the baseline: not used
    ]
    for i, c in enumerate(comparisons):
        c["anchor"] = f"cmp-{i}"
    # Holm over 4 tests: .001×4 = .004, .004×3 = .012, .01×2 = .02, .3×1 = .3
    result = findings([qo, weak, v1, v2], comparisons, {}, n_bootstrap=100)
    assert result["baseline"] == "qo" and result["tests"] == 4
    assert [f["p_adjusted"] for f in result["family"]] == pytest.approx([0.012, 0.004, 0.3, 0.02])
    assert _verdicts(result) == {
        "qo": [],  # blind: never "uses the image" nor "grounded"
        "weak-prior": [],
        "v1": ["grounded", "uses the image"],
        "v2": ["relies on language priors", "weakly grounded"],
    }
    v2_items = {i["verdict"]: i for i in result["models"][3]["items"]}
    prior = v2_items["relies on language priors"]
    assert prior["evidence"] == "cmp-1" and prior["p_adjusted"] == pytest.approx(0.3)
    assert prior["sentence"] == (
        "accuracy 52.00 not above 50.00 for blind qo (McNemar exact test, p = 0.3)"
    )
    # compared on fewer questions than either estimate (v2 diagnosed on 30 of qo's 100):
    # the sentence says where the test ran, beside each model's own figure
    comparisons[1]["difference"]["n"] = 30
    shared = findings([qo, weak, v1, v2], comparisons, {}, n_bootstrap=100)
    items = {i["verdict"]: i for i in shared["models"][3]["items"]}
    assert items["relies on language priors"]["sentence"] == (
        "accuracy 52.00 not above 50.00 for blind qo (McNemar exact test, p = 0.3); "
        "tested on the 30 units both were diagnosed on"
    )
    # found in review: the figures quoted were each model's own, not those tested; with
    # the comparison's values on the shared units (stored as qo − v2: qo is "a"), the
    # sentence gives them too, the finding's model first
    comparisons[1]["values"] = {"a": 46.0, "b": 36.0}
    there = findings([qo, weak, v1, v2], comparisons, {}, n_bootstrap=100)
    items = {i["verdict"]: i for i in there["models"][3]["items"]}
    assert items["relies on language priors"]["sentence"].endswith(
        "tested on the 30 units both were diagnosed on: 36.00 vs 46.00 there"
    )
    del comparisons[1]["values"]
    comparisons[1]["difference"]["n"] = 100  # the same questions: nothing added
    same = findings([qo, weak, v1, v2], comparisons, {}, n_bootstrap=100)
    assert {i["verdict"]: i for i in same["models"][3]["items"]}["relies on language priors"][
        "sentence"
    ] == prior["sentence"]
    # the correction decides: v2's FPVG+ p = .03 is below α alone, .06 after Holm, so
    # it is neither "weakly grounded" (needs the adjusted test) nor "not grounded" (needs
    # even the unadjusted test to fail): nothing is said about v2's grounding
    comparisons[3]["p_value"] = 0.03
    result = findings([qo, weak, v1, v2], comparisons, {}, n_bootstrap=100)
    assert _verdicts(result)["v2"] == ["relies on language priors"]
    # a p-value that is not a number is no evidence
    comparisons[3]["p_value"] = float("nan")
    result = findings([qo, weak, v1, v2], comparisons, {}, n_bootstrap=100)
    assert result["tests"] == 3 and _verdicts(result)["v2"] == ["relies on language priors"]


def test_rules_say_nothing_without_their_evidence():
    v1 = _model("v1", "objects", accuracy=60.0, fpvg_plus=40.0)
    result = findings([v1], [], {}, n_bootstrap=100)
    assert result["baseline"] is None and result["tests"] == 0
    assert _verdicts(result) == {"v1": []}
    assert "No blind model" in result["notes"][0]
    # a blind model present but no paired comparison (different data): still nothing
    qo = _model("qo", "none", accuracy=50.0)
    result = findings([qo, v1], [], {}, n_bootstrap=100)
    assert _verdicts(result) == {"qo": [], "v1": []} and result["notes"] == []


def test_threshold_rules_use_the_interval_and_link_the_card_cell():
    fragile = _model("a", "objects", r_score=0.3)  # interval [−1.7, 2.3]: not significant
    fragile.summary["r_score"].update(ci_low=0.2, ci_high=0.4)  # significant below 0.5
    steady = _model("b", "objects", r_score=0.45)
    steady.summary["r_score"].update(ci_low=0.3, ci_high=0.6)
    anchors = {("a", "r_score"): "cell-0-13", ("b", "r_score"): "cell-1-13"}
    result = findings([fragile, steady], [], anchors, n_bootstrap=100)
    # p(a) = 2(1 − Φ(0.2 / (0.2 / 3.92))) = 9e-5; p(b) = 0.51; Holm: 1.8e-4, 0.51
    assert _verdicts(result) == {"a": ["fragile to related questions"], "b": []}
    item = result["models"][0]["items"][0]
    assert item["evidence"] == "cell-0-13" and item["p_adjusted"] == pytest.approx(1.8e-4, rel=0.05)
    assert item["sentence"].startswith("R_score 0.300 [0.200, 0.400] below 0.5")


def test_a_threshold_rule_says_nothing_from_an_interval_of_width_0():
    """Found in review: the one main question of an 8-question run gives reasoning
    consistency 0.00 [0.00, 0.00], which fired "reasoning not backed by perception" at
    p = 0. No spread is no evidence: the rule says nothing, while the same value with an
    interval that excludes 50 still fires."""
    tiny = _model("tiny", "objects", reasoning_consistency=0.0)
    tiny.summary["reasoning_consistency"].update(ci_low=0.0, ci_high=0.0, n=1)
    wide = _model("wide", "objects", reasoning_consistency=20.0)
    wide.summary["reasoning_consistency"].update(ci_low=10.0, ci_high=30.0)
    result = findings([tiny, wide], [], {}, n_bootstrap=100)
    assert _verdicts(result) == {"tiny": [], "wide": ["reasoning not backed by perception"]}


def test_the_fixture_report_hand_worked(tmp_path):
    from vqadiag.workflows.report import report

    out = report([FIX / "results_a", FIX / "results_b", FIX / "results_c"], tmp_path / "r",
                 n_bootstrap=100)  # fmt: skip
    f = out["findings"]
    assert f["baseline"] == "question_only" and f["tests"] == 8
    family = {(t["model"], t["key"]): t for t in f["family"]}
    # A − B accuracy: McNemar p = 79/2048 (tests/fixtures/results_make.py); it ranks 7th
    # of 8 (the six interval tests are all smaller), so Holm gives 2p, and FPVG+'s
    # p = 1/16 takes the running maximum 2p as well: neither is significant after it
    acc, fpvg = family[("updn", "accuracy")], family[("updn", "fpvg_plus")]
    assert acc["p_value"] == pytest.approx(79 / 2048) and fpvg["p_value"] == 0.0625
    assert acc["p_adjusted"] == fpvg["p_adjusted"] == pytest.approx(2 * 79 / 2048)
    assert [t["p_adjusted"] for t in f["family"]] == pytest.approx(
        holm([t["p_value"] for t in f["family"]])
    )
    verdicts = _verdicts(f)
    # accuracy: above the baseline alone (p = 0.039) but not after Holm (0.077): neither
    # "uses the image" nor "relies on language priors"; FPVG+: not above even alone
    assert not {"uses the image", "relies on language priors"} & set(verdicts["updn"])
    assert "not grounded" in verdicts["updn"]
    # C is on other data: nothing against the blind baseline
    assert not {"uses the image", "relies on language priors"} & set(verdicts["symbolic"])
    assert verdicts["question_only"] == sorted(verdicts["question_only"])
    assert not {"grounded", "uses the image", "not grounded"} & set(verdicts["question_only"])
    # every finding's evidence is an element of the page
    html = (tmp_path / "r" / "report.html").read_text()
    for model in f["models"]:
        for item in model["items"]:
            assert f'id="{item["evidence"]}"' in html


def test_a_rule_must_say_how_it_fires():
    with pytest.raises(ValueError, match="fires"):
        FindingRule("accuracy", "blind", "sometimes", "x", "y")
    with pytest.raises(ValueError, match="compare"):
        FindingRule("accuracy", "median", "above", "x", "y")


def test_overview_shades_each_column_within_its_range():
    assert goodness(5.0, 0.0, 10.0, "higher") == 0.5
    assert goodness(2.0, 0.0, 10.0, "lower") == pytest.approx(0.8)
    assert goodness(3.0, 3.0, 3.0, "higher") == 0.5
    assert goodness(3.0, 0.0, 10.0, "neither") is None
    models = [("x", 40.0, 80.0), ("y", 60.0, 20.0), ("z", 50.0, None)]
    card = {
        "columns": [
            {"key": "accuracy", "label": "acc", "unit": "%", "direction": "higher", "suite": "a"},
            {"key": "delta", "label": "Δ", "unit": "%", "direction": "lower", "suite": "o"},
        ],
        "rows": [
            {"model": m, "reference": m == "x", "cells": {
                "accuracy": {"estimate": {"value": acc}, "anchor": f"cell-{i}-0"},
                "delta": {"estimate": None if d is None else {"value": d}, "anchor": f"c{i}"}}}
            for i, (m, acc, d) in enumerate(models)
        ],
    }  # fmt: skip
    view = overview(card)
    assert [(c["key"], c["lo"], c["hi"]) for c in view["columns"]] == [
        ("accuracy", 40.0, 60.0),
        ("delta", 20.0, 80.0),
    ]
    shades = [[c["goodness"] for c in row["cells"]] for row in view["rows"]]
    assert shades == [[0.0, 0.0], [1.0, 1.0], [0.5, None]]
    assert view["rows"][2]["cells"][1]["text"] == "-"
    assert ALPHA == 0.05


def test_a_sentence_may_name_a_figure_the_model_lacks():
    from vqadiag.report.findings import _sentence

    rule = FindingRule("delta", 20.0, "above", "x", "tail {summary[acc_tail]}, Δ {value}")
    model = _model("m", "objects", delta=50.0)
    test = {"p": 0.01, "difference": 30.0, "test": "interval", "other": None, "other_value": 20}
    assert _sentence(rule, model, test, 100) == "tail -, Δ 50.00"


def test_result_labels_are_unique(tmp_path):
    import json
    import shutil

    from vqadiag.report.results import load_result_dirs

    folders = []
    for i, name in enumerate(("m", "m", "m (2)")):
        folder = tmp_path / f"r{i}"
        shutil.copytree(FIX / "results_a", folder)
        results = json.loads((folder / "results.json").read_text())
        results["model"]["name"] = name
        (folder / "results.json").write_text(json.dumps(results))
        folders.append(folder)
    assert [rs.label for rs in load_result_dirs(folders)] == ["m", "m (2)", "m (2) (2)"]
