"""Class-conditional attribute priors and place-conditional class frequencies.

Skew formula (recorded in ``world.json``): for class ``c`` and family ``f`` with
support values ``v_0, v_1, … v_{K-1}`` (taxonomy order = real-world tendency),

    p(v_k | c) = (1 − s_c) / K + s_c · r^k / Σ_j r^j,    r = 0.15,
    s_c = bias · u_c,  u_c ~ Uniform(0.55, 1.0)  (one draw per class and family)

so ``bias = 0`` gives uniform attributes and ``bias → 1`` makes the first value
dominant ("bananas are mostly yellow"). The per-class factor ``u_c`` makes some
question groups much more imbalanced than others, which is what GQA-OOD's
entropy threshold selects (docs/protocols.md §3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vqadiag.synth.taxonomy import (
    CATEGORIES,
    CLASSES,
    FAMILIES,
    FAMILY_VALUES,
    PLACE_CATEGORY_WEIGHTS,
    PLACE_ONLY,
    PLACES,
)

DECAY = 0.15
SKEW_RANGE = (0.55, 1.0)
#: within a category, the k-th class is drawn with weight 1 / (k + 1) ** ZIPF
ZIPF = 0.6


@dataclass(frozen=True)
class Priors:
    """Attribute priors ``attr[family]`` (classes × values) and class weights (places × classes)."""

    attr: dict[str, np.ndarray]
    class_given_place: np.ndarray
    skew: dict[str, np.ndarray]

    def to_dict(self) -> dict[str, Any]:
        """The priors as plain JSON (non-zero probabilities only) for ``world.json``."""
        out: dict[str, Any] = {"attributes": {}, "classes_given_place": {}}
        for ci, cls in enumerate(CLASSES):
            entry: dict[str, Any] = {}
            for fam in FAMILIES:
                row = self.attr[fam][ci]
                if row.sum() > 0:
                    entry[fam] = {FAMILY_VALUES[fam][k]: float(row[k]) for k in np.flatnonzero(row)}
                    entry[f"{fam}_skew"] = float(self.skew[fam][ci])
            out["attributes"][cls.name] = entry
        for pi, place in enumerate(PLACES):
            row = self.class_given_place[pi]
            out["classes_given_place"][place] = {
                CLASSES[k].name: float(row[k]) for k in np.flatnonzero(row)
            }
        return out


def skewed_distribution(k: int, skew: float, decay: float = DECAY) -> np.ndarray:
    """``(1 − skew)/K + skew · decay^i / Σ_j decay^j`` for ``i = 0 … K−1`` (sums to 1)."""
    geometric = decay ** np.arange(k, dtype=np.float64)
    return (1.0 - skew) / k + skew * geometric / geometric.sum()


def build_priors(bias: float, rng: np.random.Generator) -> Priors:
    """Draw the world's priors for a given ``bias`` in [0, 1] (see module docstring)."""
    if not 0.0 <= bias <= 1.0:
        raise ValueError(f"bias must be in [0, 1], got {bias}")
    n = len(CLASSES)
    attr: dict[str, np.ndarray] = {}
    skew: dict[str, np.ndarray] = {}
    for fam in FAMILIES:
        values = FAMILY_VALUES[fam]
        table = np.zeros((n, len(values)))
        u = rng.uniform(*SKEW_RANGE, size=n)
        skew[fam] = bias * u
        for ci, cls in enumerate(CLASSES):
            support = cls.values(fam)
            if support:
                probs = skewed_distribution(len(support), skew[fam][ci])
                for value, p in zip(support, probs, strict=True):
                    table[ci, values.index(value)] = p
        attr[fam] = table
    weights = np.zeros((len(PLACES), n))
    rank = {cat: 0 for cat in CATEGORIES}
    for ci, cls in enumerate(CLASSES):
        k = rank[cls.category]
        rank[cls.category] += 1
        for pi, place in enumerate(PLACES):
            allowed = PLACE_ONLY.get(cls.name)
            if allowed is not None and place not in allowed:
                continue
            weights[pi, ci] = PLACE_CATEGORY_WEIGHTS[place].get(cls.category, 0.0) / (k + 1) ** ZIPF
    weights /= weights.sum(axis=1, keepdims=True)
    return Priors(attr, weights, skew)


def sample_rows(probs: np.ndarray, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One categorical draw per entry of ``rows`` from ``probs[rows]``; −1 for all-zero rows."""
    cdf = np.cumsum(probs, axis=1)
    u = rng.random(rows.shape[0])
    out = np.full(rows.shape[0], -1, dtype=np.int64)
    order = np.argsort(rows, kind="stable")
    bounds = np.searchsorted(rows[order], np.arange(probs.shape[0] + 1))
    for r in range(probs.shape[0]):
        idx = order[bounds[r] : bounds[r + 1]]
        total = cdf[r, -1]
        if idx.size and total > 0:
            picks = np.searchsorted(cdf[r], u[idx] * total, side="right")
            out[idx] = np.minimum(picks, probs.shape[1] - 1)
    return out
