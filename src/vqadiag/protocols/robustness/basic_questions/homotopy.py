"""The LARS-LASSO homotopy of the exact basic-question ranking (docs/protocols.md §4): the
path of ``argmin_x ½‖Ax − b‖² + λ‖x‖₁`` as λ falls, joins, drops and pivots once d rows
are active, ``G_E⁻¹`` by rank-one updates (:class:`LassoPath`), for one main question
(:func:`homotopy_lasso`) or a chunk of them side by side (:func:`lockstep_homotopy`).
:mod:`.lasso` checks and ranks what it finds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class LassoPath:
    """Active set, ``G_E⁻¹`` and coefficients of a LASSO homotopy over the rows of ``Xr``.

    Rows are pool questions (k × d). The state is an exact solution of the
    weighted problem ``min ½‖Xrᵀw − b‖² + Σ_j pen_j |w_j|`` for the current
    penalties ``pen``; :meth:`start` + :meth:`advance` move the penalties linearly (rates
    ``dpen``) and follow the solution through joins (an inactive row's
    correlation reaches its penalty) and drops (an active coefficient reaches
    0). ``G_E⁻¹`` is kept by rank-one updates, O(|E|²) per event. With d
    active rows (they span R^d) a join is a pivot (:meth:`swap_in`).
    """

    def __init__(self, Xr: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> None:
        self.Xr = Xr
        self.b = b
        d = Xr.shape[1]
        self.cap = d + 1
        self.XE = np.empty((self.cap, d))
        self.M = np.empty((self.cap, self.cap))
        self.wE = np.zeros(self.cap)
        self.act: list[int] = []
        self.n = 0
        self.c = Xr @ b if c is None else c
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
            M[:n, :n] += np.outer(v, v / alpha)
            M[:n, n] = -v / alpha
            M[n, :n] = -v / alpha
        M[n, n] = 1.0 / alpha
        self.XE[n] = xj
        self.wE[n] = 0.0
        self.act.append(j)
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
        M[:last, :last] -= np.outer(M[:last, last] / pivot, M[last, :last])
        act.pop()
        self.n = last

    def residual(self) -> np.ndarray:
        """``b − Xr_Eᵀ w_E``."""
        return self.b - self.XE[: self.n].T @ self.wE[: self.n]

    # -- the homotopy ----------------------------------------------------------------
    def start(
        self,
        dpen: np.ndarray,
        length: float,
        max_steps: int,
        *,
        level: float | None = None,
        blocked: Sequence[int] = (),
    ) -> None:
        """Prepare to move penalties by ``γ·dpen`` for γ from 0 to ``length`` (:meth:`advance`).

        ``level``: every penalty equals ``level`` and falls at rate 1 (``dpen = −1``),
        except the ``blocked`` rows, which never join (the fast plain path).
        """
        self.dpen = dpen
        self.uniform = level is not None
        self.pen_level = level
        self.blocked = np.asarray(blocked, dtype=np.int64)
        self.remaining = length
        self.steps_left = max_steps
        self.just_dropped = -1
        self.status: bool | None = None  # None while running, then True (done) / False
        self.dx = np.empty(0)

    def direction(self) -> np.ndarray | None:
        """Fit direction ``u`` of the next segment (d,): ``dc/dγ = Xr @ u``; None when E = ∅.

        With signs ``s_E``, ``dw_E/dγ = −G_E⁻¹ (dpen_E ∘ s_E)`` and the fit moves by
        ``X_Eᵀ dw_E``, so every correlation ``c = Xr (b − X_Eᵀ w_E)`` moves by
        ``−Xr X_Eᵀ dw_E``. Callers may batch ``Xr @ u`` over many paths (one GEMM).
        """
        n = self.n
        if not n:
            self.dx = np.empty(0)
            return None
        act = self.act
        s = np.sign(self.c[act])
        self.dx = -(self.M[:n, :n] @ (self.dpen[act] * s))
        return self.XE[:n].T @ (-self.dx)

    def join_rates(self, a: np.ndarray) -> np.ndarray:
        """``1/γ_j`` for each row, where γ_j is the step at which its correlation meets its
        moving penalty (a rate ≤ 0 or −∞: never; the next join is the largest rate).

        Row j joins when ``c_j + γa_j = ±(pen_j + γ·dpen_j)``:
        ``1/γ = (a_j − dpen_j)/(pen_j − c_j)`` on the + side and
        ``−(a_j + dpen_j)/(pen_j + c_j)`` on the − side; a side counts when its step is
        positive and above 1e-15 (rate in (0, 1e15)). With every penalty equal and
        falling at rate 1 (the plain path, :attr:`uniform`) these are
        ``(1 + a_j)/(pen − c_j)`` and ``(1 − a_j)/(pen + c_j)``. Active, ``blocked``
        and just-dropped rows never join. Rates rather than steps: both penalty
        schemes share one formula, the divisions write in place and no ∞-filled
        outputs are needed.
        """
        c = self.c
        if self.uniform:
            p = float(self.pen_level)
            num1, den1 = 1.0 + a, p - c
            num2, den2 = np.subtract(1.0, a), p + c
        else:
            pen, dpen = self.pen, self.dpen
            num1, den1 = a - dpen, pen - c
            num2, den2 = -(a + dpen), pen + c
        with np.errstate(divide="ignore", invalid="ignore"):
            r1 = np.divide(num1, den1, out=num1)
            r2 = np.divide(num2, den2, out=num2)
        for r in (r1, r2):
            r[~(r < 1e15)] = -np.inf  # a step of ≤ 1e-15 (or 0/0): this side does not count
        rates = np.fmax(r1, r2, out=r1)
        rates[self.act] = -np.inf
        if self.uniform:
            rates[self.blocked] = -np.inf
        if self.just_dropped >= 0:
            rates[self.just_dropped] = -np.inf
        return rates

    def join_steps(self, a: np.ndarray) -> np.ndarray:
        """The steps γ_j of :meth:`join_rates` (∞: never); for inspection and tests."""
        rates = self.join_rates(a)
        with np.errstate(divide="ignore"):
            return np.where(rates > 0, 1.0 / rates, np.inf)

    def advance(self, a: np.ndarray | None) -> bool:
        """One segment given ``a = dc/dγ`` (``Xr @ direction()``, overwritten); True while
        still running.

        Steps to the first event: a correlation reaching its (moving) penalty
        (join), an active coefficient reaching 0 (drop) or the end of the move.
        """
        c, pen, dpen, dx = self.c, self.pen, self.dpen, self.dx
        n, act = self.n, self.act
        if a is None:
            a = np.zeros_like(c)
        rates = self.join_rates(a)
        j_join = int(np.argmax(rates))
        gamma_join = 1.0 / float(rates[j_join]) if rates[j_join] > 0 else np.inf
        gamma_drop, q_drop = np.inf, -1
        if n:
            with np.errstate(divide="ignore", invalid="ignore"):
                gd = -self.wE[:n] / dx
            gd[(gd <= 1e-15) | ~np.isfinite(gd)] = np.inf
            q_drop = int(np.argmin(gd))
            gamma_drop = float(gd[q_drop])
        gamma = min(gamma_join, gamma_drop, self.remaining)
        finished = gamma == self.remaining
        if n:
            self.wE[:n] += gamma * dx
        a *= gamma  # a is consumed: the caller's row of the segment product
        c += a
        if self.uniform:
            self.pen_level -= gamma
        else:
            pen += gamma * dpen
        self.remaining -= gamma
        self.steps += 1
        self.steps_left -= 1
        if finished:
            self.status = True
            return False
        if self.steps % 64 == 63:  # refresh correlations against drift
            c[:] = self.Xr @ self.residual()
        if gamma_drop <= gamma_join:
            self.just_dropped = act[q_drop]
            self.wE[q_drop] = 0.0
            self.drop(q_drop)
        else:
            self.just_dropped = -1
            if not self.add(j_join):
                swapped = self.swap_in(j_join, np.sign(c[j_join]))
                if swapped < 0:
                    self.status = False
                    return False
                self.just_dropped = swapped
        if self.steps_left <= 0:
            self.status = False
            return False
        return True

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
        """Exact coefficients on the final active set: ``G_E w_E = Xr_E b − λ·sign(w_E)``;
        None when ``G_E`` is singular or so ill-conditioned that scipy warns (its solution
        would be rounding noise: the caller then solves the problem another way)."""
        import warnings

        import scipy.linalg

        n = self.n
        out = np.zeros(self.Xr.shape[0])
        if n == 0:
            return out
        XA = self.XE[:n]
        signs = np.sign(self.wE[:n])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", scipy.linalg.LinAlgWarning)
                w = scipy.linalg.solve(XA @ XA.T, XA @ self.b - lam * signs, assume_a="pos")
        except (np.linalg.LinAlgError, ValueError, scipy.linalg.LinAlgWarning):
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
    return lockstep_homotopy(Xr, b[:, None], lam, max_steps=max_steps)[0]


def lockstep_homotopy(
    P: np.ndarray,
    B: np.ndarray,
    lam: float,
    *,
    exclude: Sequence[int | None] | None = None,
    max_steps: int | None = None,
) -> list[LassoPath | None]:
    """The LARS-LASSO homotopy (:func:`homotopy_lasso`) over the rows of P for every column of B.

    The paths run side by side: at each segment the correlation directions of
    all running paths are one matrix product ``[u_1 … u_m]ᵀ Pᵀ`` (m × n), so the
    pool is read once per segment for the whole chunk instead of once per
    question. ``exclude[i]`` (a pool row) never joins path i (it is blocked).
    Paths that degenerate come back as None.
    """
    n, d = P.shape
    m = B.shape[1]
    exclude = list(exclude) if exclude is not None else [None] * m
    C = (B.T @ P.T) if m else np.empty((0, n))  # m × n correlations
    paths: list[LassoPath | None] = []
    live: list[LassoPath] = []
    for i in range(m):
        path = LassoPath(P, B[:, i], c=C[i].copy())
        dpen = -np.ones(n)
        c_abs = np.abs(path.c)
        if exclude[i] is not None:
            c_abs[exclude[i]] = 0.0
        lam_max = float(c_abs.max()) if n else 0.0
        path.pen[:] = max(lam_max, lam)
        blocked = [] if exclude[i] is None else [exclude[i]]
        paths.append(path)
        if lam_max <= lam:
            path.status = True
            continue
        if not path.add(int(np.argmax(c_abs))):
            paths[i] = None
            continue
        path.start(
            dpen, lam_max - lam, max_steps or 8 * d + 100, level=path.pen[0], blocked=blocked
        )
        live.append(path)
    while live:
        dirs = [path.direction() for path in live]
        moving = [u for u in dirs if u is not None]
        A = np.dot(np.vstack(moving), P.T) if moving else None
        still: list[LassoPath] = []
        row = 0
        for path, u in zip(live, dirs, strict=True):
            a = None
            if u is not None:
                a = A[row]
                row += 1
            if path.advance(a):
                still.append(path)
        live = still
    for i, path in enumerate(paths):
        if path is None:
            continue
        if not path.status:
            paths[i] = None
            continue
        path.pen[:] = lam
        coef = path.polish(lam)
        if coef is None:
            paths[i] = None
            continue
        path.coef = coef
    return paths
