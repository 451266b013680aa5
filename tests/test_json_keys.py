"""Duplicate keys in a JSON file's top-level object are refused (docs/reliability.md)."""

from __future__ import annotations

import json
import random

import orjson
import pytest

from vqadiag.data.io import json_keys
from vqadiag.data.io.json_keys import count_top_level_members, first_duplicate_key
from vqadiag.data.io.jsonio import read_json
from vqadiag.errors import DataError

HAND_WORKED = [
    (b"{}", 0),
    (b" {\n} ", 0),
    (b'{"a":1}', 1),
    # commas and brackets inside strings and nested containers are not members
    (b'{"a":1,"b":[1,2,{"c":3,"d":4}],"e":"x,y}]"}', 3),
    # escaped quotes and backslashes: "a\"" then "b\\" then "c" whose value is \"},
    (b'{"a\\"":1,"b\\\\":2, "c":"\\\\\\"},"}', 3),
    (b'{"a":1,"a":2}', 2),
    (b'{"k":{}, "j":[], "l":{"m":{"n":[{}]}}}', 3),
    (b"[1,2,3]", 3),
    (b"[]", 0),
]


@pytest.mark.parametrize("raw,members", HAND_WORKED)
@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 23])
def test_members_are_counted_across_any_chunking(raw, members, chunk, monkeypatch):
    monkeypatch.setattr(json_keys, "CHUNK", chunk)
    assert count_top_level_members(raw) == members


def _random_text(rng: random.Random) -> str:
    return "".join(rng.choice('ab,{}[]":\\ \u00e9\n') for _ in range(rng.randrange(0, 6)))


def _random_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(6 if depth < 3 else 3)
    if kind == 0:
        return _random_text(rng)
    if kind == 1:
        return rng.randrange(-5, 5)
    if kind == 2:
        return None
    if kind in (3, 4):
        return {_random_text(rng): _random_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]


@pytest.mark.parametrize("seed", range(40))
def test_random_objects_with_awkward_strings_and_duplicates(seed, monkeypatch):
    rng = random.Random(seed)
    monkeypatch.setattr(json_keys, "CHUNK", rng.choice([1, 2, 5, 16, 1 << 23]))
    keys = [_random_text(rng) + str(i) for i in range(rng.randrange(1, 12))]
    members = [(k, _random_value(rng)) for k in keys]
    if seed % 2:  # repeat one key: the parser would keep one of them
        members.insert(rng.randrange(len(members) + 1), (keys[0], "again"))
    raw = "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in members) + "}"
    raw_bytes = raw.encode()
    assert count_top_level_members(raw_bytes) == len(members)
    parsed = orjson.loads(raw_bytes)
    assert (len(parsed) != len(members)) == bool(seed % 2)
    assert first_duplicate_key(raw_bytes) == (keys[0] if seed % 2 else None)


def test_read_json_refuses_a_duplicate_id_naming_file_and_record(tmp_path):
    path = tmp_path / "predictions.json"
    path.write_text('{"q1": "yes", "q2": "no", "q1": "no"}')
    with pytest.raises(DataError) as err:
        read_json(path)
    message = str(err.value)
    assert str(path) in message and "'q1'" in message and "duplicate key" in message
    # a key repeated inside a nested object is the reader's business, not this check's
    path.write_text('{"q1": {"a": 1, "a": 2}, "q2": 3}')
    assert read_json(path) == {"q1": {"a": 2}, "q2": 3}


