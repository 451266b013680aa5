"""Prediction files of every supported shape, and their bad-input errors."""

from __future__ import annotations

import json

import pytest

from vqadiag.data.formats.predictions import (
    Prediction,
    align_predictions,
    check_coverage,
    read_answers,
    read_answers_and_probs,
    read_predictions,
)
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


def test_official_result_lists_read_fast_or_checked_give_the_same(write_json):
    """The official VQA / GQA result lists take a fast path; whatever it does not take
    (an id with spaces, a boolean answer, an extra field, a repeated id) goes through
    the checked reader, which gives the same or names the problem."""
    records = [{"questionId": f"{i:08d}", "prediction": a} for i, a in enumerate("ab")]
    fast = read_predictions(write_json("g.json", records))
    assert fast == {"00000000": Prediction("a"), "00000001": Prediction("b")}
    spaced = [*records[:1], {"questionId": " 00000001 ", "prediction": "b"}]
    assert read_predictions(write_json("s.json", spaced)) == fast
    notes: dict[str, int] = {}
    flagged = read_predictions(
        write_json("t.json", [*records, {"questionId": "7", "prediction": True}]), notes=notes
    )
    assert flagged["7"] == Prediction("yes") and notes == {"converted": 1}
    extra = [*records, {"questionId": "9", "prediction": "c", "probs": {"c": 1.0}}]
    assert read_predictions(write_json("e.json", extra))["9"].probs == {"c": 1.0}
    with pytest.raises(DataError, match="record '00000001': duplicate question id"):
        read_predictions(write_json("d.json", [*records, records[1]]))
    mixed = [{"question_id": 1, "answer": "x"}, {"questionId": "2", "prediction": "y"}]
    assert read_predictions(write_json("m.json", mixed)) == {
        "1": Prediction("x"), "2": Prediction("y")}  # fmt: skip


@pytest.mark.parametrize(
    ("name", "content"),
    [
        (
            "g.json",
            [{"questionId": "01", "prediction": "a"}, {"questionId": "2", "prediction": "b"}],
        ),
        ("v.json", [{"question_id": 1, "answer": "x"}]),
        ("d.json", {"1": "yes", "2": {"answer": "two", "probs": {"two": 0.7}}}),
        (
            "t.json",
            [{"questionId": "7", "prediction": True}, {"questionId": "8", "prediction": None}],
        ),
        ("l.jsonl", b'{"qid": "a", "answer": "red"}\n{"qid": "b", "answer": 3}\n'),
    ],
)
def test_read_answers_is_read_predictions_without_probabilities(
    write_json, tmp_path, name, content
):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path = write_json(name, content)
    notes_answers: dict[str, int] = {}
    notes_predictions: dict[str, int] = {}
    answers = read_answers(path, notes=notes_answers, null_as_wrong=True)
    predictions = read_predictions(path, notes=notes_predictions, null_as_wrong=True)
    assert answers == {qid: p.answer for qid, p in predictions.items()}
    assert notes_answers == notes_predictions


def test_read_answers_names_file_and_record(write_json):
    path = write_json("d.json", [{"questionId": "1", "prediction": "a"}] * 2)
    with pytest.raises(DataError, match=r"d\.json: record '1': duplicate question id"):
        read_answers(path)
    with pytest.raises(DataError, match=r"n\.json: record '1': answer must be a string, got None"):
        read_answers(write_json("n.json", [{"questionId": "1", "prediction": None}]))


def test_answers_and_probs_keep_only_the_probabilities_given(write_json):
    plain = write_json("g.json", [{"questionId": "1", "prediction": "a"}])
    assert read_answers_and_probs(plain) == ({"1": "a"}, {})
    mixed = write_json("m.json", {"1": "yes", "2": {"answer": "two", "probs": {"two": 0.7}}})
    assert read_answers_and_probs(mixed) == ({"1": "yes", "2": "two"}, {"2": {"two": 0.7}})
    with pytest.raises(DataError, match=r"d\.json: record '1': duplicate question id"):
        read_answers_and_probs(write_json("d.json", [{"qid": "1", "answer": "a"}] * 2))


