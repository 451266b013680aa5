"""Benchmark: the cost of refusing duplicate keys when a JSON file is read.

``read_json`` parses with orjson and, for a top-level object, counts its members in the
raw bytes (:mod:`vqadiag.data.io.json_keys`) to catch a key given twice, which every JSON
parser silently collapses. Timed on generated files of the official sizes, in the same
run (median of ``--repeats``):

* ``orjson only``: ``orjson.loads`` with the garbage collector paused, as ``read_json``
  reads (what reading cost before the check);
* ``member count alone``: :func:`~vqadiag.data.io.json_keys.count_top_level_members`;
* ``read_json``: orjson + the member count (the check's cost is the difference);
* ``naive``: the usual way to see duplicates, ``json.loads`` with an
  ``object_pairs_hook`` that checks every object's keys.

Files: a VQA v2-sized prediction object ``{qid: answer}`` (214,354 ids) and a GQA
questions-like object ``{qid: record}`` (``--gqa`` records with nested annotations, 132k
by default, about the testdev-all / val-balanced scale).

    python benchmarks/bench_duplicate_keys.py [--gqa 132062] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import orjson


def _predictions(n: int) -> bytes:
    answers = ["yes", "no", "2", "red", "a man, standing", 'say "hi"']
    return orjson.dumps({str(1000000 + i): answers[i % len(answers)] for i in range(n)})


def _gqa_questions(n: int) -> bytes:
    return orjson.dumps(
        {
            str(20000000 + i): {
                "imageId": f"n{i % 9000}",
                "question": f"Is the cup to the left of the plate, {i}?",
                "answer": "yes" if i % 2 else "no",
                "fullAnswer": "Yes, the cup is to the left of the plate.",
                "isBalanced": True,
                "groups": {"global": None, "local": "13-cup_plate"},
                "types": {"structural": "verify", "semantic": "rel", "detailed": "relVerify"},
                "annotations": {"question": {"2": "3712", "7": "3713"}, "answer": {}},
                "semantic": [{"operation": "select", "dependencies": [], "argument": "cup"}],
                "entailed": [], "equivalent": [str(20000000 + i)],
            }
            for i in range(n)
        }
    )  # fmt: skip


def _naive(raw: bytes) -> object:
    def hook(pairs):
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError("duplicate key")
        return dict(pairs)

    return json.loads(raw, object_pairs_hook=hook)


def _time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vqa", type=int, default=214354)
    parser.add_argument("--gqa", type=int, default=132062)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from vqadiag.data.io.json_keys import count_top_level_members
    from vqadiag.data.io.jsonio import paused_gc, read_json

    def orjson_only(path: Path) -> object:
        with paused_gc():  # as read_json reads
            return orjson.loads(path.read_bytes())

    work = Path(tempfile.mkdtemp(prefix="bench_dupkeys_"))
    for name, raw in (
        (f"predictions {{qid: answer}} ×{args.vqa:,}", _predictions(args.vqa)),
        (f"GQA questions {{qid: record}} ×{args.gqa:,}", _gqa_questions(args.gqa)),
    ):
        path = work / "file.json"
        path.write_bytes(raw)
        t_orjson = _time(lambda: orjson_only(path), args.repeats)  # noqa: B023
        t_count = _time(lambda: count_top_level_members(raw), args.repeats)  # noqa: B023
        t_read = _time(lambda: read_json(path), args.repeats)  # noqa: B023
        t_naive = _time(lambda: _naive(path.read_bytes()), args.repeats)  # noqa: B023
        assert read_json(path) == orjson.loads(raw)
        print(f"{name}: {len(raw) / 1e6:.1f} MB")
        print(f"  orjson only          {t_orjson:7.3f} s")
        print(f"  member count alone   {t_count:7.3f} s  ({t_count / t_orjson:.2f}× orjson only)")
        print(f"  read_json (+ check)  {t_read:7.3f} s  ({t_read / t_orjson:.2f}× orjson only)")
        print(f"  naive object hook    {t_naive:7.3f} s  ({t_naive / t_read:.1f}× read_json)")
        path.unlink()
    work.rmdir()


if __name__ == "__main__":
    main()
