"""GQA-format data access for models: batches and padded, masked object inputs."""

from __future__ import annotations

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
