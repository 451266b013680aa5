"""Bootstrap confidence intervals and paired tests (docs/protocols.md §8).

Every rate of a report carries a 95% percentile-bootstrap interval over its
units (questions, pairs or groups). Most statistics here are functions of
per-unit column sums, so one primitive does the resampling:

    S_b = Σ_i w_bi · X_i          (w_b: multinomial resample counts of the n units)

and a statistic is evaluated on every row ``S_b``. Model comparisons use a
paired bootstrap on the per-unit difference or McNemar's exact test.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_RESAMPLES = 1000
DEFAULT_CONFIDENCE = 0.95
_CHUNK_ELEMENTS = 8_000_000
_MAX_LEVELS = 4096


@dataclass(frozen=True, slots=True)
class Estimate:
    """A point estimate with its percentile-bootstrap interval and unit count."""

    value: float
    ci_low: float
    ci_high: float
    n: int

    @classmethod
    def from_bootstrap(
        cls, value: float, boot: np.ndarray, n: int, confidence: float = DEFAULT_CONFIDENCE
    ) -> Estimate:
        """A point value with the percentile interval of its bootstrap values ``boot``
        (NaN resamples ignored); an undefined (NaN) value gets a NaN interval."""
        value = float(value)
        if not np.isfinite(value):
            return cls(value, float("nan"), float("nan"), int(n))
        low, high = percentile_interval(boot, confidence)
        return cls(value, low, high, int(n))

    def to_dict(self) -> dict[str, float | int]:
        """The ``{"value", "ci_low", "ci_high", "n"}`` object of the JSON contract."""
        return {"value": self.value, "ci_low": self.ci_low, "ci_high": self.ci_high, "n": self.n}


def distinct_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of the (n × k) float64 array ``x`` in ascending lexicographic
    order, and how often each occurs: ``np.unique(x, axis=0, return_counts=True)``, the
    same arrays bit for bit, without its slow sort of whole rows where it can
    (docs/protocols.md §8.1).

    * One column of finite values: a plain sort of that column, ``np.unique(x[:, 0])``
      (the one exception: with both 0.0 and −0.0 in the column, its zero level may carry
      the other sign than the row sort's; the same counts, and the same as before).
    * Columns of whole numbers 0 … m_j (indicators, counts; no −0.0): each row is the
      integer key Σ_j x_j · Π_{l>j} (m_l + 1), whose ascending order is the rows'
      lexicographic order; one sort of n integers, and the rows are read back from the
      distinct keys.
    * Anything else (fractions, negatives, NaN, or keys beyond 2⁶²): ``np.unique``.
    """
    n, k = x.shape
    finite = bool(np.isfinite(x).all())
    if k == 1 and finite:
        values, counts = np.unique(x[:, 0], return_counts=True)
        return values[:, None], counts
    if finite and n and not np.signbit(x).any() and (x == np.floor(x)).all():
        radix = [int(m) + 1 for m in x.max(axis=0).tolist()]
        if math.prod(radix) < 2**62:
            weights = np.array([math.prod(radix[j + 1 :]) for j in range(k)], dtype=np.int64)
            keys, counts = np.unique(x.astype(np.int64) @ weights, return_counts=True)
            levels = np.empty((len(keys), k))
            for j in range(k - 1, -1, -1):
                keys, levels[:, j] = np.divmod(keys, radix[j])
            return levels, counts
    return np.unique(x, axis=0, return_counts=True)


