"""Readers of VQA v2 questions, annotations and complementary pairs, with validation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vqadiag.data.formats.vqa2 import read_pairs, read_vqa_annotations, read_vqa_questions
from vqadiag.errors import DataError

WriteJson = Callable[[str, Any], Path]


def annotation(qid: int, answers: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    answers = ["yes"] * 10 if answers is None else answers
    record = {
        "question_id": qid,
        "image_id": 7,
        "question_type": "is the",
        "answer_type": "yes/no",
        "answers": [
            {"answer": a, "answer_confidence": "yes", "answer_id": i + 1}
            for i, a in enumerate(answers)
        ],
        "multiple_choice_answer": "yes",
    }
    record.update(extra)
    return record


def test_questions_official_shape(write_json: WriteJson) -> None:
    path = write_json(
        "q.json",
        {
            "info": {},
            "questions": [
                {"image_id": 7, "question": "Is it?", "question_id": 7000},
                {"image_id": 8, "question": "What?", "question_id": 8001},
            ],
        },
    )
    out = read_vqa_questions(path)
    assert list(out) == ["7000", "8001"]
    assert out["7000"]["question"] == "Is it?"
    assert out["7000"]["image_id"] == "7"
    assert out["7000"]["question_id"] == "7000"


def test_annotations_official_shape(write_json: WriteJson) -> None:
    answers = ["2", "two", "3", "2", "2", "2", "3", "2", "two", "2"]
    record = annotation(5, answers, answer_type="number", question_type="how many")
    del record["multiple_choice_answer"]
    out = read_vqa_annotations(write_json("a.json", {"annotations": [record]}))
    entry = out["5"]
    assert entry["answer_list"] == answers
    assert entry["answer_type"] == "number"
    assert entry["question_type"] == "how many"
    assert entry["image_id"] == "7"
    # absent multiple_choice_answer: the most frequent raw answer ("2": 6 of 10)
    assert entry["multiple_choice_answer"] == "2"


def test_bare_lists_are_accepted(write_json: WriteJson) -> None:
    out = read_vqa_annotations(write_json("a.json", [annotation(1), annotation(2)]))
    assert list(out) == ["1", "2"]


def _error(fn: Callable[[Path], Any], path: Path) -> str:
    with pytest.raises(DataError) as info:
        fn(path)
    return str(info.value)


@pytest.mark.parametrize(
    ("records", "fragment"),
    [
        ([annotation(1), annotation(1)], "record '1': duplicate question id"),
        ([annotation(1, [])], "record '1': empty answer list"),
        ([annotation(1, ["yes"] * 9 + [3])], "record '1': answer 9 must be a string"),
        ([annotation(1, ["yes"] * 9 + [None])], "record '1': answer 9 must be a string"),
        ([{**annotation(1), "answers": "yes"}], "record '1': 'answers' must be a list"),
        ([annotation(1, question_type=None)], "record '1': 'question_type' must be a string"),
        ([annotation(1, multiple_choice_answer=4)], "'multiple_choice_answer' must be a string"),
        ([{k: v for k, v in annotation(1).items() if k != "answer_type"}], "missing field"),
        ([{"image_id": 3}], "item 0: missing field 'question_id'"),
        ([annotation(1, image_id=None)], "'image_id' must be an integer or string"),
    ],
)
def test_annotation_problems(write_json: WriteJson, records: list[Any], fragment: str) -> None:
    path = write_json("ann.json", {"annotations": records})
    message = _error(read_vqa_annotations, path)
    assert message.startswith(str(path))
    assert fragment in message


def test_annotation_answer_without_answer_field(write_json: WriteJson) -> None:
    record = annotation(4)
    record["answers"][2] = {"answer_id": 3}
    path = write_json("ann.json", {"annotations": [record]})
    message = _error(read_vqa_annotations, path)
    assert "record '4'" in message and "answer 2" in message and "missing field 'answer'" in message


def test_question_problems(write_json: WriteJson) -> None:
    good = {"image_id": 1, "question": "Q?", "question_id": 10}
    path = write_json("q.json", {"questions": [good, good]})
    assert "record '10': duplicate question id" in _error(read_vqa_questions, path)
    path = write_json("q.json", {"questions": [{"image_id": 1, "question_id": 11}]})
    assert "record '11': missing field 'question'" in _error(read_vqa_questions, path)
    path = write_json("q.json", {"questions": [{**good, "question": 5}]})
    assert "'question' must be a string" in _error(read_vqa_questions, path)
    path = write_json("q.json", {"quest": []})
    assert "'questions' list" in _error(read_vqa_questions, path)
    path = write_json("q.json", {"questions": []})
    assert "no questions in file" in _error(read_vqa_questions, path)


def test_file_level_problems(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("")
    assert _error(read_vqa_annotations, empty) == f"{empty}: file is empty"
    bad = tmp_path / "bad.json"
    bad.write_text('{"annotations": [')
    assert "malformed JSON at line 1" in _error(read_vqa_annotations, bad)
    nan = tmp_path / "nan.json"
    nan.write_text('{"annotations": [{"question_id": 1, "x": NaN}]}')
    assert "NaN" in _error(read_vqa_annotations, nan)
    assert "file not found" in _error(read_vqa_questions, tmp_path / "missing.json")


def test_pairs(write_json: WriteJson) -> None:
    path = write_json("pairs.json", [[1, 2], ["3", "4"]])
    assert read_pairs(path) == [("1", "2"), ("3", "4")]
    assert read_pairs(path, {"1", "2", "3", "4"}) == [("1", "2"), ("3", "4")]


@pytest.mark.parametrize(
    ("pairs", "fragment"),
    [
        ([[1, 2, 3]], "pair 0: expected [question_id_a, question_id_b]"),
        ([[1]], "pair 0: expected"),
        ([5], "pair 0: expected"),
        ([[1, 2], [3, 3]], "pair 1: question '3' is paired with itself"),
        ([[1, 2], [2, 1]], "pair 1: pair ['2', '1'] is listed twice"),
        ([[1, None]], "pair 0: question id must be a string or integer"),
        ([[1, 9]], "record '9': question id is not in the annotations"),
        ({"pairs": []}, "expected a JSON list"),
        ([], "no pairs in file"),
    ],
)
def test_pair_problems(write_json: WriteJson, pairs: Any, fragment: str) -> None:
    path = write_json("pairs.json", pairs)
    with pytest.raises(DataError) as info:
        read_pairs(path, {"1", "2", "3"})
    assert str(info.value).startswith(str(path))
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "record",
    [
        annotation(3),
        annotation(" 4 ", ["a", "b"] * 5),  # id with spaces: stripped
        annotation(5.0),  # float id with an integer value
        {k: v for k, v in annotation(6).items() if k != "image_id"},
        {k: v for k, v in annotation(7, ["x", "y", "y"]).items() if k != "multiple_choice_answer"},
        annotation("q8", image_id="COCO_8"),
    ],
)
def test_fast_and_checked_paths_agree(record: dict[str, Any], tmp_path: Path) -> None:
    from vqadiag.data.formats.vqa2 import _checked_annotation, _fast_annotation

    checked = _checked_annotation(dict(record), tmp_path / "a.json", 0)
    fast = _fast_annotation(dict(record))
    assert fast is None or fast == checked
    assert checked["answer_list"] == [a["answer"] for a in record["answers"]]


def test_fast_path_takes_well_formed_records() -> None:
    from vqadiag.data.formats.vqa2 import _fast_annotation

    assert _fast_annotation(annotation(3)) is not None
    assert _fast_annotation(annotation(3, [])) is None
    assert _fast_annotation(annotation(3, ["yes"] * 9 + [1])) is None
    assert _fast_annotation(annotation(True)) is None


def test_slim_annotations_equal_the_checked_entries(write_json: WriteJson) -> None:
    """``slim=True`` (the typed fast path) gives the checked reader's entries cut to their
    slim fields, with and without ``multiple_choice_answer`` and ``image_id``."""
    from vqadiag.data.formats.vqa2 import slim_annotation

    answers = ["2", "two", "3", "2", "2", "2", "3", "2", "two", "2"]
    no_mc = annotation(5, answers, answer_type="number", question_type="how many")
    del no_mc["multiple_choice_answer"]
    no_image = annotation(6, extra_field="kept only when not slim")
    del no_image["image_id"]
    path = write_json("a.json", {"info": {}, "annotations": [annotation(1), no_mc, no_image]})
    full = read_vqa_annotations(path)
    slim = read_vqa_annotations(path, slim=True)
    assert slim == {q: slim_annotation(e) for q, e in full.items()}
    assert slim["5"]["multiple_choice_answer"] == "2"
    assert "image_id" not in slim["6"] and "answers" not in slim["1"]


def test_slim_annotations_outside_the_fast_path(write_json: WriteJson) -> None:
    """String ids leave the typed path: the checked reader gives the same slim entries,
    and a duplicate id is still named."""
    path = write_json("a.json", {"annotations": [annotation("11"), annotation("12")]})
    assert sorted(read_vqa_annotations(path, slim=True)) == ["11", "12"]
    assert read_vqa_annotations(path, slim=True)["11"]["answer_list"] == ["yes"] * 10
    dup = write_json("d.json", {"annotations": [annotation(1), annotation(1)]})
    assert "record '1': duplicate question id" in _error(
        lambda p: read_vqa_annotations(p, slim=True), dup
    )


def _checked_questions(path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``read_vqa_questions`` with the nested-sharing decode turned off: the checked way."""
    import vqadiag.data.formats.vqa2 as vqa2

    with monkeypatch.context() as m:
        m.setattr(vqa2, "read_records_sharing_nested", lambda path, key: None)
        try:
            return read_vqa_questions(path)
        except DataError as err:
            return str(err)


