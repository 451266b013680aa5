"""Exact LASSO ranking of a basic-question pool (SPEC.md §4, Huang et al. eq. 1).

For a main question with embedding ``b`` (d,) and a pool whose embeddings are the
columns of ``A`` (d × n; stored here as the rows of ``P = Aᵀ``, n × d)::

    x* = argmin_x  ½‖Ax − b‖² + λ‖x‖₁            (λ = 1e-6 in the paper)

The pool is ranked by ``x*`` (largest first). At such a small λ the problem is
close to basis pursuit (up to d non-zeros), so screening rules remove nothing.
The solver here is exact and fast:

1. **Candidates** — the ``k`` pool entries with the largest ``|Aᵀb|``.
2. **Restricted solve** — our LARS-LASSO homotopy (:func:`homotopy_lasso`:
   joins, drops, and pivots once d rows are active, ``G_E⁻¹`` by rank-one
   updates, final coefficients re-solved directly). scikit-learn's
   ``lars_path`` is the fallback; it minimises
   ``1/(2·n_samples)‖y − Xw‖² + α‖w‖₁`` with ``n_samples = d`` rows, so
   ``α = λ / d`` gives the same minimiser (but it stops early at tiny α, so
   its answers are often not exact; the KKT check says so).
3. **KKT check** over the *whole* pool — ``x*`` is optimal iff
   ``|A_jᵀ(b − Ax*)| ≤ λ`` for every j (with equality and the sign of
   ``x_j`` where ``x_j ≠ 0``). The correlations of all pool entries with the
   residuals of a chunk of main questions are one matrix product
   ``P @ R`` ((n × d) @ (d × chunk)).
4. **Violators** (``|A_jᵀr| > λ(1 + rtol)``) join the candidate set; repeat
   until none is left (``exact = True``: the KKT conditions hold on the support,
   with the coefficients' signs, and off it, over the whole pool) or
   ``max_rounds`` is reached / the restricted solve itself fails the check
   (``exact = False``, the last solution is kept).

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


class LassoPath:
    """Active set, ``G_E⁻¹`` and coefficients of a LASSO homotopy over the rows of ``Xr``.

    Rows are pool questions (k × d). The state is an exact solution of the
    weighted problem ``min ½‖Xrᵀw − b‖² + Σ_j pen_j |w_j|`` for the current
    penalties ``pen``; :meth:`run` moves the penalties linearly (rates
    ``dpen``) and follows the solution through joins (an inactive row's
    correlation reaches its penalty) and drops (an active coefficient reaches
    0). ``G_E⁻¹`` is kept by rank-one updates, O(|E|²) per event. With d
    active rows (they span R^d) a join is a pivot (:meth:`swap_in`).
    """

    def __init__(self, Xr: np.ndarray, b: np.ndarray) -> None:
        self.Xr = Xr
        self.b = b
        d = Xr.shape[1]
        self.cap = d + 1
        self.XE = np.empty((self.cap, d))
        self.M = np.empty((self.cap, self.cap))
        self.wE = np.zeros(self.cap)
        self.act: list[int] = []
        self.is_active = np.zeros(Xr.shape[0], dtype=bool)
        self.n = 0
        self.c = Xr @ b
        self.pen = np.zeros(Xr.shape[0])
        self.steps = 0

    # -- active-set bookkeeping ------------------------------------------------------
    def add(self, j: int) -> bool:
        """Make row j active (coefficient 0); False when it is (nearly) in the active span."""
        n = self.n
        if n >= self.Xr.shape[1]:  # d active rows span R^d: a join is a pivot (swap_in)
            return False
        xj = self.Xr[j]
        M = self.M
        if n:
            g = self.XE[:n] @ xj
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
        self.XE[n] = xj
        self.wE[n] = 0.0
        self.act.append(j)
        self.is_active[j] = True
        self.n = n + 1
        return True

    def drop(self, q: int) -> None:
        """Remove the q-th active row (its coefficient reached 0)."""
        n = self.n
        last = n - 1
        M, XE, wE, act = self.M, self.XE, self.wE, self.act
        if q != last:
            XE[[q, last]] = XE[[last, q]]
            M[[q, last], :n] = M[[last, q], :n]
            M[:n, [q, last]] = M[:n, [last, q]]
            wE[[q, last]] = wE[[last, q]]
            act[q], act[last] = act[last], act[q]
        pivot = M[last, last]
        M[:last, :last] -= np.outer(M[:last, last], M[last, :last]) / pivot
        self.is_active[act.pop()] = False
        self.n = last

    def residual(self) -> np.ndarray:
        """``b − Xr_Eᵀ w_E``."""
        return self.b - self.XE[: self.n].T @ self.wE[: self.n]

    def extend(self, Xr: np.ndarray, new_pen: np.ndarray) -> None:
        """Rows appended to ``Xr`` (the old rows first, unchanged) with penalties ``new_pen``."""
        old = self.Xr.shape[0]
        self.Xr = Xr
        self.is_active = np.concatenate([self.is_active, np.zeros(Xr.shape[0] - old, bool)])
        self.pen = np.concatenate([self.pen, new_pen])
        self.c = Xr @ self.residual()

    # -- the homotopy ----------------------------------------------------------------
    def run(self, dpen: np.ndarray, length: float, max_steps: int) -> bool:
        """Move penalties by ``γ·dpen`` for γ from 0 to ``length``; False if it degenerates."""
        Xr = self.Xr
        c, pen = self.c, self.pen
        just_dropped = -1
        remaining = length
        for step in range(max_steps):
            n = self.n
            act = self.act
            if n:
                s = np.sign(c[act])
                dx = -(self.M[:n, :n] @ (dpen[act] * s))
                a = Xr @ (self.XE[:n].T @ (-dx))  # dc/dγ
            else:
                dx = np.empty(0)
                a = np.zeros_like(c)
            with np.errstate(divide="ignore", invalid="ignore"):
                g1 = (pen - c) / (a - dpen)  # c_j + γa_j = +(pen_j + γ dpen_j)
                g2 = -(pen + c) / (a + dpen)  # c_j + γa_j = −(pen_j + γ dpen_j)
            g1[(g1 <= 1e-15) | ~np.isfinite(g1)] = np.inf
            g2[(g2 <= 1e-15) | ~np.isfinite(g2)] = np.inf
            gj = np.minimum(g1, g2)
            gj[self.is_active] = np.inf
            if just_dropped >= 0:
                gj[just_dropped] = np.inf
            j_join = int(np.argmin(gj))
            gamma_join = float(gj[j_join])
            gamma_drop, q_drop = np.inf, -1
            if n:
                with np.errstate(divide="ignore", invalid="ignore"):
                    gd = -self.wE[:n] / dx
                gd[(gd <= 1e-15) | ~np.isfinite(gd)] = np.inf
                q_drop = int(np.argmin(gd))
                gamma_drop = float(gd[q_drop])
            gamma = min(gamma_join, gamma_drop, remaining)
            finished = gamma == remaining
            if n:
                self.wE[:n] += gamma * dx
            c += gamma * a
            pen += gamma * dpen
            remaining -= gamma
            self.steps += 1
            if finished:
                return True
            if step % 64 == 63:  # refresh correlations against drift
                c[:] = Xr @ self.residual()
            if gamma_drop <= gamma_join:
                just_dropped = act[q_drop]
                self.wE[q_drop] = 0.0
                self.drop(q_drop)
            else:
                just_dropped = -1
                if not self.add(j_join):
                    swapped = self.swap_in(j_join, np.sign(c[j_join]))
                    if swapped < 0:
                        return False
                    just_dropped = swapped
        return False

    def swap_in(self, j: int, sign: float) -> int:
        """Join row j when it lies in the span of the active rows (|E| = d): a pivot.

        With ``x_j = Σ β_e x_e``, moving ``w_j = δ·sign`` and ``w_E −= δ·sign·β``
        leaves the fit (hence every correlation) unchanged; δ grows until the
        first active coefficient reaches 0, which leaves. Returns the row that
        left, or −1 when no coefficient limits δ.
        """
        n = self.n
        g = self.XE[:n] @ self.Xr[j]
        beta = self.M[:n, :n] @ g
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = self.wE[:n] / (sign * beta)
        ratio[(ratio <= 0) | ~np.isfinite(ratio)] = np.inf
        q = int(np.argmin(ratio))
        delta = float(ratio[q])
        if not np.isfinite(delta):
            return -1
        self.wE[:n] -= delta * sign * beta
        self.wE[q] = 0.0
        left = self.act[q]
        self.drop(q)
        if not self.add(j):
            return -1
        self.wE[self.n - 1] = delta * sign
        return left

    def polish(self, lam: float) -> np.ndarray | None:
        """Exact coefficients on the final active set: ``G_E w_E = Xr_E b − λ·sign(w_E)``."""
        import scipy.linalg

        n = self.n
        out = np.zeros(self.Xr.shape[0])
        if n == 0:
            return out
        XA = self.XE[:n]
        signs = np.sign(self.wE[:n])
        try:
            w = scipy.linalg.solve(XA @ XA.T, XA @ self.b - lam * signs, assume_a="pos")
        except (np.linalg.LinAlgError, ValueError):
            return None
        out[self.act] = w
        return out


def homotopy_lasso(
    Xr: np.ndarray, b: np.ndarray, lam: float, *, max_steps: int | None = None
) -> LassoPath | None:
    """LARS-LASSO homotopy on the rows of ``Xr`` (k × d: one row per pool question).

    Follows the solution path of ``min ½‖Xrᵀw − b‖² + λ'‖w‖₁`` from
    ``λ' = max|Xr b|`` down to ``λ`` (all penalties fall at rate 1): the active
    set E moves along ``w_E += γ·G_E⁻¹ s_E`` until a correlation reaches λ'
    (join) or an active coefficient reaches 0 (drop). Returns the path (its
    ``coef`` re-solved directly on the final active set) or None when it
    degenerates; callers then fall back to :func:`sklearn_restricted_lasso`.
    """
    k, d = Xr.shape
    path = LassoPath(Xr, b)
    lam_max = float(np.max(np.abs(path.c))) if k else 0.0
    path.pen[:] = max(lam_max, lam)
    if lam_max > lam:
        if not path.add(int(np.argmax(np.abs(path.c)))):
            return None
        if not path.run(-np.ones(k), lam_max - lam, max_steps or 8 * d + 100):
            return None
    path.pen[:] = lam
    coef = path.polish(lam)
    if coef is None:
        return None
    path.coef = coef
    return path


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
    Defaults: ``n_candidates = 2d`` (clamped to n), ``add_per_round`` = every violator
    (fewest rounds: near basis pursuit most of the pool violates after round 1).
    """
    n, d = P.shape
    m = B.shape[1]
    exclude = list(exclude) if exclude is not None else [None] * m
    k0 = min(n, n_candidates if n_candidates is not None else 2 * d)
    step = add_per_round if add_per_round is not None else n
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
            Xr = P[cands[i]]
            path = homotopy_lasso(Xr, B[:, i], lam)
            if path is None:
                coefs[i] = sklearn_restricted_lasso(np.ascontiguousarray(Xr.T), B[:, i], lam)
            else:
                coefs[i] = path.coef
            R[:, col] = B[:, i] - Xr.T @ coefs[i]
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
