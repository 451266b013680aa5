"""Reasoning / perception consistency on VQA-introspect (docs/protocols.md §6).

Selvaraju et al., "SQuINTing at VQA Models", §5 and §7 (Table 1). Each main
(Reasoning) question j has sub (Perception) questions; every (main, sub) pair
falls in one quadrant:

    M✓S✓   main correct, sub correct        M✓S✗   main correct, sub wrong
    M✗S✓   main wrong,   sub correct        M✗S✗   main wrong,   sub wrong

Quadrants are percentages of all pairs (they sum to 100). Then

    consistency          = M✓S✓ / (M✓S✓ + M✓S✗)            (over pairs)
    consistency balanced = the same with pair weights that balance the sub
                           answers yes / no (:func:`balanced_pair_weights`)
    all_subs_wrong       = #{mains correct whose subs are all wrong}
                           / #{mains correct with at least one sub}
    reasoning accuracy   = #{mains correct} / #mains        (mains counted once)
    sub accuracy         = #{pairs with the sub correct} / #pairs

Every figure is a ratio of sums over main questions, so one table of per-main
columns (:func:`consistency_columns`) gives the point estimates and, with
resampled column sums, the bootstrap intervals over main questions
(:func:`consistency_statistics` works on any number of rows of sums).

The attention correlation of §7 is :func:`attention_correlation`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Names of the four quadrants in the JSON contract, in the paper's order (Table 1).
QUADRANTS = (
    "main_correct_sub_correct",
    "main_correct_sub_wrong",
    "main_wrong_sub_correct",
    "main_wrong_sub_wrong",
)

# Column layout of :func:`consistency_columns` (one row per main question).
_MS, _MNS, _NMS, _NMNS = 0, 1, 2, 3  # pair counts per quadrant
_PAIRS = 4  # number of sub-questions of the main
_MAIN_OK = 5  # 1 if the main is correct
_MAINS = 6  # 1 (counts mains)
_ALL_WRONG = 7  # 1 if main correct, ≥ 1 sub and every sub wrong
_OK_WITH_SUBS = 8  # 1 if main correct and ≥ 1 sub
_BAL_MS = 9  # Σ balanced weights of M✓S✓ pairs
_BAL_M = 10  # Σ balanced weights of M✓ pairs
_MAIN_SCORE = 11  # soft main score (e.g. VQA accuracy in [0, 1])
N_COLUMNS = 12


def quadrant_counts(main_correct_of_pair: np.ndarray, sub_correct: np.ndarray) -> np.ndarray:
    """Pair counts ``[M✓S✓, M✓S✗, M✗S✓, M✗S✗]`` (docs/protocols.md §6, paper §5).

    ``main_correct_of_pair[p]`` is the correctness of pair p's main question,
    ``sub_correct[p]`` that of its sub-question.
    """
    m = np.asarray(main_correct_of_pair, dtype=bool)
    s = np.asarray(sub_correct, dtype=bool)
    if m.shape != s.shape:
        raise ValueError("main and sub correctness need one value per pair")
    return np.array(
        [np.sum(m & s), np.sum(m & ~s), np.sum(~m & s), np.sum(~m & ~s)], dtype=np.int64
    )


def quadrant_percentages(main_correct_of_pair: np.ndarray, sub_correct: np.ndarray) -> dict:
    """The four quadrants in percent of all pairs, keyed by :data:`QUADRANTS` (paper Table 1).

    NaN when there are no pairs.
    """
    counts = quadrant_counts(main_correct_of_pair, sub_correct)
    total = counts.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        values = 100.0 * counts / total if total else np.full(4, np.nan)
    return {name: float(v) for name, v in zip(QUADRANTS, values, strict=True)}


def consistency(
    main_correct_of_pair: np.ndarray,
    sub_correct: np.ndarray,
    weights: np.ndarray | None = None,
) -> float:
    """``100 × Σ w·[M✓S✓] / Σ w·[M✓]`` over pairs (docs/protocols.md §6, paper §7 "Consistency").

    How often the sub-question is right given that the main is right. With
    ``weights`` (one per pair) this is the balanced consistency. NaN when no
    main question is correct.
    """
    m = np.asarray(main_correct_of_pair, dtype=bool)
    s = np.asarray(sub_correct, dtype=bool)
    w = np.ones(m.shape, dtype=np.float64) if weights is None else np.asarray(weights, float)
    den = float(np.sum(w[m]))
    return float("nan") if den == 0 else 100.0 * float(np.sum(w[m & s])) / den


def balanced_pair_weights(sub_classes: Sequence[str]) -> np.ndarray:
    """Pair weights of the balanced consistency (our reading of paper §7).

    The paper reports consistency "on a balanced version of the sub-questions
    (to make sure models are not exploiting biases to gain consistency)"
    without saying how it balanced them; sub answers in VQA-introspect are
    mostly "yes". We balance the two binary answers: pairs whose (normalized)
    sub answer is ``"yes"`` get weight ``min(n_yes, n_no) / n_yes``, ``"no"``
    pairs ``min(n_yes, n_no) / n_no``, every other pair weight 1. This is the
    expected outcome of down-sampling the majority binary answer to the size of
    the minority one, computed without randomness. If one of the two answers is
    absent, binary pairs get weight 0.

    ``sub_classes`` holds each pair's normalized sub answer.
    """
    cls = np.asarray(list(sub_classes), dtype=object)
    yes = cls == "yes"
    no = cls == "no"
    n_yes, n_no = int(yes.sum()), int(no.sum())
    keep = min(n_yes, n_no)
    w = np.ones(cls.shape[0], dtype=np.float64)
    if n_yes:
        w[yes] = keep / n_yes
    if n_no:
        w[no] = keep / n_no
    return w


def all_subs_wrong(pair_main: np.ndarray, main_correct: np.ndarray, sub_correct: np.ndarray):
    """``100 × #{mains correct, all subs wrong} / #{mains correct with ≥ 1 sub}`` (paper §5).

    The paper's 9.02% for Pythia: "the model gets *all* the sub questions wrong
    when the main question is right". ``pair_main[p]`` is the index (into
    ``main_correct``) of pair p's main question. NaN when no main with
    sub-questions is correct.
    """
    cols = consistency_columns(pair_main, main_correct, sub_correct)
    return float(consistency_statistics(cols.sum(axis=0)[None, :])["all_subs_wrong"][0])


def reasoning_accuracy(main_correct: np.ndarray) -> float:
    """``100 × #{mains correct} / #mains``, each main counted once (paper Table 1 caption)."""
    m = np.asarray(main_correct, dtype=bool)
    return float("nan") if m.size == 0 else 100.0 * float(m.sum()) / m.size


