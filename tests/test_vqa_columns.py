"""The columnar fast path of ``score vqa`` (data.formats.vqa2_columns, protocols.vqa.inputs).

The fast path is an optimisation only: for every file it either gives exactly the inputs
the checked readers give, or defers to them (``None``), which then give the same inputs
or refuse the file with the message they always gave. Each case below checks both.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vqadiag.data.io.typed_json import is_utf8, records_value
from vqadiag.errors import DataError
from vqadiag.protocols.vqa import inputs as vqa_inputs
from vqadiag.protocols.vqa.inputs import VQAInputs, read_vqa_inputs

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "vqa2_tiny"


def _example() -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    load = lambda name: json.loads((EXAMPLE / name).read_text())  # noqa: E731
    return load("questions.json"), load("annotations.json"), load("predictions.json")


def _write(folder: Path, name: str, content: Any) -> Path:
    path = folder / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(json.dumps(content))
    return path


def _assert_same(fast: VQAInputs, checked: VQAInputs) -> None:
    assert fast.question_ids == checked.question_ids
    assert fast.predictions == checked.predictions
    assert fast.answers == checked.answers
    assert np.array_equal(fast.answer_counts, checked.answer_counts)
    assert fast.answer_types == checked.answer_types
    assert fast.question_types == checked.question_types


def _outcome(read: Any, *args: Any) -> Any:
    try:
        return read(*args)
    except DataError as err:
        return str(err)


def _check(folder: Path, questions: Any, annotations: Any, results: Any, *,
           allow_missing: bool = False, results_name: str = "results.json",
           fast_expected: bool) -> Any:  # fmt: skip
    """The fast path takes the files (``fast_expected``) or defers; either way
    ``read_vqa_inputs`` behaves exactly as the checked readers. Returns that outcome."""
    q = _write(folder, "questions.json", questions)
    a = _write(folder, "annotations.json", annotations)
    r = _write(folder, results_name, results)
    fast = vqa_inputs._fast_inputs(q, a, r, allow_missing)
    checked = _outcome(vqa_inputs._checked_inputs, q, a, r, allow_missing)
    got = _outcome(lambda *x: read_vqa_inputs(*x, allow_missing=allow_missing), q, a, r)
    assert (fast is not None) == fast_expected
    if isinstance(checked, str):
        assert fast is None
        assert got == checked
    else:
        _assert_same(got, checked)
        if fast is not None:
            _assert_same(fast, checked)
    return got


def test_official_example_takes_the_fast_path(tmp_path: Path) -> None:
    got = _check(tmp_path, *_example(), fast_expected=True)
    assert got.question_ids[0] == "101000"
    assert got.predictions[2] == "Yes"
    assert len(got.answers) == 120
    assert got.answer_counts.tolist() == [10] * 12


def test_generated_files_agree(tmp_path: Path) -> None:
    """Varied answer counts, unicode and whitespace answers, extra fields, no
    ``multiple_choice_answer``, ids in shuffled order, results in another order."""
    rng = random.Random(7)
    words = ["yes", "no", "2", "two", " red ", "café", "a\tb", "Yes!", "😀", "one dog"]
    questions, annotations, results = [], [], []
    for k in range(300):
        qid, image = 5000 + 7 * k, 900 + k // 3
        questions.append({"question_id": qid, "image_id": image, "question": f"q {k}?"})
        answers = [{"answer": rng.choice(words), "answer_id": j, "answer_confidence": "yes"}
                   for j in range(rng.randint(1, 10))]  # fmt: skip
        record = {"question_id": qid, "image_id": image, "question_type": rng.choice("ab"),
                  "answer_type": rng.choice(["other", "number"]), "answers": answers}  # fmt: skip
        if k % 2:
            record["multiple_choice_answer"] = answers[0]["answer"]
        annotations.append(record)
        results.append({"question_id": qid, "answer": rng.choice(words)})
    rng.shuffle(annotations)
    rng.shuffle(results)
    questions.append({"question_id": 1, "image_id": 1, "question": "not annotated?"})
    got = _check(tmp_path, {"questions": questions}, {"annotations": annotations}, results,
                 fast_expected=True)  # fmt: skip
    assert got.question_ids == [str(r["question_id"]) for r in annotations]


def test_bare_lists_and_missing_images_everywhere(tmp_path: Path) -> None:
    questions, annotations, results = _example()
    for record in annotations["annotations"]:
        del record["image_id"]
    _check(tmp_path, questions["questions"], annotations["annotations"], results,
           fast_expected=True)  # fmt: skip


def test_allow_missing_is_fast_and_leaves_none(tmp_path: Path) -> None:
    questions, annotations, results = _example()
    got = _check(tmp_path, questions, annotations, results[1:], allow_missing=True,
                 fast_expected=True)  # fmt: skip
    assert got.predictions[0] is None
    assert got.predictions[1] == "3"


def _mutated(change: Any) -> tuple[Any, Any, Any]:
    questions, annotations, results = copy.deepcopy(_example())
    return change(questions, annotations, results)


def _set(obj: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    obj[key] = value
    return obj


def _first(
    obj: dict[str, Any], key: str, change: Callable[[dict[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    """``obj`` with its ``key`` list's first record replaced by ``change(record)``."""
    return _set(obj, key, [change(obj[key][0]), *obj[key][1:]])


