"""Typed decoding of big official JSON files, for the scoring fast paths (docs/reliability.md,
"Fast paths defer to the checked readers").

msgspec decodes a file straight into small typed records (``msgspec.Struct``), skipping
the fields nobody reads, about three times faster than building a dict per record and in
a fraction of the memory. The fast path here is an *optimisation only*: every function
returns ``None`` for anything that is not plainly the official shape (a wrong type, a
missing field, a top-level key written twice, bytes that are not UTF-8, an unreadable
file …) and the caller then runs the checked reader, which either accepts the file and
gives the same result or names the file, record and problem. So a file is scored by the
fast path only if the checked reader would score it the same way.
"""

from __future__ import annotations

import codecs
import itertools
import mmap
import re
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec
import numpy as np

from vqadiag.data.json_keys import count_top_level_members
from vqadiag.data.jsonio import FREEZE_BYTES, paused_gc

T = TypeVar("T")

_LEADING_SPACE = re.compile(rb"[ \t\r\n]*")
_UTF8_CHUNK = 1 << 23


def map_file(path: str | Path) -> mmap.mmap | None:
    """A regular, non-empty file mapped read-only (no copy of its bytes is made), or None
    (missing, a folder, empty, unreadable: the checked reader says which)."""
    try:
        with Path(path).open("rb") as fh:
            return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None


def is_utf8(raw: bytes | mmap.mmap) -> bool:
    """Whether ``raw`` is valid UTF-8 (msgspec checks only the strings it decodes, not
    those it skips; orjson and the official scripts refuse any invalid byte)."""
    data = np.frombuffer(raw, dtype=np.uint8)
    if data.size == 0 or int(data.max()) < 0x80:
        return True
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for start in range(0, len(data), _UTF8_CHUNK):
            decoder.decode(data[start : start + _UTF8_CHUNK].tobytes())
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def decode_or_none(
    raw: bytes | mmap.mmap | msgspec.Raw, decoder: msgspec.json.Decoder[T]
) -> T | None:
    """``decoder.decode(raw)``, or None when the bytes are not valid JSON of that type (also
    for a string that is not UTF-8 and for nesting deeper than Python's recursion limit:
    the checked reader then accepts or names it). The cyclic collector is paused while
    decoding, and big inputs are frozen afterwards (:func:`~vqadiag.data.jsonio.paused_gc`)."""
    try:
        with paused_gc(freeze=len(raw) >= FREEZE_BYTES):
            return decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None


#: An integer field a typed reader takes: an int64. orjson (the checked readers) reads
#: integers beyond −2⁶³ … 2⁶⁴ − 1 as doubles, so such values must be left to the checked
#: reader (msgspec cannot bound beyond int64, so the unsigned top half is left to it too).
JSONInt = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


_TOP_LEVEL = msgspec.json.Decoder(dict[str, msgspec.Raw])


def records_value(
    raw: bytes | mmap.mmap, key: str | None
) -> bytes | mmap.mmap | msgspec.Raw | None:
    """The JSON text of the record list of an official file: the value under ``key`` of
    a top-level object (``{"info": …, "annotations": [...]}``), or the whole text when it
    is a bare list (the only shape accepted when ``key`` is None). None for other shapes,
    for a top-level key written twice (the checked reader refuses it: docs/reliability.md,
    "Duplicate keys are refused") and for bytes that are not UTF-8."""
    if not is_utf8(raw):
        return None
    start = _LEADING_SPACE.match(raw).end()
    first = raw[start : start + 1]
    if first == b"[":
        return raw
    if first != b"{" or key is None:
        return None
    top: dict[str, Any] | None = decode_or_none(raw, _TOP_LEVEL)
    if top is None or key not in top:
        return None
    if count_top_level_members(_without_value(raw, top[key])) != len(top):
        return None
    return top[key]


def _without_value(raw: bytes | mmap.mmap, value: msgspec.Raw) -> bytes | mmap.mmap:
    """``raw`` with the JSON ``value`` decoded from it (a zero-copy view into ``raw``)
    replaced by ``0``: the same top-level members, in a few bytes instead of hundreds of
    megabytes, for the duplicate-key count. ``raw`` itself if the view is not inside it."""
    start = np.frombuffer(value, np.uint8).ctypes.data - np.frombuffer(raw, np.uint8).ctypes.data
    end = start + len(value)
    if not 0 <= start < end <= len(raw):
        return raw
    return raw[:start] + b"0" + raw[end:]


_DECODED = itertools.count()
R = TypeVar("R", bound="KeyedRecord")


class KeyedRecord(msgspec.Struct, gc=False):
    """Base of the records of a file keyed by id (``{id: record, ...}``): every decoded
    record counts itself, so :func:`read_keyed_records` can tell a key written twice (JSON
    decoders keep only the last) without scanning the bytes."""

    def __post_init__(self) -> None:
        next(_DECODED)


def read_keyed_records(
    path: str | Path, decoder: msgspec.json.Decoder[dict[str, R]]
) -> dict[str, R] | None:
    """``{id: record}`` of a keyed file decoded by ``decoder`` (values: a
    :class:`KeyedRecord` type), or None: unreadable, not UTF-8, not of that type, empty,
    or an id written twice (more records decoded than kept); the checked reader then
    names the problem."""
    raw = map_file(path)
    if raw is None or not is_utf8(raw):
        return None
    before = next(_DECODED)
    records = decode_or_none(raw, decoder)
    decoded = next(_DECODED) - before - 1
    if not records or decoded != len(records):
        return None
    return records
