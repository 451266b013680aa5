"""The pixel model's box encoder (``-o encoder=boxes``; docs/models.md, "The pixel model"):
crops, IoU matching and unit targets on hand-worked cases, and train / save / load /
diagnose on a small rendered world."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vqadiag.data.formats.gqa import object_corners
from vqadiag.data.model_inputs.geometry import best_matches, pairwise_iou
from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.data.model_inputs.inputs import PixelInput
from vqadiag.models.reference import pixel, pixel_objective
from vqadiag.models.reference.pixel import PixelModel
from vqadiag.models.reference.pixel_boxes import (
    MATCH_IOU,
    BoxCropInput,
    box_crops,
    boxes_of_object,
)
from vqadiag.models.reference.pixel_objective import GridObjective
from vqadiag.models.registry import load_model
from vqadiag.models.run_configs import upgrade_options


def test_iou_on_hand_worked_boxes():
    a = np.array([[0, 0, 10, 10], [0, 0, 0, 0]], np.float32)
    b = np.array([[5, 0, 15, 10], [0, 0, 10, 10], [20, 20, 30, 30]], np.float32)
    # [0,0,10,10] vs [5,0,15,10]: intersection 50, union 150 → 1/3
    expected = np.array([[1 / 3, 1.0, 0.0], [0.0, 0.0, 0.0]])
    assert np.allclose(pairwise_iou(a, b, integer=False), expected)


def test_object_corners_from_scene_graph_boxes():
    corners = object_corners([{"x": 2, "y": 3, "w": 10, "h": 5}])
    assert corners.tolist() == [[2.0, 3.0, 12.0, 8.0]]
    assert object_corners([]).shape == (0, 4)


def matched_objects(boxes: np.ndarray, objects: list) -> np.ndarray:
    """The pixel model's matching: IoU ≥ MATCH_IOU (the bound counts)."""
    return best_matches(boxes, object_corners(objects), MATCH_IOU, inclusive=True)


def test_each_detection_matches_the_object_of_largest_iou_from_one_half():
    objects = [
        {"x": 0, "y": 0, "w": 10, "h": 10},  # corners 0 0 10 10
        {"x": 0, "y": 0, "w": 12, "h": 10},  # corners 0 0 12 10
        {"x": 50, "y": 50, "w": 10, "h": 10},
    ]
    boxes = np.array(
        [
            [0, 0, 10, 10],  # IoU 1 with object 0, 10/12 with object 1 → 0
            [0, 0, 12, 10],  # IoU 1 with object 1 → 1
            [50, 50, 55, 60],  # IoU 50/100 = 0.5 with object 2 → 2 (the bound counts)
            [50, 50, 54, 60],  # IoU 0.4 → background
            [90, 90, 99, 99],  # nothing → background
        ],
        np.float32,
    )
    assert matched_objects(boxes, objects).tolist() == [0, 1, 2, -1, -1]
    assert matched_objects(boxes, []).tolist() == [-1] * 5
    assert matched_objects(np.zeros((0, 4)), objects).tolist() == []


def test_an_objects_boxes_are_its_matches_or_its_best_overlap():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 10, 10], [0, 0, 30, 30]], np.float32)
    # IoU with object 0 0 10 10: 1, 0.81, 1/9 → the first two
    assert boxes_of_object(boxes, {"x": 0, "y": 0, "w": 10, "h": 10}).tolist() == [
        True,
        True,
        False,
    ]
    # object 20 20 40 40 overlaps only box 2 (IoU 100/1700): no match, so its best box
    assert boxes_of_object(boxes, {"x": 20, "y": 20, "w": 20, "h": 20}).tolist() == [
        False,
        False,
        True,
    ]
    # an object no box touches has no box
    assert not boxes_of_object(boxes, {"x": 60, "y": 60, "w": 5, "h": 5}).any()


def test_crops_cut_the_box_from_the_stored_pixels():
    image = np.zeros((40, 60, 3), np.uint8)
    image[10:20, 30:50] = (200, 10, 10)  # a red 20 × 10 block
    boxes = np.array([[33, 13, 47, 17], [0, 0, 10, 10], [55, 35, 90, 90]], np.float32)
    crops = box_crops(image, boxes, 8)
    assert crops.shape == (3, 8, 8, 3) and crops.dtype == np.uint8
    # a box 3 px inside the block: the filter (support 14/8 px around each sample) reads
    # only the block
    assert (crops[0] == (200, 10, 10)).all()
    assert (crops[1] == 0).all()  # a box on the background
    # a box past the border is clipped to the image (5 × 5 of black)
    assert (crops[2] == 0).all()
    assert box_crops(image, np.zeros((0, 4), np.float32), 8).shape == (0, 8, 8, 3)


torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def world(rendered_world_60):
    return GQAData(rendered_world_60 / "gqa")


@pytest.fixture(scope="module")
def box_model(world):
    model = PixelModel.train(
        world, epochs=1, seed=0, progress=False, encoder="boxes", head="tokens", crop_size=8,
        pretrain_epochs=0, freeze_encoder=False, crop_pooling="mean",
    )  # fmt: skip
    assert "training_crops" not in model.__dict__  # the crops are dropped after training
    return model


def test_box_targets_follow_the_iou_matches(world, box_model):
    objective = GridObjective(box_model, world, "train")
    image_id = next(iter(objective.scenes))
    boxes = world.image_boxes(image_id)
    objects = list(objective.scenes[image_id]["objects"].values())
    names, attrs = objective.targets(image_id)
    match = matched_objects(boxes, objects)
    assert names.shape == (len(boxes),) and attrs.shape[0] == len(boxes)
    assert (match >= 0).sum() >= len(objects) // 2  # most objects are detected
    for k, m in enumerate(match.tolist()):
        expected = 0 if m < 0 else objective.name_index[str(objects[m]["name"])]
        assert names[k] == expected
    record = {"imageId": image_id, "annotations": {"answer": {"0": "o"}}}
    objective.scenes = {image_id: {"objects": {"o": objects[0]}, "width": 1, "height": 1}}
    assert (
        objective.attention_target(record).tolist() == boxes_of_object(boxes, objects[0]).tolist()
    )


def test_training_crops_are_the_crops_of_the_stored_image(world, box_model):
    qids = list(world.questions("train"))[:10]
    batch = world.batch("train", qids)
    cached = box_model.training_input(world, batch.image_ids)
    pixels = world.pixel_input(batch.image_ids, max_objects=100)
    assert isinstance(cached, BoxCropInput)
    assert np.array_equal(cached.boxes, pixels.boxes) and np.array_equal(cached.mask, pixels.mask)
    for b in range(len(qids)):
        real = pixels.boxes[b][pixels.mask[b]]
        assert np.array_equal(cached.crops[b], box_crops(pixels.images[b], real, 8))
    # the network reads the same view from either input
    rows = list(range(len(qids)))
    for left, right in zip(
        box_model._box_view(cached, rows), box_model._box_view(pixels, rows), strict=True
    ):
        assert torch.equal(left, right)
    box_model.__dict__.pop("training_crops")


def test_box_model_saves_loads_and_reports_attention_per_box(world, box_model, tmp_path):
    assert box_model.input_size is None  # it reads the stored image
    box_model.save(tmp_path / "run")
    loaded = load_model(tmp_path / "run")
    assert loaded.options["encoder"] == "boxes"
    assert loaded.fingerprint() == box_model.fingerprint()
    qids = list(world.questions("val"))[:12]
    batch = world.batch("val", qids)
    visual = world.pixel_input(batch.image_ids)
    first, second = box_model.predict(batch, visual), loaded.predict(batch, visual)
    assert first.answers == second.answers
    importance = np.asarray(second.attention)
    # the importance of a box is its attention: a distribution over the real boxes
    assert importance.shape == visual.mask.shape
    assert (importance[~visual.mask] == 0).all()
    has_boxes = visual.mask.any(axis=1)
    assert np.allclose(importance[has_boxes].sum(axis=1), 1.0, atol=1e-5)


def test_an_image_without_boxes_still_gets_an_answer(world, box_model):
    qids = list(world.questions("val"))[:2]
    batch = world.batch("val", qids)
    visual = world.pixel_input(batch.image_ids)
    empty = PixelInput(visual.images, visual.boxes, np.zeros_like(visual.mask), visual.image_sizes)
    out = box_model.predict(batch, empty)
    assert len(out.answers) == 2
    assert np.asarray(out.attention).sum() == 0


