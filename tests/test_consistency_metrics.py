"""Quadrants, consistency, balanced consistency, all-subs-wrong, attention correlation (§6)."""

from __future__ import annotations

import numpy as np
import pytest

from vqadiag.protocols.consistency.formulas import (
    all_subs_wrong,
    attention_correlation,
    balanced_pair_weights,
    consistency,
    consistency_columns,
    consistency_statistics,
    overall_accuracy,
    quadrant_counts,
    quadrant_percentages,
    reasoning_accuracy,
)

# Three mains: 0 right (subs right, wrong), 1 wrong (sub right), 2 right (subs wrong, wrong),
# plus main 3 right with no sub-question.
PAIR_MAIN = np.array([0, 0, 1, 2, 2])
MAIN_OK = np.array([True, False, True, True])
SUB_OK = np.array([True, False, True, False, False])


def test_quadrants_hand_worked():
    m_of_pair = MAIN_OK[PAIR_MAIN]  # [T, T, F, T, T]
    # M✓S✓: pair 0; M✓S✗: pairs 1, 3, 4; M✗S✓: pair 2; M✗S✗: none
    assert quadrant_counts(m_of_pair, SUB_OK).tolist() == [1, 3, 1, 0]
    assert quadrant_percentages(m_of_pair, SUB_OK) == {
        "main_correct_sub_correct": 20.0,
        "main_correct_sub_wrong": 60.0,
        "main_wrong_sub_correct": 20.0,
        "main_wrong_sub_wrong": 0.0,
    }


def test_consistency_hand_worked():
    # 1 / (1 + 3) = 25 %
    assert consistency(MAIN_OK[PAIR_MAIN], SUB_OK) == pytest.approx(25.0)
    assert np.isnan(consistency(np.zeros(3, bool), np.ones(3, bool)))  # no correct main


def test_all_subs_wrong_hand_worked():
    # correct mains with ≥ 1 sub: 0 and 2 (main 3 has none); main 2's subs are all wrong → 1/2
    assert all_subs_wrong(PAIR_MAIN, MAIN_OK, SUB_OK) == pytest.approx(50.0)


def test_reasoning_and_overall_accuracy():
    assert reasoning_accuracy(MAIN_OK) == pytest.approx(75.0)  # 3 of 4 mains, once each
    assert overall_accuracy(np.array([1.0, 0.9, 0.0, 0.3])) == pytest.approx(55.0)  # 2.2 / 4


def test_statistics_from_column_sums():
    cols = consistency_columns(PAIR_MAIN, MAIN_OK, SUB_OK)
    stats = consistency_statistics(cols.sum(axis=0))
    assert stats["main_correct_sub_wrong"][0] == pytest.approx(60.0)
    assert stats["consistency"][0] == pytest.approx(25.0)
    assert stats["consistency_balanced"][0] == pytest.approx(25.0)  # default weights are 1
    assert stats["all_subs_wrong"][0] == pytest.approx(50.0)
    assert stats["reasoning_accuracy"][0] == pytest.approx(75.0)
    assert stats["sub_accuracy"][0] == pytest.approx(40.0)  # 2 of 5 subs right
    # two rows of sums give two values per statistic (the bootstrap path)
    two = consistency_statistics(np.vstack([cols.sum(axis=0), cols[:1].sum(axis=0)]))
    assert two["consistency"][1] == pytest.approx(50.0)  # main 0 alone: 1 / (1 + 1)


def test_main_scores_column():
    cols = consistency_columns(PAIR_MAIN, MAIN_OK, SUB_OK, main_scores=[1.0, 0.3, 0.9, 1.0])
    # (1 + 0.3 + 0.9 + 1) / 4 = 80 %
    assert consistency_statistics(cols.sum(axis=0))["reasoning_score"][0] == pytest.approx(80.0)


def test_balanced_weights_hand_worked():
    w = balanced_pair_weights(["yes", "yes", "yes", "no", "red"])
    # min(3, 1) = 1: yes pairs 1/3 each, the no pair 1, other answers 1
    np.testing.assert_allclose(w, [1 / 3, 1 / 3, 1 / 3, 1.0, 1.0])
    main_ok = np.ones(5, dtype=bool)
    sub_ok = np.array([True, True, False, False, True])
    # plain: 3 / 5 = 60 %; balanced: (1/3 + 1/3 + 1) / (3 × 1/3 + 1 + 1) = (5/3) / 3 = 55.56 %
    assert consistency(main_ok, sub_ok) == pytest.approx(60.0)
    assert consistency(main_ok, sub_ok, w) == pytest.approx(500 / 9)


def test_balanced_weights_without_one_answer():
    # no "no" answer: min(2, 0) = 0, binary pairs drop out, the other answer keeps weight 1
    np.testing.assert_allclose(balanced_pair_weights(["yes", "yes", "two"]), [0.0, 0.0, 1.0])


def test_columns_reject_bad_indices():
    with pytest.raises(ValueError, match="outside"):
        consistency_columns(np.array([0, 5]), MAIN_OK, np.array([True, False]))
    with pytest.raises(ValueError, match="one value per pair"):
        consistency_columns(np.array([0, 1]), MAIN_OK, np.array([True]))


def test_attention_correlation_hand_worked():
    main = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])
    sub = np.array([[2.0, 4.0, 6.0], [3.0, 2.0, 1.0], [0.0, 1.0, 2.0]])
    r = attention_correlation(main, sub)
    assert r[0] == pytest.approx(1.0)  # proportional vectors
    assert r[1] == pytest.approx(-1.0)  # reversed
    assert np.isnan(r[2])  # constant main attention: undefined
    # a = [1, 0, 0], b = [1, 1, 0]: centred a = [2/3, −1/3, −1/3], b = [1/3, 1/3, −2/3]
    # Σab = 2/9 − 1/9 + 2/9 = 1/3; |a|² = 6/9, |b|² = 6/9 → r = (1/3) / (2/3) = 0.5
    assert attention_correlation([1.0, 0.0, 0.0], [1.0, 1.0, 0.0])[0] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="shape"):
        attention_correlation(np.ones((2, 3)), np.ones((2, 4)))