def test_check_coverage_names_the_first_gap(tmp_path):
    answers = {"a": "x", "b": "y"}
    check_coverage(answers, ["a", "b"], tmp_path / "p.json")
    with pytest.raises(DataError, match="record 'b': question id is not among the questions"):
        check_coverage(answers, ["a"], tmp_path / "p.json")
    check_coverage(answers, ["a"], tmp_path / "p.json", allow_extra=True)
    with pytest.raises(DataError, match="1 of 3 questions have no prediction, first 'c'"):
        check_coverage(answers, ["a", "b", "c"], tmp_path / "p.json")
    check_coverage(answers, ["a", "b", "c"], tmp_path / "p.json", allow_missing=True)
    for known in ({"a": 1}, {"a"}):  # a mapping or set of ids is looked up as it is
        with pytest.raises(DataError, match="record 'b': question id is not among the questions"):
            check_coverage(answers, known, tmp_path / "p.json", allow_missing=True)
    check_coverage(answers, {"a": 1, "b": 2, "c": 3}, tmp_path / "p.json", allow_missing=True)


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


@pytest.mark.parametrize("cell", ["", "  "])
def test_an_empty_answer_cell_is_refused(tmp_path, cell):
    """VLMEvalKit leaves a failed row's prediction empty: scoring it as the answer ""
    would count a failure as a wrong answer without a word."""
    path = tmp_path / "model_GQA.tsv"
    path.write_text(f"index\tanswer\tprediction\n7\tdog\tcat\n8\tyes\t{cell}\n")
    with pytest.raises(DataError) as err:
        read_predictions(path)
    assert str(err.value).startswith(f"{path}: row 3 (question 8): empty answer cell")
    # JSON says "" on purpose: that stays an answer
    spelled = tmp_path / "p.json"
    spelled.write_text('[{"question_id": 8, "answer": ""}, {"question_id": 9, "answer": "x"}]')
    assert read_predictions(spelled)["8"].answer == ""


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
    # the position is the column within that line (orjson points at its last, 24th)
    with pytest.raises(DataError, match=r"p\.jsonl: line 2: malformed JSON at column 24: "):
        read_predictions(path)


def test_align_reports_extra_and_missing_ids():
    preds = {"a": Prediction("x"), "b": Prediction("y")}
    assert align_predictions(preds, ["a", "b"], "p.json") == [preds["a"], preds["b"]]
    with pytest.raises(DataError, match="p.json: record 'b': question id is not among"):
        align_predictions(preds, ["a"], "p.json")
    with pytest.raises(DataError, match="1 of 3 questions have no prediction, first 'c'"):
        align_predictions(preds, ["a", "b", "c"], "p.json")
    assert align_predictions(preds, ["a", "b", "c"], "p.json", allow_missing=True)[2] is None


# -- files as the harnesses and model repositories write them ----------------------------


