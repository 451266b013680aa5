"""The pixel model's default box recipe (docs/models.md, "The pixel model"): layout
pooling (``crop_pooling``), the frozen pre-trained encoder (``freeze_encoder``) and the
summed attribute loss (``attribute_loss``): shapes, the frozen CNN left exactly as
pre-training left it, the cached features equal to the CNN's, the loss on a hand-worked
case, and the options' checks."""

from __future__ import annotations

import numpy as np
import pytest

from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.models.networks.crop_cache import CropFeatureCache
from vqadiag.models.reference import pixel
from vqadiag.models.reference.pixel import PixelModel
from vqadiag.models.reference.pixel_boxes import (
    BoxCropInput,
    TrainingCrops,
    box_crops,
    crops_tensor,
)
from vqadiag.models.reference.pixel_objective import GridObjective
from vqadiag.models.registry import load_model
from vqadiag.models.run_configs import upgrade_options

torch = pytest.importorskip("torch")

from vqadiag.models.networks.pixel import layout_crop_encoder  # noqa: E402

FROZEN = {
    "encoder": "boxes",
    "head": "tokens",
    "crop_size": 8,
    "pretrain_epochs": 1,
    "freeze_encoder": True,
    "crop_pooling": "layout",
}


@pytest.fixture(scope="module")
def world(rendered_world_60):
    return GQAData(rendered_world_60 / "gqa")


def _cnn_state(model):
    return {k: v.clone() for k, v in model.net.cnn.state_dict().items()}


@pytest.fixture(scope="module")
def frozen_run(world):
    """A frozen layout run (2 epochs after 1 of pre-training) and the CNN's state right
    after pre-training."""
    snapshots = []
    freeze = PixelModel._freeze_encoder

    def spy(model):
        snapshots.append(_cnn_state(model))
        freeze(model)

    mp = pytest.MonkeyPatch()
    mp.setattr(PixelModel, "_freeze_encoder", spy)
    try:
        model = PixelModel.train(world, epochs=2, seed=0, progress=False, **FROZEN)
    finally:
        mp.undo()
    assert len(snapshots) == 1
    return model, snapshots[0]


