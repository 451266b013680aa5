"""``-o question_sets=gqa,vqa2,introspect`` of ``vqadiag train --model chat-vlm``: the
records each set adds, counted against the world's own files, a run trained on all
three, and the refusals (docs/chat-vlm.md, "Training")."""

from __future__ import annotations

import json
import shutil

import pytest

from vqadiag.data.formats.introspect import introspect_path
from vqadiag.errors import DataError
from vqadiag.models.reference.chat_vlm_questions import parse_question_sets, training_records


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    out = tmp_path_factory.mktemp("question_sets") / "world"
    generate_world(out, images=30, seed=4, render=False)
    return out


@pytest.mark.parametrize(
    ("value", "sets"),
    [("gqa", ("gqa",)), ("vqa2,gqa", ("gqa", "vqa2")),
     (" gqa , introspect,vqa2,gqa", ("gqa", "vqa2", "introspect"))],
)  # fmt: skip
def test_sets_are_read_once_each_in_a_fixed_order(value, sets):
    assert parse_question_sets(value) == sets


@pytest.mark.parametrize(
    ("value", "why"),
    [("", "must name some of"), ("gqa,coco", "must name"), ("vqa2", "must include gqa"),
     (3, "must name")],
)  # fmt: skip
def test_other_sets_are_refused_in_one_line(value, why):
    with pytest.raises(DataError, match=why) as err:
        parse_question_sets(value)
    assert "\n" not in str(err.value)


def test_each_set_adds_the_splits_own_questions_on_the_gqa_images(world):
    from vqadiag.data.formats.introspect import read_introspect
    from vqadiag.data.model_inputs.gqa_data import GQAData

    data = GQAData(world)
    got = training_records(data, "train", ("gqa", "vqa2", "introspect"))
    raw = json.loads((world / "vqa2" / "v2_OpenEnded_mscoco_train2014_questions.json").read_text())
    annotations = json.loads((world / "vqa2" / "v2_mscoco_train2014_annotations.json").read_text())
    intro = read_introspect(introspect_path(world, "train"))
    assert len(got["gqa"]) == len(data.questions("train"))
    assert len(got["vqa2"]) == len(raw["questions"]) > 0
    assert len(got["introspect"]) == len(intro.subs) > 0
    # a VQA v2 question keeps its text and its most common answer, on its GQA image
    vqa_to_gqa = json.loads((world / "world.json").read_text())["image_ids"]["vqa_to_gqa"]
    first, ann = raw["questions"][0], annotations["annotations"][0]
    assert ann["question_id"] == first["question_id"]
    assert got["vqa2"][0] == {"question": first["question"],
                              "answer": ann["multiple_choice_answer"],
                              "imageId": vqa_to_gqa[str(first["image_id"])]}  # fmt: skip
    train_images = set(json.loads((world / "gqa" / "train_sceneGraphs.json").read_text()))
    for name in ("vqa2", "introspect"):
        assert {r["imageId"] for r in got[name]} <= train_images
    # a sub-question is asked about its main question's image
    main = next(m for m in intro.mains.values() if m.subs)
    sub = main.subs[0]
    assert {"question": sub.question, "answer": sub.answer,
            "imageId": vqa_to_gqa[str(main.image_id)]} in got["introspect"]  # fmt: skip
    assert set(training_records(data, "train", ("gqa",))) == {"gqa"}


def test_a_set_whose_files_are_missing_is_refused_naming_the_file(world, tmp_path):
    from vqadiag.data.model_inputs.gqa_data import GQAData

    copy = tmp_path / "world"
    shutil.copytree(world, copy)
    introspect_path(copy, "train").unlink()
    with pytest.raises(DataError, match="introspect") as err:
        training_records(GQAData(copy), "train", ("gqa", "introspect"))
    assert "VQAIntrospect_trainv1.0.json" in str(err.value)
    shutil.rmtree(copy / "vqa2")
    for sets, named in ((("gqa", "vqa2"), "vqa2"), (("gqa", "introspect"), "introspect")):
        with pytest.raises(DataError, match=f"question_sets has {named}, but") as err:
            training_records(GQAData(copy), "train", sets)
        assert "v2_OpenEnded_mscoco_train2014_questions.json" in str(err.value)
    assert training_records(GQAData(copy), "train", ("gqa",))["gqa"]


@pytest.mark.slow
def test_a_run_trained_on_every_set_counts_them_and_answers(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from typer.testing import CliRunner

    from vqadiag.cli.main import app
    from vqadiag.synth import generate_world

    world = tmp_path / "world"
    generate_world(world, images=30, seed=4, objects=(3, 6))
    tiny = ["image_size=32", "patch_size=16", "vision_dim=32", "vision_layers=1",
            "vision_heads=2", "text_dim=32", "text_layers=1", "text_heads=2", "vocab_size=400",
            "pretrain_epochs=1", "batch_size=32", "threads=1",
            "question_sets=introspect,gqa,vqa2"]  # fmt: skip
    got = CliRunner().invoke(app, ["train", "--model", "chat-vlm", "--data", str(world),
                                   "--out", str(tmp_path / "run"), "--epochs", "1", "--quiet",
                                   "--json", *[a for o in tiny for a in ("-o", o)]])  # fmt: skip
    assert got.exit_code == 0, got.output
    result = json.loads(got.stdout)
    counts = result["training_questions"]
    assert list(counts) == ["gqa", "vqa2", "introspect"] and min(counts.values()) > 0
    assert result["options"]["question_sets"] == "gqa,vqa2,introspect"
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["training_questions"] == counts
    assert result["val"]["questions"] > 0
