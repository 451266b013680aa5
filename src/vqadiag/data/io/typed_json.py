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
import stat
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec
import numpy as np
import orjson

from vqadiag.data.io import bounded
from vqadiag.data.io.json_keys import count_top_level_members
from vqadiag.data.io.jsonio import FREEZE_BYTES, paused_gc

T = TypeVar("T")

_LEADING_SPACE = re.compile(rb"[ \t\r\n]*")
_UTF8_CHUNK = 1 << 23


def map_file(path: str | Path) -> mmap.mmap | None:
    """A regular, non-empty file mapped read-only (no copy of its bytes is made), or None
    (missing, a folder, a device, empty, unreadable, over
    :data:`~vqadiag.data.io.bounded.MAX_INPUT_BYTES`: the checked reader says which)."""
    try:
        info = Path(path).stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > bounded.MAX_INPUT_BYTES:
            return None
        with Path(path).open("rb") as fh:
            return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None


def first_json_byte(raw: bytes | mmap.mmap) -> bytes:
    """The first byte of ``raw`` after JSON whitespace (``b""`` when there is none): what
    tells an object (``{``) from a list (``[``) without decoding."""
    start = _LEADING_SPACE.match(raw).end()
    return raw[start : start + 1]


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


_DECODE_ERRORS = (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError, RecursionError)


def decode_or_none(
    raw: bytes | mmap.mmap | msgspec.Raw, decoder: msgspec.json.Decoder[T]
) -> T | None:
    """``decoder.decode(raw)``, or None when the bytes are not valid JSON of that type (also
    for a string that is not UTF-8 and for nesting deeper than Python's recursion limit:
    the checked reader then accepts or names it). The cyclic collector is paused while
    decoding, and big inputs are frozen afterwards (:func:`~vqadiag.data.io.jsonio.paused_gc`)."""
    try:
        with paused_gc(freeze=len(raw) >= FREEZE_BYTES):
            return decoder.decode(raw)
    except _DECODE_ERRORS:
        return None


def decode_record(raw: msgspec.Raw, decoder: msgspec.json.Decoder[T]) -> T | None:
    """One record of :func:`raw_records` decoded by ``decoder``, or None (as
    :func:`decode_or_none`, but the collector is left as it is: a caller decoding many
    pauses it once around its loop)."""
    try:
        return decoder.decode(raw)
    except _DECODE_ERRORS:
        return None


#: An integer field a typed reader takes: an int64. orjson (the checked readers) reads
#: integers beyond −2⁶³ … 2⁶⁴ − 1 as doubles, so such values must be left to the checked
#: reader (msgspec cannot bound beyond int64, so the unsigned top half is left to it too).
JSONInt = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


#: a top-level object decoded to ``{key: msgspec.Raw}`` (each value left as its bytes)
TOP_LEVEL_RAW = msgspec.json.Decoder(dict[str, msgspec.Raw])


def records_value(
    raw: bytes | mmap.mmap, key: str | None, *, locate: bool = True
) -> bytes | mmap.mmap | msgspec.Raw | memoryview | None:
    """The JSON text of the record list of an official file: the value under ``key`` of
    a top-level object (``{"info": …, "annotations": [...]}``), or the whole text when it
    is a bare list (the only shape accepted when ``key`` is None). None for other shapes,
    for a top-level key written twice (the checked reader refuses it: docs/reliability.md,
    "Duplicate keys are refused") and for bytes that are not UTF-8.

    With ``locate``, the list may come back as a proven guess (:func:`_located_list`, a
    ``memoryview``) that runs past the list when something after it ends in ``]``; it is
    then not one JSON value, and a caller whose decode of it fails asks again with
    ``locate=False`` (the whole top level decoded)."""
    first = first_json_byte(raw)
    if first not in (b"[", b"{") or not is_utf8(raw):  # a file of zeros: no scan of it
        return None
    if first == b"[":
        return raw
    if key is None:
        return None
    located = _located_list(raw, key) if locate else None
    if located is not None:
        return located
    top: dict[str, Any] | None = decode_or_none(raw, TOP_LEVEL_RAW)
    if top is None or key not in top:
        return None
    if count_top_level_members(_without_value(raw, top[key])) != len(top):
        return None
    return top[key]


def decode_records(path: str | Path, key: str | None, decoder: msgspec.json.Decoder) -> list | None:
    """The record list of an official file (:func:`records_value`) decoded by ``decoder``,
    or None: not that shape, not of that type, or empty (the checked reader says which).
    A located guess that ran past the list is retried with the whole top level decoded."""
    raw = map_file(path)
    if raw is None:
        return None
    value = records_value(raw, key)
    records = None if value is None else decode_or_none(value, decoder)
    if records is None and isinstance(value, memoryview):  # the guess ran past the list
        value = records_value(raw, key, locate=False)
        records = None if value is None else decode_or_none(value, decoder)
    return records or None


_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])


def raw_records(path: str | Path, key: str | None) -> list[msgspec.Raw] | None:
    """The records of an official file (:func:`decode_records`), each left as its JSON
    text (no copy: each points into the file's bytes), or None. Decoding them one at a
    time (:func:`decode_record` with a record decoder, the collector paused around the
    loop) keeps one typed record alive at a time instead of the whole file's: a reader
    that keeps a few fields of each record peaks at what it keeps."""
    return decode_records(path, key, _RAW_LIST)


#: one record decoded to ``{field: msgspec.Raw}``
_RAW_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])
#: the depth of a record's value in ``{"key": [{"field": value}]}``
_VALUE_DEPTH = 3