@pytest.mark.parametrize("crop", [8, 9, 24])
def test_layout_encoder_gives_4c_features_for_any_crop_size(crop):
    net = layout_crop_encoder(6, crop).eval()
    x = torch.zeros((3, 3, crop, crop))
    assert net(x).shape == (3, 24)
    # the flattened map has ⌈S/4⌉² positions of ⌊4c/3⌋ = 8 channels
    assert net[13].in_features == 8 * ((crop + 3) // 4) ** 2


def test_crops_tensor_scales_to_minus_one_one_channels_first():
    crops = np.zeros((2, 4, 4, 3), np.uint8)
    crops[1, 0, 0] = (255, 0, 51)
    t = crops_tensor(crops)
    assert t.shape == (2, 3, 4, 4) and t.dtype == torch.float32
    assert t[0].eq(-1.0).all()
    assert t[1, :, 0, 0].tolist() == pytest.approx([1.0, -1.0, 51 / 127.5 - 1.0])


def test_frozen_encoder_ends_training_as_pretraining_left_it(frozen_run):
    model, after_pretraining = frozen_run
    final = model.net.cnn.state_dict()
    assert set(final) == set(after_pretraining)
    for key, value in after_pretraining.items():  # weights and batch-norm statistics
        assert torch.equal(final[key], value), key
    # no gradients, and batch norm stays on its running statistics in training mode
    assert not any(p.requires_grad for p in model.net.cnn.parameters())
    model.net.train()
    try:
        assert model.net.training and not model.net.cnn.training
    finally:
        model.net.eval()


def test_an_unfrozen_encoder_keeps_learning(world):
    snapshots = []
    pretrain = pixel.pretrain_box_encoder

    def spy(model, *args):
        result = pretrain(model, *args)
        snapshots.append(_cnn_state(model))
        return result

    mp = pytest.MonkeyPatch()
    mp.setattr(pixel, "pretrain_box_encoder", spy)
    try:
        model = PixelModel.train(
            world, epochs=1, seed=0, progress=False, **{**FROZEN, "freeze_encoder": False}
        )
    finally:
        mp.undo()
    final = model.net.cnn.state_dict()
    assert not all(torch.equal(final[k], v) for k, v in snapshots[0].items())


def test_training_features_are_the_frozen_cnns_features_of_the_crops(world, frozen_run):
    model, _ = frozen_run
    model.net.eval()
    crops = TrainingCrops(8, 100)
    ids = sorted({str(r["imageId"]) for r in world.questions("train").values()})[:4]
    raw = crops.batch(world, ids[:2])  # cut before the encoder is set: converted in place
    crops.encode_with(model.encode_crops)
    encoded = crops.batch(world, ids)  # two converted, two encoded on arrival
    assert not raw.encoded and encoded.encoded
    pixels = world.pixel_input(ids, max_objects=100)
    rows = list(range(len(ids)))
    with torch.no_grad():
        from_features, mask_f = model.net.cells(model._box_view(encoded, rows))
        from_pixels, mask_p = model.net.cells(model._box_view(pixels, rows))
    assert torch.equal(mask_f, mask_p)
    assert torch.allclose(from_features, from_pixels, atol=1e-5)
    for b, image_id in enumerate(ids):
        real = pixels.boxes[b][pixels.mask[b]]
        with torch.no_grad():
            expected = model.net.cnn(crops_tensor(box_crops(pixels.images[b], real, 8)))
        assert encoded.crops[b].shape == (len(real), model.net.crop_dim), image_id
        assert np.allclose(encoded.crops[b], expected.numpy(), atol=1e-5)
    assert isinstance(encoded, BoxCropInput)


def test_frozen_run_saves_loads_and_answers_the_same(world, frozen_run, tmp_path):
    model, _ = frozen_run
    model.save(tmp_path / "run")
    loaded = load_model(tmp_path / "run")
    assert loaded.options["crop_pooling"] == "layout" and loaded.options["freeze_encoder"]
    assert loaded.fingerprint() == model.fingerprint()
    batch = world.batch("val", list(world.questions("val"))[:10])
    visual = world.pixel_input(batch.image_ids)
    assert loaded.predict(batch, visual).answers == model.predict(batch, visual).answers


def test_bad_frozen_and_pooling_options_are_refused():
    with pytest.raises(ValueError, match="freeze_encoder needs pretrain_epochs > 0"):
        PixelModel.resolve_options({"pretrain_epochs": 0, "freeze_encoder": True})
    # frozen by default, unless nothing is pre-trained
    assert PixelModel.resolve_options({})["freeze_encoder"]
    assert not PixelModel.resolve_options({"pretrain_epochs": 0})["freeze_encoder"]
    with pytest.raises(ValueError, match="freeze_encoder must be true or false"):
        PixelModel.resolve_options({"encoder": "boxes", "pretrain_epochs": 1, "freeze_encoder": 1})
    with pytest.raises(ValueError, match="crop_pooling must be one of mean, layout"):
        PixelModel.resolve_options({"encoder": "boxes", "crop_pooling": "max"})


def test_attribute_loss_sums_or_averages_over_the_attributes(world, frozen_run):
    model, _ = frozen_run
    assert model.options["attribute_loss"] == "sum"  # the default
    summed = GridObjective(model, world, "train")
    model.options["attribute_loss"] = "mean"
    try:
        averaged = GridObjective(model, world, "train")
    finally:
        model.options["attribute_loss"] = "sum"
    image_id = next(i for i in sorted(summed.scenes) if len(summed.targets(i)[0]) >= 3)
    names, attrs = summed.targets(image_id)
    n_attrs = attrs.shape[1]
    assert n_attrs > 1 and summed.attribute_scale == n_attrs and averaged.attribute_scale == 1
    torch.manual_seed(0)
    cells = torch.randn((1, len(names), model.net.aux_name.in_features))
    with torch.no_grad():
        name_logits = model.net.aux_name(cells[0]).numpy().astype(np.float64)
        attr_logits = model.net.aux_attr(cells[0]).numpy().astype(np.float64)
        got_sum = float(summed.unit_label_loss(cells, None, [image_id])[0])
        got_mean = float(averaged.unit_label_loss(cells, None, [image_id])[0])
    # by hand: softmax cross-entropy of the names, logistic loss of each attribute
    shifted = name_logits - name_logits.max(axis=1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    ce = -log_softmax[np.arange(len(names)), names].mean()
    p = 1.0 / (1.0 + np.exp(-attr_logits))
    bce = -(attrs * np.log(p) + (1 - attrs) * np.log(1 - p))  # (units, attributes)
    assert got_mean == pytest.approx(ce + bce.mean(), rel=1e-5)
    assert got_sum == pytest.approx(ce + bce.sum(axis=1).mean(), rel=1e-5)


def test_one_crop_in_training_mode_reads_running_statistics(frozen_run):
    model, _ = frozen_run
    net = model.net
    crop = crops_tensor(np.full((1, 8, 8, 3), 100, np.uint8))
    net.frozen_encoder = False
    net.train()
    try:
        assert net.cnn.training
        with torch.no_grad():
            one = net.encode(crop)  # batch norm cannot take batch statistics of one crop
        assert net.cnn.training  # back in training mode afterwards
        net.eval()
        with torch.no_grad():
            assert torch.allclose(one, net.cnn(crop))
    finally:
        net.frozen_encoder = True
        net.eval()


def test_a_box_config_saved_before_these_options_loads_as_it_was_trained():
    saved = {"encoder": "boxes", "head": "tokens", "pretrain_epochs": 6, "epochs": 8}
    options = PixelModel.resolve_options(upgrade_options("pixel", saved))
    assert options["encoder"] == "boxes" and options["pretrain_epochs"] == 6
    assert options["crop_pooling"] == "mean" and options["attribute_loss"] == "mean"
    assert options["freeze_encoder"] is False


def test_box_only_options_are_refused_with_the_grid():
    for key, value in (("crop_pooling", "layout"), ("pretrain_epochs", 2)):
        with pytest.raises(ValueError, match=f"{key} needs encoder=boxes"):
            PixelModel.resolve_options({"encoder": "grid", key: value})
    with pytest.raises(ValueError, match="freeze_encoder needs encoder=boxes"):
        PixelModel.resolve_options({"encoder": "grid", "freeze_encoder": True})


def test_without_scene_graphs_the_defaults_are_the_grid_and_pretraining_is_refused(
    world, monkeypatch
):
    from vqadiag.errors import DataError

    def no_scene_graphs(split):
        raise DataError(world.root, "no scene graphs")

    monkeypatch.setattr(world, "scene_graphs", no_scene_graphs)
    model = PixelModel.train(world, epochs=1, seed=0, progress=False, image_size=32)
    assert model.options["encoder"] == "grid" and model.options["pretrain_epochs"] == 0
    assert not model.options["freeze_encoder"]
    with pytest.raises(ValueError, match="pretrain_epochs needs scene graphs"):
        PixelModel.train(world, epochs=1, progress=False, pretrain_epochs=2)


def test_pretraining_runs_when_the_answer_loss_is_the_only_training_loss(world, monkeypatch):
    calls = []
    monkeypatch.setattr(pixel, "pretrain_box_encoder", lambda *args: calls.append(args[1]))
    PixelModel.train(
        world, epochs=1, seed=0, progress=False, crop_size=8, pretrain_epochs=1,
        freeze_encoder=False, aux_weight=0.0, attention_supervision=0.0, token_supervision=0.0,
    )  # fmt: skip
    assert len(calls) == 1 and isinstance(calls[0], GridObjective)


def test_a_bad_attribute_loss_is_refused_and_grid_runs_keep_the_mean():
    with pytest.raises(ValueError, match="attribute_loss must be one of mean, sum"):
        PixelModel.resolve_options({"attribute_loss": "max"})
    assert PixelModel.resolve_options({"encoder": "grid"})["attribute_loss"] == "mean"
    assert PixelModel.omitted_options["attribute_loss"] == "mean"


def test_crop_cache_encodes_each_distinct_crop_once():
    calls = []

    def encode(crops):
        calls.append(len(crops))
        return crops.reshape(len(crops), 12)[:, :2].astype(np.float32) + 0.5

    cache = CropFeatureCache()
    crops = np.zeros((4, 2, 2, 3), np.uint8)
    crops[1] = 7
    crops[3] = 7  # the same pixels as crop 1
    first = cache.features(crops, encode)
    assert calls == [2]  # two distinct crops
    assert first.tolist() == [[0.5, 0.5], [7.5, 7.5], [0.5, 0.5], [7.5, 7.5]]
    again = cache.features(crops[::-1].copy(), encode)
    assert calls == [2] and again.tolist() == first[::-1].tolist()
    cache.clear()
    cache.features(crops[:1], encode)
    assert calls == [2, 1]
    assert cache.features(crops[:0], encode).shape[0] == 0


def test_cached_features_are_the_cnns_and_change_with_the_weights(world, frozen_run):
    model, _ = frozen_run
    model.net.eval()
    batch = world.batch("val", list(world.questions("val"))[:12])
    visual = world.pixel_input(batch.image_ids)
    rows = list(range(len(batch.image_ids)))
    model.net.crop_cache.clear()
    raw_crops, _, _ = model._box_view(visual, rows)
    cold, _, _ = model._box_view(visual, rows, encode=True)
    warm, _, _ = model._box_view(visual, rows, encode=True)
    with torch.no_grad():
        direct = model.net.cnn(raw_crops)
    assert torch.equal(cold, warm)
    assert torch.allclose(cold, direct, atol=1e-5)
    warm_out = model.predict(batch, visual)
    model.net.crop_cache.clear()
    cold_out = model.predict(batch, visual)
    assert warm_out.answers == cold_out.answers
    assert np.allclose(warm_out.probs, cold_out.probs, atol=1e-6)
    # new weights, or training mode unless the encoder is frozen, drop the cache
    n_cached = len(model.net.crop_cache)
    assert 0 < n_cached <= raw_crops.shape[0]  # distinct crops
    model.net.train()
    model.net.eval()
    assert len(model.net.crop_cache) == n_cached  # frozen: the CNN does not change
    model.net.frozen_encoder = False
    try:
        model.net.train()
        model.net.eval()
        assert len(model.net.crop_cache) == 0
    finally:
        model.net.frozen_encoder = True
    state = {k: v.clone() for k, v in model.net.state_dict().items()}
    shifted = {k: v + 0.5 if k.startswith("cnn.0.bias") else v for k, v in state.items()}
    model.net.load_state_dict(shifted)
    after, _, _ = model._box_view(visual, rows, encode=True)
    assert not torch.allclose(after, cold)
    model.net.load_state_dict(state)
    restored, _, _ = model._box_view(visual, rows, encode=True)
    assert torch.allclose(restored, cold, atol=1e-5)


def test_a_bad_lr_schedule_is_refused_and_older_or_grid_runs_keep_a_constant_one():
    with pytest.raises(ValueError, match="lr_schedule must be one of constant, cosine"):
        PixelModel.resolve_options({"lr_schedule": "step"})
    assert PixelModel.resolve_options({})["lr_schedule"] == "cosine"
    assert PixelModel.resolve_options({"encoder": "grid"})["lr_schedule"] == "constant"
    saved = {"encoder": "boxes", "head": "tokens", "pretrain_epochs": 6, "epochs": 8}
    assert PixelModel.resolve_options(upgrade_options("pixel", saved))["lr_schedule"] == (
        "constant"
    )


def test_the_default_cosine_schedule_ends_training_at_a_zero_step(world, schedulers_made):
    PixelModel.train(world, epochs=2, seed=0, progress=False, **FROZEN)
    [(optimizer, schedule, steps, scheduler)] = schedulers_made
    assert schedule == "cosine"
    assert steps == 2 * -(-len(world.questions("train")) // 64)
    assert scheduler.last_epoch == steps  # stepped once per batch
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-12)


def test_prepared_crops_answer_as_the_images_and_shared_images_are_cut_once(world, frozen_run):
    from vqadiag.probes.conditions import Probe, apply_pixel_condition
    from vqadiag.probes.runner import ProbeContext

    model, _ = frozen_run
    records = world.questions("val")
    qids = list(records)[:12]
    probes = [
        Probe(q, records[q]["question"], str(records[q]["imageId"]), records[q], keep=[0])
        for q in qids
    ]
    pixels = world.pixel_input([p.image_id for p in probes], max_objects=100)
    for visual in (pixels, apply_pixel_condition(pixels, probes, "mean")):
        prepared = model.prepare_pixels(visual)
        assert isinstance(prepared, BoxCropInput) and not prepared.encoded
        batch = ProbeContext.question_batch(probes)
        model.net.crop_cache.clear()
        want = model.predict(batch, visual)
        model.net.crop_cache.clear()
        got = model.predict(batch, prepared)
        np.testing.assert_array_equal(got.probs, want.probs)
        np.testing.assert_array_equal(got.attention, want.attention)
    shared = model.prepare_pixels(pixels)
    assert len({id(i) for i in pixels.images}) < len(probes)  # some questions share an image
    by_image: dict[int, int] = {}
    for image, crops in zip(pixels.images, shared.crops, strict=True):
        assert by_image.setdefault(id(image), id(crops)) == id(crops)
    assert len(set(map(id, shared.crops))) == len({id(i) for i in pixels.images})


def test_the_runner_hands_the_model_its_prepared_input(world, frozen_run, monkeypatch):
    from vqadiag.probes.conditions import Condition, Probe
    from vqadiag.probes.runner import ProbeContext
    from vqadiag.probes.store import PredictionStore

    model, _ = frozen_run
    records = world.questions("val")
    probes = [
        Probe(q, records[q]["question"], str(records[q]["imageId"]), records[q], remove=[0])
        for q in list(records)[:9]
    ]
    seen = []
    predict = type(model).predict

    def spy(self, batch, visual):
        seen.append(type(visual).__name__)
        return predict(self, batch, visual)

    monkeypatch.setattr(type(model), "predict", spy)
    store = PredictionStore(":memory:")
    ctx = ProbeContext(model, world, store, batch_size=4, workers=1)
    mask = {"replacement": "drop", "fill": "mean"}
    run = ctx.run(Condition("gqa.irrel", "objects", mask), probes)
    store.close()
    assert len(run.answers) == 9 and seen == ["BoxCropInput"] * 3