def _questions_outcome(path: Path) -> Any:
    try:
        return read_vqa_questions(path)
    except DataError as err:
        return str(err)


def test_equal_programs_are_one_object(
    write_json: WriteJson, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Questions with the same nested value (a synthetic world's ``semantic`` program) share
    one object; every record equals the checked reader's, keys in file order."""
    count = [{"operation": "select", "dependencies": [], "argument": "cup"},
             {"operation": "count", "dependencies": [0], "argument": ""}]  # fmt: skip
    questions = [
        {"question_id": 1, "question": "How many cups?", "semantic": count, "image_id": 4},
        {"image_id": 5, "question_id": 2, "question": "How many cups?", "semantic": count},
        {"question_id": 3, "image_id": 5, "question": "Q?", "semantic": count[:1]},
        {"question_id": 4, "image_id": "6", "question": "Q?", "extra": {"a": [1, 2.5, None]}},
    ]
    path = write_json("q.json", {"info": {"x": 1}, "questions": questions})
    shared = read_vqa_questions(path)
    checked = _checked_questions(path, monkeypatch)
    assert shared == checked
    assert [list(r) for r in shared.values()] == [list(r) for r in checked.values()]
    assert shared["1"]["semantic"] is shared["2"]["semantic"]
    assert shared["3"]["semantic"] is not shared["1"]["semantic"]
    assert shared["4"]["extra"] == {"a": [1, 2.5, None]}


@pytest.mark.parametrize(
    "text",
    [
        b'{"questions": [{"question_id": 1, "image_id": 2, "question": "Q\xff"}]}',
        b'{"questions": [], "questions": [{"question_id": 1, "image_id": 2, "question": "Q"}]}',
        b'{"questions": [{"question_id": 1, "image_id": 2, "question": "Q", "x": 1e400}]}',
        b'{"questions": [{"question_id": 1, "image_id": 2, "question": "Q", "x": NaN}]}',
        b'{"questions": [{"question_id": 123456789012345678901234, "image_id": 2, "question": "Q"}'
        b"]}",
        b'{"questions": [{"question_id": 1, "image_id": 2, "question": "Q", "x": [[[[[1]]]]]}]}',
        b'{"questions": [{"question_id": 1, "image_id": 2, "question": "Q", "x": {"k": 1, "k": 2}}'
        b"]}",
        b'{"questions": [7]}',
        b'{"questions": [{"question_id": 1, "image_id": 2, "question": "Q"}, {"question_id": 1}]}',
        # found in review: members around the list are checked as the checked reader does
        b'{"info": 1e400, "questions": [{"question_id": 1, "image_id": 2, "question": "Q"}]}',
        b'{"questions": [{"question_id": 1, "image_id": 2, "question": "Q"}], "x": -1e400}',
        b'{"info": [1, {"a": "\\u00e9"}], "questions": [{"question_id": 1, "image_id": 2,'
        b' "question": "Q", "s": [{"a": "\\u00e9"}], "t": [{"a": "\xc3\xa9"}]}]}',
        b'[{"question_id": 1, "image_id": 2, "question": "Q", "semantic": []}]',
        b'{"questions": [{"question_id": 1, "image_id": 2, "question": "Q"}',
    ],
)
def test_sharing_decode_reads_as_the_checked_reader(
    text: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Odd files give what the checked reader gives: the same records or the same one-line
    refusal (the sharing decode defers at the first doubt)."""
    path = tmp_path / "q.json"
    path.write_bytes(text)
    assert _questions_outcome(path) == _checked_questions(path, monkeypatch)


def test_sharing_decode_defers_at_the_first_doubt(tmp_path: Path) -> None:
    from vqadiag.data.io.typed_json import read_records_sharing_nested

    path = tmp_path / "q.json"
    for text in (
        b'{"questions": [{"question_id": 1, "question": "Q\xff"}]}',
        b'{"questions": [], "questions": [{"question_id": 1}]}',
        b'{"questions": [{"question_id": 1, "x": 1e400}]}',
        b'{"questions": [7]}',
        b'{"questions": []}',
    ):
        path.write_bytes(text)
        assert read_records_sharing_nested(path, "questions") is None, text
    path.write_bytes(b'{"questions": [{"question_id": 1, "x": [1]}, {"x": [1]}]}')
    records = read_records_sharing_nested(path, "questions")
    assert records == [{"question_id": 1, "x": [1]}, {"x": [1]}]
    assert records is not None and records[0]["x"] is records[1]["x"]


def test_nesting_is_limited_as_in_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A nested value is decoded at its depth in the file: with Python's recursion limit
    raised, a value just within orjson's nesting limit alone but beyond it in the file is
    refused as the checked reader refuses it (found in review)."""
    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)
    try:
        for depth in (1019, 1020, 1021, 1022, 1023, 1024):
            value = b"[" * depth + b"]" * depth
            path = tmp_path / f"deep{depth}.json"
            path.write_bytes(
                b'{"questions": [{"question_id": 1, "image_id": 2, "question": "Q", "d": '
                + value
                + b"}]}"
            )
            assert _questions_outcome(path) == _checked_questions(path, monkeypatch), depth
    finally:
        sys.setrecursionlimit(old)
