"""Exact LASSO ranking of a basic-question pool (SPEC.md §4, Huang et al. eq. 1).

For a main question with embedding ``b`` (d,) and a pool whose embeddings are the
columns of ``A`` (d × n; stored here as the rows of ``P = Aᵀ``, n × d)::

    x* = argmin_x  ½‖Ax − b‖² + λ‖x‖₁            (λ = 1e-6 in the paper)

The pool is ranked by ``x*`` (largest first). At such a small λ the problem is
close to basis pursuit (up to d non-zeros), so screening rules remove nothing.
The solver here is exact and fast:

1. **Candidates** — the ``k`` pool entries with the largest ``|Aᵀb|``.
2. **Restricted solve** — LARS-LASSO (scikit-learn's ``lars_path``, method
   ``"lasso"``) on those columns. scikit-learn minimises
   ``1/(2·n_samples)‖y − Xw‖² + α‖w‖₁`` with ``n_samples = d`` rows, so
   ``α = λ / d`` gives the same minimiser.
3. **KKT check** over the *whole* pool — ``x*`` is optimal iff
   ``|A_jᵀ(b − Ax*)| ≤ λ`` for every j (with equality and the sign of
   ``x_j`` where ``x_j ≠ 0``). The correlations of all pool entries with the
   residuals of a chunk of main questions are one matrix product
   ``P @ R`` ((n × d) @ (d × chunk)).
4. **Violators** (``|A_jᵀr| > λ(1 + rtol)``) join the candidate set; repeat
   until none is left (``exact = True``) or ``max_rounds`` is reached
   (``exact = False``, the last restricted solution is kept).

A main question never ranks itself: its own pool entry (``exclude``) is
removed from the problem (as if the column were not in ``A``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_LAMBDA = 1e-6
#: Relative slack of the KKT check: |A_jᵀr| ≤ λ·(1 + KKT_RTOL) + KKT_ATOL.
KKT_RTOL = 1e-6
KKT_ATOL = 1e-12


@dataclass
class LassoSolution:
    """Solution of one main question's LASSO problem.

    ``support`` are pool indices with non-zero coefficient ``coef`` (same
    order); ``exact`` tells whether the KKT conditions were verified over the
    whole pool; ``rounds`` is the number of restricted solves; ``candidates``
    the size of the last candidate set.
    """

    support: np.ndarray
    coef: np.ndarray
    exact: bool
    rounds: int
    candidates: int


def soft_threshold(z: np.ndarray, lam: float) -> np.ndarray:
    """``sign(z)·max(|z| − λ, 0)``: the LASSO solution when A has orthonormal columns."""
    return np.sign(z) * np.maximum(np.abs(z) - lam, 0.0)


def lasso_objective(A: np.ndarray, b: np.ndarray, x: np.ndarray, lam: float) -> float:
    """``½‖Ax − b‖² + λ‖x‖₁`` (Huang et al. eq. 1)."""
    r = A @ x - b
    return 0.5 * float(r @ r) + lam * float(np.abs(x).sum())


def restricted_lasso(X: np.ndarray, b: np.ndarray, lam: float) -> np.ndarray:
    """Solve ``min ½‖Xw − b‖² + λ‖w‖₁`` exactly by LARS-LASSO (X: d × k).

    scikit-learn's ``lars_path`` scales the squared loss by ``1/d``, hence
    ``alpha_min = λ / d``.
    """
    from sklearn.linear_model import lars_path

    d = X.shape[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, _, coef = lars_path(
            X,
            b,
            alpha_min=lam / d,
            method="lasso",
            return_path=False,
            max_iter=max(500, 8 * d),
        )
    return np.asarray(coef, dtype=np.float64).ravel()


def _top_abs(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest ``|values|`` (ties: lower index first)."""
    k = min(k, values.shape[0])
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    mag = np.abs(values)
    part = np.argpartition(-mag, k - 1)[:k] if k < values.shape[0] else np.arange(values.shape[0])
    return np.sort(part)


