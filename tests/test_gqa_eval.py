"""GQA's official eval.py metrics (docs/protocols.md §7) on hand-worked cases."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from vqadiag.protocols.gqa.formulas import (
    belongs,
    bootstrap_distribution,
    chi_square_distribution,
    consistency_scores,
    distribution_from_counts,
    distribution_index,
    evaluate_gqa,
    official_rate,
    steps_count,
    words_count,
)


def op(text: str) -> dict[str, Any]:
    operation, argument = text.split(": ", 1)
    return {"operation": operation, "argument": argument, "dependencies": []}


def rec(
    question: str,
    answer: str,
    *,
    structural: str = "query",
    semantic: str = "attr",
    detailed: str = "colorQuery",
    global_group: str | None = "color",
    entailed: tuple[str, ...] = (),
    steps: tuple[str, ...] = ("select: sky (1)", "query: color"),
    balanced: bool = True,
) -> dict[str, Any]:
    return {
        "question": question,
        "answer": answer,
        "imageId": "n1",
        "isBalanced": balanced,
        "groups": {"global": global_group, "local": "l"},
        "types": {"structural": structural, "semantic": semantic, "detailed": detailed},
        "semantic": [op(s) for s in steps],
        "entailed": list(entailed),
        "equivalent": [],
    }


def test_words_count_splits_on_any_whitespace():
    # "Is", "the", "sky", "blue?" -> 4 (double space and tab do not add words)
    assert words_count("Is the  sky\tblue?") == 4


def test_steps_exclude_exist_query_name_and_choose_name():
    semantic = [
        op("select: sky (1)"),  # counted
        op("exist: ?"),  # "exist: ?" contains "exist" -> not counted
        op("query: name"),  # "query: name" -> not counted
        op("choose name: cat|dog"),  # contains "choose name" -> not counted
        op("relate: on,s (3)"),  # counted
        op("query: color"),  # counted ("query: color" is not "query: name")
        op("choose color: red|blue"),  # counted
    ]
    assert steps_count(semantic) == 4


def test_steps_substring_quirk_matches_argument_text_too():
    # The official test is a substring test on "operation: argument", so an
    # argument containing "exist" drops the step as well.
    assert steps_count([op("relate: existing table (4)"), op("filter: named thing")]) == 1
    assert steps_count([]) == 0


def test_belongs_replaces_the_group_for_common_questions():
    assert belongs("red", ["red", "blue"], "colorQuery")
    assert not belongs("green", ["red", "blue"], "colorQuery")
    # twoCommon: the choices list is replaced by ["color", "material", "shape"]
    assert belongs("color", ["red"], "twoCommon")
    assert not belongs("red", ["red"], "twoCommon")
    assert not belongs(None, ["red"], "colorQuery")


def test_official_rate_keeps_the_official_order_of_operations():
    # official: float(sum) / len * 100 = (1/3)*100 = 33.33333333333333, while
    # 100*1/3 = 33.333333333333336 differs in the last bit.
    assert official_rate([1.0, 0.0, 0.0]) == 33.33333333333333
    assert official_rate([1.0, 0.0, 0.0]) != 100 * 1 / 3
    assert np.isnan(official_rate([]))


def test_consistency_hand_worked():
    questions = {
        "q1": rec("a", "x", entailed=("q1", "q2", "q3")),
        "q2": rec("b", "y"),
        "q3": rec("c", "z"),
        "q4": rec("d", "x", entailed=("q4",)),
        "q5": rec("e", "x", entailed=("q2",)),
        "q6": rec("f", "x", entailed=("q7",)),
        "q7": rec("g", "w"),
        "q8": rec("h", "x", entailed=("q2", "q9")),
    }
    predictions = {
        "q1": "x",  # correct; entailed q2 right, q3 wrong -> 0.5 (q1 itself excluded)
        "q2": "y",
        "q3": "no",
        "q4": "x",  # correct but only entails itself -> not counted
        "q5": "no",  # wrong -> not counted
        "q6": "x",  # correct; q7 has no prediction -> skipped, q6 left out
        "q8": "x",  # correct; q2 right, q9 unknown -> 1.0
    }
    scored = ["q1", "q4", "q5", "q6", "q8"]
    correct = [predictions[q] == questions[q]["answer"] for q in scored]
    result = consistency_scores(scored, correct, questions, predictions)
    assert result.question_ids == ["q1", "q8"]
    assert result.scores == [0.5, 1.0]
    assert result.n_entailed == [2, 1]
    assert result.entailed_skipped == 2  # q7 (no prediction), q9 (unknown id)
    assert result.questions_skipped == 1  # q6
    assert result.value == 75.0  # (0.5 + 1.0) / 2 * 100


def test_distribution_hand_worked():
    # group A gold: x, x, y; predicted x, x, x -> (3-2)^2/2 + (0-1)^2/1 = 1.5, N = 3
    # group B gold: z, z; predicted z, w -> (1-2)^2/2 = 0.5 ("w" is no gold answer), N = 2
    # null group: ignored.  (1.5*3 + 0.5*2) / 5 / 100 = 0.011
    groups = ["A", "A", "A", "B", "B", None]
    gold = ["x", "x", "y", "z", "z", "q"]
    predicted = ["x", "x", "x", "z", "w", "r"]
    assert chi_square_distribution(groups, gold, predicted) == pytest.approx(0.011, abs=1e-15)
    index = distribution_index(groups, gold, predicted)
    assert index.gold_pair.tolist() == [0, 0, 1, 2, 2, -1]
    assert index.pred_pair.tolist() == [0, 0, 0, 2, -1, -1]
    e = np.array([[2.0, 1.0, 2.0]])
    o = np.array([[3.0, 0.0, 1.0]])
    assert distribution_from_counts(e, o, index.pair_group, index.n_groups)[0] == pytest.approx(
        0.011
    )


def test_distribution_is_zero_for_a_perfect_model_and_nan_without_groups():
    assert chi_square_distribution(["A", "A"], ["x", "y"], ["x", "y"]) == 0.0
    assert np.isnan(chi_square_distribution([None], ["x"], ["x"]))
    # a missing prediction (None) adds to no predicted histogram: (0-1)^2/1 = 1 -> 0.01
    assert chi_square_distribution(["A"], ["x"], [None]) == 0.01


def test_distribution_bootstrap_is_seeded_and_zero_for_a_perfect_model():
    index = distribution_index(["A"] * 4, ["x", "x", "y", "z"], ["x", "x", "y", "z"])
    assert np.all(bootstrap_distribution(index, n_resamples=20, seed=1) == 0.0)
    noisy = distribution_index(["A"] * 6, list("xxyyzz"), list("xyyzzx"))
    a = bootstrap_distribution(noisy, n_resamples=30, seed=3)
    b = bootstrap_distribution(noisy, n_resamples=30, seed=3)
    assert np.array_equal(a, b) and np.all(a >= 0)


def test_evaluate_gqa_hand_worked():
    questions = {
        "01": rec("What color is the sky?", "blue", global_group="color"),
        "02": rec(
            "Is the sky blue?", "yes", structural="verify", global_group=None, detailed="verifyAttr"
        ),
        "03": rec("What do they have in common?", "color", detailed="twoCommon"),
        "04": rec(
            "Is it red or blue?",
            "red",
            structural="choose",
            semantic="rel",
            steps=("select: car (2)", "choose color: red|blue"),
        ),
    }
    predictions = {"01": "blue", "02": "no", "03": "color", "04": "blue"}
    choices = {
        "01": {"valid": ["blue", "red"], "plausible": ["blue"]},
        "02": {"valid": ["yes", "no"], "plausible": ["yes"]},
        "03": {"valid": ["red"], "plausible": ["red"]},  # replaced: "Common"
        "04": {"valid": ["red"], "plausible": ["red"]},
    }
    ev = evaluate_gqa(questions, predictions, list(questions), choices)
    assert ev.correct.tolist() == [1.0, 0.0, 1.0, 0.0]
    assert ev.is_open.tolist() == [True, False, True, False]
    assert ev.valid.tolist() == [1.0, 1.0, 1.0, 0.0]
    assert ev.plausible.tolist() == [1.0, 0.0, 1.0, 0.0]
    assert ev.words == [5, 4, 6, 5]
    assert ev.steps == [2, 2, 2, 2]
    assert ev.breakdowns["perStructuralType"] == {"query": [0, 2], "verify": [1], "choose": [3]}
    assert ev.breakdowns["perSemanticType"] == {"attr": [0, 1, 2], "rel": [3]}
    # global group "color": gold blue, color, red; predicted blue, color, blue
    # -> blue (2-1)^2/1 + color (1-1)^2/1 + red (0-1)^2/1 = 2, N = 3 -> 2*3/3/100
    assert ev.distribution == 0.02


def test_distribution_bootstrap_recounts_the_drawn_questions():
    # Reference: the definition with the same draws — resample question indices, weight
    # each question by how often it was drawn, recount the gold / predicted pairs.
    rng = np.random.default_rng(11)
    groups = [None if g == "-" else g for g in rng.choice(list("AB-"), size=300)]
    gold = rng.choice(list("xyz"), size=300).tolist()
    predicted = [None if p == "-" else p for p in rng.choice(list("xyzw-"), size=300)]
    index = distribution_index(groups, gold, predicted)
    got = bootstrap_distribution(index, n_resamples=70, seed=4)
    draws = np.random.default_rng(4)
    k = index.pair_group.shape[0]
    expected = []
    for _ in range(70):
        weights = np.bincount(draws.integers(0, 300, size=300), minlength=300)
        e = np.zeros(k)
        o = np.zeros(k)
        for i in range(300):
            if index.gold_pair[i] >= 0:
                e[index.gold_pair[i]] += weights[i]
            if index.pred_pair[i] >= 0:
                o[index.pred_pair[i]] += weights[i]
        expected.append(distribution_from_counts(e, o, index.pair_group, index.n_groups)[0])
    assert np.array_equal(got, np.array(expected))
