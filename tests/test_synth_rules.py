"""Unit tests of the synthetic world's rules, on hand-worked cases."""

from __future__ import annotations

import random

import numpy as np
import pytest

from vqadiag.synth import gqa_questions as gq
from vqadiag.synth.gqa_record import Phrase
from vqadiag.synth.neighbours import knn, knn_naive
from vqadiag.synth.priors import build_priors, sample_rows, skewed_distribution
from vqadiag.synth.program import ProgramError, execute
from vqadiag.synth.scenes import relation_tensor
from vqadiag.synth.taxonomy import CLASS_INDEX, RELATIONS, ripeness
from vqadiag.synth.vqa2 import annotator_answers, question_type


def test_skewed_distribution_hand_worked():
    # geometric weights 1, 0.15, 0.0225 sum to 1.1725 → 0.852878, 0.127932, 0.019190;
    # p = 0.2/3 + 0.8 × those = 0.748969, 0.169012, 0.082019
    p = skewed_distribution(3, 0.8)
    assert p == pytest.approx([0.748969, 0.169012, 0.082019], abs=1e-6)
    assert skewed_distribution(4, 0.0) == pytest.approx([0.25] * 4)


def test_bias_zero_gives_uniform_attribute_priors():
    priors = build_priors(0.0, np.random.default_rng(0))
    banana = priors.attr["color"][CLASS_INDEX["banana"]]
    assert sorted(banana[banana > 0]) == pytest.approx([1 / 3] * 3)
    skewed = build_priors(0.9, np.random.default_rng(0)).attr["color"][CLASS_INDEX["banana"]]
    from vqadiag.synth.taxonomy import COLORS

    assert skewed.argmax() == COLORS.index("yellow")  # bananas are mostly yellow
    assert skewed.max() > 0.6


def test_sample_rows_follows_probabilities_and_marks_empty_rows():
    probs = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.0, 0.5]])
    rows = np.array([0, 1, 0, 2, 2, 2, 2] * 200)
    out = sample_rows(probs, rows, np.random.default_rng(0))
    assert set(out[rows == 0]) == {1}
    assert set(out[rows == 1]) == {-1}
    assert set(out[rows == 2]) == {0, 2}


def _rel(boxes, names, size=(100, 100)):
    box = np.array([boxes])
    cls = np.array([[CLASS_INDEX[n] for n in names]])
    mask = np.ones_like(cls, dtype=bool)
    rel = relation_tensor(box, cls, mask, np.array([size[0]]), np.array([size[1]]))[0]
    return {(a, RELATIONS[r], b) for r, a, b in zip(*np.nonzero(rel), strict=True)}


def test_on_and_under_from_geometry():
    # table x 10..70, y 50..80 (area 1800); cup x 30..40, y 40..55 (area 150):
    # cup's bottom-centre (35, 55) lies over the table and 55 ∈ [50, 50 + 0.4·30 = 62]
    rels = _rel([[10, 50, 60, 30], [30, 40, 10, 15]], ["table", "cup"])
    assert (1, "on", 0) in rels and (0, "under", 1) in rels
    # same cup 10 px lower: bottom 65 > 62 → not on
    rels = _rel([[10, 50, 60, 30], [30, 50, 10, 15]], ["table", "cup"])
    assert (1, "on", 0) not in rels
    # a cup cannot support a table
    rels = _rel([[10, 50, 60, 30], [30, 40, 10, 15]], ["cup", "table"])
    assert (1, "on", 0) not in rels


def test_left_right_from_geometry():
    # table ends at x 70, apple starts at 75: gap 5 < 0.15·100, vertical overlap 55..65
    rels = _rel([[10, 50, 60, 30], [75, 55, 10, 10]], ["table", "apple"])
    assert (0, "to the left of", 1) in rels and (1, "to the right of", 0) in rels
    # gap 20 ≥ 15 → no left/right
    rels = _rel([[10, 50, 60, 30], [90, 55, 8, 10]], ["table", "apple"])
    assert not any(r in ("to the left of", "to the right of") for _, r, _ in rels)


