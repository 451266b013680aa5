"""Question records kept as their file's bytes (vqadiag.data.formats.question_store): the
same records as the checked reader, in the same order, or the checked reader's refusal."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path

import pytest

from vqadiag.data.formats.gqa import read_gqa_questions
from vqadiag.data.formats.question_store import QuestionStore, StoredRecord, read_question_store
from vqadiag.data.io.jsonio import json_bytes, stable_hash
from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError

RECORDS = {
    "q2": {
        "question": "Is the cat white?",
        "answer": "yes",
        "imageId": "img1",
        "isBalanced": True,
        "types": {"structural": "verify", "semantic": "attr", "detailed": "verifyAttr"},
        "groups": {"global": None, "local": "10v-white"},
        "annotations": {"question": {"3": "o1"}, "answer": {}, "fullAnswer": {"1": "o1"}},
        "semantic": [{"operation": "select", "dependencies": [], "argument": "cat (o1)"}],
        "entailed": ["q1"],
        "equivalent": ["q2"],
        "score": 0.25,
        "note": 'caf\u00e9 \u2013 "quoted"',
    },
    "q1": {"question": "What is it?", "answer": "cat", "imageId": 7},
    "q10": {
        "question": "Any dog?",
        "answer": "no",
        "imageId": "img2",
        "big": 12345678901234567890123,
    },
}


def _write(path: Path, text: bytes | str) -> Path:
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


@pytest.fixture
def qfile(tmp_path: Path) -> Path:
    # indented, so records do not sit back to back: spans must be exact
    return _write(tmp_path / "val_balanced_questions.json", json.dumps(RECORDS, indent=2))


def test_store_gives_the_checked_readers_records_in_file_order(qfile: Path) -> None:
    store = read_question_store(qfile)
    parsed = read_gqa_questions(qfile)
    assert isinstance(store, QuestionStore)
    assert list(store) == list(parsed) == ["q2", "q1", "q10"]
    assert len(store) == 3 and "q1" in store and "q3" not in store
    for qid, record in parsed.items():
        stored = store[qid]
        assert isinstance(stored, StoredRecord)
        assert stored.to_dict() == record and stored == record and record == stored
        assert dict(stored.items()) == record and list(stored) == list(record)
        assert stored.get("imageId") == record["imageId"] and stored.get("nope", 5) == 5
    # an integer beyond 64 bits reads as the checked reader reads it
    assert store["q10"]["big"] == parsed["q10"]["big"]
    assert store.nbytes == qfile.stat().st_size


def test_stored_record_is_written_hashed_pickled_and_copied_as_its_dict(qfile: Path) -> None:
    store = read_question_store(qfile)
    stored, record = store["q2"], read_gqa_questions(qfile)["q2"]
    assert json_bytes({"q2": stored}) == json_bytes({"q2": record})
    assert stable_hash([stored, "x"]) == stable_hash([record, "x"])
    for copied in (pickle.loads(pickle.dumps(stored)), copy.deepcopy(stored)):
        assert type(copied) is dict and copied == record


def test_stored_record_cannot_be_changed(qfile: Path) -> None:
    stored = read_question_store(qfile)["q2"]
    with pytest.raises(TypeError):
        stored["answer"] = "no"  # type: ignore[index]
    stored["types"]["structural"] = "changed"  # a copy: the stored record stays
    assert stored["types"]["structural"] == "verify"
    with pytest.raises(TypeError):
        hash(stored)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b"", "empty"),
        (b"   \n", "empty"),
        (b'{"q1": {"question": "a", "answer": "b", "imageId": "i"}', "malformed JSON"),
        (b'[{"question": "a"}]', "expected a JSON object"),
        (b"{}", "no question ids in file"),
        (b'{"q1": {"answer": "b", "imageId": "i"}}', "missing field 'question'"),
        (b'{"q1": {"question": "a", "answer": 3, "imageId": "i"}}', "'answer' must be a string"),
        (b'{"q1": {"question": "a", "answer": "b", "imageId": "i", "semantic": {}}}', "'semantic'"),
        (b'{"q1": {"question": "a", "answer": "b", "imageId": "i", "score": NaN}}', "NaN"),
        (
            b'{"q1": {"question": "a", "answer": "b", "imageId": "i"},'
            b' "q1": {"question": "c", "answer": "d", "imageId": "j"}}',
            "duplicate key",
        ),
        (b'{"q1": {"question": "caf\xe9", "answer": "b", "imageId": "i"}}', "UTF-8"),
        (b'{"q1": 5}', "expected an object"),
    ],
)
def test_refusals_are_the_checked_readers(tmp_path: Path, text: bytes, problem: str) -> None:
    path = _write(tmp_path / "q.json", text)
    with pytest.raises(DataError) as checked:
        read_gqa_questions(path)
    with pytest.raises(DataError) as fast:
        read_question_store(path)
    assert str(fast.value) == str(checked.value)
    assert str(path) in str(fast.value) and problem in str(fast.value)


def test_missing_file_is_one_line_naming_it(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="q.json"):
        read_question_store(tmp_path / "q.json")


def test_gqa_data_keeps_compact_records_on_request(tmp_path: Path) -> None:
    (tmp_path / "gqa").mkdir()
    path = tmp_path / "gqa" / "val_balanced_questions.json"
    path.write_text(json.dumps(RECORDS))
    compact = GQAData(tmp_path, compact_questions=True)
    assert isinstance(compact.questions("val"), QuestionStore)
    assert type(GQAData(tmp_path).questions("val")) is dict
    batch = compact.batch("val", ["q1", "q2"])
    assert batch.questions == ["What is it?", "Is the cat white?"]
    assert batch.image_ids == ["7", "img1"]
    assert batch.record(1) == RECORDS["q2"]


def test_a_diagnosis_holds_compact_records_and_answers_as_with_dicts(tmp_path, monkeypatch):
    """The whole diagnosis (every suite, UpDn: FPVG, importance and gain included) on
    compact records writes the same rows and scores as on the parsed dicts, and never
    parses the diagnosed question file whole."""
    pytest.importorskip("torch")
    from vqadiag.data.formats import question_store
    from vqadiag.data.model_inputs import gqa_data
    from vqadiag.diagnosis.diagnose import diagnose
    from vqadiag.models.registry import model_class
    from vqadiag.synth import generate_world

    world = tmp_path / "world"
    generate_world(world, images=40, seed=3)
    model_class("updn").train(GQAData(world), progress=False, epochs=1).save(tmp_path / "updn")
    options = {"n_bootstrap": 20, "bq_ranker": "bleu1"}

    checked_reader = gqa_data.read_gqa_questions
    stores = []

    def refuse_val(path, *args):
        raise AssertionError(f"the diagnosis parsed {Path(path).name} whole")

    def kept(path, *args):
        stores.append(question_store.read_question_store(path, *args))
        return stores[-1]

    monkeypatch.setattr(gqa_data, "read_gqa_questions", refuse_val)
    monkeypatch.setattr(question_store, "read_gqa_questions", refuse_val)
    monkeypatch.setattr(gqa_data, "read_question_store", kept)
    diagnose(world, tmp_path / "updn", tmp_path / "compact", **options)
    assert stores and all(isinstance(s, QuestionStore) for s in stores)
    monkeypatch.setattr(gqa_data, "read_gqa_questions", checked_reader)
    monkeypatch.setattr(gqa_data, "read_question_store", checked_reader)
    diagnose(world, tmp_path / "updn", tmp_path / "dicts", **options)

    compact, dicts = tmp_path / "compact", tmp_path / "dicts"
    for name in ("per_question.jsonl", "inputs/gqa_questions.json"):
        assert (compact / name).read_bytes() == (dicts / name).read_bytes()
    results = [json.loads((r / "results.json").read_text()) for r in (compact, dicts)]
    assert results[0]["suites"] == results[1]["suites"]
    assert not results[0].get("skipped"), results[0].get("skipped")
    assert len(results[0]["suites"]) >= 8
