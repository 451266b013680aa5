"""GQA question records kept as the bytes of their file (docs/diagnose.md, "Benchmark",
the memory paragraph).

A diagnosis holds every question record of its split for the whole run, and a parsed GQA
record (its ``semantic`` program, ``annotations``, ``entailed`` ids …) is a tree of
small dicts, lists and strings about five times the size of its JSON text. A
:class:`QuestionStore` keeps the file's bytes and where each record lies in them; a
record is decoded each time it is read (:class:`StoredRecord`, a read-only mapping
equal to the dict the checked reader gives), so what stays in memory is the file's size
plus an index, and no tree of small objects is left to fragment Python's allocator.

:func:`read_question_store` is an optimisation only (docs/reliability.md, "Fast paths
defer to the checked readers"): anything but a plainly valid question file (malformed,
not UTF-8, a question id written twice, a record the checks refuse) is read by
:func:`~vqadiag.data.formats.gqa.read_gqa_questions`, which accepts it as the same
records or names the file, record and problem.
"""

from __future__ import annotations

from array import array
from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from pathlib import Path
from typing import Any

import orjson

from vqadiag.data.formats.gqa import GQAQuestions, question_ok, read_gqa_questions
from vqadiag.data.io.bounded import read_input
from vqadiag.data.io.json_keys import count_top_level_members, keys_surely_unique
from vqadiag.data.io.typed_json import (
    TOP_LEVEL_RAW,
    decode_or_none,
    first_json_byte,
    offset_in,
)
from vqadiag.errors import DataError


class QuestionStore(Mapping[str, "StoredRecord"]):
    """``{qid: record}`` of a question file, each record kept as its JSON bytes.

    Iteration follows the file's order, as the parsed dict's does. ``store[qid]`` is a
    :class:`StoredRecord`; :meth:`record` decodes one to a fresh dict.
    """

    def __init__(self, raw: bytes, ids: list[str], starts: array, ends: array) -> None:
        self._view = memoryview(raw)
        self._index = {qid: i for i, qid in enumerate(ids)}
        self._starts = starts
        self._ends = ends

    def __getitem__(self, qid: str) -> StoredRecord:
        return StoredRecord(self, self._index[qid])

    def __contains__(self, qid: object) -> bool:
        return qid in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def record(self, position: int) -> dict[str, Any]:
        """The record at ``position`` (file order) decoded to a new dict."""
        return orjson.loads(self._view[self._starts[position] : self._ends[position]])

    @property
    def nbytes(self) -> int:
        """Bytes of the file kept (the records' JSON text and what lies between)."""
        return self._view.nbytes


class StoredRecord(Mapping[str, Any]):
    """One record of a :class:`QuestionStore`, decoded on every read.

    It compares equal to the record's dict, pickles and deep-copies as that dict (a Ray
    actor receives a plain dict, not the store), and is written to JSON as it
    (:func:`vqadiag.data.io.jsonio.json_bytes`). It cannot be changed: a nested value
    changed by a caller is a changed copy, never the stored record.
    """

    __slots__ = ("_position", "_store")

    def __init__(self, store: QuestionStore, position: int) -> None:
        self._store = store
        self._position = position

    def to_dict(self) -> dict[str, Any]:
        """The record as a new dict."""
        return self._store.record(self._position)

    def __getitem__(self, field: str) -> Any:
        return self.to_dict()[field]

    def get(self, field: str, default: Any = None) -> Any:
        return self.to_dict().get(field, default)

    def __contains__(self, field: object) -> bool:
        return field in self.to_dict()

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())

    def keys(self) -> KeysView[str]:
        return self.to_dict().keys()

    def items(self) -> ItemsView[str, Any]:
        return self.to_dict().items()

    def values(self) -> ValuesView[Any]:
        return self.to_dict().values()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StoredRecord):
            other = other.to_dict()
        return self.to_dict() == other

    __hash__ = None  # type: ignore[assignment]  # a mapping, like dict

    def __reduce__(self) -> tuple[type, tuple[dict[str, Any]]]:
        return (dict, (self.to_dict(),))

    def __repr__(self) -> str:
        return repr(self.to_dict())


def read_question_store(
    path: str | Path, require: Iterable[str] = ("question", "answer", "imageId")
) -> QuestionStore | GQAQuestions:
    """The question file at ``path`` as a :class:`QuestionStore`, checked as
    :func:`~vqadiag.data.formats.gqa.read_gqa_questions` checks it (every record has the
    ``require`` fields, optional fields have their types); any file that is not plainly
    valid goes to that reader, which returns its dict or raises the DataError naming
    the problem."""
    required = tuple(require)
    store = _store_or_none(Path(path), frozenset(required))
    return store if store is not None else read_gqa_questions(path, required)


def _store_or_none(path: Path, required: frozenset[str]) -> QuestionStore | None:
    try:
        raw = read_input(path)
    except DataError:
        return None
    if first_json_byte(raw) != b"{":
        return None
    spans = decode_or_none(raw, TOP_LEVEL_RAW)
    if not spans:
        return None
    if not keys_surely_unique(raw, spans) and count_top_level_members(raw) != len(spans):
        return None  # a question id written twice
    starts, ends = array("q"), array("q")
    for value in spans.values():
        begin = offset_in(value, raw)
        starts.append(begin)
        ends.append(begin + len(value))
    ids = list(spans)
    del spans
    store = QuestionStore(raw, ids, starts, ends)
    for position in range(len(ids)):
        try:
            record = store.record(position)
        except orjson.JSONDecodeError:
            return None  # e.g. bytes that are not UTF-8 inside a record
        if not question_ok(record, required):
            return None
    return store