def test_behind_and_in_front_from_geometry():
    # tree x 0..30, y 0..60; man x 20..40, y 30..90: overlap 10×30 = 300 > 0.1·1200;
    # tree's bottom 60 < 90 − 0.04·100 → tree behind man
    rels = _rel([[0, 0, 30, 60], [20, 30, 20, 60]], ["tree", "man"])
    assert (0, "behind", 1) in rels and (1, "in front of", 0) in rels
    assert (0, "near", 1) not in rels


def test_near_from_geometry():
    # centres (15, 15) and (22, 15): distance 7 < 0.1·√(100² + 100²) = 14.1, no overlap
    rels = _rel([[10, 10, 10, 10], [20, 10, 4, 10]], ["apple", "cup"])
    assert (0, "near", 1) in rels and (1, "near", 0) in rels
    rels = _rel([[10, 10, 10, 10], [60, 10, 4, 10]], ["apple", "cup"])
    assert not rels


def test_ripeness_rule():
    assert ripeness("green") == "unripe"
    assert ripeness("brown") == "rotten"
    assert ripeness("yellow") == "ripe"
    assert ripeness("red") == "ripe"


SCENE = {
    "width": 100,
    "height": 100,
    "location": "kitchen",
    "objects": {
        "1": {"name": "table", "x": 10, "y": 50, "w": 60, "h": 30,
              "attributes": ["brown", "wood"], "relations": [{"name": "under", "object": "2"}]},
        "2": {"name": "banana", "x": 30, "y": 40, "w": 10, "h": 15,
              "attributes": ["yellow", "ripe"],
              "relations": [{"name": "on", "object": "1"},
                            {"name": "to the left of", "object": "3"}]},
        "3": {"name": "cup", "x": 50, "y": 40, "w": 5, "h": 5,
              "attributes": ["white", "ceramic", "empty"],
              "relations": [{"name": "to the right of", "object": "2"}]},
    },
}  # fmt: skip


def _s(op, deps, arg):
    return {"operation": op, "dependencies": deps, "argument": arg}


def test_program_executor_operations():
    sel_banana = _s("select", [], "banana (2)")
    sel_table = _s("select", [], "table (1)")
    sel_cup = _s("select", [], "cup (3)")
    assert execute([sel_banana, _s("query", [0], "color")], SCENE) == "yellow"
    assert execute([sel_banana, _s("verify color", [0], "green")], SCENE) == "no"
    assert execute([sel_banana, _s("choose color", [0], "green|yellow")], SCENE) == "yellow"
    what_on = [sel_table, _s("relate", [0], "_,on,s (2)"), _s("query", [1], "name")]
    assert execute(what_on, SCENE) == "banana"
    kind_on = [sel_table, _s("relate", [0], "fruit,on,s (2)"), _s("query", [1], "name")]
    assert execute(kind_on, SCENE) == "banana"
    on_what = [sel_banana, _s("relate", [0], "_,on,o (1)"), _s("query", [1], "name")]
    assert execute(on_what, SCENE) == "table"
    assert execute([sel_banana, _s("verify rel", [0], "table,on,o (1)")], SCENE) == "yes"
    assert execute([sel_banana, _s("verify rel", [0], "cup,on,o (3)")], SCENE) == "no"
    choose_rel = [sel_cup, _s("choose rel", [0], "banana,to the right of|to the left of,s (2)")]
    assert execute(choose_rel, SCENE) == "left"
    dog = _s("select", [], "dog (-)")
    assert execute([dog, _s("exist", [0], "?")], SCENE) == "no"
    both = [sel_banana, _s("exist", [0], "?"), dog, _s("exist", [2], "?"), _s("and", [1, 3], "")]
    assert execute(both, SCENE) == "no"
    both[-1] = _s("or", [1, 3], "")
    assert execute(both, SCENE) == "yes"
    assert execute([sel_banana, sel_cup, _s("same color", [0, 1], "")], SCENE) == "no"
    assert execute([sel_banana, sel_cup, _s("different color", [0, 1], "")], SCENE) == "yes"
    # banana 10×15 = 150 px², cup 5×5 = 25 px²
    assert execute([sel_cup, sel_banana, _s("choose larger", [0, 1], "")], SCENE) == "banana"
    assert execute([sel_cup, sel_banana, _s("choose smaller", [0, 1], "")], SCENE) == "cup"
    scene = _s("select", [], "scene")
    assert execute([scene, _s("query", [0], "place")], SCENE) == "kitchen"
    assert execute([scene, _s("verify place", [0], "street")], SCENE) == "no"
    filt = [_s("select", [], "kitchenware (3)"), _s("filter color", [0], "white"),
            _s("query", [1], "name")]  # fmt: skip
    assert execute(filt, SCENE) == "cup"


