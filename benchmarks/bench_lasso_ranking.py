"""Benchmark: exact LASSO top-21 ranking vs scikit-learn's ``Lasso`` on the full pool.

    python benchmarks/bench_lasso_ranking.py --mains 10000 --pool 100000 --dim 384
    python benchmarks/bench_lasso_ranking.py --mains 200 --pool 20000 --dim 384 --sample 10

Embeddings. Real question embeddings (Skip-thoughts, MiniLM, LSA) are unit
vectors that are *compositional* and *anisotropic*: a question is a template
("what color is the …") plus an object plus an attribute, so a big pool holds
many near-paraphrases of any main question (nearest-neighbour cosine ≈ 0.9),
all vectors share a common direction (mean pairwise cosine ≈ 0.3) and the
spectrum decays. The generator draws ``--templates`` template vectors,
``--objects`` object vectors and ``--attributes`` attribute vectors in R^d
with per-dimension scale 1/√(1 + i/8), adds a common direction and 0.35 of
isotropic-ish noise, and L2-normalises; main questions come from the same
distribution (they are never identical to a pool vector). This keeps the
structure that matters for the LASSO (near-duplicates, a shared direction,
ill-conditioned active sets) at any size, without a download.

Figures printed: our exact solver (candidates by |Aᵀb| → LARS homotopy → KKT
check over the whole pool with one (n × d)(d × chunk) product → violators →
repeat) over all mains: time per question, questions/s, exactness, rounds;
scikit-learn ``Lasso`` (coordinate descent, ``alpha = λ/d``, ``tol`` tight,
``fit_intercept=False``) on the full pool for ``--sample`` mains: time per
question, objective values (ours ≤ theirs) and whether the top-21 (positive
coefficients, largest first) is identical; the speed ratio.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import numpy as np


def embeddings(
    n: int, d: int, rng: np.random.Generator, parts: dict[str, np.ndarray]
) -> np.ndarray:
    """``n`` unit vectors: template + object + 0.6·attribute + common direction + noise."""
    spec = parts["spec"]
    tmpl, obj, attr = parts["templates"], parts["objects"], parts["attributes"]
    X = (
        tmpl[rng.integers(0, len(tmpl), n)]
        + obj[rng.integers(0, len(obj), n)]
        + 0.6 * attr[rng.integers(0, len(attr), n)]
        + 0.5 * spec
        + 0.35 * rng.standard_normal((n, d)) * spec
    )
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def make_parts(d: int, seed: int, templates: int, objects: int, attributes: int) -> dict:
    rng = np.random.default_rng(seed)
    spec = 1.0 / np.sqrt(1.0 + np.arange(d) / 8.0)
    return {
        "spec": spec,
        "templates": rng.standard_normal((templates, d)) * spec,
        "objects": rng.standard_normal((objects, d)) * spec,
        "attributes": rng.standard_normal((attributes, d)) * spec,
    }


def top_positive(x: np.ndarray, top: int) -> list[int]:
    """Indices of the ``top`` largest positive coefficients (ties: lower index first)."""
    pos = np.flatnonzero(x > 0)
    order = np.lexsort((pos, -x[pos]))
    return [int(j) for j in pos[order][:top]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mains", type=int, default=10000)
    ap.add_argument("--pool", type=int, default=100000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--lam", type=float, default=1e-6)
    ap.add_argument("--top", type=int, default=21)
    ap.add_argument("--sample", type=int, default=50, help="mains solved by scikit-learn")
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--tol", type=float, default=1e-10, help="scikit-learn Lasso tol")
    ap.add_argument("--max-iter", type=int, default=100000, help="scikit-learn Lasso max_iter")
    ap.add_argument("--templates", type=int, default=60)
    ap.add_argument("--objects", type=int, default=800)
    ap.add_argument("--attributes", type=int, default=120)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from vqadiag.progress import progress_bar
    from vqadiag.questions.lasso import lasso_objective, solve_chunk

    d, lam = args.dim, args.lam
    parts = make_parts(d, args.seed, args.templates, args.objects, args.attributes)
    t0 = time.perf_counter()
    P = embeddings(args.pool, d, np.random.default_rng(args.seed + 1), parts)
    B = embeddings(args.mains, d, np.random.default_rng(args.seed + 2), parts)
    gen_s = time.perf_counter() - t0
    probe = P[: min(2000, args.pool)]
    cos = probe @ probe.T
    np.fill_diagonal(cos, np.nan)
    print(
        f"pool {args.pool} × d {d}, mains {args.mains}, λ {lam:g}; generated in {gen_s:.1f}s; "
        f"mean cosine {np.nanmean(cos):.3f}, median nearest-neighbour cosine "
        f"{np.nanmedian(np.nanmax(cos, axis=1)):.3f} (first {len(probe)} pool vectors)"
    )

    # ---- ours: every main question, exact
    sols = []
    t0 = time.perf_counter()
    with progress_bar(True) as bar:
        task = bar.add_task("exact LASSO", total=args.mains)
        for s in range(0, args.mains, args.chunk):
            block = np.ascontiguousarray(B[s : s + args.chunk].T)
            sols.extend(solve_chunk(P, block, lam))
            bar.advance(task, block.shape[1])
    ours_s = time.perf_counter() - t0
    per_q = ours_s / args.mains
    exact = sum(s.exact for s in sols)
    rounds = np.array([s.rounds for s in sols])
    nnz = np.array([s.support.size for s in sols])
    print(
        f"ours: {ours_s:.1f}s for {args.mains} mains = {1000 * per_q:.1f} ms/question "
        f"({args.mains / ours_s:.1f} questions/s); exact (KKT verified) {exact}/{args.mains}; "
        f"rounds mean {rounds.mean():.2f} max {rounds.max()}; non-zeros mean {nnz.mean():.0f}"
    )

    # ---- scikit-learn Lasso (coordinate descent) on the full pool, sample of mains
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import Lasso

    n_sample = min(args.sample, args.mains)
    A = np.asfortranarray(P.T)
    same = 0
    ours_better = 0
    not_converged = 0
    t0 = time.perf_counter()
    with progress_bar(True) as bar:
        task = bar.add_task("scikit-learn Lasso", total=n_sample)
        for i in range(n_sample):
            est = Lasso(
                alpha=lam / d,
                fit_intercept=False,
                tol=args.tol,
                max_iter=args.max_iter,
                precompute=False,
            )
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                est.fit(A, B[i])
            not_converged += any(issubclass(w.category, ConvergenceWarning) for w in caught)
            x = np.zeros(args.pool)
            x[sols[i].support] = sols[i].coef
            same += top_positive(x, args.top) == top_positive(est.coef_, args.top)
            ours_obj = lasso_objective(A, B[i], x, lam)
            ours_better += ours_obj <= lasso_objective(A, B[i], est.coef_, lam) + 1e-15
            bar.advance(task)
    sk_s = time.perf_counter() - t0
    sk_per_q = sk_s / n_sample
    print(
        f"scikit-learn Lasso (alpha = λ/d = {lam / d:.3g}, tol {args.tol:g}): {sk_s:.1f}s for "
        f"{n_sample} mains = {1000 * sk_per_q:.0f} ms/question; not converged {not_converged}"
    )
    print(
        f"identical top-{args.top}: {same}/{n_sample}; our objective ≤ theirs: "
        f"{ours_better}/{n_sample}"
    )
    print(
        f"speed-up per question: {sk_per_q / per_q:.1f}×; projected time for "
        f"{args.mains} mains: ours {ours_s / 60:.1f} min, scikit-learn "
        f"{sk_per_q * args.mains / 3600:.1f} h"
    )


if __name__ == "__main__":
    main()
