"""Question-only GRU baseline: blind, reproducible, round-trips."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.models.base import QuestionBatch
from vqadiag.models.reference.question_only import QuestionOnlyModel
from vqadiag.models.registry import load_model


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    out = tmp_path_factory.mktemp("qonly_world")
    generate_world(out, images=100, seed=6, progress=False)
    return out


@pytest.fixture(scope="module")
def model(world):
    return QuestionOnlyModel.train(GQAData(world), epochs=2, seed=0, progress=False, hidden_dim=32)


def test_blind_model_ignores_the_image(model, world):
    data = GQAData(world)
    batch = data.batch("val", list(data.questions("val"))[:10])
    assert model.capabilities.visual == "none" and not model.capabilities.object_masking
    blind = model.predict(batch, None)
    seeing = model.predict(batch, data.object_input(batch.image_ids))
    np.testing.assert_array_equal(blind.probs, seeing.probs)
    assert blind.attention is None
    np.testing.assert_allclose(blind.probs.sum(axis=1), 1.0, rtol=1e-5)


def test_answers_come_from_training_answers_only(model, world):
    train_answers = {r["answer"] for r in GQAData(world).questions("train").values()}
    assert set(model.answer_vocab) == train_answers
    batch = QuestionBatch(["a", "b"], ["What is it?", "Zebra??"], ["1", "1"])
    assert all(a in train_answers for a in model.predict(batch, None).answers)


def test_padding_does_not_change_a_question_s_answer(model):
    # a question alone and next to a much longer one: same probabilities (padding is never read)
    short = QuestionBatch(["a"], ["What color is the cup?"], ["1"])
    mixed = QuestionBatch(
        ["a", "b"],
        ["What color is the cup?", "Is there a red cup to the left of the big wooden table?"],
        ["1", "1"],
    )
    np.testing.assert_allclose(
        model.predict(short, None).probs[0], model.predict(mixed, None).probs[0], rtol=1e-5
    )


def test_round_trip_and_log(model, tmp_path):
    model.save(tmp_path / "run")
    loaded = load_model(tmp_path / "run")
    assert isinstance(loaded, QuestionOnlyModel) and loaded.fingerprint() == model.fingerprint()
    assert loaded.training_log["history"][-1]["epoch"] == 2
    assert loaded.options["hidden_dim"] == 32


def test_unknown_option(world):
    with pytest.raises(ValueError, match="unknown option"):
        QuestionOnlyModel.train(GQAData(world), epochs=1, progress=False, hiden_dim=3)
