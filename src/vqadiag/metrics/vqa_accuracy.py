"""Official VQA v2 accuracy, vectorized (docs/protocols.md §1, steps 1–4).

Per question with annotator answers ``gt_1 … gt_N`` (N = 10 in VQA v2) and a
prediction ``pred``:

    acc = (1/N) Σ_i min(1, #{j ≠ i : gt_j == pred} / 3)

after step 1 (strip, ``\\n``/``\\t`` → space) and, only when the N answers are
not all identical, step 2 (:func:`~vqadiag.metrics.vqa_normalize.normalize_answer`
on the prediction and every answer). ``lenient=True`` always normalizes.

How it is fast: every distinct string is cleaned and normalized once; strings
become integer codes (one dict lookup each); matches are counted with numpy.
With ``c`` = number of annotators equal to the prediction, annotator ``i``
scores ``min(1, (c − 1)/3)`` when it matches and ``min(1, c/3)`` otherwise. The
N terms are added in annotator order, exactly as the official loop adds them,
so every per-question value equals the official one bit for bit (the float sum
depends on the order of the terms, e.g. 0.6 vs 0.6000000000000001).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from vqadiag.metrics.bootstrap import Estimate, mean_ci
from vqadiag.metrics.first_seen import first_seen_codes
from vqadiag.metrics.vqa_normalize import clean_whitespace, normalize_answer

MISSING_CODE = -2
_PAD_CODE = -1


def _padded(flat: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Lay a flat code array out as rows of ``lengths``, padded with ``_PAD_CODE``."""
    n = lengths.shape[0]
    width = int(lengths.max()) if n else 0
    if n and np.all(lengths == width):
        return flat.reshape(n, width)
    out = np.full((n, width), _PAD_CODE, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    rows = np.repeat(np.arange(n), lengths)
    cols = np.arange(flat.shape[0]) - np.repeat(starts, lengths)
    out[rows, cols] = flat
    return out


def annotator_scores(n_matching: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Score of one annotator given ``c`` matching annotators (docs/protocols.md §1 step 3).

    Returns ``(hit, miss)``: ``min(1, (c − 1)/3)`` for an annotator who gave the
    predicted answer (left out, the other c − 1 match) and ``min(1, c/3)`` for one
    who did not.
    """
    c = np.asarray(n_matching, dtype=np.float64)
    return np.minimum(1.0, (c - 1.0) / 3.0), np.minimum(1.0, c / 3.0)


def vqa_accuracies(
    predictions: Sequence[str | None],
    answers: Sequence[Sequence[str]],
    *,
    lenient: bool = False,
) -> np.ndarray:
    """Per-question official VQA accuracy in [0, 1] (docs/protocols.md §1).

    ``predictions[k]`` is the model answer of question k (``None`` = missing,
    scored 0); ``answers[k]`` its annotator answers (at least one). Normalization
    is applied only to questions whose cleaned answers are not all identical,
    or to every question when ``lenient``.
    """
    if len(answers) != len(predictions):
        raise ValueError(f"{len(predictions)} predictions but {len(answers)} answer lists")
    counts = np.fromiter((len(a) for a in answers), dtype=np.int64, count=len(answers))
    flat = [a for row in answers for a in row]
    return vqa_accuracies_flat(predictions, flat, counts, lenient=lenient)


def vqa_accuracies_flat(
    predictions: Sequence[str | None],
    answers: list[str],
    answer_counts: np.ndarray,
    *,
    lenient: bool = False,
) -> np.ndarray:
    """:func:`vqa_accuracies` with the annotator answers laid out flat: question k has the
    ``answer_counts[k]`` answers that follow those of questions 0 … k−1 in ``answers``."""
    n = len(predictions)
    lengths = np.asarray(answer_counts, dtype=np.int64)
    if lengths.shape[0] != n:
        raise ValueError(f"{n} predictions but {lengths.shape[0]} answer lists")
    if n == 0:
        return np.zeros(0, dtype=np.float64)
    if np.any(lengths <= 0):
        raise ValueError(
            f"question {int(np.flatnonzero(lengths <= 0)[0])} has an empty answer list"
        )
    if int(lengths.sum()) != len(answers):
        raise ValueError(f"{len(answers)} answers but the counts add up to {int(lengths.sum())}")
    preds = list(predictions)
    if None in preds:
        present = np.fromiter((p is not None for p in preds), dtype=bool, count=n)
        preds = [p for p in preds if p is not None]
    else:
        present = np.ones(n, dtype=bool)

    # One code per distinct raw string (answers and predictions together).
    raw_codes, uniques = first_seen_codes(answers + preds)
    cleaned = [clean_whitespace(u) for u in uniques]
    clean_of_raw, clean_uniques = first_seen_codes(cleaned)
    norm_of_clean, _ = first_seen_codes([normalize_answer(u) for u in clean_uniques])

    gt_raw = raw_codes[: len(answers)]
    gt_clean = _padded(clean_of_raw[gt_raw], lengths)
    valid = gt_clean != _PAD_CODE
    pred_clean = np.full(n, MISSING_CODE, dtype=np.int64)
    pred_clean[present] = clean_of_raw[raw_codes[len(answers) :]]

    if lenient:
        normalize = np.ones(n, dtype=bool)
    else:
        big = np.iinfo(np.int64).max
        row_max = np.where(valid, gt_clean, -1).max(axis=1)
        row_min = np.where(valid, gt_clean, big).min(axis=1)
        normalize = row_min != row_max

    gt = gt_clean.copy()
    pred = pred_clean.copy()
    rows = np.flatnonzero(normalize)
    if rows.size:
        sub = gt_clean[rows]
        gt[rows] = np.where(sub == _PAD_CODE, _PAD_CODE, norm_of_clean[np.maximum(sub, 0)])
        p = pred_clean[rows]
        pred[rows] = np.where(p == MISSING_CODE, MISSING_CODE, norm_of_clean[np.maximum(p, 0)])

    match = (gt == pred[:, None]) & valid
    hit, miss = annotator_scores(match.sum(axis=1))
    total = np.zeros(n, dtype=np.float64)
    for j in range(gt.shape[1]):  # annotator order, as the official sum
        total += np.where(valid[:, j], np.where(match[:, j], hit, miss), 0.0)
    return total / lengths


def official_mean(values: np.ndarray) -> float:
    """``100 × Σ values / n`` with the sum taken left to right, as the official script.

    (docs/protocols.md §1 step 4; ``numpy.mean`` sums pairwise and can differ in the last bit.)
    NaN for an empty array.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return float("nan")
    return 100.0 * float(sum(v.tolist())) / v.size


def discrete_mean_ci(
    values: np.ndarray,
    *,
    scale: float = 100.0,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Estimate:
    """``scale × mean(values)`` with its percentile-bootstrap interval (docs/protocols.md §8).

    The interval is :func:`~vqadiag.metrics.bootstrap.mean_ci`'s (fast for the few
    distinct levels VQA accuracies take); the point value is summed left to right
    like :func:`official_mean`, so it equals the official script's figure bit for bit.
    """
    v = np.asarray(values, dtype=np.float64)
    n = v.shape[0]
    if n == 0:
        nan = float("nan")
        return Estimate(nan, nan, nan, 0)
    est = mean_ci(v, scale=scale, n_resamples=n_resamples, seed=seed, confidence=confidence)
    return Estimate(scale * float(sum(v.tolist())) / n, est.ci_low, est.ci_high, n)


def group_indices(labels: Sequence[Hashable]) -> dict[Hashable, np.ndarray]:
    """Row indices of each label (ascending), labels in first-seen order (for per-type
    means)."""
    codes, uniques = first_seen_codes(list(labels))
    if not uniques:
        return {}
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(1, len(uniques)))
    return dict(zip(uniques, np.split(order, bounds), strict=True))