def _without(record: dict[str, Any], field: str) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != field}


# (name, change of (questions, annotations, results) → the three file contents)
DEFERRED = [
    (
        "string id in annotations",
        lambda q, a, r: (q, _first(a, "annotations", lambda x: {**x, "question_id": "101000"}), r),
    ),
    (
        "float id in results",
        lambda q, a, r: (q, a, [{"question_id": 101000.0, "answer": "x"}, *r[1:]]),
    ),
    (
        "id beyond int64",
        lambda q, a, r: (
            _set(
                q,
                "questions",
                [*q["questions"], {"question_id": 2**70, "image_id": 1, "question": "big?"}],
            ),
            a,
            r,
        ),
    ),
    (
        "string image id in questions",
        lambda q, a, r: (
            _first(q, "questions", lambda x: {**x, "image_id": str(x["image_id"])}),
            a,
            r,
        ),
    ),
    (
        "image id on some annotations only",
        lambda q, a, r: (q, _first(a, "annotations", lambda x: _without(x, "image_id")), r),
    ),
    (
        "results with probabilities",
        lambda q, a, r: (q, a, [{**x, "probs": {x["answer"]: 0.5}} for x in r]),
    ),
    (
        "results with a prediction field",
        lambda q, a, r: (q, a, [{**x, "prediction": "no"} for x in r]),
    ),
    (
        "results as an object",
        lambda q, a, r: (q, a, {str(x["question_id"]): x["answer"] for x in r}),
    ),
    (
        "empty answer list",
        lambda q, a, r: (
            q,
            _first(a, "annotations", lambda x: {**x, "answers": []}),
            r,
        ),
    ),
    (
        "answer not a string",
        lambda q, a, r: (
            q,
            _first(a, "annotations", lambda x: {**x, "answers": [{"answer": 2}]}),
            r,
        ),
    ),
    (
        "null multiple choice answer",
        lambda q, a, r: (
            q,
            _first(a, "annotations", lambda x: {**x, "multiple_choice_answer": None}),
            r,
        ),
    ),
    (
        "missing question type",
        lambda q, a, r: (q, _first(a, "annotations", lambda x: _without(x, "question_type")), r),
    ),
    (
        "duplicate annotation",
        lambda q, a, r: (q, _set(a, "annotations", [*a["annotations"], a["annotations"][0]]), r),
    ),
    (
        "duplicate question",
        lambda q, a, r: (_set(q, "questions", [*q["questions"], q["questions"][0]]), a, r),
    ),
    ("duplicate prediction", lambda q, a, r: (q, a, [*r, r[0]])),
    (
        "prediction for an unannotated question",
        lambda q, a, r: (q, a, [*r, {"question_id": 7, "answer": "x"}]),
    ),
    ("missing prediction", lambda q, a, r: (q, a, r[1:])),
    (
        "annotation on another image",
        lambda q, a, r: (q, _first(a, "annotations", lambda x: {**x, "image_id": 123456}), r),
    ),
    (
        "annotation outside the questions",
        lambda q, a, r: (_set(q, "questions", q["questions"][1:]), a, r),
    ),
    ("empty annotations", lambda q, a, r: (q, _set(a, "annotations", []), r)),
    ("no annotations key", lambda q, a, r: (q, {"info": {}}, r)),
    ("annotations not a list", lambda q, a, r: (q, _set(a, "annotations", {"a": 1}), r)),
    ("empty results", lambda q, a, r: (q, a, [])),
]


@pytest.mark.parametrize("allow_missing", [False, True])
@pytest.mark.parametrize("name,change", DEFERRED, ids=[n for n, _ in DEFERRED])
def test_unusual_files_defer_to_the_checked_readers(
    tmp_path: Path, name: str, change: Any, allow_missing: bool
) -> None:
    fast = allow_missing and name == "missing prediction"
    _check(tmp_path, *_mutated(change), allow_missing=allow_missing, fast_expected=fast)


def test_deferred_cases_include_refusals_and_acceptances(tmp_path: Path) -> None:
    """Both kinds are covered: some deferred files are scored, some refused."""
    outcomes = []
    for k, (_, change) in enumerate(DEFERRED):
        folder = tmp_path / str(k)
        folder.mkdir()
        outcomes.append(_check(folder, *_mutated(change), fast_expected=False))
    refused = [o for o in outcomes if isinstance(o, str)]
    assert 0 < len(refused) < len(outcomes)
    assert all("annotations.json" in o or "questions.json" in o or "results.json" in o
               for o in refused)  # fmt: skip


def _raw_annotations(text: bytes, tmp_path: Path, fast_expected: bool) -> Any:
    questions, _, results = _example()
    return _check(tmp_path, questions, text, results, fast_expected=fast_expected)


