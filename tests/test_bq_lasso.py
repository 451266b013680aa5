"""Exact LASSO ranking (protocols.md §4): hand-worked solutions, KKT exactness, ranking rules."""

from __future__ import annotations

import numpy as np
import pytest

from vqadiag.protocols.robustness.basic_questions.homotopy import homotopy_lasso
from vqadiag.protocols.robustness.basic_questions.lasso import (
    LassoSolution,
    lasso_objective,
    rank_solution,
    restricted_lasso,
    sklearn_restricted_lasso,
    soft_threshold,
    solve_chunk,
)


def test_orthonormal_columns_give_soft_threshold():
    # A = I₃ (orthonormal columns), b = (0.6, 0.05, −0.8), λ = 0.1:
    # x = sign(Aᵀb)·max(|Aᵀb| − λ, 0) = (0.5, 0, −0.7)
    A = np.eye(3)
    b = np.array([0.6, 0.05, -0.8])
    expected = np.array([0.5, 0.0, -0.7])
    np.testing.assert_allclose(soft_threshold(A.T @ b, 0.1), expected, atol=1e-12)
    np.testing.assert_allclose(restricted_lasso(A, b, 0.1), expected, atol=1e-12)
    # scikit-learn divides the squared loss by n_samples = d = 3, so alpha = λ / 3
    np.testing.assert_allclose(sklearn_restricted_lasso(A, b, 0.1), expected, atol=1e-9)


def test_sklearn_alpha_scaling_on_lasso_estimator():
    from sklearn.linear_model import Lasso

    A = np.eye(3)
    b = np.array([0.6, 0.05, -0.8])
    est = Lasso(alpha=0.1 / 3, fit_intercept=False, tol=1e-12, max_iter=10000).fit(A, b)
    np.testing.assert_allclose(est.coef_, [0.5, 0.0, -0.7], atol=1e-9)


def test_two_correlated_columns_hand_worked():
    # a1 = (1, 0), a2 = (0.6, 0.8), b = (1, 1)/√2, λ = 0.1. Both active and positive:
    # G = [[1, .6], [.6, 1]], det .64; Aᵀb − λ = (0.60710678, 0.88994949)
    # x1 = (0.60710678 − 0.6·0.88994949)/0.64 = 0.11427670
    # x2 = (0.88994949 − 0.6·0.60710678)/0.64 = 0.82138347
    A = np.array([[1.0, 0.6], [0.0, 0.8]])
    b = np.array([1.0, 1.0]) / np.sqrt(2)
    x = restricted_lasso(A, b, 0.1)
    np.testing.assert_allclose(x, [0.11427670, 0.82138347], atol=1e-7)
    # KKT: A_jᵀ(b − Ax) = λ for both (positive) coefficients
    np.testing.assert_allclose(A.T @ (b - A @ x), [0.1, 0.1], atol=1e-12)


def test_lambda_above_max_correlation_gives_zero():
    A = np.array([[1.0, 0.0], [0.0, 1.0]])
    b = np.array([0.3, 0.2])
    np.testing.assert_array_equal(homotopy_lasso(A.T.copy(), b, 0.5).coef, [0.0, 0.0])


def _embeddings(n, d, seed):
    """Unit vectors with a common direction and a decaying spectrum (sentence-embedding-like)."""
    rng = np.random.default_rng(seed)
    spec = 1 / np.sqrt(1 + np.arange(d) / 4)
    X = rng.standard_normal((n, d)) * spec + 0.8 * spec
    return X / np.linalg.norm(X, axis=1, keepdims=True)


