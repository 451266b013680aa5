"""Prediction files as a model: lookup by id, conditions, probabilities, errors."""

from __future__ import annotations

import numpy as np
import pytest

from vqadiag.errors import DataError
from vqadiag.models.adapters.file_adapter import PredictionFileModel
from vqadiag.models.base import QuestionBatch, VQAModel
from vqadiag.models.registry import load_model


def _batch(*qids):
    return QuestionBatch(list(qids), ["q?"] * len(qids), ["1"] * len(qids))


@pytest.fixture
def files(write_json):
    plain = write_json("plain.json", {"q1": "red", "q2": "yes"})
    rel = write_json(
        "rel.json",
        {"q1": {"answer": "blue", "probs": {"blue": 0.75, "red": 0.25}}, "q2": "no"},
    )
    return plain, rel


def test_plain_lookup_one_hot(files):
    model = PredictionFileModel(files[0])
    assert isinstance(model, VQAModel)
    out = model.predict(_batch("q2", "q1"), None)
    assert out.answers == ["yes", "red"]
    assert model.answer_vocab == ["red", "yes"]  # every answer of every file, sorted
    assert out.probs.tolist() == [[0.0, 1.0], [1.0, 0.0]]
    caps = model.capabilities
    assert caps.visual == "none" and not caps.object_masking and not caps.probabilities


def test_conditions_and_file_probabilities(files):
    model = PredictionFileModel({"plain": files[0], "relevant": files[1]})
    assert model.answer_vocab == ["blue", "no", "red", "yes"]
    assert model.conditions == ["plain", "relevant"]
    rel = model.with_condition("relevant")
    out = rel.predict(_batch("q1", "q2"))
    assert out.answers == ["blue", "no"]
    # q1 carries probs {blue .75, red .25}; q2 has none -> one-hot on "no"
    np.testing.assert_allclose(out.probs, [[0.75, 0, 0.25, 0], [0, 1, 0, 0]])
    assert model.predict(_batch("q1"), condition="relevant").answers == ["blue"]
    with pytest.raises(ValueError, match="no prediction file for condition 'other'"):
        model.predict(_batch("q1"), condition="other")


def test_missing_question_names_file_and_record(files):
    model = PredictionFileModel(files[0])
    with pytest.raises(
        DataError, match=r"plain.json: record 'q9': no prediction for this question"
    ):
        model.predict(_batch("q1", "q9"))


def test_bad_file_is_a_data_error(write_json, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"q1": ')
    with pytest.raises(DataError, match="bad.json"):
        PredictionFileModel(bad)


def test_save_load_and_fingerprint(files, tmp_path, write_json):
    model = PredictionFileModel({"plain": files[0], "relevant": files[1]}, "relevant")
    model.save(tmp_path / "run")
    loaded = load_model(tmp_path / "run")
    assert isinstance(loaded, PredictionFileModel) and loaded.condition == "relevant"
    assert loaded.fingerprint() == model.fingerprint()
    other = PredictionFileModel(write_json("other.json", {"q1": "red", "q2": "no"}))
    assert other.fingerprint() != PredictionFileModel(files[0]).fingerprint()
    with pytest.raises(ValueError, match="not trained"):
        PredictionFileModel.train(None)