def overall_accuracy(scores: np.ndarray) -> float:
    """``100 × mean(scores)`` over the whole evaluation set (paper §7 "Overall").

    ``scores`` are per-question accuracies (VQA accuracy in [0, 1] or 0/1 matches).
    """
    s = np.asarray(scores, dtype=np.float64)
    return float("nan") if s.size == 0 else 100.0 * float(s.sum()) / s.size


def consistency_columns(
    pair_main: np.ndarray,
    main_correct: np.ndarray,
    sub_correct: np.ndarray,
    *,
    pair_weights: np.ndarray | None = None,
    main_scores: np.ndarray | None = None,
) -> np.ndarray:
    """Per-main-question columns whose sums give every consistency figure.

    Row j describes main question j: its pair counts per quadrant, its number
    of sub-questions, its correctness, whether all its subs are wrong, the
    balanced-weight sums and its soft score (``main_scores``, default the 0/1
    correctness). Mains without sub-questions still count for the reasoning
    accuracy. Feed the column sums (or resampled column sums) to
    :func:`consistency_statistics`.
    """
    mc = np.asarray(main_correct, dtype=bool)
    n_main = mc.shape[0]
    pm = np.asarray(pair_main, dtype=np.int64)
    sc = np.asarray(sub_correct, dtype=bool)
    if pm.shape != sc.shape:
        raise ValueError("pair_main and sub_correct need one value per pair")
    if pm.size and (pm.min() < 0 or pm.max() >= n_main):
        raise ValueError("pair_main holds an index outside the main questions")
    w = np.ones(pm.shape[0]) if pair_weights is None else np.asarray(pair_weights, float)
    m_of_pair = mc[pm]
    cols = np.zeros((n_main, N_COLUMNS), dtype=np.float64)
    for col, mask in (
        (_MS, m_of_pair & sc),
        (_MNS, m_of_pair & ~sc),
        (_NMS, ~m_of_pair & sc),
        (_NMNS, ~m_of_pair & ~sc),
    ):
        cols[:, col] = np.bincount(pm[mask], minlength=n_main)
    cols[:, _PAIRS] = np.bincount(pm, minlength=n_main)
    cols[:, _MAIN_OK] = mc
    cols[:, _MAINS] = 1.0
    has_subs = cols[:, _PAIRS] > 0
    right_subs = cols[:, _MS] + cols[:, _NMS]
    cols[:, _ALL_WRONG] = mc & has_subs & (right_subs == 0)
    cols[:, _OK_WITH_SUBS] = mc & has_subs
    cols[:, _BAL_MS] = np.bincount(pm, weights=w * (m_of_pair & sc), minlength=n_main)
    cols[:, _BAL_M] = np.bincount(pm, weights=w * m_of_pair, minlength=n_main)
    cols[:, _MAIN_SCORE] = mc if main_scores is None else np.asarray(main_scores, float)
    return cols


