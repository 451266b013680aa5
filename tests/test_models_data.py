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
