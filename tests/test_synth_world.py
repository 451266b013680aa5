"""A generated world: files load through vqadiag readers and keep the world's promises."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import h5py
import numpy as np
import pytest

from vqadiag.data.formats.detections import read_detections
from vqadiag.data.formats.gqa import read_choices, read_gqa_questions, read_scene_graphs
from vqadiag.data.formats.vqa2 import read_pairs, read_vqa_annotations, read_vqa_questions
from vqadiag.data.io.jsonio import read_json
from vqadiag.protocols.ood.formulas import build_ood_split
from vqadiag.synth import generate_world
from vqadiag.synth.program import execute
from vqadiag.synth.taxonomy import WARM_MATERIALS, WILD_ANIMALS, ripeness
from vqadiag.synth.vqa2 import QUESTION_TYPES

SPLITS = ("train", "val", "testdev")


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("world")
    generate_world(out, images=300, seed=5, bias=0.8, feature_dim=16)
    return out


def test_layout_and_world_json(world):
    meta = read_json(world / "world.json")
    for split in SPLITS:
        for kind in ("balanced_questions", "sceneGraphs", "choices"):
            assert (world / "gqa" / f"{split}_{kind}.json").is_file()
    for sub in ("train2014", "val2014"):
        assert (world / "vqa2" / f"v2_OpenEnded_mscoco_{sub}_questions.json").is_file()
        assert (world / "vqa2" / f"v2_mscoco_{sub}_annotations.json").is_file()
        assert (world / "vqa2" / f"v2_mscoco_{sub}_complementary_pairs.json").is_file()
    assert (world / "introspect" / "VQAIntrospect_trainv1.0.json").is_file()
    assert (world / "gqa" / "objects" / "gqa_objects_info.json").is_file()
    assert meta["seed"] == 5 and meta["images"] == 300 and meta["bias"] == 0.8
    assert sum(s["images"] for s in meta["splits"]["gqa"].values()) == 300
    assert len(meta["taxonomy"]["classes"]) >= 40
    assert {"ripeness", "warmth", "wildness", "seat_free"} <= set(meta["rules"])
    v = meta["splits"]["vqa2"]["val"]
    assert v["not_possible_rate"] == pytest.approx(100 * v["not_possible"] / v["pair_attempts"])
    assert meta["image_ids"]["vqa_to_gqa"]["1"] == "2300000"


def test_gqa_files_load_and_programs_give_the_answers(world):
    for split in SPLITS:
        questions = read_gqa_questions(world / "gqa" / f"{split}_balanced_questions.json")
        graphs = read_scene_graphs(world / "gqa" / f"{split}_sceneGraphs.json")
        choices = read_choices(world / "gqa" / f"{split}_choices.json")
        assert set(choices) == set(questions)
        for qid, q in questions.items():
            assert execute(q["semantic"], graphs[q["imageId"]]) == q["answer"], qid
            assert q["answer"] in choices[qid]["valid"]
            assert q["answer"] in choices[qid]["plausible"]
            assert qid in q["equivalent"]
            assert all(e in questions for e in q["entailed"] + q["equivalent"])


def test_every_annotation_points_at_an_existing_object(world):
    n = 0
    for split in SPLITS:
        questions = read_gqa_questions(world / "gqa" / f"{split}_balanced_questions.json")
        graphs = read_scene_graphs(world / "gqa" / f"{split}_sceneGraphs.json")
        for q in questions.values():
            objects = graphs[q["imageId"]]["objects"]
            tokens = {
                "question": q["question"].rstrip("?").split(),
                "answer": q["answer"].split(),
                "fullAnswer": q["fullAnswer"].rstrip(".").split(),
            }
            for part, spans in q["annotations"].items():
                for span, oid in spans.items():
                    assert oid in objects
                    lo, _, hi = span.partition(":")
                    words = tokens[part][int(lo) : int(hi) if hi else int(lo) + 1]
                    name = objects[oid]["name"]
                    assert " ".join(words).lower() in (name, _plural(name)), (q, span)
                    n += 1
    assert n > 1000


def _plural(name: str) -> str:
    from vqadiag.synth.taxonomy import CLASS_INDEX, CLASSES

    return CLASSES[CLASS_INDEX[name]].plural


def test_relations_point_at_objects_of_the_same_image(world):
    graphs = read_scene_graphs(world / "gqa" / "val_sceneGraphs.json")
    for graph in graphs.values():
        assert 5 <= len(graph["objects"]) <= 40
        for obj in graph["objects"].values():
            assert obj["x"] + obj["w"] <= graph["width"] and obj["y"] + obj["h"] <= graph["height"]
            for rel in obj["relations"]:
                assert rel["object"] in graph["objects"]


def test_gqa_ood_on_val_has_head_and_tail(world):
    questions = read_gqa_questions(world / "gqa" / "val_balanced_questions.json")
    split = build_ood_split(questions)
    assert split.head_ids and split.tail_ids


def test_question_types_cover_gqa_structure(world):
    questions = read_gqa_questions(world / "gqa" / "train_balanced_questions.json")
    structural = Counter(q["types"]["structural"] for q in questions.values())
    semantic = Counter(q["types"]["semantic"] for q in questions.values())
    assert set(structural) == {"query", "verify", "logical", "choose", "compare"}
    assert set(semantic) == {"obj", "attr", "rel", "cat", "global"}
    balanced = [q for q in questions.values() if q["isBalanced"]]
    assert 0 < len(balanced) < len(questions)


def test_detections_in_gqa_layout(world):
    info = read_json(world / "gqa" / "objects" / "gqa_objects_info.json")
    graphs = {}
    for split in SPLITS:
        graphs.update(read_scene_graphs(world / "gqa" / f"{split}_sceneGraphs.json"))
    assert set(info) == set(graphs)
    with h5py.File(world / "gqa" / "objects" / "gqa_objects_0.h5", "r") as fh:
        assert fh["bboxes"].shape == (300, 100, 4)
        assert fh["features"].shape == (300, 100, 16)
        bboxes = fh["bboxes"][:]
        source = fh["synth_object_index"][:]
    detections = read_detections(world / "gqa" / "objects")
    ious, duplicates, false_pos = [], 0, 0
    try:
        for image_id, record in info.items():
            boxes = np.asarray(detections[image_id])
            assert boxes.shape == (record["objectsNum"], 4)
            assert np.all(bboxes[record["idx"], record["objectsNum"] :] == 0)
            src = source[record["idx"], : record["objectsNum"]]
            false_pos += int((src < 0).sum())
            duplicates += len(src[src >= 0]) - len(set(src[src >= 0].tolist()))
            objects = list(graphs[image_id]["objects"].values())
            for box in boxes:
                best = max(_iou(box, o) for o in objects)
                ious.append(best)
    finally:
        detections.close()
    ious = np.array(ious)
    assert 0.7 < (ious > 0.5).mean() < 0.99  # most boxes localize an object, some do not
    assert duplicates > 0 and false_pos > 0


def _iou(box, obj):
    x1, y1, x2, y2 = box
    ox1, oy1, ox2, oy2 = obj["x"], obj["y"], obj["x"] + obj["w"], obj["y"] + obj["h"]
    iw = max(0.0, min(x2, ox2) - max(x1, ox1))
    ih = max(0.0, min(y2, oy2) - max(y1, oy1))
    inter = iw * ih
    return inter / ((x2 - x1) * (y2 - y1) + obj["w"] * obj["h"] - inter)


def test_vqa2_files_and_complementary_pairs(world):
    for sub in ("train2014", "val2014"):
        questions = read_vqa_questions(world / "vqa2" / f"v2_OpenEnded_mscoco_{sub}_questions.json")
        ann = read_vqa_annotations(world / "vqa2" / f"v2_mscoco_{sub}_annotations.json")
        pairs = read_pairs(world / "vqa2" / f"v2_mscoco_{sub}_complementary_pairs.json", ann.keys())
        assert set(questions) == set(ann)
        assert pairs
        for a, b in pairs:
            assert ann[a]["multiple_choice_answer"] != ann[b]["multiple_choice_answer"]
            assert questions[a]["question"] == questions[b]["question"]
            assert questions[a]["image_id"] != questions[b]["image_id"]
        paired = [q for pair in pairs for q in pair]
        assert len(paired) == len(set(paired))  # a question is in at most one pair
        for rec in ann.values():
            assert rec["question_type"] in QUESTION_TYPES
            assert rec["answer_type"] in ("yes/no", "number", "other")
            assert len(rec["answer_list"]) == 10
            assert Counter(rec["answer_list"]).most_common(1)[0][0] == rec["multiple_choice_answer"]
        variation = [len(set(r["answer_list"])) > 1 for r in ann.values()]
        assert 0.3 < np.mean(variation) < 0.95


def test_vqa2_and_introspect_programs_give_the_answers(world):
    # every VQA v2 question and every sub-question carries the program that answers it
    to_gqa = read_json(world / "world.json")["image_ids"]["vqa_to_gqa"]
    graphs = {}
    for split in SPLITS:
        graphs.update(read_scene_graphs(world / "gqa" / f"{split}_sceneGraphs.json"))
    keys = set()
    for sub in ("train2014", "val2014"):
        questions = read_vqa_questions(world / "vqa2" / f"v2_OpenEnded_mscoco_{sub}_questions.json")
        ann = read_vqa_annotations(world / "vqa2" / f"v2_mscoco_{sub}_annotations.json")
        for qid, q in questions.items():
            graph = graphs[to_gqa[q["image_id"]]]
            assert execute(q["semantic"], graph) == ann[qid]["multiple_choice_answer"], qid
            assert "(" not in str(q["semantic"])  # no object ids: nothing beyond the question
            keys.add(q["semantic"][-1]["operation"])
        intro = read_json(world / "introspect" / f"VQAIntrospect_{sub[:-4]}v1.0.json")
        for rec in intro.values():
            graph = graphs[to_gqa[str(rec["image_id"])]]
            for qa in (qa for entry in rec["introspect"] for qa in entry["sub_qa"]):
                assert execute(qa["semantic"], graph) == qa["sub_answer"], qa
    assert {"query", "count", "exist", "verify color", "not", "or"} <= keys


def test_pair_candidates_are_the_24_neighbours(world):
    cands = read_json(world / "vqa2" / "synth_val2014_pair_candidates.json")
    pairs = read_json(world / "vqa2" / "v2_mscoco_val2014_complementary_pairs.json")
    assert len(cands) == len(pairs)
    for rec in cands.values():
        assert len(rec["candidates"]) == 24
        assert rec["image_id"] not in rec["candidates"]
        assert rec["complement_image_id"] in rec["candidates"]


def test_introspect_sub_answers_imply_the_main_answer(world):
    from vqadiag.data.formats.introspect import read_introspect

    ann = read_vqa_annotations(world / "vqa2" / "v2_mscoco_val2014_annotations.json")
    raw = read_json(world / "introspect" / "VQAIntrospect_valv1.0.json")
    read_introspect(world / "introspect" / "VQAIntrospect_valv1.0.json")
    kinds = defaultdict(int)
    for main_id, rec in raw.items():
        assert ann[main_id]["multiple_choice_answer"] == rec["reasoning_answer_most_common"]
        main, answer = rec["reasoning_question"], rec["reasoning_answer_most_common"]
        for entry in rec["introspect"]:
            kinds[entry["pred_q_type"]] += 1
            if entry["pred_q_type"] != "perception":
                continue
            (sub,) = entry["sub_qa"]
            implied = _rule(main, sub["sub_answer"])
            assert implied == answer, (main, sub)
    assert kinds["perception"] > kinds["reasoning"] > 0


def _rule(main: str, fact: str) -> str:
    if main.endswith("ripe?"):
        return "yes" if ripeness(fact) == "ripe" else "no"
    if main.endswith("warm?"):
        return "yes" if fact in WARM_MATERIALS else "no"
    if main == "Is the animal wild?":
        return "yes" if fact in WILD_ANIMALS else "no"
    assert main.startswith("Can you sit on")
    return "yes" if fact == "no" else "no"


def _dominant_rate(out: Path) -> float:
    """How often a queryAttr answer is its class's most typical value (taxonomy order).

    A blind model that learned "bananas are yellow" answers exactly this value.
    """
    from vqadiag.synth.taxonomy import CLASS_INDEX, CLASSES

    questions = read_gqa_questions(out / "gqa" / "train_balanced_questions.json")
    hits = []
    for q in questions.values():
        if q["types"]["detailed"] != "queryAttr":
            continue
        name, family = q["groups"]["local"].removeprefix("queryAttr-").split("_")
        hits.append(CLASSES[CLASS_INDEX[name]].values(family)[0] == q["answer"])
    return float(np.mean(hits))


def test_bias_makes_language_priors_exploitable(world, tmp_path):
    generate_world(tmp_path, images=300, seed=5, bias=0.0, feature_dim=4)
    # bias 0.8: the typical value has p ≈ 0.6 on average; bias 0: p = 1/K ≈ 0.35
    assert _dominant_rate(world) > _dominant_rate(tmp_path) + 0.15


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    generate_world(a, images=60, seed=7, feature_dim=8)
    generate_world(b, images=60, seed=7, feature_dim=8)
    generate_world(c, images=60, seed=8, feature_dim=8)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert len(files) >= 20
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    differ = [rel for rel in files if (a / rel).read_bytes() != (c / rel).read_bytes()]
    assert "gqa/train_balanced_questions.json" in {str(r) for r in differ}


def test_choices_are_like_gqas_valid_broader_than_plausible_broader_than_gold(world, tmp_path):
    """GQA's choices: ``valid`` answers are of the question's kind, ``plausible`` the
    valid ones that make sense for that kind of object; so validity is not accuracy."""
    import json

    for split in SPLITS:
        questions = read_gqa_questions(world / "gqa" / f"{split}_balanced_questions.json")
        choices = read_choices(world / "gqa" / f"{split}_choices.json")
        broader = 0
        for qid, q in questions.items():
            valid, plausible = set(choices[qid]["valid"]), set(choices[qid]["plausible"])
            assert q["answer"] in plausible <= valid, qid
            if valid == {"yes", "no"}:
                assert plausible == valid, qid
            broader += len(valid) > 1
        assert broader > 0.9 * len(questions)
    # scored like GQA: answering "yes" to everything is valid far more often than right
    questions_file = world / "gqa" / "val_balanced_questions.json"
    questions = json.loads(questions_file.read_text())
    predictions = tmp_path / "yes.json"
    predictions.write_text(json.dumps({qid: "yes" for qid in questions}))
    from vqadiag.protocols.gqa.score import score_gqa

    out = score_gqa(questions_file, predictions, choices=world / "gqa" / "val_choices.json",
                    n_bootstrap=10)  # fmt: skip
    assert out["validity"] > out["accuracy"] + 10
    assert out["accuracy"] <= out["plausibility"] <= out["validity"]


def test_an_object_range_bounds_every_scene_and_keeps_the_default_draw(world, tmp_path):
    from vqadiag.synth.priors import build_priors
    from vqadiag.synth.scenes import sample_scenes

    sparse = tmp_path / "sparse"
    summary = generate_world(sparse, images=60, seed=5, feature_dim=4, objects=(3, 6))
    assert summary["objects_per_image"] == [3, 6]
    assert read_json(sparse / "world.json")["objects_per_image"] == [3, 6]
    counts = [
        len(scene["objects"])
        for split in SPLITS
        for scene in read_scene_graphs(sparse / "gqa" / f"{split}_sceneGraphs.json").values()
    ]
    assert len(counts) == 60 and min(counts) >= 3 and max(counts) <= 6
    assert Counter(counts)[6] > Counter(counts)[3]  # Γ(2.5, 4) + 3 is mostly clipped at 6
    # the default range is the 5–40 draw: the same counts as before the range existed
    assert read_json(world / "world.json")["objects_per_image"] == [5, 40]
    rng = np.random.default_rng(0)
    scenes = sample_scenes(200, build_priors(0.8, np.random.default_rng(1)), rng)
    again = np.random.default_rng(0)
    again.integers(0, build_priors(0.8, np.random.default_rng(1)).class_given_place.shape[0], 200)
    again.integers(0, 5, 200)
    expected = np.clip(np.rint(again.gamma(2.5, 4.0, 200)) + 5, 5, 40)
    assert np.diff(scenes.offsets).tolist() == expected.astype(int).tolist()


@pytest.mark.parametrize(
    ("objects", "why"),
    [((1, 6), "2 <= MIN <= MAX <= 40"), ((6, 3), "2 <= MIN <= MAX <= 40"),
     ((5, 41), "2 <= MIN <= MAX <= 40"), ("3-6", "two whole numbers"), ((3,), "two whole"),
     ((3.0, 6.0), "two whole numbers"), ((True, 6), "two whole numbers")],
)  # fmt: skip
def test_an_object_range_outside_2_to_40_is_refused(tmp_path, objects, why):
    with pytest.raises(ValueError, match=why):
        generate_world(tmp_path / "w", images=10, objects=objects)
    assert not (tmp_path / "w").exists()
