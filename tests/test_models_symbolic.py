"""The GQA program executor and the symbolic model (issue 4)."""

from __future__ import annotations

import numpy as np
import pytest

from vqadiag.data.formats.gqa_program import ProgramError, ProgramVocabulary, parse_argument, run
from vqadiag.errors import DataError
from vqadiag.models.base import ObjectInput, PixelInput, QuestionBatch

pytest.importorskip("torch")

from vqadiag.data.model_inputs.geometry import best_matches, pairwise_iou
from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.models.reference.symbolic import SymbolicModel
from vqadiag.models.reference.symbolic_features import (
    MATCH_IOU,
    grounded_question_ids,
    pair_geometry,
)
from vqadiag.models.reference.symbolic_vocabulary import learn_vocabulary, program_key


def _s(op, deps, arg):
    return {"operation": op, "dependencies": deps, "argument": arg}


VOCAB = ProgramVocabulary(
    attribute_family={"red": "color", "green": "color", "wood": "material"},
    categories={"apple": ("fruit",), "table": ("furniture",)},
    relation_answer={"to the left of": "left"},
)
SCENE = {
    "location": "kitchen",
    "objects": {
        "1": {"name": "apple", "x": 0, "y": 0, "w": 10, "h": 10, "attributes": ["red"],
              "relations": [{"name": "on", "object": "3"}], "score": 0.9},
        "2": {"name": "apple", "x": 50, "y": 0, "w": 4, "h": 4, "attributes": ["green"],
              "relations": [], "score": 0.6},
        "3": {"name": "table", "x": 0, "y": 8, "w": 80, "h": 30, "attributes": ["wood"],
              "relations": [{"name": "under", "object": "1"}]},
    },
}  # fmt: skip


# --------------------------------------------------------------------------- executor
def test_parse_argument_splits_name_and_ids():
    assert parse_argument("apple (12,13)") == ("apple", ["12", "13"])
    assert parse_argument("table,on,o (-)") == ("table,on,o", [])
    assert parse_argument("red") == ("red", [])


def test_strict_ambiguity_raises_lenient_uses_scores():
    prog = [_s("select", [], "apple (1)"), _s("query", [0], "color")]
    with pytest.raises(ProgramError, match="ambiguous"):
        run(prog, SCENE, VOCAB)
    # lenient: mass red = 0.9 (object 1), green = 0.6 (object 2) → red
    out = run(prog, SCENE, VOCAB, strict=False)
    assert out.answer == "red"
    assert out.touched == ["1", "2"] and out.final_operation == "query"
    assert out.final_objects == ["1", "2"]


def test_lenient_uses_classifier_probabilities_over_hard_attributes():
    scene = {"objects": {k: dict(v) for k, v in SCENE["objects"].items()}}
    # object 1 unsure: red 0.3 green 0.6 → mass green = 0.9·0.6 + 0.6 = 1.14 > red 0.27
    scene["objects"]["1"] = {
        **scene["objects"]["1"],
        "probs": {"color": {"red": 0.3, "green": 0.6}},
    }
    prog = [_s("select", [], "apple (1)"), _s("query", [0], "color")]
    assert run(prog, scene, VOCAB, strict=False).answer == "green"


def test_category_select_filter_not_relate_and_relation_answer():
    fruit_red = [
        _s("select", [], "fruit (1)"),
        _s("filter color", [0], "red"),
        _s("exist", [0], ""),
    ]
    assert run(fruit_red, SCENE, VOCAB).answer == "yes"
    not_red = [_s("select", [], "apple (2)"), _s("filter color", [0], "not(red)"),
               _s("query", [1], "name")]  # fmt: skip
    assert run(not_red, SCENE, VOCAB).answer == "apple"
    on_table = [_s("select", [], "table (3)"), _s("relate", [0], "fruit,on,s (1)"),
                _s("query", [1], "name")]  # fmt: skip
    out = run(on_table, SCENE, VOCAB)
    assert out.answer == "apple" and out.touched == ["1", "3"]
    left = {"objects": {
        "a": {"name": "apple", "x": 0, "y": 0, "w": 1, "h": 1,
              "relations": [{"name": "to the left of", "object": "b"}]},
        "b": {"name": "table", "x": 5, "y": 0, "w": 1, "h": 1, "relations": []},
    }}  # fmt: skip
    choose = [_s("select", [], "table (b)"),
              _s("choose rel", [0], "apple,to the left of|to the right of,s (a)")]  # fmt: skip
    assert run(choose, left, VOCAB).answer == "left"


