"""The chat VLM's batched patch labels (:class:`BoxTable`) and the batched pieces of its
vision pre-training: the same labels as the per-image rule, the same pixels as moving
each image alone, the same objects as grouping each image alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vqadiag.models.reference.chat_vlm_box_labels import BoxTable
from vqadiag.models.reference.chat_vlm_data import (
    augment,
    moved_by_gathers,
    moved_by_slices,
    patch_labels,
    patch_vocabulary,
    scene_labeller,
)
from vqadiag.models.reference.chat_vlm_fit import object_groups, object_means

SCENE = {"width": 64, "height": 64, "objects": {
    "1": {"name": "dog", "x": 0, "y": 0, "w": 20, "h": 40, "attributes": ["white"]},
    "2": {"name": "cat", "x": 40, "y": 16, "w": 24, "h": 16, "attributes": []},
    # the same area as the cat and over the same patch centres: the cat, listed first, wins
    "3": {"name": "cup", "x": 40, "y": 16, "w": 24, "h": 16, "attributes": ["white"]},
    "4": {"name": "dog", "x": 30, "y": 50, "w": 0, "h": 10, "attributes": []},  # no area
}}  # fmt: skip
NAMES, ATTRS = {"dog": 1, "cat": 2, "cup": 3}, {"white": 0}


@pytest.mark.parametrize("rule", ["centre", "overlap"])
def test_a_hand_worked_scene_is_labelled_as_the_per_image_rule_labels_it(rule):
    """One scene, a second image with no scene graph (background) and a third with no
    object: plain, mirrored and moved, each as :func:`patch_labels` labels it alone; the
    tie between the cat and the cup goes to the cat, listed first."""
    scenes = {"a": SCENE, "empty": {"width": 10, "height": 10, "objects": {}}}
    table = BoxTable(scenes, ["a", "missing", "empty"], 4, NAMES, ATTRS, rule)
    flips, shifts = np.array([True, False, True]), np.array([[0.25, -0.25], [0, 0], [0, 0]])
    for flip, shift in ((None, None), (flips, shifts)):
        names, attrs = table(flip, shift)
        assert names.dtype == torch.int64 and attrs.dtype == torch.float32
        assert names.shape == (3, 16) and attrs.shape == (3, 16, 1)
        alone = patch_labels(
            SCENE, 4, NAMES, ATTRS, rule=rule,
            flip=bool(flip[0]) if flip is not None else False,
            shift=tuple(shift[0]) if shift is not None else (0.0, 0.0),
        )  # fmt: skip
        assert names[0].tolist() == alone[0].tolist()
        assert attrs[0].tolist() == alone[1].tolist()
        assert not names[1:].any() and not attrs[1:].any()
    plain = table()[0][0].reshape(4, 4).tolist()
    if rule == "centre":
        assert plain == [[1, 0, 0, 0], [1, 0, 2, 2], [0] * 4, [0] * 4]
    else:
        assert plain == [[1, 1, 0, 0], [1, 1, 2, 2], [1, 1, 0, 0], [0, 0, 0, 0]]


def test_an_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="centre, overlap, not 'corner'"):
        BoxTable({"a": SCENE}, ["a"], 4, NAMES, ATTRS, "corner")


def test_no_images_and_images_without_boxes_give_empty_and_background_labels():
    names, attrs = BoxTable({}, [], 8, NAMES, ATTRS)()
    assert names.shape == (0, 64) and attrs.shape == (0, 64, 1)
    names, attrs = BoxTable({}, ["x", "y"], 2, NAMES, ATTRS)()
    assert names.tolist() == [[0] * 4] * 2 and not attrs.any()


@pytest.mark.parametrize("rule", ["centre", "overlap"])
def test_a_worlds_images_are_labelled_as_scene_labeller_labels_them(tmp_path, rule):
    """Every training image of a generated world (scene graphs only), over its own name
    and attribute indices, plain and under drawn mirrors and moves of up to half a patch:
    exactly the per-image rule's labels, in more images than one chunk holds."""
    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.models.reference import chat_vlm_box_labels
    from vqadiag.synth import generate_world

    generate_world(tmp_path / "w", images=60, seed=3, render=False)
    scenes, names, attrs = patch_vocabulary(GQAData(tmp_path / "w"), "train", 16)
    ids = [*sorted(scenes), "not-a-scene"]
    rng = np.random.default_rng(0)
    table = BoxTable(scenes, ids, 8, names, attrs, rule)
    slow = scene_labeller(scenes, ids, 8, names, attrs, rule)
    draws = [(None, None)] + [
        (rng.random(len(ids)) < 0.5, rng.integers(-8, 9, size=(len(ids), 2)) / 128)
        for _ in range(3)
    ]
    chunk = chat_vlm_box_labels.CHUNK
    try:
        chat_vlm_box_labels.CHUNK = 16  # several chunks, the last one short
        for flips, shifts in draws:
            fast, expected = table(flips, shifts), slow(flips, shifts)
            assert np.array_equal(fast[0].numpy(), expected[0])
            assert np.array_equal(fast[1].numpy(), expected[1])
            assert (expected[0] > 0).any()
    finally:
        chat_vlm_box_labels.CHUNK = chunk


