"""R_score, Acc_diff and the monotonic-fall check on hand-worked cases (docs/protocols.md §4)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vqadiag.protocols.robustness.formulas import (
    accuracy_difference,
    check_limits,
    is_monotonic_fall,
    monotonic_violations,
    r_score,
)


def test_r_score_at_five_points():
    # √20 = 2√5 and √0.05 = √5/10, so R(5) = (2√5 − √5) / (2√5 − √5/10) = 1 / 1.9 = 0.526315...
    assert r_score(5.0) == pytest.approx(1 / 1.9, abs=1e-12)
    assert r_score(5.0) == pytest.approx(0.5263, abs=1e-4)


def test_r_score_quarter_of_limit():
    # √1.25 = √5/2: (2√5 − √5/2) / (1.9√5) = 1.5 / 1.9 = 0.789473...
    assert r_score(1.25) == pytest.approx(1.5 / 1.9, abs=1e-12)


def test_r_score_is_clamped():
    assert r_score(0.0) == 1.0  # raw value 2 / 1.9 = 1.0526 → clamped to 1
    assert r_score(0.05) == pytest.approx(1.0)  # exactly the tolerance
    assert r_score(20.0) == pytest.approx(0.0, abs=1e-15)  # exactly the limit
    assert r_score(30.0) == 0.0  # raw (√20 − √30)/… < 0 → 0


def test_r_score_custom_limits():
    # t = 1, m = 16, Acc_diff = 4: (4 − 2) / (4 − 1) = 2/3
    assert r_score(4.0, t=1.0, m=16.0) == pytest.approx(2 / 3, abs=1e-12)
    # t = 0, m = 100, Acc_diff = 25: (10 − 5) / 10 = 0.5
    assert r_score(25.0, t=0.0, m=100.0) == pytest.approx(0.5, abs=1e-12)


def test_r_score_broadcasts_over_arrays():
    out = r_score(np.array([[0.0, 5.0], [20.0, 40.0]]))
    assert out.shape == (2, 2)
    assert out[0, 0] == 1.0 and out[1, 1] == 0.0
    assert out[0, 1] == pytest.approx(1 / 1.9)


@pytest.mark.parametrize(
    ("first_partition_diff", "paper_r_score"),
    [
        # Paper Table 2 "First-dev" diff column → Table 1 R_score1 (t, m) = (0.05, 20):
        (13.55, 0.19),  # LSTM Q+I: (4.4721 − 3.6810) / 4.2485 = 0.1862
        (5.85, 0.48),  # HieCoAtt VGG19: (4.4721 − 2.4187) / 4.2485 = 0.4833
        (6.59, 0.45),  # HieCoAtt ResNet200: (4.4721 − 2.5671) / 4.2485 = 0.4484
        (10.20, 0.30),  # MUTAN w/o attention: (4.4721 − 3.1937) / 4.2485 = 0.3009
        (9.13, 0.34),  # MUTAN with attention: (4.4721 − 3.0216) / 4.2485 = 0.3414
        (8.67, 0.36),  # MLB: (4.4721 − 2.9445) / 4.2485 = 0.3596
    ],
)
def test_paper_table_1_is_partition_one(first_partition_diff, paper_r_score):
    assert round(r_score(first_partition_diff), 2) == paper_r_score


@pytest.mark.parametrize(
    ("t", "m", "message"),
    [
        (-0.1, 20, "at least 0"),
        (0.05, 101, "at most 100"),
        (20, 20, "smaller than m"),
        (30, 20, "smaller than m"),
        (math.nan, 20, "finite"),
    ],
)
def test_limits_are_validated(t, m, message):
    with pytest.raises(ValueError, match=message):
        check_limits(t, m)
    with pytest.raises(ValueError, match=message):
        r_score(1.0, t=t, m=m)


def test_negative_difference_is_rejected():
    with pytest.raises(ValueError, match="non-negative"):
        r_score(-1.0)


def test_accuracy_difference_is_absolute():
    assert accuracy_difference(60.16, 49.96) == pytest.approx(10.20)  # paper Table 2 MUTAN row
    assert accuracy_difference(40.0, 45.5) == pytest.approx(5.5)  # noise that helps also counts


def test_monotonic_fall():
    assert is_monotonic_fall([50.0, 48.0, 48.0, 47.0]) is True  # ties allowed by default
    assert is_monotonic_fall([50.0, 48.0, 48.0, 47.0], strict=True) is False
    assert monotonic_violations([50.0, 48.0, 48.0, 47.0], strict=True) == [3]
    # paper Table 2 HieCoAtt VGG19: third 51.08 → fourth 51.34 rises
    acc = [54.63, 52.67, 51.08, 51.34, 49.99, 50.27, 48.92]
    assert monotonic_violations(acc) == [4, 6]
    assert is_monotonic_fall(acc) is False
    assert is_monotonic_fall([50.0]) is None