def test_scene_query_and_lenient_choice_from_scene_probabilities():
    prog = [_s("select", [], "scene"), _s("query", [0], "place")]
    assert run(prog, SCENE, VOCAB).answer == "kitchen"
    scene = {**SCENE, "probs": {"location": {"kitchen": 0.2, "park": 0.5, "farm": 0.3}}}
    choose = [_s("select", [], "scene"), _s("choose place", [0], "kitchen|farm")]
    # strict: the hard value; lenient: the more probable option (farm 0.3 > kitchen 0.2)
    assert run(choose, scene, VOCAB).answer == "kitchen"
    assert run(choose, scene, VOCAB, strict=False).answer == "farm"


def test_single_object_steps_and_errors():
    larger = [_s("select", [], "table (3)"), _s("select", [], "apple (1)"),
              _s("choose larger", [0, 1], "")]  # fmt: skip
    with pytest.raises(ProgramError):  # two apples: strict refuses
        run(larger, SCENE, VOCAB)
    # lenient: apple 1 (score 0.9); areas 80·30 = 2400 > 10·10 → table
    assert run(larger, SCENE, VOCAB, strict=False).answer == "table"
    with pytest.raises(ProgramError, match="unknown operation"):
        run([_s("select", [], "apple (1)"), _s("teleport", [0], "")], SCENE, VOCAB)
    with pytest.raises(ProgramError, match="ends in objects"):
        run([_s("select", [], "apple (1)")], SCENE, VOCAB)
    with pytest.raises(ProgramError, match="malformed"):
        run([_s("select", [], "apple"), _s("exist", [5], "")], SCENE, VOCAB)
    with pytest.raises(ProgramError, match="no object"):
        run([_s("select", [], "cat (9)"), _s("query", [0], "color")], SCENE, VOCAB, strict=False)


def test_count_and_not_beyond_gqa():
    count = [_s("select", [], "apple"), _s("count", [0], "")]
    assert run(count, SCENE, VOCAB).answer == "2"
    assert run([_s("select", [], "cat"), _s("count", [0], "")], SCENE, VOCAB).answer == "0"
    free = [_s("select", [], "table"), _s("relate", [0], "_,on,s"), _s("exist", [1], "?"),
            _s("not", [2], "")]  # fmt: skip
    assert run(free, SCENE, VOCAB).answer == "no"  # apple 1 is on the table
    assert run([*free[:1], _s("relate", [0], "_,under,s"), *free[2:]], SCENE, VOCAB).answer == "yes"
    with pytest.raises(ProgramError, match="not needs a yes/no"):
        run([_s("select", [], "apple"), _s("not", [0], "")], SCENE, VOCAB)
    with pytest.raises(ProgramError, match="count needs objects"):
        run([_s("select", [], "scene"), _s("count", [0], "")], SCENE, VOCAB)


def test_vocabulary_round_trips_through_json():
    assert ProgramVocabulary.from_dict(VOCAB.to_dict()) == VOCAB


# --------------------------------------------------------------------------- geometry
def test_iou_and_matching_hand_worked():
    a = np.array([[0, 0, 2, 2], [10, 10, 12, 12]], float)
    b = np.array([[1, 1, 3, 3], [0, 0, 2, 2]], float)
    iou = pairwise_iou(a, b, integer=False)
    # [0,0,2,2] vs [1,1,3,3]: intersection 1, union 4 + 4 − 1 = 7
    assert iou[0, 0] == pytest.approx(1 / 7)
    assert iou[0, 1] == 1.0 and iou[1, 0] == 0.0
    assert best_matches(a, b, MATCH_IOU, inclusive=False).tolist() == [1, -1]
    # IoU exactly 0.5 is not a match (> 0.5): [0,0,2,1] inside [0,0,2,2]: 2 / 4
    half = np.array([[0, 0, 2, 1]]), np.array([[0, 0, 2, 2]])
    assert pairwise_iou(*half, integer=False)[0, 0] == 0.5
    assert best_matches(*half, MATCH_IOU, inclusive=False).tolist() == [-1]
    assert best_matches(*half, MATCH_IOU, inclusive=True).tolist() == [0]  # the pixel rule


