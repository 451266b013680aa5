"""Paired comparison of two models on the same units (docs/protocols.md §8).

A report says whether a difference between two models is real by testing it
on the units both were scored on (questions, pairs, main/sub pairs). Inputs are
per-unit values of each model (0/1 indicators, VQA accuracies in [0, 1],
suff/comp drops …), aligned on the same units; a unit a model was not scored
on carries weight 0 for that model (``has_a`` / ``has_b``).

* Rate of a mean: ``d = 100 · (Σ a_i / Σ h^a_i − Σ b_i / Σ h^b_i)``.
  - Both models scored on exactly the same units with 0/1 values: McNemar's
    exact test (two-sided binomial on the discordant units,
    :func:`vqadiag.metrics.bootstrap.mcnemar_exact`); the interval of d is the
    paired bootstrap's.
  - Otherwise (soft values, different unit sets, clustered units): a paired
    bootstrap that resamples units (or clusters of units, e.g. a main question
    with all its sub-questions) jointly for both models; two-sided p =
    min(1, 2 · min(P*(d ≤ 0), P*(d ≥ 0))).
* A statistic of column sums (Δ of GQA-OOD, R_score): the same paired
  bootstrap on ``statistic(S_a) − statistic(S_b)`` (:func:`compare_statistic`);
  each protocol owns its statistic (``vqadiag.protocols.ood.formulas`` and
  ``vqadiag.protocols.robustness.formulas``).

Nothing here reads files; the report assembles the per-unit arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from vqadiag.metrics.bootstrap import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    Estimate,
    PairedComparison,
    mcnemar_exact,
    percentile_interval,
    resampled_sums,
)

Statistic = Callable[[np.ndarray], np.ndarray]

MCNEMAR = "mcnemar_exact"
PAIRED_BOOTSTRAP = "paired_bootstrap"


def bootstrap_p_value(differences: np.ndarray, value: float) -> float:
    """Two-sided percentile-bootstrap p-value of a difference (docs/protocols.md §8).

    ``p = min(1, 2 · min(P*(d ≤ 0), P*(d ≥ 0)))`` over the finite resampled
    differences ``d``; 1.0 when the observed difference is exactly 0 and no
    resample differs from it, NaN when nothing is defined.
    """
    d = np.asarray(differences, dtype=np.float64)
    d = d[np.isfinite(d)]
    if d.size == 0 or not np.isfinite(value):
        return float("nan")
    if value == 0 and np.all(d == 0):
        return 1.0
    return float(min(1.0, 2.0 * min(np.mean(d <= 0), np.mean(d >= 0))))


def cluster_sums(columns: np.ndarray, clusters: Sequence[str] | None) -> np.ndarray:
    """Rows of ``columns`` summed within each cluster (first-seen order); unchanged
    when ``clusters`` is None. Resampling clusters keeps correlated units together."""
    x = np.asarray(columns, dtype=np.float64)
    if clusters is None:
        return x
    keys: dict[str, int] = {}
    index = np.fromiter((keys.setdefault(c, len(keys)) for c in clusters), np.int64, len(clusters))
    out = np.zeros((len(keys), x.shape[1]), dtype=np.float64)
    np.add.at(out, index, x)
    return out


def compare_statistic(
    columns_a: np.ndarray,
    columns_b: np.ndarray,
    statistic: Statistic,
    *,
    clusters: Sequence[str] | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> PairedComparison:
    """Paired bootstrap of ``statistic(Σ columns_a) − statistic(Σ columns_b)``.

    ``columns_a`` and ``columns_b`` are (n × k) per-unit columns of the two
    models on the same n units (rows aligned); units (or ``clusters`` of them)
    are resampled jointly, so the comparison is paired. ``statistic`` maps
    (B × k) sums to B values.
    """
    a = np.asarray(columns_a, dtype=np.float64)
    b = np.asarray(columns_b, dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None]
    if b.ndim == 1:
        b = b[:, None]
    if a.shape != b.shape:
        raise ValueError("paired comparison needs per-unit columns of equal shape")
    k = a.shape[1]
    x = cluster_sums(np.hstack([a, b]), clusters)
    n = x.shape[0]
    if n == 0:
        nan = float("nan")
        return PairedComparison(Estimate(nan, nan, nan, 0), nan, PAIRED_BOOTSTRAP)

    def diff(sums: np.ndarray) -> np.ndarray:
        return statistic(sums[:, :k]) - statistic(sums[:, k:])

    with np.errstate(divide="ignore", invalid="ignore"):
        value = float(diff(x.sum(axis=0)[None, :])[0])
        boot = diff(resampled_sums(x, n_resamples, seed))
    low, high = percentile_interval(boot, confidence)
    if not np.isfinite(value):
        low = high = float("nan")
    estimate = Estimate(value, low, high, int(a.shape[0]))
    return PairedComparison(estimate, bootstrap_p_value(boot, value), PAIRED_BOOTSTRAP)


def _rate(sums: np.ndarray) -> np.ndarray:
    return 100.0 * sums[:, 0] / sums[:, 1]


def compare_rates(
    values_a: np.ndarray,
    values_b: np.ndarray,
    *,
    has_a: np.ndarray | None = None,
    has_b: np.ndarray | None = None,
    clusters: Sequence[str] | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> PairedComparison:
    """Paired comparison of two rates (percent) on aligned units.

    rate_m = 100 · Σ_i v^m_i / Σ_i h^m_i, where ``h`` marks the units a model was
    scored on (default: all; ``values`` of other units must be 0). The
    difference rate_a − rate_b gets a paired-bootstrap interval; the test is
    McNemar's exact test when both models cover every unit with 0/1 values and
    units are not clustered, else the paired bootstrap p-value.
    """
    va = np.asarray(values_a, dtype=np.float64)
    vb = np.asarray(values_b, dtype=np.float64)
    if va.shape != vb.shape:
        raise ValueError("paired comparison needs per-unit values of equal length")
    ha = np.ones_like(va) if has_a is None else np.asarray(has_a, dtype=np.float64)
    hb = np.ones_like(vb) if has_b is None else np.asarray(has_b, dtype=np.float64)
    result = compare_statistic(
        np.column_stack([va, ha]),
        np.column_stack([vb, hb]),
        _rate,
        clusters=clusters,
        n_resamples=n_resamples,
        seed=seed,
        confidence=confidence,
    )
    binary = bool(np.all((va == 0) | (va == 1)) and np.all((vb == 0) | (vb == 1)))
    full = bool(np.all(ha == 1) and np.all(hb == 1))
    if binary and full and clusters is None and va.size > 0:
        return PairedComparison(result.difference, mcnemar_exact(va == 1, vb == 1), MCNEMAR)
    return result
