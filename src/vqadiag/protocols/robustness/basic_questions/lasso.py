"""Exact LASSO ranking of a basic-question pool (docs/protocols.md §4, Huang et al. eq. 1).

For a main question with embedding ``b`` (d,) and a pool whose embeddings are the
columns of ``A`` (d × n; stored here as the rows of ``P = Aᵀ``, n × d)::

    x* = argmin_x  ½‖Ax − b‖² + λ‖x‖₁            (λ = 1e-6 in the paper)

The pool is ranked by ``x*`` (largest first). At such a small λ the problem is
basis pursuit in all but name: about d non-zeros, spread over the whole pool
(in ``|Aᵀb|`` rank they are uniform), so screening rules remove nothing and
candidate sets by ``|Aᵀb|`` need many rounds. Two exact strategies
(:func:`solve_chunk`):

* ``path`` (default) — our LARS-LASSO homotopy (:class:`LassoPath`: joins,
  drops, and pivots once d rows are active, ``G_E⁻¹`` by rank-one updates,
  final coefficients re-solved directly) over the whole pool, for a chunk of
  main questions side by side (:func:`lockstep_homotopy`), so that the pool is
  read once per segment for the chunk: one (m × d)(d × n) product.
* ``rounds`` — candidates (the ``k`` largest ``|Aᵀb|``), the homotopy on them,
  the KKT check, the largest violators join; repeat. scikit-learn's
  ``lars_path`` is its fallback; it minimises
  ``1/(2·n_samples)‖y − Xw‖² + α‖w‖₁`` with ``n_samples = d`` rows, so
  ``α = λ / d`` gives the same minimiser (but it stops early at tiny α, so
  its answers are often not exact; the KKT check says so).

Either way every answer is checked against the **KKT conditions** over the
*whole* pool — ``x*`` is optimal iff ``|A_jᵀ(b − Ax*)| ≤ λ`` for every j (with
equality and the sign of ``x_j`` where ``x_j ≠ 0``); for a chunk of main
questions that is one product ``P @ R`` ((n × d) @ (d × chunk)) — and
``exact`` says whether it passed (within ``λ·KKT_RTOL + KKT_ATOL``).

A main question never ranks itself: its own pool entry (``exclude``) is
removed from the problem (as if the column were not in ``A``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vqadiag.protocols.robustness.basic_questions.homotopy import (
    homotopy_lasso,
    lockstep_homotopy,
)

DEFAULT_LAMBDA = 1e-6
#: Slack of the KKT check: |A_jᵀr| ≤ λ·(1 + KKT_RTOL) + KKT_ATOL off the support and
#: |A_jᵀr − λ·sign(x_j)| ≤ λ·KKT_RTOL + KKT_ATOL on it (1e-10 absolute at λ = 1e-6).
KKT_RTOL = 1e-4
KKT_ATOL = 1e-12


@dataclass
class LassoSolution:
    """Solution of one main question's LASSO problem.

    ``support`` are pool indices with non-zero coefficient ``coef`` (same
    order); ``exact`` tells whether the KKT conditions were verified over the
    whole pool; ``rounds`` is the number of restricted solves; ``candidates``
    the size of the last candidate set; ``segments`` the homotopy segments
    followed, summed over rounds (each reads every candidate row once).
    """

    support: np.ndarray
    coef: np.ndarray
    exact: bool
    rounds: int
    candidates: int
    segments: int = 0


def soft_threshold(z: np.ndarray, lam: float) -> np.ndarray:
    """``sign(z)·max(|z| − λ, 0)``: the LASSO solution when A has orthonormal columns."""
    return np.sign(z) * np.maximum(np.abs(z) - lam, 0.0)


def lasso_objective(A: np.ndarray, b: np.ndarray, x: np.ndarray, lam: float) -> float:
    """``½‖Ax − b‖² + λ‖x‖₁`` (Huang et al. eq. 1)."""
    r = A @ x - b
    return 0.5 * float(r @ r) + lam * float(np.abs(x).sum())


def sklearn_restricted_lasso(X: np.ndarray, b: np.ndarray, lam: float) -> np.ndarray:
    """Solve ``min ½‖Xw − b‖² + λ‖w‖₁`` by scikit-learn's LARS-LASSO (X: d × k).

    ``lars_path`` scales the squared loss by ``1/d`` (d = rows), hence
    ``alpha_min = λ / d``. Slow per step; the fallback of :func:`restricted_lasso`.
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


def restricted_lasso(X: np.ndarray, b: np.ndarray, lam: float) -> np.ndarray:
    """Exact ``min ½‖Xw − b‖² + λ‖w‖₁`` (X: d × k): homotopy, else scikit-learn's LARS."""
    path = homotopy_lasso(np.ascontiguousarray(X.T), b, lam)
    return sklearn_restricted_lasso(X, b, lam) if path is None else path.coef


