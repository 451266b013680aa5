"""Prior model: global / per-group / per-type most frequent training answer (hand-worked)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError
from vqadiag.models.base import QuestionBatch
from vqadiag.models.reference.prior import PriorModel, group_key
from vqadiag.models.registry import load_model


def _q(answer, group, detailed="t"):
    return {
        "question": "q?",
        "answer": answer,
        "imageId": "1",
        "groups": {"global": group, "local": "x"},
        "types": {"detailed": detailed},
    }


TRAIN = {
    "1": _q("red", "color", "queryColor"),
    "2": _q("red", "color", "queryColor"),
    "3": _q("blue", "color", "queryColor"),
    "4": _q("yes", None, "exist"),
    "5": _q("no", None, "exist"),
    "6": _q("no", None, "verifyColor"),
    "7": _q("wood", "material", "verifyColor"),
}


@pytest.fixture
def data(tmp_path):
    (tmp_path / "train_balanced_questions.json").write_text(json.dumps(TRAIN))
    return GQAData(tmp_path)


def _batch(records):
    n = len(records)
    return QuestionBatch([str(i) for i in range(n)], ["q?"] * n, ["1"] * n, records)


def test_global_prior(data):
    model = PriorModel.train(data, mode="global")
    # counts: no 2, red 2 (tie -> alphabetical), blue 1, wood 1, yes 1
    assert model.answer_vocab == ["no", "red", "blue", "wood", "yes"]
    out = model.predict(_batch([_q("x", "color"), _q("x", None)]), None)
    assert out.answers == ["no", "no"]
    np.testing.assert_allclose(out.probs[0], [2 / 7, 2 / 7, 1 / 7, 1 / 7, 1 / 7], rtol=1e-6)


def test_group_prior_with_fallback_for_unseen_groups(data):
    model = PriorModel.train(data)  # default mode: group (GQA's per-global-group prior)
    assert model.mode == "group"
    batch = _batch([_q("x", "color"), _q("x", None), _q("x", "material"), _q("x", "shape")])
    out = model.predict(batch, None)
    # color: red 2/3, blue 1/3; no group: no 2/3, yes 1/3; material: wood; shape unseen -> global
    assert out.answers == ["red", "no", "wood", "no"]
    np.testing.assert_allclose(out.probs[0], [0, 2 / 3, 1 / 3, 0, 0], atol=1e-7)
    np.testing.assert_allclose(out.probs[1], [2 / 3, 0, 0, 0, 1 / 3], atol=1e-7)
    np.testing.assert_allclose(out.probs[3], [2 / 7, 2 / 7, 1 / 7, 1 / 7, 1 / 7], rtol=1e-6)
    assert model.capabilities.visual == "none" and not model.capabilities.object_masking


def test_type_prior(data):
    model = PriorModel.train(data, mode="type")
    # verifyColor: no 1, wood 1 -> tie goes to the globally more frequent "no"
    out = model.predict(_batch([_q("x", None, "queryColor"), _q("x", None, "verifyColor")]))
    assert out.answers == ["red", "no"]
    assert group_key({"types": {"detailed": "exist"}}, "type") == "exist"
    assert group_key({}, "group") is None


def test_save_load_round_trip_and_fingerprint(data, tmp_path):
    model = PriorModel.train(data)
    model.save(tmp_path / "run")
    loaded = load_model(tmp_path / "run")
    assert isinstance(loaded, PriorModel)
    assert loaded.fingerprint() == model.fingerprint()
    batch = _batch([_q("x", "color"), _q("x", None)])
    np.testing.assert_array_equal(loaded.predict(batch).probs, model.predict(batch).probs)
    assert PriorModel.train(data, mode="global").fingerprint() != model.fingerprint()


def test_bad_options_and_corrupt_counts(data, tmp_path):
    with pytest.raises(ValueError, match="mode must be one of"):
        PriorModel.train(data, mode="nope")
    with pytest.raises(ValueError, match="unknown options"):
        PriorModel.train(data, hidden_dim=3)
    from vqadiag.models.checkpoint import save_checkpoint

    save_checkpoint(
        tmp_path / "bad",
        {"model": "prior", "mode": "global", "groups": []},
        {"counts": np.zeros((2, 2))},
        ["a", "b"],
    )
    with pytest.raises(DataError, match=r"weights.safetensors: 'counts' must have shape \(1, 2\)"):
        PriorModel.load(tmp_path / "bad")