def _moved_one_by_one(pixels, flips, shifts):
    out = torch.zeros_like(pixels)
    size = pixels.shape[-1]
    for i in range(len(pixels)):
        image = pixels[i].flip(-1) if flips[i] else pixels[i]
        dx, dy = int(shifts[i][0]), int(shifts[i][1])
        for y in range(size):
            for x in range(size):
                if 0 <= y - dy < size and 0 <= x - dx < size:
                    out[i, :, y, x] = image[:, y - dy, x - dx]
    return out


@pytest.mark.parametrize("move", [augment, moved_by_slices, moved_by_gathers])
def test_each_way_of_moving_a_batch_moves_each_image_as_a_pixel_by_pixel_copy(move):
    """Drawn mirrors and moves, including a move past the image (all border), against a
    pixel-by-pixel copy of each image: the CPU's slices and another device's gathers
    (run here on the CPU) alike."""
    rng = np.random.default_rng(1)
    pixels = torch.randn(6, 3, 10, 10, generator=torch.Generator().manual_seed(0))
    flips = rng.random(6) < 0.5
    shifts = rng.integers(-4, 5, size=(6, 2))
    shifts[-1] = (12, -3)
    out = move(pixels, flips, shifts)
    assert torch.equal(out, _moved_one_by_one(pixels, flips, shifts))
    assert (out[-1] == 0).all()
    assert torch.equal(move(pixels, np.zeros(6, bool), np.zeros((6, 2), int)), pixels)


def test_object_groups_of_a_batch_equal_those_of_each_image_alone():
    """Drawn labels of 5 images: the ids of the batch are each image's own ids (those of
    the image grouped alone), offset by the objects of the images before it; the object
    means and first patches follow the ids."""
    rng = np.random.default_rng(2)
    names = rng.integers(0, 4, size=(5, 12))
    attrs = (rng.random((5, 12, 3)) < 0.3).astype(np.float32)
    batch = object_groups(names, attrs)
    offset = 0
    for row in range(5):
        alone = object_groups(names[row : row + 1], attrs[row : row + 1])[0]
        on = alone >= 0
        assert torch.equal(batch[row][on], alone[on] + offset)
        assert (batch[row][~on] == -1).all() and torch.equal(on, torch.from_numpy(names[row] > 0))
        offset += int(alone.max()) + 1 if on.any() else 0
    feats = torch.randn(5, 12, 4, generator=torch.Generator().manual_seed(3))
    means, first = object_means(feats, batch)
    flat = batch.reshape(-1)
    for obj in range(offset):
        where = torch.nonzero(flat == obj).reshape(-1)
        assert int(first[obj]) == int(where[0])
        assert torch.allclose(means[obj], feats.reshape(-1, 4)[where].mean(0))
