"""Ranking match of per-object importance with relevance annotations (FPVG paper §3.3, App. D.2).

For one question with importance scores s over its objects (attention, LOO,
GradCAM, ...), relevant objects relN (N = |relN|) and irrelevant objects
irrelM (M = |irrelM|):

* relevant score   = |topN ∩ relN| / |relN|   (higher is better for FPVG+)
* irrelevant score = |topM ∩ irrelM| / |irrelM| (lower is better for FPVG+)

where topK are the K objects with the highest scores (ties: lower index
first). Paper Table 1 averages each score over the FPVG+ and over the FPVG−
questions, in percent (docs/protocols.md §5).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: the two groups of FPVG questions importance is reported on (docs/protocols.md §5)
FPVG_GROUPS = ("fpvg_plus", "fpvg_minus")


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores; ties go to the lower index."""
    s = np.asarray(scores, dtype=np.float64)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(-s, kind="stable")
    return order[:k]


def ranking_match(
    scores: np.ndarray, relevant: Sequence[int], irrelevant: Sequence[int]
) -> tuple[float, float]:
    """``(|topN ∩ relN| / N, |topM ∩ irrelM| / M)`` as fractions; NaN where a set is empty."""
    s = np.asarray(scores, dtype=np.float64)
    if not np.isfinite(s).all():
        raise ValueError("importance scores must be finite")
    out = []
    for subset in (relevant, irrelevant):
        wanted = set(int(i) for i in subset)
        if not wanted:
            out.append(float("nan"))
            continue
        if max(wanted) >= s.shape[0] or min(wanted) < 0:
            raise ValueError("object index outside the scored objects")
        top = set(top_k(s, len(wanted)).tolist())
        out.append(len(top & wanted) / len(wanted))
    return out[0], out[1]


def ranking_match_by_fpvg(
    scores: Sequence[np.ndarray],
    relevant: Sequence[Sequence[int]],
    irrelevant: Sequence[Sequence[int]],
    fpvg: np.ndarray,
) -> dict[str, dict[str, float]]:
    """Mean ranking match (in %) over FPVG+ and FPVG− questions (paper Table 1).

    Returns ``{"relevant": {"fpvg_plus", "fpvg_minus"}, "irrelevant": {...},
    "n": {"fpvg_plus", "fpvg_minus"}}``; a mean over no questions is NaN.
    """
    flags = np.asarray(fpvg, dtype=bool)
    if not (len(scores) == len(relevant) == len(irrelevant) == flags.shape[0]):
        raise ValueError("scores, relevant, irrelevant and fpvg differ in length")
    pairs = np.array(
        [ranking_match(s, r, i) for s, r, i in zip(scores, relevant, irrelevant, strict=True)],
        dtype=np.float64,
    ).reshape(-1, 2)
    out: dict[str, dict[str, float]] = {"relevant": {}, "irrelevant": {}, "n": {}}
    for name, mask in zip(FPVG_GROUPS, (flags, ~flags), strict=True):
        for col, kind in enumerate(("relevant", "irrelevant")):
            vals = pairs[mask, col]
            vals = vals[np.isfinite(vals)]
            out[kind][name] = float(100.0 * vals.mean()) if vals.size else float("nan")
        out["n"][name] = int(mask.sum())
    return out
