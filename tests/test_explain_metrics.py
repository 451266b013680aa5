"""Counter-example metrics and baselines on hand-worked cases (docs/protocols.md §2)."""

from __future__ import annotations

import numpy as np
import pytest

from vqadiag.metrics.counterexample import (
    distance_scores,
    embedding_distance_scores,
    hinge_ranking_loss,
    random_expected_recall,
    random_scores,
    recall_at_k,
    recall_hits,
    target_ranks,
    vqa_model_scores,
)


def test_target_rank_counts_higher_scores() -> None:
    # scores 0.1, 0.9, 0.5; target = candidate 2 (0.5): only 0.9 is higher → rank 0-based 1
    assert target_ranks(np.array([[0.1, 0.9, 0.5]]), np.array([2])).tolist() == [1]
    # target = candidate 1 (0.9): nothing higher → rank 0
    assert target_ranks(np.array([[0.1, 0.9, 0.5]]), np.array([1])).tolist() == [0]


def test_ties_broken_by_candidate_order_or_key() -> None:
    scores = np.array([[0.5, 0.2, 0.5], [0.5, 0.2, 0.5]])
    # row 0, target 2: candidate 0 ties and comes first → rank 1; row 1, target 0 → rank 0
    assert target_ranks(scores, np.array([2, 0])).tolist() == [1, 0]
    # with keys 9, 0, 1 candidate 2 (key 1) now precedes candidate 0 (key 9): target 2 → 0
    keys = np.array([[9.0, 0.0, 1.0], [9.0, 0.0, 1.0]])
    assert target_ranks(scores, np.array([2, 0]), tiebreak=keys).tolist() == [0, 1]


def test_target_ranks_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError):
        target_ranks(np.zeros(3), np.array([0]))
    with pytest.raises(ValueError):
        target_ranks(np.zeros((1, 3)), np.array([3]))


def test_recall_at_k_hand_worked() -> None:
    ranks = np.array([0, 4, 5, 23])
    # hits@1: [1,0,0,0] → 25 %; hits@5: [1,1,0,0] → 50 %; hits@10: [1,1,1,0] → 75 %
    assert recall_hits(ranks, 5).tolist() == [1.0, 1.0, 0.0, 0.0]
    assert recall_at_k(ranks, 1).value == pytest.approx(25.0)
    est = recall_at_k(ranks, 5, n_resamples=200, seed=0)
    assert est.value == pytest.approx(50.0)
    assert est.n == 4
    assert 0.0 <= est.ci_low <= 50.0 <= est.ci_high <= 100.0
    assert recall_at_k(ranks, 10).value == pytest.approx(75.0)


def test_random_expectation_is_k_over_K() -> None:
    # rank of I' is uniform on 0..23, so P(rank < 5) = 5/24 = 20.8333… %
    assert random_expected_recall(5, 24) == pytest.approx(100 * 5 / 24)
    assert random_expected_recall(1, 24) == pytest.approx(4.1666666667)
    assert random_expected_recall(10, 24) == pytest.approx(41.6666666667)
    assert random_expected_recall(30, 24) == 100.0
    with pytest.raises(ValueError):
        random_expected_recall(5, 0)


def test_seeded_random_ranking_matches_expectation() -> None:
    n, k = 24_000, 24
    targets = np.arange(n) % k
    ranks = target_ranks(random_scores(n, k, seed=3), targets)
    # same seed, same ranking; the rank of the target is uniform on 0..23
    assert np.array_equal(ranks, target_ranks(random_scores(n, k, seed=3), targets))
    assert recall_hits(ranks, 5).mean() * 100 == pytest.approx(100 * 5 / 24, abs=1.0)
    assert np.bincount(ranks, minlength=k).min() > 800  # 1000 expected per rank


def test_distance_baseline_is_the_candidates_order() -> None:
    # nearest first: the complement at position p ranks p
    assert target_ranks(distance_scores(3, 24), np.array([0, 4, 23])).tolist() == [0, 4, 23]


def test_embedding_distance_baseline() -> None:
    query = np.array([[0.0, 0.0]])
    cands = np.array([[[3.0, 4.0], [1.0, 0.0], [0.0, 2.0]]])
    # distances 5, 1, 2 → scores −5, −1, −2; candidate 2 is second nearest → rank 1
    scores = embedding_distance_scores(query, cands)
    assert scores.tolist() == [[-5.0, -1.0, -2.0]]
    assert target_ranks(scores, np.array([2])).tolist() == [1]


def test_vqa_model_baseline_sorts_by_ascending_probability() -> None:
    # P(A|Q,I_i) = 0.9, 0.1, 0.3 → order 1, 2, 0: candidate 2 ranks 1, candidate 0 ranks 2
    scores = vqa_model_scores(np.array([[0.9, 0.1, 0.3], [0.9, 0.1, 0.3]]))
    assert target_ranks(scores, np.array([2, 0])).tolist() == [1, 2]


def test_hinge_ranking_loss_three_candidates() -> None:
    scores = np.array([[2.0, 1.5, 0.0], [2.0, 1.5, 0.0]])
    # M = 1. target 0: max(0, 1 − (2 − 1.5)) + max(0, 1 − (2 − 0)) = 0.5 + 0 = 0.5
    # target 1: max(0, 1 − (1.5 − 2)) + max(0, 1 − (1.5 − 0)) = 1.5 + 0 = 1.5
    loss = hinge_ranking_loss(scores, np.array([0, 1]), margin=1.0)
    assert loss.tolist() == pytest.approx([0.5, 1.5])
    # M = 3, target 0: (3 − 0.5) + (3 − 2) = 3.5
    assert hinge_ranking_loss(scores[:1], np.array([0]), 3.0).tolist() == pytest.approx([3.5])


def test_torch_hinge_loss_matches_hand_worked_case() -> None:
    torch = pytest.importorskip("torch")
    from vqadiag.models.remedies.counterexample import hinge_loss

    scores = torch.tensor([[2.0, 1.5, 0.0], [2.0, 1.5, 0.0]], requires_grad=True)
    loss = hinge_loss(scores, torch.tensor([0, 1]), 1.0)
    assert loss.tolist() == pytest.approx([0.5, 1.5])  # as in the numpy case above
    loss.sum().backward()
    # row 0: only the pair (0, 1) is active → dS_0 = −1, dS_1 = +1, dS_2 = 0
    # row 1: only the pair (1, 0) is active → dS_1 = −1, dS_0 = +1
    assert scores.grad.tolist() == [[-1.0, 1.0, 0.0], [1.0, -1.0, 0.0]]
