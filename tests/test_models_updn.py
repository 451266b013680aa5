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


def test_object_gradients_are_those_of_the_features_the_network_reads(model, inputs):
    """GradCAM differentiates the answer's logit with respect to the object features after
    ``feature_norm`` (a LayerNorm by default): checked by a central difference on those
    features (float64). The gradient with respect to the raw features sums to 0 over the
    feature dimension (a LayerNorm ignores a shift of all of an object's features), so
    GradCAM taken there was rounding noise, whatever the model looked at."""
    batch, objects = inputs
    index = np.arange(len(batch)) % len(model.answer_vocab)
    grads = model.object_gradients(batch, objects, index)
    assert grads.shape == objects.features.shape
    assert (grads[~objects.mask] == 0).all()
    j, d = np.unravel_index(np.abs(grads[0]).argmax(), grads[0].shape)
    net = model.net.double()
    layer_norm = net.feature_norm
    tokens, lengths = model._question_tensors(batch)
    spatial = torch.from_numpy(spatial_features(objects.boxes, objects.image_sizes)).double()
    mask = torch.from_numpy(objects.mask)
    raw = torch.from_numpy(objects.features.astype(np.float64)).requires_grad_(True)
    try:
        logits, _ = net(tokens, lengths, raw, spatial, mask)
        (raw_grad,) = torch.autograd.grad(logits[0, index[0]], raw)
        with torch.no_grad():
            read = layer_norm(raw)
        net.feature_norm = torch.nn.Identity()  # the network now reads `read` as it is
        eps = 1e-4

        def logit(delta):
            f = read.clone()
            f[0, j, d] += delta
            with torch.no_grad():
                return net(tokens, lengths, f, spatial, mask)[0][0, index[0]].item()

        numeric = (logit(eps) - logit(-eps)) / (2 * eps)
    finally:
        net.feature_norm = layer_norm
        model.net.float()
    assert grads[0, j, d] == pytest.approx(numeric, rel=1e-3)
    visible = objects.mask[0]

    def shift_share(g):  # |Σ_d g| / Σ_d |g| per visible object: 0 when a shift does nothing
        g = np.asarray(g, np.float64)[visible]
        return np.abs(g.sum(-1)) / np.abs(g).sum(-1)

    assert shift_share(raw_grad[0].detach().numpy()).max() < 1e-9
    assert shift_share(grads[0]).max() > 1e-2


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