def _top_abs(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest ``|values|`` (ties: lower index first)."""
    k = min(k, values.shape[0])
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    mag = np.abs(values)
    part = np.argpartition(-mag, k - 1)[:k] if k < values.shape[0] else np.arange(values.shape[0])
    return np.sort(part)


STRATEGIES = ("path", "rounds")


def _kkt_violations(
    g: np.ndarray, support: np.ndarray, coef: np.ndarray, lam: float, exclude: int | None
) -> tuple[bool, np.ndarray]:
    """KKT check of one solution given ``g = Aᵀr`` over the whole pool.

    Returns whether every support entry has ``A_jᵀr = λ·sign(x_j)`` (within the
    tolerance) and the pool entries off the support with ``|A_jᵀr| > λ``.
    """
    active_ok = bool(np.all(np.abs(g[support] - lam * np.sign(coef)) <= lam * KKT_RTOL + KKT_ATOL))
    viol = np.abs(g) > lam * (1.0 + KKT_RTOL) + KKT_ATOL
    viol[support] = False
    if exclude is not None:
        viol[exclude] = False
    return active_ok, viol


def solve_chunk(
    P: np.ndarray,
    B: np.ndarray,
    lam: float = DEFAULT_LAMBDA,
    *,
    exclude: Sequence[int | None] | None = None,
    strategy: str = "path",
    n_candidates: int | None = None,
    add_per_round: int | None = None,
    max_rounds: int = 30,
) -> list[LassoSolution]:
    """Exact LASSO solutions for a chunk of main questions (columns of ``B``, d × m).

    ``P`` is the pool (n × d, rows = embeddings, float64); ``exclude[i]`` is the
    pool index of main question i's own text (removed from its problem). Every
    solution is checked against the KKT conditions over the whole pool (one
    product ``P @ R`` for the chunk) and says whether it is ``exact``.

    * ``strategy="path"`` (default): the homotopy over the whole pool for all
      mains side by side (:func:`lockstep_homotopy`). Near basis pursuit the
      support is spread over the whole pool, so this is the fastest exact way
      measured (``benchmarks/bench_lasso_ranking.py``). A main whose path
      degenerates or fails the check is re-solved by ``rounds``.
    * ``strategy="rounds"``: candidates by ``|Aᵀb|`` (``n_candidates``, default
      2d), the homotopy on them, the KKT check, the ``add_per_round`` (default
      d) largest violators join; repeat up to ``max_rounds``.
    """
    if strategy not in STRATEGIES:
        raise ValueError(
            f"unknown LASSO strategy {strategy!r}; choose from {', '.join(STRATEGIES)}"
        )
    n, d = P.shape
    m = B.shape[1]
    exclude = list(exclude) if exclude is not None else [None] * m
    if strategy == "rounds":
        return _solve_rounds(P, B, lam, exclude, n_candidates, add_per_round, max_rounds)
    paths = lockstep_homotopy(P, B, lam, exclude=exclude)
    R = np.zeros((d, m))
    for i, path in enumerate(paths):
        if path is not None:
            R[:, i] = B[:, i] - P.T @ path.coef
    G = P @ R
    sols: list[LassoSolution | None] = [None] * m
    retry: list[int] = []
    for i, path in enumerate(paths):
        if path is None:
            retry.append(i)
            continue
        nz = np.flatnonzero(path.coef)
        active_ok, viol = _kkt_violations(G[:, i], nz, path.coef[nz], lam, exclude[i])
        if not active_ok or viol.any():
            retry.append(i)
            continue
        sols[i] = LassoSolution(
            support=nz, coef=path.coef[nz], exact=True, rounds=1, candidates=n, segments=path.steps
        )
    if retry:
        again = _solve_rounds(
            P,
            B[:, retry],
            lam,
            [exclude[i] for i in retry],
            n_candidates,
            add_per_round,
            max_rounds,
        )
        for i, sol in zip(retry, again, strict=True):
            sols[i] = sol
    return [s for s in sols if s is not None]


def _solve_rounds(
    P: np.ndarray,
    B: np.ndarray,
    lam: float,
    exclude: list[int | None],
    n_candidates: int | None,
    add_per_round: int | None,
    max_rounds: int,
) -> list[LassoSolution]:
    """The ``rounds`` strategy of :func:`solve_chunk` (candidates → homotopy → KKT → violators)."""
    n, d = P.shape
    m = B.shape[1]
    k0 = min(n, n_candidates if n_candidates is not None else 2 * d)
    step = add_per_round if add_per_round is not None else d
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
    segments = [0] * m
    pending = list(range(m))
    rounds = 0
    while pending:
        rounds += 1
        R = np.empty((d, len(pending)))
        for col, i in enumerate(pending):
            Xr = P[cands[i]]
            path = homotopy_lasso(Xr, B[:, i], lam)
            if path is None:
                coefs[i] = sklearn_restricted_lasso(np.ascontiguousarray(Xr.T), B[:, i], lam)
            else:
                coefs[i] = path.coef
                segments[i] += path.steps
            R[:, col] = B[:, i] - Xr.T @ coefs[i]
        G = P @ R  # KKT: correlations of every pool entry with each residual
        still: list[int] = []
        for col, i in enumerate(pending):
            g = G[:, col]
            nz = np.flatnonzero(coefs[i])
            support = cands[i][nz]
            active_ok, viol = _kkt_violations(g, support, coefs[i][nz], lam, exclude[i])
            inside = bool(viol[cands[i]].any())  # the restricted solve itself is off
            viol[cands[i]] = False
            violators = np.flatnonzero(viol)
            done = violators.size == 0 or inside or not active_ok or rounds >= max_rounds
            if done:
                sols[i] = LassoSolution(
                    support=support,
                    coef=coefs[i][nz],
                    exact=violators.size == 0 and active_ok and not inside,
                    rounds=rounds,
                    candidates=int(cands[i].size),
                    segments=segments[i],
                )
                continue
            if violators.size > step:
                mag = np.abs(g[violators])
                violators = violators[np.argpartition(-mag, step - 1)[:step]]
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