def test_score_vqa_refuses_duplicate_prediction_ids(run_cli, tmp_path):
    questions = {"questions": [{"question_id": 1, "image_id": 7, "question": "Is it?"}]}
    annotations = {"annotations": [{
        "question_id": 1, "image_id": 7, "answer_type": "yes/no", "question_type": "is it",
        "multiple_choice_answer": "yes",
        "answers": [{"answer": "yes", "answer_id": i + 1} for i in range(10)],
    }]}  # fmt: skip
    (tmp_path / "q.json").write_text(json.dumps(questions))
    (tmp_path / "a.json").write_text(json.dumps(annotations))
    (tmp_path / "p.json").write_text('{"1": "no", "1": "yes"}')
    res = run_cli("score", "vqa", "--questions", tmp_path / "q.json", "--annotations",
                  tmp_path / "a.json", "--predictions", tmp_path / "p.json")  # fmt: skip
    assert res.exit_code == 2, res.stdout
    line = res.stderr.strip()
    assert "\n" not in line and "p.json" in line and "'1'" in line and "duplicate key" in line


def test_the_few_keys_shortcut_proves_uniqueness_or_defers_to_the_count(tmp_path):
    from vqadiag.data.io.json_keys import keys_surely_unique
    from vqadiag.data.io.jsonio import read_json
    from vqadiag.errors import DataError

    big = b'{"info": {"v": 1}, "annotations": [' + b'{"question_id": 1},' * 1000 + b"{}]}"
    assert keys_surely_unique(big, {"info": 0, "annotations": 0})
    # a key twice: two occurrences, no proof; the count finds the duplicate
    twice = b'{"annotations": [1], "info": 2, "annotations": [3]}'
    assert not keys_surely_unique(twice, {"annotations": 0, "info": 0})
    # the same key written with an escape: a backslash in the file, no proof either
    escaped = b'{"annotations": [1], "\\u0061nnotations": [3]}'
    assert not keys_surely_unique(escaped, {"annotations": 0})
    # a value equal to a key is two occurrences too: no proof, and no duplicate
    assert not keys_surely_unique(b'{"a": "a"}', {"a": 0})
    # escapes in values (not keys) do not stop the proof, even an escaped key look-alike
    values = b'{"info": "a\\nb \\"annotations\\": \\\\", "annotations": [1]}'
    assert json.loads(values) == {"info": 'a\nb "annotations": \\', "annotations": [1]}
    assert keys_surely_unique(values, {"info": 0, "annotations": 0})
    # a key with an escape anywhere in the file (even nested) stops it
    nested = b'{"info": {"k\\u0065y": 1}, "annotations": [1]}'
    assert not keys_surely_unique(nested, {"info": 0, "annotations": 0})
    for name, raw, duplicate in (("twice", twice, True), ("escaped", escaped, True),
                                 ("value", b'{"a": "a"}', False), ("big", big, False)):  # fmt: skip
        path = tmp_path / f"{name}.json"
        path.write_bytes(raw)
        if duplicate:
            with pytest.raises(DataError, match="duplicate key"):
                read_json(path)
        else:
            read_json(path)


def test_big_files_decode_as_orjson_decodes_them(tmp_path):
    """A file of at least DIRECT_BYTES is decoded by msgspec (no whole-document tree first)
    into what orjson gives; a 19-digit run sends it to orjson (an integer beyond 64 bits is
    a float there); a malformed big file is still named with orjson's explanation."""
    from vqadiag.data.io.jsonio import DIRECT_BYTES, decode_json

    records = {f"q{i}": {"question": f"Is it {i}?", "semantic": [{"op": "x", "dep": [i]}],
                         "p": i / 7, "neg": -0.0, "ok": i % 2 == 0, "none": None}
               for i in range(20_000)}  # fmt: skip
    raw = orjson.dumps(records)
    assert len(raw) >= DIRECT_BYTES
    path = tmp_path / "big.json"
    path.write_bytes(raw)
    assert read_json(path) == orjson.loads(raw)
    long_int = raw[:-1] + b', "huge": 123456789012345678901234567890}'
    assert decode_json(long_int)["huge"] == 1.2345678901234568e29
    bad = tmp_path / "bad.json"
    bad.write_bytes(raw[:-1] + b', "x": NaN}')
    with pytest.raises(DataError, match="bad.json: malformed JSON"):
        read_json(bad)