def solve_chunk(
    P: np.ndarray,
    B: np.ndarray,
    lam: float = DEFAULT_LAMBDA,
    *,
    exclude: Sequence[int | None] | None = None,
    n_candidates: int | None = None,
    add_per_round: int | None = None,
    max_rounds: int = 30,
) -> list[LassoSolution]:
    """Exact LASSO solutions for a chunk of main questions (columns of ``B``, d × m).

    ``P`` is the pool (n × d, rows = embeddings, float64). The KKT check of
    all unfinished questions is one product ``P @ R``. ``exclude[i]`` is the
    pool index of main question i's own text (removed from its problem).
    Defaults: ``n_candidates = 2d`` (clamped to n), ``add_per_round = d/2``.
    """
    n, d = P.shape
    m = B.shape[1]
    exclude = list(exclude) if exclude is not None else [None] * m
    k0 = min(n, n_candidates if n_candidates is not None else 2 * d)
    step = add_per_round if add_per_round is not None else max(16, d // 2)
    corr = P @ B  # n × m
    cands: list[np.ndarray] = []
    for i in range(m):
        c = corr[:, i].copy()
        if exclude[i] is not None:
            c[exclude[i]] = 0.0
        idx = _top_abs(c, k0 + (exclude[i] is not None))
        if exclude[i] is not None:
            idx = idx[idx != exclude[i]][:k0]
        cands.append(idx)
    sols: list[LassoSolution | None] = [None] * m
    coefs: list[np.ndarray] = [np.empty(0)] * m
    pending = list(range(m))
    rounds = 0
    limit = lam * (1.0 + KKT_RTOL) + KKT_ATOL
    while pending:
        rounds += 1
        R = np.empty((d, len(pending)))
        for col, i in enumerate(pending):
            X = P[cands[i]].T
            coefs[i] = restricted_lasso(X, B[:, i], lam)
            R[:, col] = B[:, i] - X @ coefs[i]
        G = P @ R  # KKT: correlations of every pool entry with each residual
        still: list[int] = []
        for col, i in enumerate(pending):
            g = np.abs(G[:, col])
            g[cands[i]] = 0.0  # restricted optimality holds on the candidate set
            if exclude[i] is not None:
                g[exclude[i]] = 0.0
            violators = np.flatnonzero(g > limit)
            if violators.size == 0 or rounds >= max_rounds:
                nz = np.flatnonzero(coefs[i])
                sols[i] = LassoSolution(
                    support=cands[i][nz],
                    coef=coefs[i][nz],
                    exact=violators.size == 0,
                    rounds=rounds,
                    candidates=int(cands[i].size),
                )
                continue
            if violators.size > step:
                violators = violators[np.argpartition(-g[violators], step - 1)[:step]]
            cands[i] = np.union1d(cands[i], violators)
            still.append(i)
        pending = still
    return [s for s in sols if s is not None]


def rank_solution(
    sol: LassoSolution, corr: np.ndarray, top: int, exclude: int | None = None
) -> tuple[list[int], list[float], int]:
    """Top-``top`` pool indices by LASSO coefficient, largest first.

    Positive coefficients rank first (ties: lower pool index first). When
    fewer than ``top`` are positive, the rest is filled with the remaining
    pool entries by cosine similarity ``corr = Aᵀb`` (largest first, ties by
    index); their score is their coefficient (0 or negative). Returns
    ``(indices, scores, ranked)`` where ``ranked`` counts the entries ranked
    by a positive coefficient.
    """
    pos = sol.coef > 0
    sup, val = sol.support[pos], sol.coef[pos]
    order = np.lexsort((sup, -val))
    chosen = [int(j) for j in sup[order][:top]]
    scores = [float(v) for v in val[order][:top]]
    ranked = len(chosen)
    if ranked < top:
        coef_of = dict(zip(sol.support.tolist(), sol.coef.tolist(), strict=True))
        taken = set(chosen)
        if exclude is not None:
            taken.add(exclude)
        need = top - ranked
        pool_order = np.lexsort((np.arange(corr.shape[0]), -corr))
        for j in pool_order[: need + len(taken)]:
            j = int(j)
            if j in taken:
                continue
            chosen.append(j)
            scores.append(float(coef_of.get(j, 0.0)))
            if len(chosen) == top:
                break
    return chosen, scores, ranked
