"""The per_question.jsonl lines of a diagnosis, held compressed until the file is written
(docs/diagnose.md, "Benchmark": the memory paragraph).

Each suite's rows arrive together when it finishes; they are turned into their JSON lines,
sorted by id, and kept as one zlib-compressed block per ``suite`` value. The file is
written suite by suite in name order, each block decompressed in turn, which gives the
order of a stable sort of every row by ``(suite, id)``: rows of equal keys keep the order
they arrived in. A diagnosis of the 12,000-image world writes 32,000 rows: as plain lines
they would take 11.5 MiB through every later suite.
"""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from vqadiag.data.io.jsonio import json_bytes

#: zlib level: the lines are compressed once and read once
_LEVEL = 1


def row_line(row: Mapping[str, Any]) -> bytes:
    """One line of per_question.jsonl."""
    return json_bytes(row) + b"\n"


def _pack(pairs: list[tuple[Any, bytes]]) -> bytes:
    return zlib.compress(pickle.dumps(pairs, protocol=pickle.HIGHEST_PROTOCOL), _LEVEL)


def _unpack(block: bytes) -> list[tuple[Any, bytes]]:
    return pickle.loads(zlib.decompress(block))  # only this module's own blocks


class RowLines:
    """The per-question rows of the suites run so far, as compressed lines (module
    docstring)."""

    def __init__(self) -> None:
        self._blocks: dict[str, bytes] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def extend(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Add rows (each with ``suite`` and ``id``), turned into their lines."""
        by_suite: dict[str, list[tuple[Any, bytes]]] = {}
        for row in rows:
            by_suite.setdefault(row["suite"], []).append((row["id"], row_line(row)))
        for suite, new in by_suite.items():
            self._count += len(new)
            # rows that came earlier stay first among equal ids (the sort is stable)
            pairs = _unpack(self._blocks[suite]) + new if suite in self._blocks else new
            pairs.sort(key=lambda pair: pair[0])
            self._blocks[suite] = _pack(pairs)

    def lines(self) -> Iterator[bytes]:
        """Every line, sorted by ``(suite, id)`` (ties in arrival order)."""
        for suite in sorted(self._blocks):
            for _id, line in _unpack(self._blocks[suite]):
                yield line
