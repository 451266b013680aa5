"""UpDn: masked attention, spatial features, exact mask honouring, gradients, round trip."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vqadiag.data.model_inputs.gqa_data import GQAData  # noqa: E402
from vqadiag.errors import DataError  # noqa: E402
from vqadiag.models.base import GradientModel, ObjectInput, VQAModel  # noqa: E402
from vqadiag.models.networks.updn import masked_softmax  # noqa: E402
from vqadiag.models.reference.updn import UpDnModel  # noqa: E402
from vqadiag.models.registry import load_model  # noqa: E402
from vqadiag.models.training import spatial_features  # noqa: E402


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    out = tmp_path_factory.mktemp("updn_world")
    generate_world(out, images=100, seed=5, progress=False)
    return out


@pytest.fixture(scope="module")
def model(world):
    return UpDnModel.train(GQAData(world), epochs=1, seed=0, progress=False, hidden_dim=32)


@pytest.fixture(scope="module")
def inputs(world):
    data = GQAData(world)
    qids = list(data.questions("val"))[:16]
    batch = data.batch("val", qids)
    return batch, data.object_input(batch.image_ids)


def test_masked_softmax_hand_worked():
    logits = torch.tensor([[0.0, math.log(3.0), 5.0], [1.0, 2.0, 3.0]])
    mask = torch.tensor([[True, True, False], [False, False, False]])
    out = masked_softmax(logits, mask)
    # row 0: e^0 : e^ln3 = 1 : 3 over the visible two -> 0.25, 0.75; the masked one exactly 0
    torch.testing.assert_close(out[0], torch.tensor([0.25, 0.75, 0.0]))
    assert out[0, 2].item() == 0.0
    # row 1: nothing visible -> attends to nothing (no NaN)
    assert out[1].tolist() == [0.0, 0.0, 0.0]


def test_spatial_features_hand_worked():
    boxes = np.array([[[10, 20, 30, 60]]], dtype=np.float32)
    sizes = np.array([[100, 200]], dtype=np.float32)
    # x1/W = .1, y1/H = .1, x2/W = .3, y2/H = .3, area fraction = .2 * .2 = .04
    np.testing.assert_allclose(
        spatial_features(boxes, sizes)[0, 0], [0.1, 0.1, 0.3, 0.3, 0.04], rtol=1e-6
    )


def test_interface_and_capabilities(model):
    assert isinstance(model, VQAModel) and isinstance(model, GradientModel)
    caps = model.capabilities
    assert caps.visual == "objects" and caps.object_masking and caps.attention and caps.gradients


def test_attention_is_a_distribution_over_visible_objects(model, inputs):
    batch, objects = inputs
    out = model.predict(batch, objects)
    assert out.attention.shape == objects.mask.shape
    assert (out.attention[~objects.mask] == 0).all()
    np.testing.assert_allclose(out.attention.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(out.probs.sum(axis=1), 1.0, rtol=1e-5)
    assert all(a in model.answer_vocab for a in out.answers)


def test_masked_objects_have_exactly_no_influence(model, inputs):
    batch, objects = inputs
    mask = objects.mask.copy()
    mask[:, ::2] = False  # drop every other object
    masked = objects.with_mask(mask)
    rng = np.random.default_rng(0)
    garbage = objects.features.copy()
    garbage[~mask] = rng.normal(0, 1e3, size=garbage[~mask].shape)
    boxes = objects.boxes.copy()
    boxes[~mask] = rng.uniform(0, 1e4, size=boxes[~mask].shape)
    changed = ObjectInput(garbage, boxes, mask, objects.image_sizes)
    a, b = model.predict(batch, masked), model.predict(batch, changed)
    np.testing.assert_array_equal(a.probs, b.probs)  # bit for bit
    np.testing.assert_array_equal(a.attention, b.attention)
    # the same as physically removing the masked objects (up to float summation order)
    keep = np.arange(objects.mask.shape[1])[1::2]
    removed = ObjectInput(
        objects.features[:, keep], objects.boxes[:, keep], mask[:, keep], objects.image_sizes
    )
    c = model.predict(batch, removed)
    np.testing.assert_allclose(a.probs, c.probs, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(a.attention[:, keep], c.attention, rtol=1e-5, atol=1e-7)


def test_no_visible_object_gives_a_finite_answer(model, inputs):
    batch, objects = inputs
    out = model.predict(batch, objects.with_mask(np.zeros_like(objects.mask)))
    assert np.isfinite(out.probs).all() and (out.attention == 0).all()


def test_object_gradients_match_finite_differences(model, inputs):
    batch, objects = inputs
    index = np.arange(len(batch)) % len(model.answer_vocab)
    grads = model.object_gradients(batch, objects, index)
    assert grads.shape == objects.features.shape
    assert (grads[~objects.mask] == 0).all()
    # the largest gradient coordinate of question 0, checked by a central difference (float64)
    j, d = np.unravel_index(np.abs(grads[0]).argmax(), grads[0].shape)
    net = model.net.double()
    try:
        eps = 1e-4

        def logit(delta):
            feats = objects.features.astype(np.float64).copy()
            feats[0, j, d] += delta
            f = torch.from_numpy(feats)
            spatial = torch.from_numpy(
                spatial_features(objects.boxes, objects.image_sizes)
            ).double()
            tokens, lengths = model._question_tensors(batch)
            logits, _ = net(tokens, lengths, f, spatial, torch.from_numpy(objects.mask))
            return logits[0, index[0]].item()

        numeric = (logit(eps) - logit(-eps)) / (2 * eps)
    finally:
        model.net.float()
    assert grads[0, j, d] == pytest.approx(numeric, rel=1e-3)


def test_save_load_round_trip(model, inputs, tmp_path):
    batch, objects = inputs
    model.save(tmp_path / "run")
    loaded = load_model(tmp_path / "run")
    assert isinstance(loaded, UpDnModel) and loaded.fingerprint() == model.fingerprint()
    np.testing.assert_array_equal(
        loaded.predict(batch, objects).probs, model.predict(batch, objects).probs
    )


def test_wrong_feature_dimension_is_a_data_error(model, inputs):
    batch, objects = inputs
    narrow = ObjectInput(
        objects.features[..., :8], objects.boxes, objects.mask, objects.image_sizes
    )
    with pytest.raises(DataError, match="8 dimensions; model 'updn' was trained on 64"):
        model.predict(batch, narrow)
    with pytest.raises(DataError, match="needs object input"):
        model.predict(batch, None)
