"""Counter-example explanation metrics and baselines (Goyal et al. 2017 §5, docs/protocols.md §2).

For a question (I, Q, A) with K candidate images I_1..I_K (the K nearest
neighbours of I, nearest first) among which the complementary image I' = I_t
was picked, a method gives every candidate a score (higher = more likely a
counter-example). The candidates are sorted by descending score; ties are
broken by a key (default: the candidate's position, i.e. nearest first).

* rank of I' (0-based): ``r = #{i : S_i > S_t} + #{i : S_i = S_t, key_i < key_t}``
* Recall@k = 100 · mean over questions of [r < k] (percent), with a 95%
  bootstrap interval over questions (:func:`~vqadiag.metrics.bootstrap.mean_ci`).

Baselines (paper Table 6: Random 20.79, Distance 42.84, VQA model 21.65,
trained model 43.39 Recall@5):

* Random: expected Recall@k = min(k, K) / K exactly (5/24 = 20.83 % for K = 24),
  and a seeded random ranking (:func:`random_scores`);
* Distance: nearest first, i.e. the candidates' order (:func:`distance_scores`),
  or ascending L2 distance in an image embedding (:func:`embedding_distance_scores`);
* VQA model: ascending P(A | Q, I_i) (:func:`vqa_model_scores`).

The trained explainer's loss is the pairwise hinge ranking loss
``Σ_{i≠t} max(0, M − (S_t − S_i))`` (:func:`hinge_ranking_loss`).
Pure functions: arrays in, numbers out.
"""

from __future__ import annotations

import numpy as np

from vqadiag.metrics.bootstrap import DEFAULT_RESAMPLES, Estimate, mean_ci

PAPER_RECALL_AT_5: dict[str, float] = {
    "random": 20.79,
    "distance": 42.84,
    "vqa_model": 21.65,
    "model": 43.39,
}


def target_ranks(
    scores: np.ndarray, targets: np.ndarray, tiebreak: np.ndarray | None = None
) -> np.ndarray:
    """0-based rank of the target candidate in each row of ``scores`` (n, K) sorted by
    descending score: ``#{i: S_i > S_t} + #{i: S_i = S_t, key_i < key_t}`` with
    ``key = tiebreak`` (n, K) or, by default, the candidate position (nearest first)."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2:
        raise ValueError("scores must be an (n, K) array")
    t = np.asarray(targets, dtype=np.int64)
    if t.shape != (s.shape[0],) or (t.size and (t.min() < 0 or t.max() >= s.shape[1])):
        raise ValueError("targets must hold one candidate index in [0, K) per row")
    rows = np.arange(s.shape[0])
    key = (
        np.broadcast_to(np.arange(s.shape[1], dtype=np.float64), s.shape)
        if tiebreak is None
        else np.asarray(tiebreak, dtype=np.float64)
    )
    if key.shape != s.shape:
        raise ValueError("tiebreak must have the shape of scores")
    s_t = s[rows, t][:, None]
    k_t = key[rows, t][:, None]
    above = (s > s_t) | ((s == s_t) & (key < k_t))
    return above.sum(axis=1).astype(np.int64)


def recall_hits(ranks: np.ndarray, k: int) -> np.ndarray:
    """Per-question hits ``[rank < k]`` as 0.0 / 1.0 (ranks 0-based)."""
    return (np.asarray(ranks) < k).astype(np.float64)


def recall_at_k(
    ranks: np.ndarray, k: int, *, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> Estimate:
    """Recall@k = 100 · mean [rank < k] over questions (percent) with its 95% bootstrap
    interval (Goyal et al. 2017 §5, docs/protocols.md §2)."""
    return mean_ci(recall_hits(ranks, k), n_resamples=n_resamples, seed=seed)


def random_expected_recall(k: int, n_candidates: int) -> float:
    """Expected Recall@k (percent) of a uniformly random ranking of K candidates:
    the target's rank is uniform on 0..K−1, so P(rank < k) = min(k, K) / K."""
    if n_candidates <= 0:
        raise ValueError("need at least one candidate")
    return 100.0 * min(max(k, 0), n_candidates) / n_candidates


def random_scores(n: int, n_candidates: int, seed: int = 0) -> np.ndarray:
    """Scores of the seeded Random baseline: i.i.d. U(0, 1) per candidate → (n, K)."""
    return np.random.default_rng(seed).random((n, n_candidates))


def distance_scores(n: int, n_candidates: int) -> np.ndarray:
    """Scores of the Distance baseline on candidates listed nearest first:
    ``S_i = −i`` (the candidates' own order) → (n, K)."""
    return np.broadcast_to(-np.arange(n_candidates, dtype=np.float64), (n, n_candidates)).copy()


def embedding_distance_scores(query: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Scores of the Distance baseline in an image embedding: ``S_i = −‖e(I) − e(I_i)‖₂``
    for ``query`` (n, D) and ``candidates`` (n, K, D) → (n, K)."""
    q = np.asarray(query, dtype=np.float64)[:, None, :]
    c = np.asarray(candidates, dtype=np.float64)
    return -np.sqrt(((c - q) ** 2).sum(axis=-1))


def vqa_model_scores(probs: np.ndarray) -> np.ndarray:
    """Scores of the VQA-model baseline: ``S_i = −P(A | Q, I_i)`` for ``probs`` (n, K), so
    the image least likely to have answer A comes first."""
    return -np.asarray(probs, dtype=np.float64)


def hinge_ranking_loss(scores: np.ndarray, targets: np.ndarray, margin: float) -> np.ndarray:
    """Pairwise hinge ranking loss per question (Goyal et al. 2017 §5, eq. 1):
    ``Σ_{i ≠ t} max(0, M − (S_t − S_i))`` for ``scores`` (n, K), targets t (n,) → (n,)."""
    s = np.asarray(scores, dtype=np.float64)
    t = np.asarray(targets, dtype=np.int64)
    rows = np.arange(s.shape[0])
    terms = np.maximum(0.0, margin - (s[rows, t][:, None] - s))
    terms[rows, t] = 0.0
    return terms.sum(axis=1)
