"""Prediction files of every supported shape, and their bad-input errors."""

from __future__ import annotations

import json

import pytest

from vqadiag.data.predictions import Prediction, align_predictions, read_predictions
from vqadiag.errors import DataError


def test_dict_shape_and_int_ids(write_json):
    path = write_json("p.json", {"1": "yes", "02": {"answer": "two", "probs": {"two": 0.7}}})
    preds = read_predictions(path)
    assert preds["1"] == Prediction("yes")
    assert preds["02"].answer == "two"
    assert preds["02"].prob_of("two") == 0.7
    assert preds["02"].prob_of("three") == 0.0


def test_vqa_results_and_gqa_shapes(write_json):
    vqa = read_predictions(write_json("v.json", [{"question_id": 5, "answer": "2"}]))
    gqa = read_predictions(write_json("g.json", [{"questionId": "007", "prediction": "no"}]))
    assert vqa == {"5": Prediction("2")}
    assert gqa == {"007": Prediction("no")}


def test_jsonl_and_lmms_eval_shape(tmp_path):
    path = tmp_path / "samples.jsonl"
    lines = [
        {"qid": "a", "answer": "red"},
        {"doc_id": 3, "doc": {"question_id": 99}, "filtered_resps": [["cat"]], "target": "dog"},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    preds = read_predictions(path)
    assert preds == {"a": Prediction("red"), "99": Prediction("cat")}


def test_vlmevalkit_tsv_prefers_prediction_column(tmp_path):
    path = tmp_path / "model_GQA.tsv"
    path.write_text("index\tquestion\tanswer\tprediction\n1\tWhat?\tdog\tcat\n2\tWho?\tNA\tNone\n")
    preds = read_predictions(path)
    assert preds["1"].answer == "cat"
    assert preds["2"].answer == "None"  # literal strings are not turned into missing values


def test_csv(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text('question_id,answer\n1,yes\n2,"a, b"\n')
    assert read_predictions(path)["2"].answer == "a, b"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "p.json: file is empty"),
        ('{"1": "yes",', "p.json: malformed JSON at line 1"),
        ('[{"question_id": 1}]', "p.json: record '1': missing answer field"),
        ('[{"answer": "x"}]', "p.json: item 0: missing question id"),
        (
            '[{"question_id": 1, "answer": "a"}, {"question_id": "1", "answer": "b"}]',
            "p.json: record '1': duplicate question id",
        ),
        ('{"q": {"answer": "a", "probs": {"a": NaN}}}', "NaN/Infinity is not valid JSON"),
        ('{"q": ["a"]}', "p.json: record 'q': answer must be a string"),
        ('{"q": {"answer": "a", "probs": {"a": 1.5}}}', "record 'q': probability of 'a' is 1.5"),
        ('"yes"', "expected a JSON object"),
        ("[]", "p.json: no predictions in file"),
    ],
)
def test_bad_prediction_files(tmp_path, content, message):
    path = tmp_path / "p.json"
    path.write_text(content)
    with pytest.raises(DataError) as err:
        read_predictions(path)
    assert message in str(err.value)
    assert str(path) in str(err.value)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(DataError, match="nope.json: file not found"):
        read_predictions(tmp_path / "nope.json")


def test_malformed_jsonl_names_the_line(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"qid": "a", "answer": "x"}\n{"qid": "b", "answer": \n')
    with pytest.raises(DataError, match=r"p.jsonl: line 2: malformed JSON"):
        read_predictions(path)


def test_align_reports_extra_and_missing_ids():
    preds = {"a": Prediction("x"), "b": Prediction("y")}
    assert align_predictions(preds, ["a", "b"], "p.json") == [preds["a"], preds["b"]]
    with pytest.raises(DataError, match="p.json: record 'b': question id is not among"):
        align_predictions(preds, ["a"], "p.json")
    with pytest.raises(DataError, match="1 of 3 questions have no prediction, first 'c'"):
        align_predictions(preds, ["a", "b", "c"], "p.json")
    assert align_predictions(preds, ["a", "b", "c"], "p.json", allow_missing=True)[2] is None
