"""Robustness to basic-question noise: Acc_diff, R_score, monotonic fall (docs/protocols.md §4).

Huang et al., "A Novel Framework for Robustness Analysis of Visual QA Models",
§3 (eq. 2–3) and §4:

    Acc_diff = |Acc_clean − Acc_noisy|                        (percent)
    R_score  = clamp₀¹((√m − √Acc_diff) / (√m − √t)),   0 ≤ t < m ≤ 100

with tolerance ``t = 0.05`` and maximum robustness limit ``m = 20`` (paper
Table 1). R_score is 1 for Acc_diff ≤ t and 0 for Acc_diff ≥ m.

A basic-question ranking is *effective* when accuracy falls monotonically from
partition 1 (the 3 most similar basic questions) to partition 7 (§4 (a)).

All functions are pure: numbers and arrays in, numbers out. They broadcast, so
they work on a single figure and on a vector of bootstrap resamples alike.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vqadiag.metrics.compare import Statistic

DEFAULT_T = 0.05
DEFAULT_M = 20.0


def check_limits(t: float, m: float) -> None:
    """Validate the R_score parameters: ``0 ≤ t < m ≤ 100`` (docs/protocols.md §4, paper eq. 2).

    Raises ``ValueError`` naming the violated bound.
    """
    if not (np.isfinite(t) and np.isfinite(m)):
        raise ValueError(f"t and m must be finite numbers, got t={t}, m={m}")
    if t < 0:
        raise ValueError(f"t must be at least 0, got t={t}")
    if m > 100:
        raise ValueError(f"m must be at most 100, got m={m}")
    if not t < m:
        raise ValueError(f"t must be smaller than m, got t={t}, m={m}")


def accuracy_difference(acc_clean: float | np.ndarray, acc_noisy: float | np.ndarray):
    """``Acc_diff = |Acc_clean − Acc_noisy|`` in percent points (docs/protocols.md §4, paper §3).

    Both accuracies are in percent, measured with the dataset's own metric.
    """
    return np.abs(np.asarray(acc_clean, dtype=np.float64) - np.asarray(acc_noisy, np.float64))


def r_score(
    acc_diff: float | np.ndarray, t: float = DEFAULT_T, m: float = DEFAULT_M
) -> float | np.ndarray:
    """``R_score = clamp₀¹((√m − √Acc_diff) / (√m − √t))`` (docs/protocols.md §4, paper eq. 2–3).

    ``acc_diff`` is in percent points (non-negative; NaN stays NaN). Returns a
    float for a scalar input and an array otherwise.
    """
    check_limits(t, m)
    diff = np.asarray(acc_diff, dtype=np.float64)
    if np.any(diff < 0):
        raise ValueError("Acc_diff must be non-negative (it is an absolute difference)")
    raw = (np.sqrt(m) - np.sqrt(diff)) / (np.sqrt(m) - np.sqrt(t))
    out = np.clip(raw, 0.0, 1.0)
    return float(out) if out.ndim == 0 else out


def monotonic_violations(accuracies: Sequence[float], *, strict: bool = False) -> list[int]:
    """Partitions (1-based) whose accuracy does not fall from the previous one (paper §4 (a)).

    Partition k violates the fall when ``acc_k > acc_{k−1}`` (or ``≥`` when
    ``strict``). An empty list means accuracy falls monotonically.
    """
    acc = np.asarray(accuracies, dtype=np.float64)
    rises = acc[1:] >= acc[:-1] if strict else acc[1:] > acc[:-1]
    return [int(k) + 2 for k in np.flatnonzero(rises)]


def is_monotonic_fall(accuracies: Sequence[float], *, strict: bool = False) -> bool | None:
    """Whether accuracy falls monotonically over partitions 1..K (paper §4 (a)).

    Non-increasing by default (``acc_k ≤ acc_{k−1}``), strictly decreasing with
    ``strict``. ``None`` when fewer than two partitions are given (nothing to compare).
    """
    if len(accuracies) < 2:
        return None
    return not monotonic_violations(accuracies, strict=strict)


def r_score_statistic(t: float = DEFAULT_T, m: float = DEFAULT_M) -> Statistic:
    """R_score from column sums ``[clean correct, noisy correct, units]`` (docs/protocols.md §4):
    Acc_diff = 100 · |Σ clean − Σ noisy| / n, R = clamp₀¹((√m − √Acc_diff) / (√m − √t))."""
    check_limits(t, m)

    def statistic(sums: np.ndarray) -> np.ndarray:
        diff = 100.0 * np.abs(sums[:, 0] - sums[:, 1]) / sums[:, 2]
        return np.clip((np.sqrt(m) - np.sqrt(diff)) / (np.sqrt(m) - np.sqrt(t)), 0.0, 1.0)

    return statistic