def consistency_statistics(sums: np.ndarray) -> dict[str, np.ndarray]:
    """Every figure (percent) from rows of column sums of :func:`consistency_columns`.

    ``sums`` is (B × N_COLUMNS); each returned array has B values (NaN where a
    denominator is 0). Keys: the four :data:`QUADRANTS`, ``consistency``,
    ``consistency_balanced``, ``all_subs_wrong``, ``reasoning_accuracy``,
    ``reasoning_score`` (mean soft main score), ``sub_accuracy``.
    """
    s = np.atleast_2d(np.asarray(sums, dtype=np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        pairs = s[:, _PAIRS]
        out = {
            name: 100.0 * s[:, col] / pairs for name, col in zip(QUADRANTS, range(4), strict=True)
        }
        out["consistency"] = 100.0 * s[:, _MS] / (s[:, _MS] + s[:, _MNS])
        out["consistency_balanced"] = 100.0 * s[:, _BAL_MS] / s[:, _BAL_M]
        out["all_subs_wrong"] = 100.0 * s[:, _ALL_WRONG] / s[:, _OK_WITH_SUBS]
        out["reasoning_accuracy"] = 100.0 * s[:, _MAIN_OK] / s[:, _MAINS]
        out["reasoning_score"] = 100.0 * s[:, _MAIN_SCORE] / s[:, _MAINS]
        out["sub_accuracy"] = 100.0 * (s[:, _MS] + s[:, _NMS]) / pairs
    return out


def attention_correlation(main_attention: np.ndarray, sub_attention: np.ndarray) -> np.ndarray:
    """Pearson correlation of each pair's main and sub attention vectors (paper §7 "Attn Corr").

    Row p of both (P × K) arrays is the attention over the same K image regions
    for pair p's main and sub question:

        r_p = Σ_k (a_k − ā)(b_k − b̄) / sqrt(Σ_k (a_k − ā)² · Σ_k (b_k − b̄)²)

    Returns the P correlations (NaN where a vector is constant); the paper's
    figure is their mean (``numpy.nanmean``).
    """
    a = np.asarray(main_attention, dtype=np.float64)
    b = np.asarray(sub_attention, dtype=np.float64)
    if a.ndim == 1:
        a, b = a[None, :], np.atleast_2d(b)
    if a.shape != b.shape:
        raise ValueError(f"attention arrays differ in shape: {a.shape} vs {b.shape}")
    da = a - a.mean(axis=1, keepdims=True)
    db = b - b.mean(axis=1, keepdims=True)
    den = np.sqrt((da * da).sum(axis=1) * (db * db).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (da * db).sum(axis=1) / den
    r[den == 0] = np.nan
    return r
