"""Basic-question rankers: LASSO over embeddings, or text similarity (docs/protocols.md §4).

Each ranker is a pure chunk function ``fn(shared, chunk) -> [result per main]``
that a backend (:mod:`.backends`) runs locally or on Ray.
A result is ``{"indices": [pool index × top], "scores": [...], ...}``, best first.

* ``lasso``: :func:`.lasso.solve_chunk` (exact, KKT-verified);
  results also carry ``exact``, ``rounds`` and ``ranked`` (entries ranked by a
  positive coefficient; the rest filled by cosine similarity).
* ``bleu1``..``bleu4``, ``rouge``, ``cider``, ``meteor``: the pool question is
  the candidate, the main question the reference
  (:mod:`.text_similarity`); ties go to the lower pool index (the earlier question in
  the pool files).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vqadiag.errors import DataError

TEXT_RANKERS = ("bleu1", "bleu2", "bleu3", "bleu4", "rouge", "cider", "meteor")
RANKERS = ("lasso", *TEXT_RANKERS)


def check_ranker(name: str, option: str | None = None) -> str:
    """``name`` if it is a known ranker, else DataError listing the choices (naming
    ``option``, the command-line option that gave it, where known)."""
    if name not in RANKERS:
        raise DataError(option, f"unknown ranker {name!r} (choose {', '.join(RANKERS)})")
    return name


def lasso_chunk(shared: dict[str, Any], chunk: dict[str, Any]) -> list[dict[str, Any]]:
    """Exact LASSO top-``top`` for a chunk of mains (``chunk["B"]``: d × m embeddings)."""
    from vqadiag.protocols.robustness.basic_questions.lasso import rank_solution, solve_chunk

    P = shared["P"]
    B = chunk["B"]
    exclude = chunk["exclude"]
    sols = solve_chunk(P, B, shared["lam"], exclude=exclude)
    corr = P @ B
    out = []
    for i, sol in enumerate(sols):
        c = corr[:, i]
        idx, scores, ranked = rank_solution(sol, c, shared["top"], exclude[i])
        out.append(
            {
                "indices": idx,
                "scores": scores,
                "ranked": ranked,
                "exact": sol.exact,
                "rounds": sol.rounds,
                "nonzero": int(sol.support.size),
            }
        )
    return out


def top_indices(scores: np.ndarray, top: int, exclude: int | None) -> np.ndarray:
    """Indices of the ``top`` highest ``scores`` (ties: lower index first), skipping ``exclude``."""
    s = scores.astype(np.float64, copy=True)
    if exclude is not None:
        s[exclude] = -np.inf
    k = min(top, s.shape[0] - (exclude is not None))
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    if k < s.shape[0]:
        kth = np.partition(-s, k - 1)[k - 1]
        cand = np.flatnonzero(-s <= kth)  # everything tied with the k-th too
    else:
        cand = np.arange(s.shape[0])
    order = np.lexsort((cand, -s[cand]))
    return cand[order][:k]


def text_chunk(shared: dict[str, Any], chunk: dict[str, Any]) -> list[dict[str, Any]]:
    """Top-``top`` pool questions by a text-similarity ranker for a chunk of mains."""
    from vqadiag.protocols.robustness.basic_questions import text_similarity as ts

    index: ts.PoolIndex = shared["index"]
    ranker = shared["ranker"]
    top = shared["top"]
    mains: list[str] = chunk["texts"]
    exclude: list[int | None] = chunk["exclude"]
    if ranker == "meteor" and shared.get("jar"):
        scorer = ts.JavaMeteor(shared["jar"], shared.get("java", "java"))
        try:
            return [
                dict(
                    zip(
                        ("indices", "scores"),
                        ts.java_meteor_top(index, m, top, ex, scorer),
                        strict=True,
                    )
                )
                for m, ex in zip(mains, exclude, strict=True)
            ]
        finally:
            scorer.close()
    if ranker == "meteor":
        return [
            dict(zip(("indices", "scores"), ts.meteor_top(index, m, top, ex), strict=True))
            for m, ex in zip(mains, exclude, strict=True)
        ]
    S = ts.score_matrix(index, ranker, mains)  # n × m
    out = []
    for i, ex in enumerate(exclude):
        idx = top_indices(S[:, i], top, ex)
        # arrays, not lists of Python numbers: a ranking's results live until its
        # dataset is written (15,000 questions × 21: 13 MiB as arrays, 25 as lists)
        out.append({"indices": idx, "scores": S[idx, i].astype(np.float64)})
    return out