def test_pair_geometry_hand_worked():
    boxes = np.array([[0, 0, 10, 10], [20, 5, 40, 25]], float)
    g = pair_geometry(boxes, (100, 50), np.array([0]), np.array([1]))[0]
    # gap (x1_b − x2_a)/W = (20 − 10)/100; vertical overlap (min(10,25) − max(0,5))/H = 5/50
    assert g[0] == pytest.approx(0.1) and g[2] == pytest.approx(0.1)
    # no intersection → IoU 0; bottom offset (10 − 25)/50; log area ratio log(100/400)
    assert g[5] == 0 and g[6] == pytest.approx(-0.3) and g[10] == pytest.approx(np.log(0.25))
    # a's bottom relative to b: (10 − 5)/20
    assert g[11] == pytest.approx(0.25)


def test_learn_vocabulary_from_programs_and_scenes():
    scenes = {"7": SCENE}
    questions = {
        "q1": {"imageId": "7", "answer": "red",
               "semantic": [_s("select", [], "fruit (1)"), _s("query", [0], "color")]},
        "q2": {"imageId": "7", "answer": "no",
               "semantic": [_s("select", [], "table (3)"), _s("verify material", [0], "metal")]},
        "q3": {"imageId": "7", "answer": "yes",
               "semantic": [_s("select", [], "apple (1)"), _s("choose color", [0], "green|blue")]},
        "q4": {"imageId": "7", "answer": "left",
               "semantic": [_s("select", [], "table (3)"),
                            _s("choose rel", [0], "apple,to the left of|to the right of,s (1)")]},
    }  # fmt: skip
    vocab = learn_vocabulary(questions, scenes)
    assert vocab.attribute_family == {
        "blue": "color", "green": "color", "metal": "material", "red": "color"
    }  # fmt: skip
    assert vocab.categories == {"apple": ("fruit",)}
    assert vocab.relation_answer == {"to the left of": "left"}


# --------------------------------------------------------------------------- the model
@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    out = tmp_path_factory.mktemp("symworld")
    generate_world(out, images=120, seed=3, progress=False)
    return GQAData(out)


@pytest.fixture(scope="module")
def model(world):
    return SymbolicModel.train(world, epochs=10, relation_epochs=3, seed=0, progress=False)


def _val(world, n=None):
    qids = sorted(world.questions("val"))[:n]
    batch = world.batch("val", qids)
    return batch, world.object_input(batch.image_ids)


def test_symbolic_beats_the_prior_and_is_strong_when_objects_are_detected(world, model):
    batch, visual = _val(world)
    out = model.predict(batch, visual)
    truth = [r["answer"] for r in batch.records]
    acc = np.mean([a == t for a, t in zip(out.answers, truth, strict=True)])
    prior = np.mean([model.fallback_answer(r) == r["answer"] for r in batch.records])
    grounded = set(grounded_question_ids(world, "val"))
    g_acc = np.mean(
        [
            a == r["answer"]
            for q, a, r in zip(batch.question_ids, out.answers, batch.records, strict=True)
            if q in grounded
        ]
    )
    assert acc > prior + 0.15
    assert g_acc > 0.75
    assert 0 < len(grounded) < len(batch)


def test_outputs_are_distributions_and_attention_only_on_visible_objects(world, model):
    batch, visual = _val(world, 60)
    out = model.predict(batch, visual)
    assert out.probs.shape == (60, len(model.answer_vocab))
    np.testing.assert_allclose(out.probs.sum(axis=1), 1.0, atol=1e-5)
    for a, p in zip(out.answers, out.probs, strict=True):
        assert model.answer_vocab[int(p.argmax())] == a
    assert out.attention.shape == visual.mask.shape
    assert not out.attention[~visual.mask].any()
    touched = out.attention.sum(axis=1)
    assert np.all((np.abs(touched - 1) < 1e-5) | (touched == 0)) and touched.any()


def test_masked_objects_have_no_influence(world, model):
    batch, visual = _val(world, 40)
    rng = np.random.default_rng(0)
    mask = visual.mask & (rng.random(visual.mask.shape) < 0.6)
    seen = model.predict(batch, visual.with_mask(mask))
    # garbage in every masked slot: features, boxes — the answers must not move
    features = visual.features.copy()
    boxes = visual.boxes.copy()
    features[~mask] = rng.normal(size=features[~mask].shape) * 50
    boxes[~mask] = np.array([1, 1, 300, 300], np.float32)
    garbage = model.predict(batch, ObjectInput(features, boxes, mask, visual.image_sizes))
    assert seen.answers == garbage.answers
    np.testing.assert_array_equal(seen.probs, garbage.probs)
    np.testing.assert_array_equal(seen.attention, garbage.attention)