def resampled_sums(
    columns: np.ndarray, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> np.ndarray:
    """Column sums of ``columns`` (n × k) over ``n_resamples`` bootstrap resamples → (B × k).

    A resample draws n units with replacement; only how often each unit is drawn
    matters, so the sums are ``w_b · X`` with resample counts ``w_b``.

    * Few distinct rows (binary correctness, VQA's 0/0.3/0.6/0.9/1 …): with U
      distinct rows r_u drawn c_u times in the data, the counts of each distinct
      row are Multinomial(n, c_u / n) — the same distribution as drawing unit
      indices — so each resample costs O(U) instead of O(n).
    * Otherwise: n unit indices per resample, one bincount, one matrix product;
      drawn in chunks so memory stays bounded for large n.
    """
    x = np.asarray(columns, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    n, k = x.shape
    out = np.zeros((n_resamples, k), dtype=np.float64)
    if n == 0:
        return out
    rng = np.random.default_rng(seed)
    levels, counts = distinct_rows(x)
    if len(levels) <= _MAX_LEVELS and len(levels) * 4 <= n:
        draws = rng.multinomial(n, counts / n, size=n_resamples)
        return draws.astype(np.float64) @ levels
    chunk = max(1, _CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, n_resamples, chunk):
        stop = min(n_resamples, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        weights = np.empty((stop - start, n), dtype=np.float64)
        for row in range(stop - start):
            weights[row] = np.bincount(idx[row], minlength=n)
        out[start:stop] = weights @ x
    return out


def percentile_interval(
    samples: np.ndarray, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[float, float]:
    """Percentile interval of bootstrap ``samples``, ignoring NaN (undefined resamples)."""
    finite = np.asarray(samples, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return float("nan"), float("nan")
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(finite, [tail, 100.0 - tail])
    return float(low), float(high)


def sums_statistic_ci(
    columns: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Estimate:
    """Estimate + interval of a statistic of column sums.

    ``statistic`` maps a (B × k) array of column sums to B values; it is also
    applied to the full-sample sums for the point estimate.
    """
    x = np.asarray(columns, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        value = statistic(x.sum(axis=0)[None, :])[0]
        boot = statistic(resampled_sums(x, n_resamples, seed))
    return Estimate.from_bootstrap(value, boot, x.shape[0], confidence)


def mean_ci(
    values: np.ndarray,
    *,
    scale: float = 100.0,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Estimate:
    """``scale × mean(values)`` with its bootstrap interval (default: a rate in percent).

    The mean of an empty array is NaN (with a NaN interval).
    """
    v = np.asarray(values, dtype=np.float64)
    n = v.shape[0]
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    return sums_statistic_ci(
        v, lambda s: scale * s[:, 0] / n, n_resamples=n_resamples, seed=seed, confidence=confidence
    )


def ratio_ci(
    numerator: np.ndarray,
    denominator: np.ndarray,
    *,
    scale: float = 100.0,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Estimate:
    """``scale × Σ numerator / Σ denominator`` over units, resampling units jointly."""
    cols = np.column_stack([np.asarray(numerator, float), np.asarray(denominator, float)])
    return sums_statistic_ci(
        cols,
        lambda s: scale * s[:, 0] / s[:, 1],
        n_resamples=n_resamples,
        seed=seed,
        confidence=confidence,
    )


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """Difference ``a − b`` of two models on the same units, with its test."""

    difference: Estimate
    p_value: float
    test: str

    def significant(self, alpha: float = 0.05) -> bool:
        """Whether the difference is significant at level ``alpha``."""
        return bool(self.p_value < alpha)

    def to_dict(self) -> dict[str, object]:
        return {"difference": self.difference.to_dict(), "p_value": self.p_value, "test": self.test}


def paired_bootstrap(
    a: np.ndarray,
    b: np.ndarray,
    *,
    scale: float = 100.0,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> PairedComparison:
    """Paired bootstrap of ``mean(a) − mean(b)`` over shared units.

    Two-sided p-value: 2 × min(P*(d ≤ 0), P*(d ≥ 0)) over the resampled
    differences d, capped at 1 (the percentile-bootstrap test).
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError("paired comparison needs per-unit values of equal length")
    n = a.shape[0]
    diff = a - b
    if n == 0:
        nan = float("nan")
        return PairedComparison(Estimate(nan, nan, nan, 0), nan, "paired bootstrap")
    boot = scale * resampled_sums(diff, n_resamples, seed)[:, 0] / n
    low, high = percentile_interval(boot, confidence)
    value = float(scale * diff.mean())
    p = min(1.0, 2.0 * min(np.mean(boot <= 0), np.mean(boot >= 0)))
    if np.all(diff == 0):
        p = 1.0
    return PairedComparison(Estimate(value, low, high, n), float(p), "paired bootstrap")


def mcnemar_exact(correct_a: np.ndarray, correct_b: np.ndarray) -> float:
    """McNemar's exact test on paired binary outcomes.

    With b = #(a right, b wrong) and c = #(a wrong, b right), the p-value is the
    two-sided binomial test of b successes in b + c trials at p = 1/2.
    """
    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.shape != b.shape:
        raise ValueError("McNemar's test needs paired outcomes of equal length")
    only_a = int(np.sum(a & ~b))
    only_b = int(np.sum(~a & b))
    if only_a + only_b == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


def official_rate_ci(
    values: np.ndarray, official: float, seed: int, n_bootstrap: int
) -> tuple[float | None, dict[str, Any] | None]:
    """An official script's point value (exact, as it sums) and the 95% percentile-bootstrap
    interval of ``100 × mean(values)`` over the units (docs/protocols.md §8); ``(None, None)``
    for no units."""
    if len(values) == 0:
        return None, None
    est = mean_ci(values, n_resamples=n_bootstrap, seed=seed).to_dict()
    est["value"] = official
    return official, est


def finite_or_none(value: float | None) -> float | None:
    """``value`` as a float, or ``None`` for a missing or NaN value (JSON has no NaN)."""
    return None if value is None or value != value else float(value)
