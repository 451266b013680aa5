"""FPVG formulas (protocols.md §5, FPVG paper Eq. 4–12, App. C, §3.4, §4.4) on hand-worked cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vqadiag.data.formats.relevance_files import detector_statistics
from vqadiag.protocols.fpvg.formulas import (
    answers_equal,
    c2i_ratio,
    c2i_report,
    fpvg_indicators,
    fpvg_rates,
    mod_fpvg_indicators,
    relative_drop,
    suff_comp_report,
)

GOLD = ["yes", "red", "2", "cat", "no"]
ALL = ["yes", "red", "3", "dog", "no"]
REL = ["yes", "blue", "3", "dog", "no"]
IRREL = ["no", "red", "4", "dog", "no"]
# FPVG_j: q1 yes=yes ∧ yes≠no → 1; q2 red≠blue → 0; q3 3=3 ∧ 3≠4 → 1;
#         q4 dog=dog but dog=dog (irrel) → 0; q5 no=no, no=no → 0
# correct(all): q1 ✓ q2 ✓ q3 ✗ q4 ✗ q5 ✓


def test_fpvg_indicator_and_mod():
    assert fpvg_indicators(ALL, REL, IRREL).tolist() == [True, False, True, False, False]
    assert mod_fpvg_indicators(ALL, REL).tolist() == [True, False, True, True, True]


def test_missing_answers_equal_nothing():
    assert answers_equal([None, "a", None], [None, "a", "b"]).tolist() == [False, True, False]
    # missing â_all: [None = rel] false → FPVG 0 even though ≠ irrel
    assert fpvg_indicators([None], [None], ["x"]).tolist() == [False]
    with pytest.raises(ValueError, match="differ in length"):
        answers_equal(["a"], [])


def test_fpvg_rates_hand_worked():
    r = {k: v.value for k, v in fpvg_rates(ALL, REL, IRREL, GOLD, n_resamples=50).items()}
    assert r["fpvg_plus"] == pytest.approx(40.0)  # q1, q3 of 5
    assert r["fpvg_minus"] == pytest.approx(60.0)
    assert r["fpvg_plus_correct"] == pytest.approx(20.0)  # q1
    assert r["fpvg_plus_wrong"] == pytest.approx(20.0)  # q3
    assert r["fpvg_minus_correct"] == pytest.approx(40.0)  # q2, q5
    assert r["fpvg_minus_wrong"] == pytest.approx(20.0)  # q4
    four = ("fpvg_plus_correct", "fpvg_plus_wrong", "fpvg_minus_correct", "fpvg_minus_wrong")
    assert sum(r[k] for k in four) == pytest.approx(100.0)
    assert r["mod_fpvg_plus"] == pytest.approx(80.0)  # q1 q3 q4 q5
    assert r["acc_all"] == pytest.approx(60.0)
    assert r["acc_rel"] == pytest.approx(40.0)  # yes ✓, no ✓
    assert r["acc_irrel"] == pytest.approx(40.0)  # red ✓, no ✓


def test_fpvg_intervals_bracket_the_value():
    est = fpvg_rates(ALL, REL, IRREL, GOLD, n_resamples=200, seed=3)["fpvg_plus"]
    assert est.ci_low <= est.value <= est.ci_high and est.n == 5
    assert est.ci_low < est.ci_high


def test_c2i_ratio_and_drop():
    assert c2i_ratio(np.array([1, 1, 1, 0])) == 3.0
    assert c2i_ratio(np.array([1])) == math.inf
    assert math.isnan(c2i_ratio(np.array([], dtype=bool)))
    assert relative_drop(2.0, 0.5) == 75.0  # (2 − 0.5) / 2
    assert relative_drop(1.0, 1.5) == -50.0
    assert math.isnan(relative_drop(0.0, 1.0))


def test_c2i_report_hand_worked():
    # ID = questions 0-5, OOD = 6-11
    correct = np.array([1, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0], dtype=bool)
    fpvg = np.array([1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0], dtype=bool)
    split_id = np.arange(12) < 6
    values, ci = c2i_report(
        correct,
        {"fpvg_plus": fpvg, "fpvg_minus": ~fpvg},
        {"id": split_id, "ood": ~split_id},
        n_resamples=100,
    )
    # all: FPVG+ {0,1,2,6,7,8}: 3 correct / 3 wrong; FPVG− {3,4,5,9,10,11}: 1 / 5
    assert values["all"] == {"fpvg_plus": 1.0, "fpvg_minus": 0.2}
    # ID: FPVG+ {0,1,2} 2/1; FPVG− {3,4,5} 1/2.  OOD: FPVG+ {6,7,8} 1/2; FPVG− 0/3
    assert values["id"] == {"fpvg_plus": 2.0, "fpvg_minus": 0.5}
    assert values["ood"] == {"fpvg_plus": 0.5, "fpvg_minus": 0.0}
    # ID→OOD: FPVG+ (2 − 0.5)/2 = 75 %, FPVG− (0.5 − 0)/0.5 = 100 %
    assert values["drop_id_to_ood"] == pytest.approx({"fpvg_plus": 75.0, "fpvg_minus": 100.0})
    # FPVG+→FPVG−: all (1 − 0.2)/1 = 80 %, ID (2 − 0.5)/2 = 75 %, OOD (0.5 − 0)/0.5 = 100 %
    assert values["drop_plus_to_minus"] == pytest.approx({"all": 80.0, "id": 75.0, "ood": 100.0})
    assert ci["id"]["fpvg_plus"]["value"] == 2.0 and ci["id"]["fpvg_plus"]["n"] == 12
    assert set(ci["drop_plus_to_minus"]) == {"all", "id", "ood"}


def test_c2i_report_without_splits():
    values, _ = c2i_report(np.array([1, 0, 1], bool), {"fpvg_plus": np.array([1, 1, 0], bool)})
    assert values == {"all": {"fpvg_plus": 1.0}}  # no minus category → no drop


def test_suff_comp_hand_worked():
    p_all = np.array([0.9, 0.5, 0.6, 0.8])
    p_rel = np.array([0.895, 0.3, 0.6, 0.1])
    p_irrel = np.array([0.85, 0.05, 0.3, 0.8])
    # suff = [0.005, 0.2, 0.0, 0.7] → mean 0.22625; comp = [0.05, 0.45, 0.3, 0.0] → mean 0.2
    flip_rel = np.array([True, False, False, True])
    flip_irrel = np.array([False, True, True, False])
    values, ci = suff_comp_report(p_all, p_rel, p_irrel, flip_rel, flip_irrel, n_resamples=50)
    assert values["suff"] == pytest.approx(22.625) and values["comp"] == pytest.approx(20.0)
    cats = values["categories"]
    # suff good (< 0.01): q0, q2 → 50 %, flips among them: q0 → 50 %
    assert cats["suff_good"] == pytest.approx({"share": 50.0, "flip": 50.0, "n": 2})
    assert cats["suff_other"] == pytest.approx({"share": 50.0, "flip": 50.0, "n": 2})  # q1, q3
    # comp bad (< 0.2): q0, q3 (no irrel flips); medium: q2; best (≥ 0.4): q1
    assert cats["comp_bad"] == pytest.approx({"share": 50.0, "flip": 0.0, "n": 2})
    assert cats["comp_medium"] == pytest.approx({"share": 25.0, "flip": 100.0, "n": 1})
    assert cats["comp_best"] == pytest.approx({"share": 25.0, "flip": 100.0, "n": 1})
    assert cats["suff_good_comp_bad"]["share"] == pytest.approx(25.0)  # q0
    assert cats["suff_good_comp_best"]["share"] == 0.0
    assert cats["suff_other_comp_bad"]["share"] == pytest.approx(25.0)  # q3
    assert cats["suff_other_comp_best"]["share"] == pytest.approx(25.0)  # q1
    assert values["thresholds"] == {"suff_good": 0.01, "comp_bad": 0.2, "comp_best": 0.4}
    assert ci["categories"]["comp_best"]["flip"]["value"] == pytest.approx(100.0)


def test_comp_threshold_is_inclusive_at_best():
    # comp exactly 0.40 counts as best (≥); 0.20 is not bad (< 0.20 only) but medium
    values, _ = suff_comp_report(
        np.array([0.5, 0.5]),
        np.array([0.5, 0.5]),
        np.array([0.1, 0.3]),
        np.array([False, False]),
        np.array([True, False]),
        n_resamples=20,
    )
    assert values["categories"]["comp_best"]["n"] == 1
    assert values["categories"]["comp_medium"]["n"] == 1
    assert values["categories"]["comp_bad"]["n"] == 0


def test_detector_statistics():
    stats = detector_statistics([9, 9, 7], [2, 1, 3], [6, 8, 1])
    assert stats == {
        "questions": 3,
        "max_boxes": {"all": 9, "rel": 3, "irrel": 8},
        "avg_boxes": {"all": pytest.approx(25 / 3), "rel": 2.0, "irrel": 5.0},
    }


def test_batched_intervals_agree_with_one_call_per_statistic():
    # All FPVG statistics share one set of resamples; their intervals must agree with
    # separate mean_ci / sums_statistic_ci calls up to Monte Carlo error, and the same
    # seed must give the same intervals.
    from vqadiag.metrics.bootstrap import mean_ci, sums_statistic_ci

    rng = np.random.default_rng(1)
    gold = rng.choice(["a", "b", "c"], 300).tolist()
    runs = [rng.choice(["a", "b", "c"], 300).tolist() for _ in range(3)]
    rates = fpvg_rates(*runs, gold, n_resamples=2000, seed=5)
    assert rates == fpvg_rates(*runs, gold, n_resamples=2000, seed=5)
    correct = answers_equal(runs[0], gold)
    alone = mean_ci(correct, n_resamples=2000, seed=5)
    assert rates["acc_all"].value == alone.value
    assert rates["acc_all"].ci_low == pytest.approx(alone.ci_low, abs=1.0)
    assert rates["acc_all"].ci_high == pytest.approx(alone.ci_high, abs=1.0)
    fpvg = fpvg_indicators(*runs)
    _, ci = c2i_report(correct, {"fpvg_plus": fpvg}, n_resamples=2000, seed=5)
    cols = np.column_stack([fpvg & correct, fpvg & ~correct])
    alone = sums_statistic_ci(cols, lambda s: s[:, 0] / s[:, 1], n_resamples=2000, seed=5)
    assert ci["all"]["fpvg_plus"]["value"] == alone.value
    assert ci["all"]["fpvg_plus"]["ci_low"] == pytest.approx(alone.ci_low, rel=0.1)
    assert ci["all"]["fpvg_plus"]["ci_high"] == pytest.approx(alone.ci_high, rel=0.1)
