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


def homotopy_lasso(
    Xr: np.ndarray, b: np.ndarray, lam: float, *, max_steps: int | None = None
) -> np.ndarray | None:
    """LARS-LASSO homotopy on the rows of ``Xr`` (k × d: one row per pool question).

    Follows the solution path of ``min ½‖Xrᵀw − b‖² + λ'‖w‖₁`` from
    ``λ' = max|Xr b|`` down to ``λ``: the active set E moves along
    ``w_E += γ·G_E⁻¹ s_E`` (G_E = Xr_E Xr_Eᵀ, s_E the correlation signs) until a
    correlation reaches the shrinking λ' (join) or an active coefficient
    reaches 0 (drop). ``G_E⁻¹`` is kept up to date by rank-one updates (O(|E|²)
    per step); the final coefficients are re-solved directly
    (``G_E w_E = Xr_E b − λ s_E``). Returns None when the path degenerates
    (a joining row nearly in the span of the active ones, or too many steps);
    the caller then falls back to :func:`sklearn_restricted_lasso`.
    """
    k, d = Xr.shape
    max_steps = max_steps or 8 * d + 100
    cap = min(k, d + 1)
    XE = np.empty((cap, d))
    M = np.empty((cap, cap))
    wE = np.zeros(cap)
    act: list[int] = []
    is_active = np.zeros(k, dtype=bool)
    c = Xr @ b
    lam_cur = float(np.max(np.abs(c))) if k else 0.0
    if lam_cur <= lam:
        return np.zeros(k)
    n = 0

    def add(j: int) -> bool:
        nonlocal n
        if n >= cap:
            return False
        xj = Xr[j]
        if n:
            g = XE[:n] @ xj
            v = M[:n, :n] @ g
            alpha = float(xj @ xj - g @ v)
        else:
            v = np.empty(0)
            alpha = float(xj @ xj)
        if alpha <= 1e-10 * float(xj @ xj):
            return False
        if n:
            M[:n, :n] += np.outer(v, v) / alpha
            M[:n, n] = -v / alpha
            M[n, :n] = -v / alpha
        M[n, n] = 1.0 / alpha
        XE[n] = xj
        wE[n] = 0.0
        act.append(j)
        is_active[j] = True
        n += 1
        return True

    def drop(q: int) -> None:
        nonlocal n
        last = n - 1
        if q != last:
            XE[[q, last]] = XE[[last, q]]
            M[[q, last], :n] = M[[last, q], :n]
            M[:n, [q, last]] = M[:n, [last, q]]
            wE[[q, last]] = wE[[last, q]]
            act[q], act[last] = act[last], act[q]
        pivot = M[last, last]
        M[:last, :last] -= np.outer(M[:last, last], M[last, :last]) / pivot
        is_active[act.pop()] = False
        n = last

    if not add(int(np.argmax(np.abs(c)))):
        return None
    just_dropped = -1
    for step in range(max_steps):
        s = np.sign(c[act])
        direction = M[:n, :n] @ s
        a = Xr @ (XE[:n].T @ direction)
        # joins: |c_j − γ a_j| = λ' − γ
        with np.errstate(divide="ignore", invalid="ignore"):
            g1 = (lam_cur - c) / (1.0 - a)
            g2 = (lam_cur + c) / (1.0 + a)
        g1[(g1 <= 1e-15) | ~np.isfinite(g1)] = np.inf
        g2[(g2 <= 1e-15) | ~np.isfinite(g2)] = np.inf
        gj = np.minimum(g1, g2)
        gj[is_active] = np.inf
        if just_dropped >= 0:
            gj[just_dropped] = np.inf
        j_join = int(np.argmin(gj))
        gamma_join = float(gj[j_join])
        # drops: w_j + γ·direction_j = 0
        with np.errstate(divide="ignore", invalid="ignore"):
            gd = -wE[:n] / direction
        gd[(gd <= 1e-15) | ~np.isfinite(gd)] = np.inf
        q_drop = int(np.argmin(gd)) if n else -1
        gamma_drop = float(gd[q_drop]) if n else np.inf
        gamma_end = lam_cur - lam
        gamma = min(gamma_join, gamma_drop, gamma_end)
        wE[:n] += gamma * direction
        c -= gamma * a
        lam_cur -= gamma
        if gamma == gamma_end:
            break
        if step % 64 == 63:  # refresh correlations against drift
            c = Xr @ (b - XE[:n].T @ wE[:n])
        if gamma_drop <= gamma_join:
            just_dropped = act[q_drop]
            wE[q_drop] = 0.0
            drop(q_drop)
        else:
            just_dropped = -1
            if not add(j_join):
                return None
    else:
        return None
    # polish: exact coefficients of the final active set and signs
    import scipy.linalg

    XA = XE[:n]
    signs = np.sign(wE[:n])
    try:
        w = scipy.linalg.solve(XA @ XA.T, XA @ b - lam * signs, assume_a="pos")
    except (np.linalg.LinAlgError, ValueError):
        return None
    out = np.zeros(k)
    out[act] = w
    return out


def restricted_lasso(X: np.ndarray, b: np.ndarray, lam: float) -> np.ndarray:
    """Exact ``min ½‖Xw − b‖² + λ‖w‖₁`` (X: d × k): homotopy, else scikit-learn's LARS."""
    w = homotopy_lasso(np.ascontiguousarray(X.T), b, lam)
    return sklearn_restricted_lasso(X, b, lam) if w is None else w


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
            g = G[:, col]
            nz = np.flatnonzero(coefs[i])
            support = cands[i][nz]
            # active entries: A_jᵀr = λ·sign(x_j) (within the tolerance)
            active_ok = bool(
                np.all(
                    np.abs(g[support] - lam * np.sign(coefs[i][nz])) <= lam * KKT_RTOL + KKT_ATOL
                )
            )
            viol = np.abs(g) > limit
            viol[support] = False
            if exclude[i] is not None:
                viol[exclude[i]] = False
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
