"""GQA-format data access for models: batches and padded, masked object inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError
from vqadiag.models.base import ObjectInput, QuestionBatch


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    out = tmp_path_factory.mktemp("world")
    generate_world(out, images=40, seed=3, progress=False)
    return out


def test_batch_and_object_input_pad_and_mask(world):
    data = GQAData(world)
    qids = list(data.questions("val"))[:5]
    batch = data.batch("val", qids)
    assert isinstance(batch, QuestionBatch) and len(batch) == 5
    objects = data.object_input(batch.image_ids)
    counts = [len(data.detections[i]) for i in batch.image_ids]
    assert objects.features.shape[:2] == (5, max(counts))
    assert objects.mask.sum(axis=1).tolist() == counts
    for row, image_id in enumerate(batch.image_ids):
        k = counts[row]
        np.testing.assert_array_equal(objects.features[row, :k], data.detections.features(image_id))
        assert not objects.features[row, k:].any()  # padding stays zero


def test_an_image_with_no_detected_object_is_fully_masked(world, tmp_path):
    """Found in review: an image whose info says 0 objects, alone in a batch (or with
    others of 0), was a numpy broadcast traceback; it is padding, fully masked."""
    import shutil

    copy = tmp_path / "w"
    shutil.copytree(world, copy)
    info_path = copy / "gqa" / "objects" / "gqa_objects_info.json"
    info = json.loads(info_path.read_text())
    empty, other = list(info)[:2]
    info[empty]["objectsNum"] = 0
    info_path.write_text(json.dumps(info))
    data = GQAData(copy)
    alone = data.object_input([empty])
    assert alone.features.shape == (1, 1, 64) and not alone.mask.any()
    both = data.object_input([empty, other])
    assert not both.mask[0].any() and both.mask[1].sum() == len(data.detections[other])


def test_object_features_of_two_widths_are_refused_naming_file_and_image(world, tmp_path):
    """A second h5 file whose features are narrower was a numpy broadcast traceback when
    its image met another in one batch; it is one line naming the info file and image."""
    import shutil

    import h5py

    copy = tmp_path / "w"
    shutil.copytree(world, copy)
    objects = copy / "gqa" / "objects"
    info = json.loads((objects / "gqa_objects_info.json").read_text())
    first, narrow = list(info)[:2]
    num = info[narrow]["objectsNum"]
    with h5py.File(objects / "gqa_objects_0.h5", "r") as h5:
        boxes = h5["bboxes"][info[narrow]["idx"]]
    with h5py.File(objects / "gqa_objects_7.h5", "w") as h5:
        h5["bboxes"] = boxes[None]
        h5["features"] = np.ones((1, boxes.shape[0], 32), np.float32)
    info[narrow].update(file=7, idx=0, objectsNum=num)
    (objects / "gqa_objects_info.json").write_text(json.dumps(info))
    data = GQAData(copy)
    assert data.object_input([narrow]).features.shape[2] == 32  # alone it is read
    with pytest.raises(DataError) as err:
        data.object_input([first, narrow])
    assert str(err.value).startswith(str(objects / "gqa_objects_info.json"))
    widths = f"object features have 32 dimensions here and 64 for image '{first}'"
    assert f"image '{narrow}': {widths}" in str(err.value)


def test_with_mask_shares_features(world):
    data = GQAData(world)
    objects = data.object_input([next(iter(data.detections))])
    masked = objects.with_mask(np.zeros_like(objects.mask))
    assert masked.features is objects.features and not masked.mask.any()
    with pytest.raises(ValueError, match="must agree"):
        ObjectInput(objects.features, objects.boxes[:, :1], objects.mask, objects.image_sizes)


def test_missing_folder_and_split_are_named(tmp_path, world):
    with pytest.raises(DataError, match="data folder not found"):
        GQAData(tmp_path / "nope")
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(DataError, match="a_file: is a file, expected a data folder"):
        GQAData(tmp_path / "a_file")
    with pytest.raises(DataError, match="no question file for split 'dev'"):
        GQAData(world).questions("dev")


def test_a_pixel_model_is_refused_a_malformed_detection_not_given_no_boxes(
    rendered_world_60, tmp_path
):
    """Found in review: a NaN box coordinate in the detector's h5 file was read by the
    pixel model as "this image has no boxes" (its answers on that image changed, with no
    message), where an object model stops with one line naming it. Now both stop; an
    image the detector output does not list, or data without detector output, still
    gives a pixel model no boxes."""
    import shutil

    import h5py

    from vqadiag.data.model_inputs.gqa_data import GQAData

    world = tmp_path / "world"
    shutil.copytree(rendered_world_60, world)
    image = str(next(iter(GQAData(world).questions("val").values()))["imageId"])
    assert GQAData(rendered_world_60).pixel_input([image]).mask.any()
    info = json.loads((world / "gqa" / "objects" / "gqa_objects_info.json").read_text())
    where = info[image]
    with h5py.File(world / "gqa" / "objects" / f"gqa_objects_{where['file']}.h5", "r+") as h5:
        row = h5["bboxes"][where["idx"]]
        row[0] = np.nan
        h5["bboxes"][where["idx"]] = row
    with pytest.raises(DataError, match="NaN"):
        GQAData(world).pixel_input([image])
    shutil.rmtree(world / "gqa" / "objects")  # pixels alone: no detector output at all
    assert not GQAData(world).pixel_input([image]).mask.any()


def test_an_image_of_another_size_than_its_boxes_is_refused(rendered_world_60, tmp_path):
    """Found in review: a half-size copy of the images (``--images``), an EXIF-rotated
    JPEG or a doubled width in the info file put every box in the wrong place: FPVG+
    fell from 2.33 to 0 without a word. The image must be the size the boxes are in."""
    import shutil

    from PIL import Image

    image = str(next(iter(GQAData(rendered_world_60).questions("val").values()))["imageId"])
    copies = tmp_path / "images"
    shutil.copytree(rendered_world_60 / "gqa" / "images", copies)
    path = copies / f"{image}.png"
    with Image.open(path) as img:
        width, height = img.size
        img.resize((width // 2, height // 2)).save(path)
    data = GQAData(rendered_world_60, images=copies)
    with pytest.raises(DataError) as err:
        data.pixel_input([image], questions=["q1"])
    assert str(err.value) == (
        f"{path}: question q1: the image is {width // 2} x {height // 2} pixels but "
        f"gqa_objects_info.json records {width} x {height}, the size its boxes are in (a "
        "resized or rotated copy?)"
    )
    assert GQAData(rendered_world_60).pixel_input([image]).images[0].shape[:2] == (height, width)