def test_program_executor_rejects_ambiguity_and_unknown_operations():
    with pytest.raises(ProgramError):
        execute([_s("select", [], "_ (-)"), _s("query", [0], "name")], SCENE)
    with pytest.raises(ProgramError):
        execute([_s("select", [], "cup (3)"), _s("fly", [0], "")], SCENE)


def test_phrase_annotations_index_tokens():
    q = Phrase().add("what color is the").obj("banana", "17")
    assert q.text("?") == "What color is the banana?"
    assert q.annotations == {"4": "17"}
    q = Phrase().add("is this").obj("living room", "5")
    assert q.annotations == {"2:4": "5"}


def test_mark_balanced_hand_worked():
    # group g: answer a ×10, b ×3, c ×1. Rarest c keeps 1; b keeps min(3, ceil(2·1)) = 2;
    # a keeps min(10, ceil(2·(1 + 2))) = 6 → 1 + 4 unbalanced questions
    answers = ["a"] * 10 + ["b"] * 3 + ["c"]
    qs = {
        f"q{k}": {"answer": a, "groups": {"local": "g"}, "isBalanced": True}
        for k, a in enumerate(answers)
    }
    qs["solo"] = {"answer": "x", "groups": {"local": "h"}, "isBalanced": True}
    gq.mark_balanced(qs, random.Random(0))
    kept = {a: sum(q["isBalanced"] for q in qs.values() if q["answer"] == a) for a in "abcx"}
    assert kept == {"a": 6, "b": 2, "c": 1, "x": 1}


def test_knn_hand_worked_and_ties():
    # points 0, 1, 3, 4 on a line, k = 2
    emb = np.array([[0.0], [1.0], [3.0], [4.0]])
    assert knn(emb, 2).tolist() == [[1, 2], [0, 2], [3, 1], [2, 1]]
    # 0, 1, 2: for the middle point both neighbours are at distance 1 → lower index first
    assert knn(np.array([[0.0], [1.0], [2.0]]), 2).tolist() == [[1, 2], [0, 2], [1, 0]]


def test_knn_blocked_equals_naive_with_many_ties():
    rng = np.random.default_rng(0)
    emb = rng.integers(0, 3, size=(300, 8)).astype(np.float64)
    assert np.array_equal(knn(emb, 24, block=64), knn_naive(emb, 24))


def test_question_type_longest_official_prefix():
    assert question_type("What color is the banana?") == "what color is the"
    assert question_type("What is on the table?") == "what is on the"
    assert question_type("Is there a dog in the picture?") == "is there a"
    assert question_type("Is there anything on the bench?") == "is there"
    assert question_type("Are there any cats?") == "are there any"
    assert question_type("Can you sit on the chair?") == "can you"
    assert question_type("Isn't it?") == "none of the above"


def test_annotator_answers_keep_the_canonical_answer_most_frequent():
    rng = random.Random(0)
    for k in range(300):
        answer, kind = (("yes", "yes/no"), ("2", "number"), ("yellow", "other"))[k % 3]
        given = annotator_answers(answer, kind, rng)
        texts = [g["answer"] for g in given]
        assert [g["answer_id"] for g in given] == list(range(1, 11))
        assert texts.count(answer) >= 6
