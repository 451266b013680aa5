"""Complementary-pair analysis of Goyal et al. (docs/protocols.md §2; paper §4, "pairs").

For each pair (q, q') of the same question on two complementary images:

* both correct:  acc(q) ≥ τ and acc(q') ≥ τ   (τ = 1.0 by default: VQA acc 100%)
* identical:     the two predictions are the same answer (correct or not)
* different:     the two predictions differ   (= 100 − identical)

Rates are 100 × the mean over pairs; the bootstrap resamples pairs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DEFAULT_PAIR_THRESHOLD = 1.0


def pair_both_correct(
    acc_a: np.ndarray, acc_b: np.ndarray, threshold: float = DEFAULT_PAIR_THRESHOLD
) -> np.ndarray:
    """Per pair: 1.0 when both VQA accuracies reach ``threshold`` (protocols.md §2), else 0.0."""
    a = np.asarray(acc_a, dtype=np.float64)
    b = np.asarray(acc_b, dtype=np.float64)
    return ((a >= threshold) & (b >= threshold)).astype(np.float64)


def pair_identical(answers_a: Sequence[str | None], answers_b: Sequence[str | None]) -> np.ndarray:
    """Per pair: 1.0 when both predictions are the same answer (docs/protocols.md §2).

    A missing prediction (``None``) is never identical to anything.
    """
    if len(answers_a) != len(answers_b):
        raise ValueError("both sides of the pairs need the same number of answers")
    return np.fromiter(
        (
            a is not None and b is not None and a == b
            for a, b in zip(answers_a, answers_b, strict=True)
        ),
        dtype=np.float64,
        count=len(answers_a),
    )