def test_llava_answer_files(tmp_path):
    """LLaVA's model_vqa*.py: one JSON line per question, the answer in ``text``."""
    path = tmp_path / "llava-v1.5-7b.jsonl"
    lines = [
        {"question_id": 262148000, "prompt": "Is it red?\nAnswer the question using a single "
         "word or phrase.", "text": "Yes", "answer_id": "Xk2", "model_id": "llava-v1.5-7b",
         "metadata": {}},
        {"question_id": "20968153", "prompt": "What is it?", "text": "A cat", "answer_id": "p9",
         "model_id": "llava-v1.5-7b", "metadata": {}},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert read_predictions(path) == {
        "262148000": Prediction("Yes"),
        "20968153": Prediction("A cat"),
    }


def _lmms_line(doc_id, response, **extra):
    """A line of lmms-eval ≥ 0.4's samples_*.jsonl (no ``doc``)."""
    return {"doc_id": doc_id, "target": "", "arguments": [["<image> Q?", "{...}"]],
            "resps": [[response]], "filtered_resps": [response], "doc_hash": "ab",
            "prompt_hash": "cd", "target_hash": "ef", **extra}  # fmt: skip


def test_lmms_eval_logs_from_0_4_on(tmp_path):
    # VQA v2 test: the task's submission carries the question id
    path = tmp_path / "samples_vqav2_test.jsonl"
    lines = [_lmms_line(0, "Yes", submission={"question_id": 262148000, "answer": "yes"}),
             _lmms_line(1, "2", submission={"question_id": 262148001, "answer": "2"})]  # fmt: skip
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert read_predictions(path) == {"262148000": Prediction("Yes"), "262148001": Prediction("2")}
    # a task that logs only doc_id: no question id can be recovered, and row 0 is not one
    path = tmp_path / "samples_gqa.jsonl"
    path.write_text(json.dumps(_lmms_line(0, "yes", exact_match=1.0)) + "\n")
    with pytest.raises(DataError) as err:
        read_predictions(path)
    message = str(err.value)
    assert str(path) in message and "line 1" in message and "doc_id" in message
    assert "row number" in message and "question id is not among" not in message


def test_vlmevalkit_xlsx(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("openpyxl")
    path = tmp_path / "llava_v1.5_7b_GQA_TestDev_Balanced.xlsx"
    frame = pd.DataFrame({"index": [201307251, 201640614], "question": ["Is it?", "What?"],
                          "answer": ["yes", "table"], "prediction": ["Yes", "desk"],
                          "category": ["verify", "query"]})  # fmt: skip
    frame.to_excel(path, index=False)
    assert read_predictions(path) == {
        "201307251": Prediction("Yes"),
        "201640614": Prediction("desk"),
    }
    # the same workbook under another name is still read as one
    renamed = tmp_path / "predictions.json"
    renamed.write_bytes(path.read_bytes())
    assert read_predictions(renamed) == read_predictions(path)


@pytest.mark.parametrize(
    ("name", "make", "kind"),
    [
        ("p.json", lambda p: p.write_bytes(b"PAR1" + b"\0" * 40), "a Parquet table"),
        (
            "p.json",
            lambda p: p.write_bytes(__import__("gzip").compress(b"{}")),
            "a gzip-compressed file",
        ),
        ("p.jsonl", lambda p: p.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 30), "an HDF5 file"),
        (
            "p.csv",
            lambda p: p.write_bytes(b"SQLite format 3\x00" + bytes(range(256))),
            "an SQLite database",
        ),
    ],
)
def test_binary_files_say_what_they_are(tmp_path, name, make, kind):
    path = tmp_path / name
    make(path)
    with pytest.raises(DataError) as err:
        read_predictions(path)
    assert str(path) in str(err.value) and kind in str(err.value)
    assert "malformed JSON" not in str(err.value)


def test_pickled_predictions_are_read_without_running_code(tmp_path):
    """FPVG writes its predictions as pickled dicts; anything beyond plain values is
    refused before it can run."""
    import pickle

    import numpy as np

    for name in ("predictions.pkl", "predictions.json"):  # the name does not matter
        path = tmp_path / name
        path.write_bytes(pickle.dumps({"q1": "yes", 2: "red"}))
        assert read_predictions(path) == {"q1": Prediction("yes"), "2": Prediction("red")}
    path = tmp_path / "arrays.pkl"
    path.write_bytes(pickle.dumps({"q1": np.str_("yes")}))
    with pytest.raises(DataError) as err:
        read_predictions(path)
    assert str(path) in str(err.value) and "asks for numpy" in str(err.value)


def test_a_pickle_of_objects_given_to_score_vqa_is_one_line(run_cli, tmp_path, write_json):
    import pickle
    from fractions import Fraction

    q = write_json("q.json", {"questions": [{"question_id": 1, "image_id": 1, "question": "Q?"}]})
    answers = [{"answer": "yes", "answer_id": i} for i in range(1, 11)]
    record = {"question_id": 1, "image_id": 1, "answer_type": "yes/no", "question_type": "is"}
    a = write_json("a.json", {"annotations": [{**record, "answers": answers}]})
    p = tmp_path / "results.pkl"
    p.write_bytes(pickle.dumps([{"question_id": 1, "answer": "yes", "score": Fraction(1, 2)}]))
    res = run_cli("score", "vqa", "--questions", q, "--annotations", a, "--predictions", p)
    assert res.exit_code == 2
    line = res.stderr.strip()
    assert "\n" not in line and line.startswith(
        f"error: {p}: the pickle asks for fractions.Fraction"
    )


def test_probabilities_need_not_sum_to_one(write_json):
    """A model that scores each answer on its own (ViLT's sigmoid scores) writes
    probabilities whose sum passes 1; each is still in [0, 1]."""
    sigmoid = {"1": {"answer": "2", "probs": {"2": 0.93, "3": 0.41, "two": 0.12}}}
    assert read_predictions(write_json("s.json", sigmoid))["1"].prob_of("3") == 0.41


def test_score_vqa_counts_and_notes_converted_answers(run_cli, tmp_path):
    """A JSON boolean or number answer is read as yes / no / digits, counted, and said on
    stderr, as score gqa does (the official VQA script stops on such an answer)."""
    questions = {"questions": [
        {"question_id": q, "image_id": 7, "question": "Is it?"} for q in (1, 2, 3)
    ]}  # fmt: skip
    annotations = {"annotations": [{
        "question_id": q, "image_id": 7, "answer_type": "other", "question_type": "is it",
        "multiple_choice_answer": a,
        "answers": [{"answer": a, "answer_id": i + 1} for i in range(10)],
    } for q, a in ((1, "yes"), (2, "2"), (3, "cat"))]}  # fmt: skip
    (tmp_path / "q.json").write_text(json.dumps(questions))
    (tmp_path / "a.json").write_text(json.dumps(annotations))
    (tmp_path / "p.json").write_text(json.dumps(
        [{"question_id": 1, "answer": True}, {"question_id": 2, "answer": 2},
         {"question_id": 3, "answer": "cat"}]))  # fmt: skip
    res = run_cli("score", "vqa", "--questions", tmp_path / "q.json", "--annotations",
                  tmp_path / "a.json", "--predictions", tmp_path / "p.json", "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    out = res.json()
    assert out["overall"] == 100.0 and out["converted_predictions"] == 2
    assert "note: 2 predictions were JSON booleans or numbers" in res.stderr
    (tmp_path / "p.json").write_text(json.dumps(
        [{"question_id": q, "answer": "yes"} for q in (1, 2, 3)]))  # fmt: skip
    plain = run_cli("score", "vqa", "--questions", tmp_path / "q.json", "--annotations",
                    tmp_path / "a.json", "--predictions", tmp_path / "p.json",
                    "--json")  # fmt: skip
    assert plain.json()["converted_predictions"] == 0 and "note:" not in plain.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            {
                "q1": {
                    "question": "Is it red?",
                    "answer": "yes",
                    "fullAnswer": "Yes, it is.",
                    "imageId": "1",
                    "semantic": [],
                }
            },
            r"g\.json: record 'q1': looks like a GQA questions file \(it has 'fullAnswer'\)",
        ),
        (
            [
                {
                    "question_id": 7,
                    "multiple_choice_answer": "yes",
                    "answer": "x",
                    "answers": [{"answer": "yes", "answer_id": 1}],
                }
            ],
            r"g\.json: record '7': looks like VQA v2 annotations \(it has 'multiple_choice",
        ),
        (
            [{"question_id": 7, "question": "Is it red?", "image": "7.jpg", "answer": "yes"}],
            r"g\.json: record '7': looks like a benchmark's rows",
        ),
        (
            [{"question_id": 7, "answer": "yes", "text": "no"}],
            r"g\.json: record '7': has both 'answer' and 'text': which is the model's answer\?",
        ),
    ],
)
def test_ground_truth_or_an_ambiguous_record_is_refused(write_json, content, message):
    """Gold answers read as predictions would score 100: a GQA questions file, VQA
    annotations or a benchmark's rows are refused, and so is a record whose answer field
    is ambiguous; ``prediction`` beside the gold ``answer`` (VLMEvalKit) is read."""
    with pytest.raises(DataError, match=message):
        read_predictions(write_json("g.json", content))
    vlmevalkit = [{"index": 7, "question": "Is it red?", "image": "7.jpg", "answer": "yes",
                   "prediction": "no", "text": "no"}]  # fmt: skip
    assert read_predictions(write_json("v.json", vlmevalkit)) == {"7": Prediction("no")}
    # a model's own top answers under "answers" are not VQA's annotator answers
    top = [{"question_id": 7, "answer": "no", "answers": ["no", "yes"]}]
    assert read_predictions(write_json("t.json", top)) == {"7": Prediction("no")}


def test_a_benchmark_table_is_refused_naming_its_row(tmp_path):
    table = tmp_path / "GQA_TestDev_Balanced.tsv"
    table.write_text("index\tquestion\timage\tanswer\n3\tIs it red?\tabc\tyes\n")
    with pytest.raises(DataError, match=r"Balanced\.tsv: record '3': looks like a bench"):
        read_predictions(table)
