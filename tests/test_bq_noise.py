"""Noise partitions (docs/protocols.md §4) and the BQD reader/writer, with bad-input messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vqadiag.data.formats.bqd import read_bqd, sibling_annotations, write_bqd
from vqadiag.errors import DataError
from vqadiag.protocols.robustness.basic_questions.noise import (
    noise_partitions,
    noisy_question,
    partition_of_texts,
    partitions_of_texts,
    shared_texts,
)


def _record(qid="q1", n=6):
    return {
        "image_id": "img1",
        "question_id": qid,
        "question": "What color is the cat?",
        "basic": [{"question": f"Is it b{k}?", "score": 1.0 / (k + 1)} for k in range(n)],
    }


def test_partitions_take_consecutive_slices():
    parts = noise_partitions([_record()], partitions=2, size=3, max_words=None)
    assert parts[0]["q1"] == "What color is the cat? Is it b0? Is it b1? Is it b2?"
    assert parts[1]["q1"] == "What color is the cat? Is it b3? Is it b4? Is it b5?"


def test_short_records_use_what_their_slice_holds():
    parts = noise_partitions([_record(n=4)], partitions=3, size=3, max_words=None)
    assert parts[1]["q1"] == "What color is the cat? Is it b3?"
    assert parts[2]["q1"] == "What color is the cat?"


def test_one_partition_at_a_time_equals_all_partitions_at_once():
    """The diagnosis builds each noise partition when its run asks it (partition_of_texts
    over shared_texts): the same texts as partitions_of_texts, a repeated question id
    included (the later record wins), and shared basic texts kept once."""
    triples = [
        ("q1", "What color is the cat?", [f"Is it b{k}?" for k in range(7)]),
        ("q2", "Is the dog big?", [f"Is it b{k}?" for k in range(2, 30)]),
        ("q1", "What is on the table?", ["Is it b0?", "Is there a cup on the table now?"]),
    ]
    for max_words in (None, 10, 26):
        every = partitions_of_texts(iter(triples), partitions=7, max_words=max_words)
        shared = shared_texts(iter(triples))
        assert list(shared) == triples and len(shared) == 3
        for k in range(7):
            assert partition_of_texts(shared, k, max_words=max_words) == every[k]
    shared = shared_texts(iter(triples))
    assert shared.distinct_basic_texts == 31  # b0 … b29 and the cup (37 given), once each
    assert shared[-1] == triples[-1] and shared[1:] == triples[1:]
    assert shared.question_ids() == ["q1", "q2", "q1"]
    with pytest.raises(IndexError):
        shared[3]
    with pytest.raises(ValueError):
        partition_of_texts(shared, -1)


def test_word_limit_keeps_main_whole_and_cuts_basics_from_the_end():
    # main 5 words + 3 × 3 words = 14; limit 10 → main + 5 basic words
    text = noisy_question("What color is the cat?", ["Is it b0?", "Is it b1?", "Is it b2?"], 10)
    assert text == "What color is the cat? Is it b0? Is it"
    assert len(text.split()) == 10
    # a main over the limit stays whole, no basic words
    assert noisy_question("a b c d e f", ["x y"], 4) == "a b c d e f"
    # whitespace inside questions collapses to single spaces
    assert noisy_question("Is  it\tred?", [" Is it  blue? "], 0) == "Is it red? Is it blue?"


def test_bqd_round_trip_accepts_object_and_bare_list(tmp_path, write_json):
    path = tmp_path / "bqd.json"
    write_bqd(path, [_record()], {"ranker": "lasso", "top": 6})
    records = read_bqd(path)
    assert records[0]["basic"][1] == {"question": "Is it b1?", "score": 0.5}
    bare = write_json("bare.json", [{**_record(), "question_id": 17, "image_id": 3}])
    assert read_bqd(bare)[0]["question_id"] == "17"
    assert read_bqd(bare)[0]["image_id"] == "3"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.pop("question"), "bad.json: record 'q1': missing field 'question'"),
        (lambda r: r.pop("basic"), "bad.json: record 'q1': missing field 'basic'"),
        (
            lambda r: r["basic"][1].pop("score"),
            "bad.json: record 'q1': basic 1: missing field 'score'",
        ),
        (lambda r: r.pop("question_id"), "bad.json: item 0: missing field 'question_id'"),
        (
            lambda r: r["basic"][0].update(score="high"),
            "bad.json: record 'q1': basic 0: score must be a number, got 'high'",
        ),
    ],
)
def test_bqd_errors_name_file_and_record(write_json, mutate, message):
    record = _record()
    mutate(record)
    path = write_json("bad.json", {"meta": {}, "records": [record]})
    with pytest.raises(DataError) as err:
        read_bqd(path)
    assert str(err.value).endswith(message)


def test_bqd_nan_empty_and_duplicates(tmp_path, write_json):
    nan = tmp_path / "nan.json"
    nan.write_text(
        '{"records": [{"image_id": "1", "question_id": "q", "question": "a?", '
        '"basic": [{"question": "b?", "score": NaN}]}]}'
    )
    with pytest.raises(DataError, match="nan.json: malformed JSON .*NaN"):
        read_bqd(nan)
    empty = tmp_path / "empty.json"
    empty.write_text("")
    with pytest.raises(DataError, match="empty.json: file is empty"):
        read_bqd(empty)
    dup = write_json("dup.json", [_record(), _record()])
    with pytest.raises(DataError, match="dup.json: record 'q1': duplicate question id"):
        read_bqd(dup)


def test_sibling_annotations_official_names(tmp_path):
    q = tmp_path / "v2_OpenEnded_mscoco_val2014_questions.json"
    q.write_text("{}")
    assert sibling_annotations(q) is None
    a = tmp_path / "v2_mscoco_val2014_annotations.json"
    a.write_text("{}")
    assert sibling_annotations(q) == a


def test_vqabq_shapes_without_image_ids_and_with_the_main_question_ranked(
    run_cli, tmp_path, write_json
):
    """VQABQ's files: keyed by question id or a bare list, no image_id, and the main
    question itself among its basic questions (ranked first, score 1): dropped."""
    questions = {"questions": [
        {"question_id": 1, "image_id": 10, "question": "Is it red?"},
        {"question_id": 2, "image_id": 11, "question": "How many?"},
    ]}  # fmt: skip
    q = write_json("v2_OpenEnded_mscoco_val2014_questions.json", questions)
    keyed = {
        "1": {"question": "Is it red?", "basic": [
            {"question": "Is it red? ", "score": 1.0},
            {"question": "Is it blue?", "score": 0.4},
            {"question": "What color?", "score": 0.2}]},
        "2": {"question": "How many?", "basic": [
            {"question": "How many cats?", "score": 0.5},
            {"question": "Is it big?", "score": 0.1}]},
    }  # fmt: skip
    records = read_bqd(write_json("keyed.json", keyed))
    assert [r["image_id"] for r in records] == [None, None]
    assert [b["question"] for b in records[0]["basic"]] == ["Is it blue?", "What color?"]
    assert [r["dropped_identical"] for r in records] == [1, 0]
    bare = write_json("combined.json", [{"question_id": k, **v} for k, v in keyed.items()])
    assert read_bqd(bare) == records
    res = run_cli("bq", "noise", "--bqd", bare, "--questions", q, "--out", tmp_path / "noise",
                  "--partitions", "2", "--size", "1", "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    out = res.json()
    assert out["dropped_identical"] == 1
    first = json.loads((tmp_path / "noise" / "partition_1" / Path(q).name).read_text())
    assert [x["question"] for x in first["questions"]] == [
        "Is it red? Is it blue?",
        "How many? How many cats?",
    ]


def test_bqd_fast_path_equals_the_checked_reader(monkeypatch, write_json):
    """vqadiag's own shape is read through msgspec: the same records as the checked reader
    (integer ids, LASSO's keys, pool ids, the main question dropped); a key vqadiag never
    writes sends the file to the checked reader, which keeps it."""
    from vqadiag.data.formats import bqd

    record = {
        "image_id": 3, "question_id": 17, "question": "Is it red?",
        "basic": [
            {"question": "Is it red?", "score": 1, "pool_id": "p0"},
            {"question": "Is it blue?", "score": 0.5, "pool_id": "p1"},
            {"question": "What color?", "score": 0.25, "pool_id": 9},
        ],
        "exact": True, "ranked": 2, "rounds": 4,
    }  # fmt: skip
    path = write_json("bqd.json", {"meta": {"kind": "vqadiag.bqd"}, "records": [record]})
    fast = bqd._typed_bqd(path)
    assert fast is not None
    monkeypatch.setattr(bqd, "_typed_bqd", lambda path: None)
    checked = bqd.read_bqd(path)
    assert fast == checked
    assert fast[0]["dropped_identical"] == 1 and fast[0]["question_id"] == "17"
    monkeypatch.undo()
    other = write_json("other.json", [{**record, "note": "mine"}])
    assert bqd._typed_bqd(other) is None
    assert bqd.read_bqd(other)[0]["note"] == "mine"


def test_lean_question_file_equals_the_checked_one(write_json):
    """A GQA pool read without its raw records (the typed path) gives the same ids, texts,
    images and yes/no flags; a missing answer that --yes-no needs is still named."""
    from vqadiag.data.formats.bqd import read_question_file

    questions = {
        "a": {"question": "Is it red?", "answer": "Yes", "imageId": "1", "semantic": []},
        "b": {"question": "What color?", "answer": "red", "imageId": 2},
        "c": {"question": "Where?", "imageId": None},
        "d": {"question": "Which?"},
    }
    path = write_json("train_balanced_questions.json", questions)
    lean = read_question_file(path, keep_raw=False)
    full = read_question_file(path)
    assert lean.raw is None and full.raw is not None
    for field in ("ids", "texts", "image_ids", "yes_no"):
        assert getattr(lean, field) == getattr(full, field), field
    assert lean.image_ids == ["1", "2", "None", ""]
    with pytest.raises(DataError, match="record 'c': missing field 'answer'"):
        read_question_file(path, need_answers=True, keep_raw=False)


def test_bqd_texts_are_the_records_texts(tmp_path, write_json):
    """What the noise partitions read, through the typed path and the checked one, equals
    the checked records' texts; write_bqd streams a generator of records."""
    from vqadiag.data.formats.bqd import read_bqd_texts
    from vqadiag.protocols.robustness.basic_questions.noise import partitions_of_texts

    main = {**_record("q2"), "basic": [{"question": "What color is the cat?", "score": 1.0},
                                      *_record("q2")["basic"]]}  # fmt: skip
    path = tmp_path / "bqd.json"
    assert write_bqd(path, (r for r in (_record(), main)), {"ranker": "bleu1"}) == 2
    records = read_bqd(path)
    expected = [(r["question_id"], r["question"], [b["question"] for b in r["basic"]])
                for r in records]  # fmt: skip
    assert list(read_bqd_texts(path)) == expected
    assert expected[1][2][0] == "Is it b0?"  # the main question itself is dropped
    other = write_json("other.json", [{**_record(), "note": "a key vqadiag never writes"}])
    assert list(read_bqd_texts(other)) == [
        ("q1", "What color is the cat?", [f"Is it b{k}?" for k in range(6)])
    ]
    assert partitions_of_texts(read_bqd_texts(path), partitions=2, size=3) == noise_partitions(
        records, partitions=2, size=3
    )


def test_packed_triples_keep_non_string_ids_and_any_text():
    """Ids that are not strings (a checked reader's integers) stay as given; texts with
    non-ASCII characters, empty texts and newlines come back unchanged."""
    triples = [
        (7, "Qu'est-ce que c'est ? \u00e9\u4e2d", ["", "line\\nbreak", "caf\u00e9\n"]),
        (8, "", []),
        (9, "Is it red?", ["caf\u00e9\n", "\U0001f600 emoji"]),
    ]
    shared = shared_texts(iter(triples))
    assert list(shared) == triples and shared[0][0] == 7
    assert shared.distinct_basic_texts == 4


def test_noise_refuses_a_bqd_built_for_other_questions(run_cli, tmp_path, write_json):
    """The same ids with other main questions (another world's BQD): one line naming the
    BQD, the record and the questions file; the same words spaced otherwise are fine."""
    questions = {"questions": [
        {"question_id": 1, "image_id": 10, "question": "Is it red?"},
        {"question_id": 2, "image_id": 11, "question": "How many?"},
    ]}  # fmt: skip
    q = write_json("v2_OpenEnded_mscoco_val2014_questions.json", questions)
    basic = [{"question": "Is it blue?", "score": 0.4}]
    spaced = write_json("spaced.json", [
        {"question_id": 1, "question": " Is  it red?", "basic": basic},
        {"question_id": 2, "question": "How many?", "basic": basic},
    ])  # fmt: skip
    ok = run_cli("bq", "noise", "--bqd", spaced, "--questions", q, "--out", tmp_path / "ok")
    assert ok.exit_code == 0, ok.stderr
    other = write_json("other.json", [
        {"question_id": 1, "question": "Is it red?", "basic": basic},
        {"question_id": 2, "question": "What is the dog doing?", "basic": basic},
    ])  # fmt: skip
    res = run_cli("bq", "noise", "--bqd", other, "--questions", q, "--out", tmp_path / "no")
    assert res.exit_code == 2
    assert res.stderr.strip() == (
        f"error: {other}: record '2': its main question 'What is the dog doing?' is not the "
        "question of v2_OpenEnded_mscoco_val2014_questions.json, 'How many?': built for other "
        "questions"
    )
    assert not (tmp_path / "no").exists()
