"""The typed fast paths of ``score ood``, ``relevance`` and the result-list reader
(vqadiag.data.formats.gqa_typed, vqadiag.data.formats.result_lists).

Each is an optimisation only: on every file below the command gives exactly what it
gives with the fast path switched off (the same figures, the same R.json bytes, or the
same one-line refusal), and unusual files are handed to the checked readers.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vqadiag.data.formats import gqa, gqa_typed, relevance_files
from vqadiag.data.formats import predictions as predictions_module
from vqadiag.data.formats.gqa_typed import ood_questions, relevance_questions, scene_boxes
from vqadiag.data.formats.predictions import read_predictions
from vqadiag.data.formats.result_lists import read_result_list
from vqadiag.errors import DataError
from vqadiag.protocols.fpvg import score as fpvg_scoring
from vqadiag.protocols.gqa import inputs as gqa_inputs
from vqadiag.protocols.gqa import score as gqa_scoring
from vqadiag.protocols.ood import score as ood_scoring


def _questions(n: int = 90, seed: int = 3) -> dict[str, dict[str, Any]]:
    """GQA-shaped questions: skewed answers in a few local groups (some null), some
    unbalanced, every optional field present, annotations naming scene objects."""
    rng = random.Random(seed)
    out = {}
    for k in range(n):
        group = rng.choice(["g1", "g2", "g3", None])
        answer = rng.choices(["red", "blue", "cat", "yes"], weights=[8, 3, 1, 1])[0]
        out[f"{k:05d}"] = {
            "question": f"what is {k}?", "answer": answer, "fullAnswer": f"It is {answer}.",
            "imageId": f"img{k % 3}", "isBalanced": k % 5 != 0,
            "groups": {"global": "color", "local": group},
            "types": {"structural": "query", "semantic": "attr", "detailed": "color"},
            "annotations": {"question": {"2": f"o{k % 2}"}, "answer": {},
                            "fullAnswer": {"0": f"o{(k + 1) % 2}"}},
            "semantic": [{"operation": "select", "argument": "x", "dependencies": []}],
            "entailed": [f"{(k + 1) % n:05d}"], "equivalent": [f"{k:05d}"],
        }  # fmt: skip
    return out


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except DataError as err:
        return f"DataError: {err}"


def _fast_and_checked(monkeypatch: pytest.MonkeyPatch, call: Callable[[], Any]) -> tuple:
    fast = _outcome(call)
    with monkeypatch.context() as patch:
        patch.setattr(ood_scoring, "ood_questions", lambda path: None)
        patch.setattr(gqa_typed, "relevance_questions", lambda path: None)
        patch.setattr(gqa_typed, "scene_boxes", lambda path: None)
        patch.setattr(predictions_module, "read_result_list", lambda path: None)
        patch.setattr(gqa_inputs, "read_typed_questions", lambda path, kind: None)
        patch.setattr(gqa_typed, "answer_questions", lambda path: None)
        patch.setattr(relevance_files, "_typed_relevance", lambda path: None)
        checked = _outcome(call)
    return fast, checked


def _write(path: Path, content: Any) -> Path:
    path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    return path


def _predictions(questions: dict[str, Any]) -> list[dict[str, str]]:
    rng = random.Random(5)
    return [{"questionId": q, "prediction": r["answer"] if rng.random() < 0.7 else "blue"}
            for q, r in questions.items()]  # fmt: skip


# ---------------------------------------------------------------- score ood


def test_ood_takes_the_fast_path_and_agrees(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    questions = _questions()
    q = _write(tmp_path / "q.json", questions)
    p = _write(tmp_path / "p.json", _predictions(questions))
    typed = ood_questions(q)
    assert typed is not None
    first = typed["00000"]
    assert (first.answer, first.isBalanced, first.groups.local) == (
        questions["00000"]["answer"], False, questions["00000"]["groups"]["local"],
    )  # fmt: skip
    fast, checked = _fast_and_checked(
        monkeypatch, lambda: ood_scoring.score_ood(q, p, alpha=0.5, curve=True)
    )
    assert isinstance(fast, dict) and fast["n_all"] > 0 and fast["n_tail"] > 0
    assert fast == checked


OOD_TAKEN = {
    "lists empty": lambda r: r.update(semantic=[], entailed=[], equivalent=[]),
    "lists of mixed items": lambda r: r.update(
        semantic=[1, "x", None, [2, {"a": []}]], entailed=[{"b": 1}], equivalent=[True, 2.5]
    ),
    "lists null": lambda r: r.update(semantic=None, entailed=None, equivalent=None),
    "lists missing": lambda r: [r.pop(k) for k in ("semantic", "entailed", "equivalent")],
}


@pytest.mark.parametrize("change", OOD_TAKEN.values(), ids=OOD_TAKEN.keys())
def test_lists_of_any_items_take_the_ood_fast_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: Callable[[dict], Any]
) -> None:
    """The checked reader asks only that ``semantic`` / ``entailed`` / ``equivalent`` be
    lists (or null): so does the typed record, without building their items."""
    questions = _questions()
    change(questions["00001"])
    q = _write(tmp_path / "q.json", questions)
    p = _write(tmp_path / "p.json", _predictions(questions))
    assert ood_questions(q) is not None
    fast, checked = _fast_and_checked(monkeypatch, lambda: ood_scoring.score_ood(q, p))
    assert isinstance(fast, dict) and fast == checked


def _set_first(field: str, value: Any, qid: str | None = None) -> Callable[[dict], dict]:
    """Set (or with KeyError, delete) ``field`` of the first question, or of ``qid``."""

    def change(questions: dict) -> dict:
        first = questions[qid or next(iter(questions))]
        if value is KeyError:
            del first[field]
        else:
            first[field] = value
        return questions

    return change


OOD_DEFERRED = {
    "answer missing": _set_first("answer", KeyError),
    "answer a number": _set_first("answer", 3),
    "groups missing": _set_first("groups", KeyError),
    "groups null": _set_first("groups", None),
    "local missing": _set_first("groups", {"global": "x"}),
    "local a number": _set_first("groups", {"local": 3}),
    "semantic a string": _set_first("semantic", "select"),
    "entailed an object": _set_first("entailed", {"a": 1}),
    "equivalent a number": _set_first("equivalent", 3),
    "semantic false": _set_first("semantic", False),
    "isBalanced a number": _set_first("isBalanced", 1),
    "types a list": _set_first("types", []),
    "annotations a string": _set_first("annotations", "x"),
    "empty file object": lambda questions: {},
    "a list of questions": lambda questions: list(questions.values()),
}


@pytest.mark.parametrize("change", OOD_DEFERRED.values(), ids=OOD_DEFERRED.keys())
def test_unusual_question_files_defer_for_ood(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: Callable[[dict], Any]
) -> None:
    questions = _questions()
    q = _write(tmp_path / "q.json", change(copy.deepcopy(questions)))
    p = _write(tmp_path / "p.json", _predictions(questions))
    assert ood_questions(q) is None
    fast, checked = _fast_and_checked(monkeypatch, lambda: ood_scoring.score_ood(q, p))
    assert fast == checked


@pytest.mark.parametrize(
    "edit",
    [
        (b'"00001": {', b'"00000": {"answer": "x", "groups": {"local": "g1"}}, "00001": {'),
        (b'"It is ', b'"It \xff is '),
        (b'"groups"', b'"groups": {"local": "g1"}, "groups"'),
    ],
    ids=["question id twice", "invalid UTF-8 in a skipped field", "field twice in a record"],
)
def test_raw_bytes_cases_agree_for_ood(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, edit: tuple[bytes, bytes]
) -> None:
    questions = _questions()
    text = json.dumps(questions).encode().replace(*edit, 1)
    q = _write(tmp_path / "q.json", text)
    p = _write(tmp_path / "p.json", _predictions(questions))
    fast, checked = _fast_and_checked(monkeypatch, lambda: ood_scoring.score_ood(q, p))
    assert fast == checked
    if edit[0] != b'"groups"':  # a field written twice: both readers keep the last
        assert ood_questions(q) is None
        assert str(checked).startswith("DataError") and "q.json" in checked


def test_writing_the_split_reads_whole_records(tmp_path: Path) -> None:
    q = _write(tmp_path / "q.json", _questions())
    result = ood_scoring.score_ood(q, write_split=tmp_path / "split")
    written = json.loads((tmp_path / "split" / "ood_all.json").read_text())
    assert result["split_files"] and all("fullAnswer" in r for r in written.values())


# ---------------------------------------------------------------- score gqa


def _choices(questions: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    return {q: {"valid": [r["answer"], "blue"], "plausible": [r["answer"]]}
            for q, r in questions.items()}  # fmt: skip


def _score_gqa(q: Path, c: Path | None, p: Path, **options: Any) -> Any:
    return gqa_scoring.score_gqa(q, p, choices=c, **options)


@pytest.mark.parametrize("with_choices", [True, False])
def test_score_gqa_takes_the_fast_path_and_agrees(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, with_choices: bool
) -> None:
    questions = _questions()
    q = _write(tmp_path / "q.json", questions)
    c = _write(tmp_path / "c.json", _choices(questions)) if with_choices else None
    p = _write(tmp_path / "p.json", _predictions(questions))
    assert gqa_inputs._typed_inputs(q, c, all_questions=False) is not None
    for options in ({}, {"all_questions": True}):
        fast, checked = _fast_and_checked(
            monkeypatch, lambda options=options: _score_gqa(q, c, p, **options)
        )
        assert isinstance(fast, dict) and fast["n"] > 0
        assert fast == checked


def _unbalanced_first(change: Callable[[dict], dict]) -> Callable[[dict], dict]:
    def both(questions: dict) -> dict:
        return change(_set_first("isBalanced", False)(questions))

    return both


GQA_DEFERRED = {
    "types missing on an unscored question": _unbalanced_first(_set_first("types", KeyError)),
    "types missing on a scored question": _set_first("types", KeyError, "00001"),
    "detailed type missing": _set_first(
        "types", {"structural": "query", "semantic": "attr"}, "00001"
    ),
    "global group missing": _set_first("groups", {"local": "l"}, "00001"),
    "a step argument that is a number": _set_first(
        "semantic", [{"operation": "select", "argument": 3}], "00001"
    ),
    "a step without an argument": _set_first("semantic", [{"operation": "select"}], "00001"),
    "question a number": _set_first("question", 5, "00001"),
    "answer null": _set_first("answer", None, "00001"),
    "an entailed id that is a number": _set_first("entailed", [3], "00001"),
    "equivalent true": _set_first("equivalent", True, "00001"),
}


@pytest.mark.parametrize("change", GQA_DEFERRED.values(), ids=GQA_DEFERRED.keys())
def test_unusual_question_files_defer_for_score_gqa(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: Callable[[dict], Any]
) -> None:
    questions = _questions()
    q = _write(tmp_path / "q.json", change(copy.deepcopy(questions)))
    c = _write(tmp_path / "c.json", _choices(questions))
    p = _write(tmp_path / "p.json", _predictions(questions))
    assert gqa_inputs._typed_inputs(q, c, all_questions=False) is None
    fast, checked = _fast_and_checked(monkeypatch, lambda: _score_gqa(q, c, p))
    assert fast == checked


CHOICES_DEFERRED = {
    "valid not a list": lambda c: {**c, "00001": {"valid": "red", "plausible": []}},
    "a number among the valid answers": lambda c: {**c, "00001": {"valid": [1], "plausible": []}},
    "no choices for a scored question": lambda c: {k: v for k, v in c.items() if k != "00001"},
    "plausible missing": lambda c: {**c, "00001": {"valid": ["red"]}},
}


@pytest.mark.parametrize("change", CHOICES_DEFERRED.values(), ids=CHOICES_DEFERRED.keys())
def test_unusual_choices_defer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: Callable[[dict], Any]
) -> None:
    questions = _questions()
    q = _write(tmp_path / "q.json", questions)
    c = _write(tmp_path / "c.json", change(_choices(questions)))
    p = _write(tmp_path / "p.json", _predictions(questions))
    assert gqa_inputs._typed_inputs(q, c, all_questions=False) is None
    fast, checked = _fast_and_checked(monkeypatch, lambda: _score_gqa(q, c, p))
    assert fast == checked


def test_choices_with_a_question_twice_are_refused_as_before(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    questions = _questions()
    q = _write(tmp_path / "q.json", questions)
    text = json.dumps(_choices(questions)).encode()
    c = _write(tmp_path / "c.json", text.replace(b'"00001": ', b'"00002": {"valid": [], '
                                                 b'"plausible": []}, "00001": ', 1))  # fmt: skip
    p = _write(tmp_path / "p.json", _predictions(questions))
    assert gqa_inputs._typed_inputs(q, c, all_questions=False) is None
    fast, checked = _fast_and_checked(monkeypatch, lambda: _score_gqa(q, c, p))
    assert fast == checked and "duplicate key" in fast and "c.json" in fast


# ---------------------------------------------------------------- relevance


def _scenes() -> dict[str, Any]:
    def obj(x: float, y: float, w: float, h: float) -> dict[str, Any]:
        return {"name": "thing", "x": x, "y": y, "w": w, "h": h, "attributes": ["red"],
                "relations": [{"name": "near", "object": "o1"}]}  # fmt: skip

    return {f"img{i}": {"width": 640, "height": 480,
                        "objects": {"o0": obj(10, 10, 40, 40), "o1": obj(200.5, 200, 50, 80)}}
            for i in range(3)}  # fmt: skip


def _relevance_world(tmp_path: Path, questions: Any, scenes: Any = None) -> tuple[Path, Path, Path]:
    boxes = [[11, 11, 49, 49], [0, 0, 0, 0], [205, 190, 250, 280], [400, 300, 500, 400]]
    return (
        _write(tmp_path / "q.json", questions),
        _write(tmp_path / "sg.json", _scenes() if scenes is None else scenes),
        _write(tmp_path / "boxes.json", {f"img{i}": boxes for i in range(3)}),
    )


def _relevance(paths: tuple[Path, Path, Path], out: Path) -> Any:
    summary = relevance_files.relevance(*paths, out)
    return summary | {"R.json": out.read_bytes()}


def test_relevance_takes_the_fast_path_and_agrees(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    paths = _relevance_world(tmp_path, _questions())
    assert relevance_questions(paths[0]) is not None
    fast, checked = _fast_and_checked(monkeypatch, lambda: _relevance(paths, tmp_path / "R.json"))
    assert isinstance(fast, dict) and fast["n_kept"] > 0
    assert fast == checked


def test_relevance_reads_the_scene_boxes_typed_and_agrees(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    paths = _relevance_world(tmp_path, _questions())
    typed = scene_boxes(paths[1])
    assert typed is not None and typed["img1"].objects["o1"]["x"] == 200.5
    assert typed["img0"].get("objects") is typed["img0"].objects
    with monkeypatch.context() as patch:  # the fast run never reads the scenes as dicts
        patch.setattr(gqa, "read_scene_graphs", lambda path: pytest.fail("checked reader"))
        fast = _outcome(lambda: _relevance(paths, tmp_path / "R.json"))
    _, checked = _fast_and_checked(monkeypatch, lambda: _relevance(paths, tmp_path / "R.json"))
    assert isinstance(fast, dict) and fast["n_kept"] > 0
    assert fast == checked


def _set_box(field: str, value: Any) -> Callable[[dict], Any]:
    def change(scenes: dict) -> Any:
        if value is KeyError:
            del scenes["img1"]["objects"]["o0"][field]
        else:
            scenes["img1"]["objects"]["o0"][field] = value
        return scenes

    return change


SCENES_DEFERRED = {
    "w zero": _set_box("w", 0),
    "h negative": _set_box("h", -3),
    "x beyond the double range": lambda s: json.dumps(s).replace("200.5", "1e999").encode(),
    "x a boolean": _set_box("x", True),
    "y a string": _set_box("y", "10"),
    "name missing": _set_box("name", KeyError),
    "name a number": _set_box("name", 7),
    "objects a list": lambda s: s | {"img2": {"objects": []}},
    "no objects": lambda s: s | {"img2": {"width": 4}},
    "an image twice": lambda s: json.dumps(s)[:-1].encode() + b', "img0": {"objects": {}}}',
    "an annotated object missing": lambda s: s | {"img2": {"objects": {}}},
}


@pytest.mark.parametrize("change", SCENES_DEFERRED.values(), ids=SCENES_DEFERRED.keys())
def test_unusual_scene_graphs_defer_for_relevance(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: Callable[[dict], Any]
) -> None:
    paths = _relevance_world(tmp_path, _questions(), change(_scenes()))
    if change is not SCENES_DEFERRED["an annotated object missing"]:  # refused by relevance
        assert scene_boxes(paths[1]) is None
    fast, checked = _fast_and_checked(monkeypatch, lambda: _relevance(paths, tmp_path / "R.json"))
    assert fast == checked
    if isinstance(checked, str):  # refused: the message names the file and the record
        assert "sg.json" in checked and ("img" in checked or "malformed JSON at line" in checked)


RELEVANCE_DEFERRED = {
    "imageId a number": _set_first("imageId", 7),
    "imageId missing": _set_first("imageId", KeyError),
    "annotations a list": _set_first("annotations", []),
    "a span naming a boolean": _set_first("annotations", {"question": {"0": True}}),
    "a span list": _set_first("annotations", {"question": ["o0"]}),
    "semantic a string": _set_first("semantic", "select"),
}


@pytest.mark.parametrize("change", RELEVANCE_DEFERRED.values(), ids=RELEVANCE_DEFERRED.keys())
def test_unusual_question_files_defer_for_relevance(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: Callable[[dict], Any]
) -> None:
    paths = _relevance_world(tmp_path, change(_questions()))
    assert relevance_questions(paths[0]) is None
    fast, checked = _fast_and_checked(monkeypatch, lambda: _relevance(paths, tmp_path / "R.json"))
    assert fast == checked


# ---------------------------------------------------------------- score fpvg, R.json


def _fpvg_inputs(tmp_path: Path, questions: dict[str, Any]) -> tuple[Path, ...]:
    paths = _relevance_world(tmp_path, questions)
    relevance = tmp_path / "R.json"
    relevance_files.relevance(*paths, relevance)
    runs = []
    for name, seed in (("all", 1), ("rel", 2), ("irrel", 3)):
        rng = random.Random(seed)
        answers = [{"questionId": q, "prediction": r["answer"] if rng.random() < 0.6 else "x"}
                   for q, r in questions.items()]  # fmt: skip
        runs.append(_write(tmp_path / f"{name}.json", answers))
    return paths[0], relevance, *runs


def test_score_fpvg_takes_the_fast_path_and_agrees(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    q, relevance, *runs = _fpvg_inputs(tmp_path, _questions())
    assert relevance_files._typed_relevance(relevance) is not None
    fast, checked = _fast_and_checked(
        monkeypatch, lambda: fpvg_scoring.score_fpvg(q, relevance, *runs, n_bootstrap=50)
    )
    assert isinstance(fast, dict) and fast["n"] > 0
    assert fast == checked


def _first_record(change: Callable[[dict], Any]) -> Callable[[dict], dict]:
    def edit(records: dict) -> dict:
        change(records[next(iter(records))])
        return records

    return edit


R_DEFERRED = {
    "a negative index": _first_record(lambda r: r.update(relevant=[-1])),
    "a boolean index": _first_record(lambda r: r.update(relevant=[True])),
    "a float index": _first_record(lambda r: r.update(irrelevant=[1.0])),
    "an unknown reason": _first_record(lambda r: r.update(excluded="tired")),
    "a box both relevant and irrelevant": _first_record(
        lambda r: r.update(relevant=[0], irrelevant=[0, 1])
    ),
    "irrelevant missing": _first_record(lambda r: r.pop("irrelevant")),
    "a record that is a list": lambda records: {**records, next(iter(records)): [0]},
    "a list of records": lambda records: list(records.values()),
    "no records": lambda records: {},
}


@pytest.mark.parametrize("change", R_DEFERRED.values(), ids=R_DEFERRED.keys())
def test_unusual_relevance_files_defer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: Callable[[dict], Any]
) -> None:
    q, relevance, *runs = _fpvg_inputs(tmp_path, _questions())
    _write(relevance, change(json.loads(relevance.read_text())))
    assert relevance_files._typed_relevance(relevance) is None
    fast, checked = _fast_and_checked(
        monkeypatch, lambda: relevance_files.read_relevance(relevance)
    )
    assert fast == checked
    fast, checked = _fast_and_checked(
        monkeypatch, lambda: fpvg_scoring.score_fpvg(q, relevance, *runs, n_bootstrap=50)
    )
    assert fast == checked


def test_relevance_with_a_question_twice_is_refused_as_before(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _, relevance, *_ = _fpvg_inputs(tmp_path, _questions())
    text = relevance.read_bytes()
    assert b'"00001":' in text
    text = text.replace(b'"00001":', b'"00002": {"relevant": [0], "irrelevant": [1]}, "00001":', 1)
    _write(relevance, text)
    fast, checked = _fast_and_checked(
        monkeypatch, lambda: relevance_files.read_relevance(relevance)
    )
    assert fast == checked and "duplicate key" in fast and "R.json" in fast


# ---------------------------------------------------------------- result lists


def _read(path: Path) -> Any:
    return {q: p.answer for q, p in read_predictions(path).items()}


@pytest.mark.parametrize(
    "records",
    [
        [{"questionId": "01", "prediction": "yes"}, {"questionId": "x 2", "prediction": "no"}],
        [{"question_id": 1, "answer": "yes"}, {"question_id": -2, "answer": ""}],
    ],
    ids=["GQA", "VQA"],
)
def test_result_lists_take_the_fast_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, records: list
) -> None:
    path = _write(tmp_path / "p.json", records)
    assert read_result_list(path) is not None
    fast, checked = _fast_and_checked(monkeypatch, lambda: _read(path))
    assert fast == checked and len(fast) == 2


RESULT_DEFERRED = {
    "an extra field": [{"questionId": "1", "prediction": "a", "probs": {"a": 1.0}}],
    "an id with spaces": [{"questionId": " 1", "prediction": "a"}],
    "an empty id": [{"questionId": "", "prediction": "a"}],
    "an id twice": [{"questionId": "1", "prediction": "a"}, {"questionId": "1", "prediction": "b"}],
    "an integer GQA id": [{"questionId": 1, "prediction": "a"}],
    "a string VQA id": [{"question_id": "1", "answer": "a"}],
    "a boolean answer": [{"question_id": 1, "answer": True}],
    "a null answer": [{"question_id": 1, "answer": None}],
    "mixed shapes": [{"question_id": 1, "answer": "a"}, {"questionId": "2", "prediction": "b"}],
    "an empty list": [],
}


@pytest.mark.parametrize("records", RESULT_DEFERRED.values(), ids=RESULT_DEFERRED.keys())
def test_unusual_result_lists_defer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, records: list
) -> None:
    path = _write(tmp_path / "p.json", records)
    assert read_result_list(path) is None
    fast, checked = _fast_and_checked(monkeypatch, lambda: _read(path))
    assert fast == checked


# ---------------------------------------------------------------- found in review


def test_invalid_utf8_in_a_result_list_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = _write(tmp_path / "p.json", b'[{"question_id": 1, "answer": "caf\xe9"}]')
    fast, checked = _fast_and_checked(monkeypatch, lambda: _read(path))
    assert fast == checked and fast.startswith("DataError") and "p.json" in fast


NESTED = "NESTED-PLACEHOLDER"


def _with_nesting(content: Any, depth: int) -> bytes:
    """``content`` as JSON with the string NESTED replaced by ``depth`` nested lists (too
    deep for ``json.dumps``)."""
    deep = "[" * depth + "0" + "]" * depth
    return json.dumps(content).replace(json.dumps(NESTED), deep).encode()


@pytest.mark.parametrize("depth", [1000, 1100], ids=["accepted by orjson", "too deep"])
def test_deep_nesting_in_a_skipped_field_defers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, depth: int
) -> None:
    questions = _questions()
    p = _write(tmp_path / "p.json", _predictions(questions))
    c = _write(tmp_path / "c.json", _choices(questions))
    questions["00001"]["semantic"][0]["dependencies"] = NESTED
    q = _write(tmp_path / "q.json", _with_nesting(questions, depth))
    for call in (lambda: ood_scoring.score_ood(q, p), lambda: _score_gqa(q, c, p)):
        fast, checked = _fast_and_checked(monkeypatch, call)
        assert fast == checked
        assert isinstance(fast, dict) == (depth == 1000)


@pytest.mark.parametrize("digits", [30, 400])
def test_ids_beyond_64_bits_are_read_as_orjson_reads_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, digits: int
) -> None:
    big = int("1" * digits)
    path = _write(tmp_path / "p.json", [{"question_id": big, "answer": "yes"}])
    assert read_result_list(path) is None
    fast, checked = _fast_and_checked(monkeypatch, lambda: _read(path))
    assert fast == checked
    questions = _questions()
    questions["00001"]["annotations"] = {"question": {"2": big}}
    paths = _relevance_world(tmp_path, questions)
    assert relevance_questions(paths[0]) is None
    fast, checked = _fast_and_checked(monkeypatch, lambda: _relevance(paths, tmp_path / "R.json"))
    assert fast == checked


def test_a_small_read_does_not_freeze_the_collector(tmp_path: Path) -> None:
    import gc

    path = _write(tmp_path / "p.json", [{"question_id": 1, "answer": "yes"}])
    frozen = gc.get_freeze_count()
    assert read_result_list(path) == {"1": "yes"}
    # a freeze would move every live object (hundreds of thousands here) into the
    # permanent generation; frozen objects freed meanwhile (by an earlier test's
    # leftovers) can only lower the count
    assert gc.get_freeze_count() <= frozen