def read_records_sharing_nested(path: str | Path, key: str) -> list[dict[str, Any]] | None:
    """The record list of an official file (:func:`records_value`) as the dicts the checked
    reader's ``read_json`` builds, except that a nested value (a list or an object) is
    decoded once per distinct JSON text and that one object is held by every record with
    the same text; None when the checked reader should read the file.

    A synthetic world's VQA v2 questions each carry a ``semantic`` program: on the
    12,000-image world, 831 distinct programs among 21,431 questions; one object per
    question would make 20 of the records' 33 MiB. The records are decoded one at a
    time. Values are equal to the checked reader's: each is decoded by orjson (a nested
    one at its depth in the file, for orjson's nesting limit), which the checked reader
    uses for texts under a megabyte and for any holding a 19-digit number, and which
    agrees with msgspec elsewhere; the members around the list are decoded by orjson too
    (msgspec skips them, checking less: ``1e400`` passes). The shared objects are
    read-only, as every record a diagnosis holds (docs/reliability.md, "Fast paths defer
    to the checked readers")."""
    raw = map_file(path)
    value = None if raw is None else records_value(raw, key, locate=False)
    if raw is None or value is None:
        return None
    if value is not raw:
        rest = _without_value(raw, value)
        try:
            orjson.loads(rest)
        except orjson.JSONDecodeError:
            return None
    records = decode_or_none(value, _RAW_LIST)
    if not records:
        return None
    with paused_gc():
        return _shared_nested_rows(records)


def _shared_nested_rows(records: list[Any]) -> list[dict[str, Any]] | None:
    nested: dict[bytes, Any] = {}
    out: list[dict[str, Any]] = []
    try:
        for i, record in enumerate(records):
            fields = decode_record(record, _RAW_FIELDS)
            if fields is None:
                return None
            records[i] = None  # the rows grow as the list's views are let go
            row: dict[str, Any] = {}
            for field, value_raw in fields.items():
                text = bytes(value_raw)
                if first_json_byte(text) in (b"[", b"{"):
                    value = nested.get(text)
                    if value is None:
                        wrapped = b"[" * _VALUE_DEPTH + text + b"]" * _VALUE_DEPTH
                        value = orjson.loads(wrapped)[0][0][0]
                        nested[text] = value
                else:
                    value = orjson.loads(text)
                row[field] = value
            out.append(row)
    except orjson.JSONDecodeError:
        return None
    return out


_LIST_AFTER_KEY = re.compile(rb"[ \t\r\n]*:[ \t\r\n]*\[")
_AFTER_VALUE = frozenset(b" \t\r\n,}")
_SHORT_REST = 1 << 20


def _located_list(raw: bytes | mmap.mmap, key: str) -> memoryview | None:
    """The list under the top-level ``key`` found without parsing it: from the first
    ``"key": [`` to the file's last ``]``, or None when that guess cannot be proven.

    Skipping over a 181 MB list to find where it ends costs a tenth of a second; the
    official files put the list last or before a few short strings. The guess is proven
    by decoding the file with the list replaced by ``0``: when that is an object whose
    member ``key`` is exactly that ``0`` (its position is checked, not its text) and
    whose members are all distinct, the file is that object with ``key`` holding the
    guessed bytes, which the caller then decodes as the list: only the list's true end
    leaves exactly one JSON value there, so a wrong end fails that decode (and the caller
    asks for the full top-level decode). A guess not proven goes to that decode at once.
    """
    marker = b'"' + key.encode() + b'"'
    at = raw.find(marker)
    after_key = None if at < 0 else _LIST_AFTER_KEY.match(raw, at + len(marker))
    if after_key is None:
        return None
    begin, end = after_key.end() - 1, raw.rfind(b"]") + 1
    if end <= begin or len(raw) - (end - begin) > _SHORT_REST:
        return None  # no list, or the guess leaves more than a short remainder
    if raw[end : end + 1] and raw[end] not in _AFTER_VALUE:
        return None  # "]" glued to what follows: "0" would read differently
    rest = raw[:begin] + b"0" + raw[end:]
    top: dict[str, Any] | None = decode_or_none(rest, TOP_LEVEL_RAW)
    if top is None or key not in top or offset_in(top[key], rest) != begin:
        return None
    if count_top_level_members(rest) != len(top):
        return None
    return memoryview(raw)[begin:end]


def offset_in(view: msgspec.Raw, buffer: bytes | mmap.mmap) -> int:
    """Where the zero-copy ``view`` (a value msgspec decoded as ``msgspec.Raw`` from
    ``buffer``) starts inside ``buffer``."""
    return np.frombuffer(view, np.uint8).ctypes.data - np.frombuffer(buffer, np.uint8).ctypes.data


def _without_value(raw: bytes | mmap.mmap, value: msgspec.Raw) -> bytes | mmap.mmap:
    """``raw`` with the JSON ``value`` decoded from it (a zero-copy view into ``raw``)
    replaced by ``0``: the same top-level members, in a few bytes instead of hundreds of
    megabytes, for the duplicate-key count. ``raw`` itself if the view is not inside it."""
    start = offset_in(value, raw)
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
    if raw is None or first_json_byte(raw) != b"{" or not is_utf8(raw):
        return None
    before = next(_DECODED)
    records = decode_or_none(raw, decoder)
    decoded = next(_DECODED) - before - 1
    if not records or decoded != len(records):
        return None
    return records
