"""Paired model comparison (metrics/compare.py) on hand-worked cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vqadiag.metrics.compare import (
    MCNEMAR,
    PAIRED_BOOTSTRAP,
    bootstrap_p_value,
    cluster_sums,
    compare_rates,
    compare_statistic,
)
from vqadiag.protocols.ood.formulas import ood_delta_columns, ood_delta_statistic
from vqadiag.protocols.robustness.formulas import r_score_statistic


def test_mcnemar_on_binary_units_with_the_same_coverage():
    # 20 units: a right on 0..14, b right on 0..4 and 15, 16.
    # Discordant: a-only 10 (5..14), b-only 2 (15, 16) → two-sided binomial
    # p = 2 · P(X ≤ 2 | 12, ½) = 2 · (1 + 12 + 66) / 4096 = 158 / 4096.
    a = np.array([1] * 15 + [0] * 5)
    b = np.array([1] * 5 + [0] * 10 + [1, 1, 0, 0, 0])
    cmp = compare_rates(a, b, n_resamples=200, seed=0)
    assert cmp.test == MCNEMAR
    assert cmp.p_value == pytest.approx(158 / 4096)
    assert cmp.difference.value == pytest.approx(40.0)  # 75 % − 35 %
    assert cmp.difference.n == 20
    assert cmp.difference.ci_low <= 40.0 <= cmp.difference.ci_high


def test_identical_models_are_not_different():
    a = np.array([1, 0, 1, 1, 0])
    cmp = compare_rates(a, a.copy(), n_resamples=100)
    assert cmp.p_value == 1.0  # no discordant unit
    assert cmp.difference.value == 0.0
    soft = np.array([0.3, 1.0, 0.6, 0.0])
    cmp = compare_rates(soft, soft.copy(), n_resamples=100)
    assert cmp.test == PAIRED_BOOTSTRAP and cmp.p_value == 1.0


def test_soft_values_use_the_paired_bootstrap():
    # VQA accuracies: mean a = (1 + 0.6 + 0.3 + 1) / 4 = 0.725, b = (0 + 0.6 + 0.3 + 0) / 4 = 0.225
    a = np.array([1.0, 0.6, 0.3, 1.0])
    b = np.array([0.0, 0.6, 0.3, 0.0])
    cmp = compare_rates(a, b, n_resamples=500, seed=1)
    assert cmp.test == PAIRED_BOOTSTRAP
    assert cmp.difference.value == pytest.approx(50.0)
    # every unit's difference is ≥ 0, so no resample is below 0; the resamples that
    # draw only units 2 and 3 (difference 0) give P*(d ≤ 0) = p0 > 0 but small.
    assert 0.0 <= cmp.p_value < 0.2


def test_units_each_model_was_not_scored_on():
    # rate a = (1 + 1 + 0) / 3, rate b over units 2 and 3 only = (1 + 0) / 2
    a, has_a = np.array([1, 1, 0]), np.array([1, 1, 1])
    b, has_b = np.array([0, 1, 0]), np.array([0, 1, 1])
    cmp = compare_rates(a, b, has_a=has_a, has_b=has_b, n_resamples=200)
    assert cmp.difference.value == pytest.approx(100 * (2 / 3 - 1 / 2))
    assert cmp.test == PAIRED_BOOTSTRAP  # not the same units: no McNemar


def test_bootstrap_p_value_hand_cases():
    # d = [1, 2, 3, -1]: P(d ≤ 0) = 1/4, P(d ≥ 0) = 3/4 → p = 2 · 1/4
    assert bootstrap_p_value(np.array([1.0, 2.0, 3.0, -1.0]), 1.0) == pytest.approx(0.5)
    # NaN resamples are ignored: the same answer
    assert bootstrap_p_value(np.array([1.0, np.nan, 2.0, 3.0, -1.0]), 1.0) == pytest.approx(0.5)
    assert bootstrap_p_value(np.zeros(5), 0.0) == 1.0
    assert bootstrap_p_value(np.array([2.0, 3.0]), 2.5) == 0.0
    assert math.isnan(bootstrap_p_value(np.array([np.nan]), 1.0))


def test_cluster_sums_keep_first_seen_order():
    x = np.array([[1, 1], [0, 1], [1, 1], [1, 0]])
    out = cluster_sums(x, ["m2", "m1", "m2", "m3"])
    # m2: rows 0 + 2 = [2, 2]; m1: [0, 1]; m3: [1, 0]
    assert out.tolist() == [[2, 2], [0, 1], [1, 0]]
    assert cluster_sums(x, None) is not None and cluster_sums(x, None).shape == (4, 2)


def test_ood_delta_statistic():
    # head 3/4 = 75 %, tail 1/4 = 25 % → Δ = (75 − 25) / 25 · 100 = 200
    assert ood_delta_statistic(np.array([[3.0, 4.0, 1.0, 4.0]]))[0] == pytest.approx(200.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        assert math.isnan(ood_delta_statistic(np.array([[3.0, 4.0, 0.0, 4.0]]))[0])
    cols = ood_delta_columns(np.array([1, np.nan, 0]), np.array([np.nan, 1, np.nan]))
    assert cols.tolist() == [[1, 1, 0, 0], [0, 0, 1, 1], [0, 1, 0, 0]]


def test_r_score_statistic():
    # clean 10/10, noisy 9/10 → Acc_diff = 10;
    # R = (√20 − √10) / (√20 − √0.05) = (4.472136 − 3.162278) / (4.472136 − 0.223607) = 0.308309
    r = r_score_statistic()(np.array([[10.0, 9.0, 10.0], [5.0, 5.0, 10.0]]))
    assert r[0] == pytest.approx(0.308309, abs=1e-6)
    assert r[1] == 1.0  # no difference → clamped to 1
    with pytest.raises(ValueError):
        r_score_statistic(t=5, m=1)


def test_compare_statistic_difference_of_deltas():
    # a: head q1 right q2 wrong (50 %), tail t1 right t2 wrong (50 %) → Δ_a = 0
    # b: head both right (100 %), tail t1 right t2 wrong (50 %) → Δ_b = 100
    a = ood_delta_columns(np.array([1, 0, np.nan, np.nan]), np.array([np.nan, np.nan, 1, 0]))
    b = ood_delta_columns(np.array([1, 1, np.nan, np.nan]), np.array([np.nan, np.nan, 1, 0]))
    with np.errstate(divide="ignore", invalid="ignore"):
        cmp = compare_statistic(a, b, ood_delta_statistic, n_resamples=300, seed=0)
    assert cmp.difference.value == pytest.approx(-100.0)
    assert cmp.test == PAIRED_BOOTSTRAP and cmp.difference.n == 4
    with pytest.raises(ValueError):
        compare_statistic(a, b[:2], ood_delta_statistic)