def test_removing_the_touched_objects_changes_yes_exist_answers(world, model):
    qids = [q for q, r in sorted(world.questions("val").items())
            if r["types"]["detailed"] == "exist" and r["answer"] == "yes"]  # fmt: skip
    batch = world.batch("val", qids)
    visual = world.object_input(batch.image_ids)
    out = model.predict(batch, visual)
    hit = [i for i, a in enumerate(out.answers) if a == "yes"]
    assert len(hit) >= 5
    mask = visual.mask & ~(out.attention > 0)
    after = model.predict(batch, visual.with_mask(mask))
    flipped = np.mean([after.answers[i] == "no" for i in hit])
    assert flipped > 0.5


def test_fallback_is_the_group_prior(model):
    record = {"groups": {"local": "no-such-group", "global": None}, "types": {"detailed": "x"}}
    assert model.fallback_answer(record) == model.priors["overall"]
    local, answer = next(iter(model.priors["local"].items()))
    assert model.fallback_answer({"groups": {"local": local}}) == answer
    batch = QuestionBatch(["q"], ["What?"], ["i"], [{"groups": {"local": local}}])
    visual = ObjectInput(
        np.zeros((1, 1, model.tensors["feature_mean"].shape[0]), np.float32),
        np.array([[[0, 0, 5, 5]]], np.float32),
        np.ones((1, 1), bool),
        np.array([[100, 100]], np.float32),
    )
    out = model.predict(batch, visual)  # no program → fallback
    assert out.answers == [answer] and not out.attention.any()


def test_fallback_of_a_program_without_groups_is_its_programs_prior(model):
    # a VQA v2 record of a synthetic world: a program, no groups; GQA's training programs
    # with the same steps (ids dropped) give its fallback when no object is selected
    key, answer = next((k, a) for k, a in model.priors["program"].items() if "query: color" in k)
    name = key.split(" [")[0].removeprefix("select: ")
    record = {"semantic": [_s("select", [], name), _s("query", [0], "color")]}
    assert program_key(record["semantic"]) == key
    assert program_key([_s("select", [], f"{name} (1,2)"), _s("query", [0], "color")]) == key
    assert model.fallback_answer(record) == answer
    assert model.fallback_answer({"semantic": [_s("select", [], "zz")]}) == model.priors["overall"]
    assert program_key(None) is None and program_key([]) is None


def test_save_load_round_trip_and_fingerprint(world, model, tmp_path):
    model.save(tmp_path / "run")
    assert (tmp_path / "run" / "weights.safetensors").is_file()
    loaded = SymbolicModel.load(tmp_path / "run")
    assert loaded.fingerprint() == model.fingerprint()
    batch, visual = _val(world, 30)
    a, b = model.predict(batch, visual), loaded.predict(batch, visual)
    assert a.answers == b.answers
    np.testing.assert_array_equal(a.probs, b.probs)


def test_same_seed_same_weights(world):
    kw = {"epochs": 1, "relation_epochs": 1, "progress": False, "max_images": 30}
    a = SymbolicModel.train(world, seed=5, **kw)
    b = SymbolicModel.train(world, seed=5, **kw)
    c = SymbolicModel.train(world, seed=6, **kw)
    assert a.fingerprint() == b.fingerprint()
    for key in a.tensors:
        np.testing.assert_array_equal(a.tensors[key], b.tensors[key])
    assert c.fingerprint() != a.fingerprint()


def test_bad_inputs(world, model, tmp_path):
    batch, _ = _val(world, 2)
    with pytest.raises(TypeError, match="ObjectInput"):
        model.predict(batch, PixelInput(np.zeros((2, 4, 4, 3), np.uint8)))
    with pytest.raises(DataError, match="run folder not found"):
        SymbolicModel.load(tmp_path / "missing")
    model.save(tmp_path / "run")
    cfg = (tmp_path / "run" / "config.json").read_text().replace('"symbolic"', '"updn"', 1)
    (tmp_path / "run" / "config.json").write_text(cfg)
    with pytest.raises(DataError, match="config.json: not a symbolic model run"):
        SymbolicModel.load(tmp_path / "run")
    with pytest.raises(ValueError, match="unknown options"):
        SymbolicModel.train(world, progress=False, bogus=1)
    with pytest.raises(DataError, match="testdev_sceneGraphs|sceneGraphs"):
        (world.gqa_dir / "testdev_sceneGraphs.json").rename(tmp_path / "sg.json")
        try:
            SymbolicModel.train(GQAData(world.root), split="testdev", progress=False)
        finally:
            (tmp_path / "sg.json").rename(world.gqa_dir / "testdev_sceneGraphs.json")
