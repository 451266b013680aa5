"""per_question.jsonl lines held compressed (vqadiag.diagnosis.row_lines)."""

from __future__ import annotations

import random
from typing import Any

import orjson

from vqadiag.diagnosis.row_lines import RowLines, row_line


def _row(suite: str, uid: Any, **values: Any) -> dict[str, Any]:
    return {"suite": suite, "id": uid, **values}


def test_lines_come_sorted_by_suite_then_id_ties_in_arrival_order() -> None:
    rows = RowLines()
    rows.extend([_row("pairs", "9"), _row("accuracy", "2", n=1), _row("accuracy", "10")])
    rows.extend([_row("accuracy", "2", n=2), _row("fpvg", "1")])
    got = [orjson.loads(line) for line in rows.lines()]
    assert [(r["suite"], r["id"], r.get("n")) for r in got] == [
        ("accuracy", "10", None),  # ids are compared as given: "10" < "2"
        ("accuracy", "2", 1),  # the row that came first stays first
        ("accuracy", "2", 2),
        ("fpvg", "1", None),
        ("pairs", "9", None),
    ]
    assert len(rows) == 5


def test_same_bytes_as_a_stable_sort_of_every_line() -> None:
    """The file is what sorting every ``(suite, id, line)`` by ``(suite, id)`` gives."""
    rnd = random.Random(3)
    batches = [
        [
            _row(rnd.choice("abc"), rnd.randrange(40), x=rnd.random(), text="é\u2028")
            for _ in range(rnd.randrange(0, 60))
        ]
        for _ in range(7)
    ]
    rows, plain = RowLines(), []
    for batch in batches:
        rows.extend(batch)
        plain.extend((r["suite"], r["id"], row_line(r)) for r in batch)
    plain.sort(key=lambda r: (r[0], r[1]))
    assert b"".join(rows.lines()) == b"".join(line for _, _, line in plain)
    assert len(rows) == len(plain)
    assert list(RowLines().lines()) == [] and len(RowLines()) == 0
