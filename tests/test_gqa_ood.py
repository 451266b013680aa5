"""GQA-OOD construction and metrics (docs/protocols.md §3) on hand-worked cases."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from vqadiag.protocols.ood.formulas import (
    OOD_ALPHA_GRID,
    OODColumns,
    accuracy_percent,
    build_ood_split,
    delta_percent,
    normalized_entropy,
    ood_groups,
)


def make_questions(groups: dict[str | None, list[tuple[str, int]]]) -> dict[str, dict[str, Any]]:
    """Questions ``{qid: record}`` with the given answer counts per local group."""
    out: dict[str, dict[str, Any]] = {}
    for local, answers in groups.items():
        for answer, count in answers:
            for _ in range(count):
                qid = f"{len(out):05d}"
                out[qid] = {
                    "question": "q?",
                    "answer": answer,
                    "imageId": "1",
                    "isBalanced": True,
                    "groups": {"global": None, "local": local},
                }
    return out


# Group A: yes x9, no x1 -> H = -(.9 ln .9 + .1 ln .1) / ln 2 = 0.4690
# Group B: red x5, blue x5 -> H = 1 (up to the 1e-9 term)
# Group C: cat x1 (K = 1) -> H = 1
# Group D: x, y, z x2 each -> H = 1
# mean = 0.86725, population std = 0.22993 -> threshold 0.63732 (sample std would
# give 0.60175): only A is kept.
FOUR_GROUPS = {
    "A": [("yes", 9), ("no", 1)],
    "B": [("red", 5), ("blue", 5)],
    "C": [("cat", 1)],
    "D": [("x", 2), ("y", 2), ("z", 2)],
}


def test_normalized_entropy_hand_values():
    # -(.75 ln .75 + .25 ln .25) / ln 2 = (0.21576 + 0.34657) / 0.69315 = 0.81128
    assert normalized_entropy(np.array([0.75, 0.25])) == pytest.approx(0.81128, abs=1e-5)
    assert normalized_entropy(np.array([0.9, 0.1])) == pytest.approx(0.46900, abs=1e-5)
    assert normalized_entropy(np.array([1.0])) == 1.0  # K = 1
    # the 1e-9 inside the log keeps a uniform histogram just below 1
    assert 1 - 1e-8 < normalized_entropy(np.full(4, 0.25)) < 1.0


def test_split_keeps_low_entropy_groups_with_population_std():
    questions = make_questions(FOUR_GROUPS)
    split = build_ood_split(questions, alpha=0.2)
    assert split.entropy_threshold == pytest.approx(0.63732, abs=1e-5)
    assert [g.name for g in split.groups.values() if g.kept] == ["A"]
    # A: K = 2, tail if p < 1.2 / 2 = 0.6: "no" (0.1) tail, "yes" (0.9) head
    a_ids = [q for q, r in questions.items() if r["groups"]["local"] == "A"]
    no_id = next(q for q in a_ids if questions[q]["answer"] == "no")
    assert split.all_ids == a_ids
    assert split.tail_ids == [no_id]
    assert split.head_ids == [q for q in a_ids if q != no_id]
    assert split.summary()["n_groups"] == 4 and split.n_groups_kept == 1


def test_tail_grows_with_alpha():
    groups = ood_groups(make_questions(FOUR_GROUPS))
    # alpha = -0.7: threshold 0.3 / 2 = 0.15 -> "no" only; alpha = 9: 10 / 2 = 5 -> both
    assert len(groups.split(-0.7).tail_ids) == 1
    assert len(groups.split(9.0).tail_ids) == 10
    assert groups.split(9.0).head_ids == []
    sizes = [len(groups.split(a).tail_ids) for a in OOD_ALPHA_GRID]
    assert sizes == sorted(sizes)


def test_tail_test_is_strict_at_the_threshold():
    # Group A: a x6, b x4 -> p = (0.6, 0.4), H = 0.97095; three K = 1 groups (H = 1).
    # mean = 0.99274, population std = 0.01258 -> threshold 0.98016: A is kept.
    # alpha = 0.2: threshold mean(p) * 1.2 = 0.5 * 1.2 = 0.6 and p_a = 0.6 is NOT < 0.6,
    # so "a" is head; "b" (0.4) is tail.
    questions = make_questions(
        {"A": [("a", 6), ("b", 4)], "B": [("u", 3)], "C": [("v", 2)], "D": [("w", 1)]}
    )
    split = build_ood_split(questions, alpha=0.2)
    assert split.groups["A"].kept
    assert split.groups["A"].tail_answers(0.2) == ["b"]
    assert {questions[q]["answer"] for q in split.head_ids} == {"a"}
    assert len(split.tail_ids) == 4


def test_null_local_group_is_the_group_none():
    questions = make_questions({None: [("yes", 2)], "none": [("no", 1)], "B": [("x", 1)]})
    groups = ood_groups(questions)
    assert list(groups.groups) == ["none", "B"]
    assert groups.groups["none"].answers == ("yes", "no")
    assert groups.groups["none"].counts == (2, 1)


def test_split_starts_from_balanced_questions_unless_told():
    questions = make_questions(FOUR_GROUPS)
    extra = dict(next(iter(questions.values())), answer="maybe", isBalanced=False)
    questions["99999"] = extra
    assert "99999" not in ood_groups(questions).question_ids
    assert "99999" in ood_groups(questions, balanced_only=False).question_ids


def test_alpha_grid_is_the_official_one():
    assert len(OOD_ALPHA_GRID) == 22
    assert OOD_ALPHA_GRID[0] == -0.7 and OOD_ALPHA_GRID[-1] == 9.0
    assert 0.2 in OOD_ALPHA_GRID and 3.6 in OOD_ALPHA_GRID
    assert list(OOD_ALPHA_GRID) == sorted(OOD_ALPHA_GRID)


def test_delta_and_accuracy():
    # Paper Table 2, question prior: head 24.1, tail 17.8 -> (24.1 - 17.8) / 17.8 = 35.39 %
    assert delta_percent(24.1, 17.8) == pytest.approx(35.393, abs=1e-3)
    assert np.isnan(delta_percent(50.0, 0.0))
    assert accuracy_percent([1, 0, 0]) == 33.33333333333333
    assert np.isnan(accuracy_percent([]))


def test_columns_give_the_same_groups_and_masks_as_records():
    """FOUR_GROUPS plus a null group and an unbalanced question, worked by hand: pairs
    are numbered in first-seen order, the unbalanced one only when asked, and the
    per-question masks select the split's ids."""
    questions = make_questions({**FOUR_GROUPS, None: [("cat", 2)]})
    questions["99999"] = dict(questions["00000"], answer="maybe", isBalanced=False)
    columns = OODColumns.of(questions)
    assert columns.local_groups[-3:] == ["none", "none", "A"]
    assert columns.balanced.tolist() == [True] * (len(questions) - 1) + [False]
    balanced = columns.subset(columns.balanced)
    assert balanced.ids == list(questions)[:-1] and balanced.balanced.all()
    # A: yes (0) x9, no (1); B: red (2) x5, blue (3) x5; C: cat (4); D: x, y, z (5-7) x2;
    # none: cat (8) x2; the unbalanced A "maybe" is pair 9
    pairs = [0] * 9 + [1] + [2] * 5 + [3] * 5 + [4] + [5, 5, 6, 6, 7, 7] + [8, 8]
    for source in (questions, columns):
        assert ood_groups(source).question_pair.tolist() == pairs
        assert ood_groups(source, balanced_only=False).question_pair.tolist() == [*pairs, 9]
        assert list(ood_groups(source).groups) == ["A", "B", "C", "D", "none"]
    groups = ood_groups(columns)
    # H: A 0.46900, B, C, D and none 1 -> mean 0.89380, std 0.21240, threshold 0.68140
    assert groups.entropy_threshold == pytest.approx(0.68140, abs=1e-5)
    assert groups.n_groups_kept == 1
    kept, tail = groups.question_masks(0.2)
    assert np.flatnonzero(kept).tolist() == list(range(10))  # group A
    assert np.flatnonzero(tail).tolist() == [9]  # A's single "no"
    split = groups.split(0.2)
    ids = np.array(groups.question_ids)
    assert (ids[kept].tolist(), ids[tail].tolist()) == (split.all_ids, split.tail_ids)


def test_unbalanced_records_are_not_read_when_left_out():
    questions = make_questions(FOUR_GROUPS)
    questions["99999"] = {"isBalanced": False}  # neither answer nor groups: never read
    assert "99999" not in ood_groups(questions).question_ids