@pytest.mark.parametrize("strategy", ["path", "rounds"])
def test_exact_solution_beats_coordinate_descent_and_satisfies_kkt(strategy):
    from sklearn.linear_model import Lasso

    d, lam = 16, 1e-3
    P = _embeddings(300, d, 0)
    B = _embeddings(3, d, 1).T.copy()
    sols = solve_chunk(P, B, lam, strategy=strategy, n_candidates=20, add_per_round=8)
    for i, sol in enumerate(sols):
        assert sol.exact
        if strategy == "rounds":
            assert sol.rounds > 1  # 20 candidates are not enough: violators were added
        else:
            assert (sol.rounds, sol.candidates) == (1, P.shape[0])  # one path over the pool
        x = np.zeros(P.shape[0])
        x[sol.support] = sol.coef
        r = B[:, i] - P.T @ x
        g = P @ r
        off = np.setdiff1d(np.arange(P.shape[0]), sol.support)
        assert np.abs(g[off]).max() <= lam * (1 + 1e-4)
        np.testing.assert_allclose(g[sol.support], lam * np.sign(sol.coef), rtol=1e-4)
        cd = Lasso(alpha=lam / d, fit_intercept=False, tol=1e-14, max_iter=200000)
        cd.fit(P.T, B[:, i])
        ours = lasso_objective(P.T, B[:, i], x, lam)
        theirs = lasso_objective(P.T, B[:, i], cd.coef_, lam)
        assert ours <= theirs + 1e-12
        top = np.argsort(-x, kind="stable")[:5]
        assert list(top) == list(np.argsort(-cd.coef_, kind="stable")[:5])


def test_excluded_entry_never_enters():
    d = 8
    P = _embeddings(50, d, 2)
    b = P[7].copy()  # the main question is pool entry 7
    sol_in = solve_chunk(P, b[:, None], 1e-6)[0]
    assert list(sol_in.support) == [7]  # b itself: one coefficient 1 − λ
    np.testing.assert_allclose(sol_in.coef, [1 - 1e-6], atol=1e-9)
    sol_out = solve_chunk(P, b[:, None], 1e-6, exclude=[7])[0]
    assert 7 not in set(sol_out.support.tolist())
    assert sol_out.exact


def test_rank_solution_orders_ties_and_fills_by_cosine():
    sol = LassoSolution(
        support=np.array([4, 1, 3, 0]),
        coef=np.array([0.5, 0.5, 0.2, -0.1]),
        exact=True,
        rounds=1,
        candidates=4,
    )
    corr = np.array([0.9, 0.1, 0.3, 0.95, 0.2, 0.8])
    idx, scores, ranked = rank_solution(sol, corr, top=5, exclude=5)
    # positives by coefficient, tie 0.5/0.5 → lower index first: 1, 4, then 3;
    # fill by cosine among the rest (5 excluded): 0 (0.9, coef −0.1), 2 (0.3)
    assert idx == [1, 4, 3, 0, 2]
    assert scores == [0.5, 0.5, 0.2, -0.1, 0.0]
    assert ranked == 3


@pytest.mark.parametrize("lam", [1e-6, 1e-5])
def test_near_basis_pursuit_is_exact(lam):
    d = 24
    P = _embeddings(400, d, 3)
    B = _embeddings(2, d, 4).T.copy()
    for sol in solve_chunk(P, B, lam):
        assert sol.exact
        assert sol.support.size >= d - 2  # close to basis pursuit: about d non-zeros


def test_join_steps_uniform_penalty_hand_worked():
    # pen = 1 falling at rate 1; c = (0.2, −0.5, 0.9), a = dc/dγ = (0.5, −1.5, 3):
    # row 0: (1 − 0.2)/(1 + 0.5) = 0.5333 (the other side: (1 + 0.2)/(1 − 0.5) = 2.4)
    # row 1: 1 + a < 0, so only (1 + (−0.5))/(1 − (−1.5)) = 0.2
    # row 2: (1 − 0.9)/(1 + 3) = 0.025 (1 − a < 0: never reaches −pen)
    from vqadiag.protocols.robustness.basic_questions.homotopy import LassoPath

    X = np.eye(3)
    path = LassoPath(X, np.zeros(3), c=np.array([0.2, -0.5, 0.9]))
    a = np.array([0.5, -1.5, 3.0])
    path.pen[:] = 1.0
    path.start(-np.ones(3), 1.0, 10, level=1.0)
    uniform = path.join_steps(a.copy())
    np.testing.assert_allclose(uniform, [0.8 / 1.5, 0.2, 0.025])
    path.start(-np.ones(3), 1.0, 10)  # the general weighted formula agrees
    np.testing.assert_allclose(path.join_steps(a.copy()), uniform)
    path.start(-np.ones(3), 1.0, 10, level=1.0, blocked=[2])
    assert path.join_steps(a.copy())[2] == np.inf