def test_grid_runs_keep_their_config_and_bad_box_options_are_refused():
    assert PixelModel.resolve_options({})["encoder"] == "boxes"  # the default
    grid = PixelModel.resolve_options({"encoder": "grid"})
    # the grid encoder is the pixel model as it was before the box encoder
    assert grid["head"] == "grid" and grid["pretrain_epochs"] == 0
    assert not grid["freeze_encoder"] and grid["crop_pooling"] == "mean"
    assert PixelModel.resolve_options({"encoder": "grid", "head": "tokens"})["head"] == "tokens"
    # a config without these keys is a grid run saved before they existed
    assert PixelModel.omitted_options["encoder"] == "grid"
    legacy = PixelModel.resolve_options(upgrade_options("pixel", {"epochs": 8}))
    assert legacy["encoder"] == "grid" and legacy["head"] == "grid"
    assert legacy["pretrain_epochs"] == 0 and legacy["attention_supervision"] == 0.0
    with pytest.raises(ValueError, match="encoder must be one of grid, boxes"):
        PixelModel.resolve_options({"encoder": "regions"})
    with pytest.raises(ValueError, match="^crop_size must be a whole number of 4 or more, not 2$"):
        PixelModel.resolve_options({"encoder": "boxes", "crop_size": 2})


def _name_loss(model, objective, world, image_ids):
    """Mean name cross-entropy of the box encoder over ``image_ids``' real boxes."""
    model.net.eval()
    with torch.no_grad():
        view = model._box_view(model.training_input(world, image_ids), range(len(image_ids)))
        cells, mask = model.net.cells(view)
        names = np.stack(
            [pixel_objective._padded(objective.targets(i)[0], cells.shape[1]) for i in image_ids]
        )
        logits = model.net.aux_name(cells[mask])
        return float(objective.ce(logits, torch.from_numpy(names)[mask]))


def test_pretraining_fits_the_box_names_and_leaves_the_head_alone(world, box_model):
    objective = GridObjective(box_model, world, "train")
    images = sorted(objective.scenes)[:20]
    head = {k: v.clone() for k, v in box_model.net.state_dict().items() if k.startswith("key")}
    before = _name_loss(box_model, objective, world, images)
    accuracies = pixel_objective.pretrain_box_encoder(
        box_model, objective, world, images, 3, 0, False
    )
    after = _name_loss(box_model, objective, world, images)
    box_model.__dict__.pop("training_crops")
    assert len(accuracies) == 3 and all(0.0 <= a <= 1.0 for a in accuracies)
    assert after < before
    for k, v in box_model.net.state_dict().items():
        if k in head:
            assert torch.equal(v, head[k])


def test_training_runs_the_pretraining_on_the_training_images(world, monkeypatch):
    calls = []
    monkeypatch.setattr(
        pixel, "pretrain_box_encoder", lambda *args: calls.append((args[3], args[4], args[5]))
    )
    PixelModel.train(
        world, epochs=1, seed=3, progress=False, encoder="boxes", pretrain_epochs=2,
        freeze_encoder=False,
    )  # fmt: skip
    questions = world.questions("train")
    assert calls == [(sorted({str(q["imageId"]) for q in questions.values()}), 2, 3)]
    with pytest.raises(ValueError, match="pretrain_epochs needs encoder=boxes"):
        PixelModel.resolve_options({"encoder": "grid", "pretrain_epochs": 2})
    with pytest.raises(
        ValueError, match="^pretrain_epochs must be a whole number of 0 or more, not -1$"
    ):
        PixelModel.resolve_options({"encoder": "boxes", "pretrain_epochs": -1})
    with pytest.raises(
        ValueError, match="^pretrain_epochs must be a whole number of 0 or more, not 1.5$"
    ):
        PixelModel.resolve_options({"encoder": "boxes", "pretrain_epochs": 1.5})


def test_cli_trains_and_diagnoses_a_box_run(world, run_cli, tmp_path):
    data = world.root.parent  # the world folder (gqa/ inside)
    run = tmp_path / "run"
    trained = run_cli(
        "train", "--data", data, "--model", "pixel", "--out", run, "--epochs", "1",
        "-o", "encoder=boxes", "-o", "crop_size=8", "-o", "pretrain_epochs=1", "--json", "-q",
    )  # fmt: skip
    assert trained.exit_code == 0, trained.stderr
    options = json.loads(trained.stdout)["options"]
    assert options["encoder"] == "boxes" and options["pretrain_epochs"] == 1
    out = tmp_path / "diag"
    diagnosed = run_cli(
        "diagnose", "--data", data, "--model", run, "--suite", "accuracy,fpvg",
        "--max-questions", "40", "--n-bootstrap", "20", "--out", out,
    )  # fmt: skip
    assert diagnosed.exit_code == 0, diagnosed.stderr
    summary = json.loads((out / "results.json").read_text())["summary"]
    assert 0.0 <= summary["fpvg_plus"]["value"] <= 100.0
    assert summary["fpvg_plus"]["n"] > 0
