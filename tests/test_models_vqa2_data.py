"""VQA v2-format data for models: GQA-like records over the official files, mapped images."""

from __future__ import annotations

import orjson
import pytest

from vqadiag.data.model_inputs.vqa2_data import VQA2Data
from vqadiag.errors import DataError


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    out = tmp_path_factory.mktemp("world")
    generate_world(out, images=40, seed=3, progress=False)
    return out


def test_records_carry_answer_and_mapped_image(world):
    data = VQA2Data(world)
    questions = data.questions("val")
    mapping = orjson.loads((world / "world.json").read_bytes())["image_ids"]["vqa_to_gqa"]
    raw = orjson.loads((world / "vqa2" / "v2_mscoco_val2014_annotations.json").read_bytes())[
        "annotations"
    ]
    first = raw[0]
    record = questions[str(first["question_id"])]
    assert record["answer"] == first["multiple_choice_answer"]
    assert record["answers"] == [a["answer"] for a in first["answers"]]
    assert record["image_id"] == str(first["image_id"])
    assert record["imageId"] == str(mapping[str(first["image_id"])])
    batch = data.batch("val", [record["question_id"]])
    objects = data.object_input(batch.image_ids)
    assert objects.mask.sum() == len(data.detections[record["imageId"]])


def test_unmapped_image_names_file_and_record(world):
    data = VQA2Data(world, image_map={})
    with pytest.raises(DataError) as err:
        data.questions("train")
    message = str(err.value)
    assert "v2_OpenEnded_mscoco_train2014_questions.json" in message
    assert "record '" in message and "not in the image map" in message


def test_an_annotation_on_another_image_is_refused(world, tmp_path):
    """Found in review: ``score vqa`` refuses an annotation whose ``image_id`` differs
    from its question's, and the diagnosis (pairs, consistency, gain) accepted it."""
    import shutil

    copy = tmp_path / "w"
    shutil.copytree(world, copy, ignore=shutil.ignore_patterns("images", "objects"))
    path = copy / "vqa2" / "v2_mscoco_val2014_annotations.json"
    raw = orjson.loads(path.read_bytes())
    first = raw["annotations"][0]
    first["image_id"] += 1
    path.write_bytes(orjson.dumps(raw))
    with pytest.raises(DataError) as err:
        VQA2Data(copy).questions("val")
    assert str(err.value) == (
        f"{path}: record '{first['question_id']}': image_id {first['image_id']} differs from "
        f"the questions file ({first['image_id'] - 1})"
    )


def test_missing_split_names_folder(world):
    with pytest.raises(DataError, match="no VQA v2 question file for split 'testdev'"):
        VQA2Data(world).questions("testdev")


def test_forgotten_questions_are_read_again_equal(world):
    """A diagnosis lets go of the VQA v2 records between suites that do not read them
    (``release_idle_sources``); the next suite that asks reads the same records again."""
    from types import SimpleNamespace

    from vqadiag.suites.sources import release_idle_sources

    data = VQA2Data(world)
    first = data.questions("val")
    state = SimpleNamespace(memo={"vqa2": data})
    release_idle_sources(state, ("gqa", "vqa2"))  # the next suite reads VQA v2: kept
    assert data.questions("val") is first
    release_idle_sources(state, ("gqa",))
    again = data.questions("val")
    assert again is not first and again == first
    release_idle_sources(SimpleNamespace(memo={}), ())  # no VQA v2 read yet: nothing to do
