"""Complementary pairs and answer balance (docs/protocols.md §2) on hand-worked cases."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from vqadiag.protocols.vqa.balance import (
    answer_counts_by_type,
    entropy_bits,
    entropy_by_type,
    per_type_prior,
    prior_answer,
    prior_predictions,
    weighted_mean_entropy,
)
from vqadiag.protocols.vqa.pairs import pair_both_correct, pair_identical


def test_both_correct_needs_full_accuracy_by_default() -> None:
    acc_a = np.array([1.0, 1.0, 0.9, 0.0])
    acc_b = np.array([1.0, 0.6, 1.0, 0.0])
    assert pair_both_correct(acc_a, acc_b).tolist() == [1, 0, 0, 0]
    # with τ = 0.6 the second and third pairs count too
    assert pair_both_correct(acc_a, acc_b, 0.6).tolist() == [1, 1, 1, 0]


def test_identical_predictions() -> None:
    same = pair_identical(["yes", "red", None, None], ["yes", "blue", "no", None])
    assert same.tolist() == [1, 0, 0, 0]
    with pytest.raises(ValueError):
        pair_identical(["a"], [])


def test_entropy_bits_by_hand() -> None:
    assert entropy_bits([5, 5]) == pytest.approx(1.0)  # two equal answers: 1 bit
    assert entropy_bits([1, 1, 1, 1]) == pytest.approx(2.0)
    assert entropy_bits([7]) == 0.0
    # p = (3/4, 1/4): −(.75 log2 .75 + .25 log2 .25) = 0.311278 + 0.5 = 0.811278
    assert entropy_bits([3, 1, 0]) == pytest.approx(0.8112781245)
    assert math.isnan(entropy_bits([]))


def test_weighted_mean_entropy_by_hand() -> None:
    types = ["is the"] * 4 + ["what color"] * 2
    answers = ["yes", "yes", "yes", "no", "red", "blue"]
    counts = answer_counts_by_type(types, answers)
    assert counts["is the"] == Counter({"yes": 3, "no": 1})
    h = entropy_by_type(counts)
    assert h["is the"] == pytest.approx(0.8112781245)
    assert h["what color"] == pytest.approx(1.0)
    # (4 × 0.811278 + 2 × 1.0) / 6 = 5.245112 / 6 = 0.874185
    assert weighted_mean_entropy(counts) == pytest.approx(0.8741854164)
    assert math.isnan(weighted_mean_entropy({}))


def test_priors_by_hand() -> None:
    types = ["is the", "is the", "what color", "what color", "what color", "how many"]
    answers = ["yes", "yes", "red", "blue", "blue", "2"]
    assert prior_answer(answers) == "yes"  # yes 2, blue 2: "yes" seen first
    assert per_type_prior(types, answers) == {
        "is the": "yes",
        "what color": "blue",
        "how many": "2",
    }
    preds = prior_predictions(["what color", "why"], {"what color": "blue"}, "yes")
    assert preds == ["blue", "yes"]
    with pytest.raises(ValueError):
        prior_answer([])
    with pytest.raises(ValueError):
        answer_counts_by_type(["a"], [])