def test_lockstep_paths_equal_one_path_per_question():
    from vqadiag.protocols.robustness.basic_questions.homotopy import lockstep_homotopy

    d, lam = 12, 1e-6
    P = _embeddings(200, d, 5)
    B = _embeddings(4, d, 6).T.copy()
    together = lockstep_homotopy(P, B, lam)
    for i, path in enumerate(together):
        alone = homotopy_lasso(P, B[:, i], lam)
        assert path.steps == alone.steps
        np.testing.assert_allclose(path.coef, alone.coef, atol=1e-12)


def test_path_and_rounds_strategies_agree_near_basis_pursuit():
    d, lam = 20, 1e-6
    P = _embeddings(500, d, 7)
    B = _embeddings(3, d, 8).T.copy()
    exclude = [None, 11, None]
    by_path = solve_chunk(P, B, lam, exclude=exclude)
    by_rounds = solve_chunk(P, B, lam, exclude=exclude, strategy="rounds")
    for a, b in zip(by_path, by_rounds, strict=True):
        assert a.exact and b.exact
        np.testing.assert_array_equal(np.sort(a.support), np.sort(b.support))
        np.testing.assert_allclose(
            a.coef[np.argsort(a.support)], b.coef[np.argsort(b.support)], atol=1e-9
        )
    assert 11 not in set(by_path[1].support.tolist())


def test_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="unknown LASSO strategy 'fast'"):
        solve_chunk(np.eye(3), np.eye(3)[:, :1], strategy="fast")


@pytest.mark.parametrize("strategy", ["path", "rounds"])
def test_segments_count_the_homotopy_events(strategy):
    # a1 = (1, 0), a2 = (0.6, 0.8), b = (1, 1)/√2: Aᵀb = (0.7071, 0.9899), so a2 is
    # active from λ_max = 0.9899; segment 1 ends when a1's correlation meets the
    # falling penalty (a join), segment 2 runs both to λ = 0.1 (the hand-worked case above)
    P = np.array([[1.0, 0.0], [0.6, 0.8]])
    b = np.array([1.0, 1.0]) / np.sqrt(2)
    sol = solve_chunk(P, b[:, None], 0.1, strategy=strategy)[0]
    assert sol.exact and sol.rounds == 1
    assert sol.segments == 2
    coef = sol.coef[np.argsort(sol.support)]
    np.testing.assert_allclose(coef, [0.11427670, 0.82138347], atol=1e-7)


def test_an_ill_conditioned_active_set_is_not_polished(recwarn):
    """Two active rows 3e-8 apart make G_E nearly singular (rcond about 1e-17): scipy's
    solve warns but answers (the demo world's LASSO printed such LinAlgWarnings), and
    its answer is rounding noise. ``polish`` gives None instead (the caller then solves the problem
    with the restricted coordinate-descent solver), and nothing is printed."""
    from vqadiag.protocols.robustness.basic_questions.homotopy import LassoPath

    row = np.array([1.0, 2.0, 0.5])
    Xr = np.vstack([row, row + 3e-8 * np.array([1.0, -1.0, 0.0]), [0.0, 0.0, 1.0]])
    path = LassoPath(Xr, np.array([1.0, 1.0, 1.0]))
    path.XE[:2] = Xr[:2]
    path.wE[:2] = [0.3, 0.2]
    path.act, path.n = [0, 1], 2
    assert path.polish(0.1) is None
    assert not [w for w in recwarn if "LinAlgWarning" in type(w.message).__name__]
    well = LassoPath(Xr, np.array([1.0, 1.0, 1.0]))
    well.XE[:2] = Xr[[0, 2]]
    well.wE[:2] = [0.3, 0.2]
    well.act, well.n = [0, 2], 2
    coef = well.polish(0.1)  # G_E w_E = X_E b − λ sign(w_E), solved exactly
    G = Xr[[0, 2]] @ Xr[[0, 2]].T
    expected = np.linalg.solve(G, Xr[[0, 2]] @ np.ones(3) - 0.1)
    np.testing.assert_allclose(coef[[0, 2]], expected)
    assert coef[1] == 0.0