def test_duplicate_top_level_key_is_refused_as_before(tmp_path: Path) -> None:
    text = (EXAMPLE / "annotations.json").read_bytes()
    twice = text.replace(b'"data_type": "mscoco",', b'"data_type": "mscoco", "info": 1,', 1)
    got = _raw_annotations(twice, tmp_path, fast_expected=False)
    assert "duplicate key" in got and "'info'" in got


def test_invalid_utf8_in_a_skipped_field_is_refused_as_before(tmp_path: Path) -> None:
    text = (EXAMPLE / "annotations.json").read_bytes()
    bad = text.replace(b'"answer_confidence": "maybe"', b'"answer_confidence": "m\xffybe"', 1)
    assert b"\xff" in bad
    got = _raw_annotations(bad, tmp_path, fast_expected=False)
    assert "annotations.json" in got


def test_results_as_json_lines_are_read_line_by_line(tmp_path: Path) -> None:
    questions, annotations, results = _example()
    lines = b"".join(json.dumps(x).encode() + b"\n" for x in results)
    got = _check(tmp_path, questions, annotations, lines, results_name="results.jsonl",
                 fast_expected=False)  # fmt: skip
    assert got.predictions[0] == "white"


def test_records_value_shapes() -> None:
    assert records_value(b" [1]", None) == b" [1]"
    assert records_value(b'{"x": [1]}', None) is None
    assert records_value(b'{"x": [1]}', "y") is None
    assert bytes(records_value(b'{"a": {"x": 1, "x": 2}, "x": [1, 2]}', "x")) == b"[1, 2]"
    assert records_value(b'{"a": 1, "x": [1], "a": 2}', "x") is None
    assert records_value(b'"x"', "x") is None


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (b'{"info": {"a": "]"}, "annotations": [1, 2], "t": "x"}', b"[1, 2]"),
        (b'{"annotations":[1]}', b"[1]"),
        (b'{"x": "\\"annotations\\": [", "annotations": [3]}', b"[3]"),
        # a nested "annotations" first, the top-level one not a list: the full decode
        (b'{"a": {"annotations": [1]}, "annotations": 0}', b"0"),
        # a list after it: the guess runs to its end and is not one value (decode fails)
        (b'{"annotations": [1], "b": [2]}', b'[1], "b": [2]'),
        (b'{"annotations": [1], "b": 2}', b"[1]"),
        # "]" glued to what follows ("0.5" would read as a number), or left open: refused
        (b'{"annotations": [1].5}', None),
        (b'{"annotations": [1]', None),
    ],
)
def test_records_value_finds_the_list_without_parsing_it(text: bytes, value: bytes | None) -> None:
    """The located list is the value under the top-level key, or the guess is refused
    and the full top-level decode (or the caller's decode of the list) has the last word."""
    got = records_value(text, "annotations")
    assert (None if got is None else bytes(got)) == value


def test_a_list_after_the_records_is_decoded_the_long_way(tmp_path: Path) -> None:
    """The guess runs to the last list's end and fails to decode; the whole top level is
    then decoded, still on the fast path. A key written twice still defers."""
    questions, annotations, results = _example()
    annotations["extra"] = [1, 2]
    _check(tmp_path, questions, annotations, results, fast_expected=True)
    text = json.dumps(annotations)[:-1] + ', "extra": [3]}'
    _check(tmp_path, questions, text.encode(), results, fast_expected=False)
    annotations = {"a": {"annotations": []}, **annotations}
    del annotations["extra"]
    _check(tmp_path, questions, annotations, results, fast_expected=True)


def test_is_utf8() -> None:
    assert is_utf8(b"plain")
    assert is_utf8("café 😀".encode())
    assert not is_utf8(b"caf\xe9")
    assert not is_utf8("😀".encode()[:3])


def test_ids_beyond_64_bits_are_refused_by_both_paths(tmp_path: Path) -> None:
    """orjson reads such ids as doubles (10**20 and 10**20 + 1 alike); the columnar path
    leaves them to the checked readers, which refuse them with one line rather than
    merge two questions (docs/reliability.md, "Hostile and malformed inputs")."""
    big = int("1" * 30)
    questions, annotations, results = _example()
    questions["questions"][0]["question_id"] = big
    annotations["annotations"][0]["question_id"] = big
    results[0]["question_id"] = big
    got = _check(tmp_path, questions, annotations, results, fast_expected=False)
    assert "item 0: question id 1.111111111111111e+29 is too large to be read exactly" in got


def test_deep_nesting_in_a_skipped_field_defers(tmp_path: Path) -> None:
    questions, annotations, results = _example()
    annotations["annotations"][0]["extra"] = "NESTED"
    deep = "[" * 1000 + "0" + "]" * 1000
    text = json.dumps(annotations).replace('"NESTED"', deep).encode()
    got = _check(tmp_path, questions, text, results, fast_expected=False)
    assert len(got.question_ids) == 12
