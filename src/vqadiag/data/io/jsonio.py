"""Reading JSON, JSON Lines and CSV/TSV files with errors that name file and record."""

from __future__ import annotations

import functools
import gc
import hashlib
import inspect
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import orjson

from vqadiag.data.io.binary_formats import binary_kind
from vqadiag.data.io.bounded import input_file, read_input
from vqadiag.data.io.json_keys import (
    count_top_level_members,
    first_duplicate_key,
    keys_surely_unique,
)
from vqadiag.errors import DataError, excerpt, record_label

F = TypeVar("F", bound=Callable[..., Any])
_NON_FINITE = re.compile(rb"\s*-?(NaN|Infinity|inf|nan)\b")


def _existing(path: str | Path) -> Path:
    """An input file that can be read (:func:`vqadiag.data.io.bounded.input_file`)."""
    return input_file(path)[0]


#: bytes that can start a JSON text (after white space)
_JSON_STARTS = frozenset(b'{["-0123456789tfn')


def _refuse_non_json_start(p: Path, head: bytes, kind: str = "JSON") -> None:
    """Refuse a file whose first bytes cannot start ``kind`` (a binary format, a NUL, a
    byte order mark …) before reading the rest of it: a 2 GB file of zeros fails here."""
    binary = binary_kind(head)
    if binary is not None:
        raise DataError(p, f"is {binary}, not {kind}")
    text = head.lstrip(b" \t\r\n")
    if text and text[0] not in _JSON_STARTS:
        try:
            orjson.loads(head)
        except orjson.JSONDecodeError as err:
            raise DataError(p, _decode_problem(head, err)) from None


def _decode_problem(raw: bytes, err: orjson.JSONDecodeError, one_line: bool = False) -> str:
    """What is wrong with the JSON text ``raw``; ``one_line``: ``raw`` is one line of a
    JSON Lines file (named by the caller), so only the column is given."""
    kind = binary_kind(raw[:4096])  # no JSON text starts like these formats
    if kind is not None:
        return f"is {kind}, not JSON"
    where = f"column {err.colno}" if one_line else f"line {err.lineno}, column {err.colno}"
    if _NON_FINITE.match(raw, err.pos):
        return f"malformed JSON at {where}: NaN/Infinity is not valid JSON"
    return f"malformed JSON at {where}: {err.msg}"


#: files at least this large are parsed with ``paused_gc(freeze=True)``
FREEZE_BYTES = 16 << 20
#: files at least this large are decoded by msgspec first (:func:`decode_json`)
DIRECT_BYTES = 1 << 20
_LONG_DIGITS = re.compile(rb"[0-9]{19}")


def decode_json(raw: bytes) -> Any:
    """The JSON text ``raw`` as Python objects, as ``orjson.loads`` gives them.

    orjson first parses the whole text into a document of its own and then builds the
    objects: a decode peaks at about three times the objects' size (196 MB for a 61 MB
    GQA question dict). msgspec builds the objects as it parses (peak: the objects), so
    a text of at least :data:`DIRECT_BYTES` goes to msgspec, unless it holds a run of 19
    digits (orjson reads an integer beyond 64 bits as a float, msgspec as an integer);
    anything msgspec refuses goes to orjson, which decodes it or raises the error the
    caller explains."""
    if len(raw) >= DIRECT_BYTES and not _LONG_DIGITS.search(raw):
        try:
            return msgspec.json.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError):
            pass
    return orjson.loads(raw)


@contextmanager
def paused_gc(*, freeze: bool = False) -> Iterator[None]:
    """Pause the cyclic garbage collector while reading a big JSON file.

    Parsing creates millions of dicts and lists without cycles; each automatic
    collection walks the whole growing heap, which doubles the time to read the
    VQA v2 val annotations. The previous state is restored afterwards; with ``freeze``
    and a normal exit (an error freezes nothing), after ``gc.freeze()``: the first
    collection after re-enabling would otherwise walk every parsed object once more (a
    full collection, about a second for GQA testdev-all). Frozen objects are still freed
    by reference counting; only the cyclic collector skips them (parsed JSON holds no
    cycles; cyclic garbage already waiting when a big file is read stays until
    ``gc.unfreeze()``, which is why only big reads freeze).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    except BaseException:  # nothing of a failed read is frozen
        if was_enabled:
            gc.enable()
        raise
    if was_enabled:
        if freeze:
            gc.freeze()
        gc.enable()


def _total_bytes(values: Iterable[Any]) -> int:
    total = 0
    for value in values:
        if isinstance(value, tuple | list):
            total += _total_bytes(value)
        elif isinstance(value, str | Path):
            with suppress(OSError, ValueError):  # missing, unreadable, a NUL in the name
                total += Path(value).stat().st_size
    return total


def collector_paused_over(*file_parameters: str) -> Callable[[F], F]:
    """Decorator: run a scoring function with the cyclic collector paused, and on a
    normal return freeze (``gc.freeze()``) when the files its ``file_parameters`` name
    (paths, or tuples of paths; missing ones count 0) reach :data:`FREEZE_BYTES`.

    Scoring builds lists of millions of strings after the files are read (answer
    columns, aligned predictions); every automatic collection walks each of them item
    by item, which cost ``score fpvg`` 0.6 s of its 4 s. Freezing moves every object
    alive at that point, and any cyclic garbage made while the collector was paused, out
    of the collector's reach until ``gc.unfreeze()`` (reference counting still frees
    the rest); so small inputs (tests, notebooks) and a call that raises only give the
    collector back, as it was.
    """

    def decorate(function: F) -> F:
        signature = inspect.signature(function)
        unknown = [name for name in file_parameters if name not in signature.parameters]
        if unknown:
            raise TypeError(f"{function.__name__} has no parameter {', '.join(unknown)}")

        @functools.wraps(function)
        def paused(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            size = _total_bytes(bound.arguments.get(name) for name in file_parameters)
            with paused_gc(freeze=size >= FREEZE_BYTES):
                return function(*args, **kwargs)

        return paused  # type: ignore[return-value]

    return decorate


def read_json(path: str | Path) -> Any:
    """Parse a whole JSON file (:func:`decode_json`); empty or malformed files, and a
    top-level object with a key twice (:mod:`vqadiag.data.io.json_keys`), raise DataError."""
    p = _existing(path)
    with p.open("rb") as fh:
        _refuse_non_json_start(p, fh.read(4096))
    raw = read_input(p)
    if not raw or raw.isspace():  # no stripped copy of a large file
        raise DataError(p, "file is empty")
    try:
        with paused_gc(freeze=len(raw) >= FREEZE_BYTES):
            obj = decode_json(raw)
    except orjson.JSONDecodeError as err:
        raise DataError(p, _decode_problem(raw, err)) from None
    if (
        isinstance(obj, dict)
        and obj
        and not keys_surely_unique(raw, obj)
        and count_top_level_members(raw) != len(obj)
    ):
        key = first_duplicate_key(raw)
        raise DataError(p, "duplicate key (a JSON reader keeps only the last)", record_label(key))
    return obj


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, object)`` for every non-blank line of a JSON Lines file."""
    p = _existing(path)
    seen = False
    with p.open("rb") as fh:
        _refuse_non_json_start(p, fh.read(4096), "JSON Lines")
        fh.seek(0)
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            seen = True
            text = line.rstrip(b"\r\n")  # an error at its end is then in this line
            try:
                yield lineno, orjson.loads(text)
            except orjson.JSONDecodeError as err:
                problem = _decode_problem(text, err, one_line=True)
                raise DataError(p, problem, f"line {lineno}") from None
    if not seen:
        raise DataError(p, "file is empty")


def read_table(path: str | Path) -> list[dict[str, str]]:
    """Read a CSV (``.csv``) or TSV (``.tsv``/``.tab``) file as string records."""
    import pandas as pd

    p = _existing(path)
    if p.stat().st_size == 0:
        raise DataError(p, "file is empty")
    with p.open("rb") as fh:
        head = fh.read(4096)
    kind = binary_kind(head) or ("binary (it holds NUL bytes)" if b"\0" in head else None)
    if kind is not None:  # before pandas reads it all
        raise DataError(p, f"is {kind}, not a CSV / TSV table")
    sep = "," if p.suffix.lower() == ".csv" else "\t"
    try:
        frame = pd.read_csv(p, sep=sep, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise DataError(p, f"malformed table: {err}") from None
    return frame.to_dict(orient="records")


def read_workbook(path: str | Path) -> list[dict[str, str]]:
    """Read the first sheet of an Excel workbook (``.xlsx``) as string records (openpyxl,
    the ``xlsx`` extra)."""
    import pandas as pd

    p = _existing(path)
    try:
        import openpyxl  # noqa: F401
    except ImportError:
        raise DataError(p, "reading .xlsx needs openpyxl: pip install 'vqadiag[xlsx]'") from None
    try:
        frame = pd.read_excel(p, dtype=str, keep_default_na=False, engine="openpyxl")
    except (ValueError, KeyError, OSError) as err:
        raise DataError(p, f"unreadable Excel workbook: {err}") from None
    except Exception as err:  # openpyxl's own errors (a zip that is not a workbook …)
        raise DataError(p, f"unreadable Excel workbook: {type(err).__name__}: {err}") from None
    if frame.empty:
        raise DataError(p, "no rows in the workbook's first sheet")
    frame.columns = [str(c) for c in frame.columns]
    return frame.to_dict(orient="records")


def _mapping_as_dict(obj: Any) -> dict[Any, Any]:
    """orjson's ``default``: a read-only mapping that is not a dict (a question record
    kept as its bytes, :mod:`vqadiag.data.formats.question_store`) is written as a dict."""
    if isinstance(obj, Mapping):
        return dict(obj.items())
    raise TypeError(f"Type is not JSON serializable: {type(obj).__name__}")


def json_bytes(obj: Any, *, indent: bool = False) -> bytes:
    """``obj`` as the JSON bytes :func:`write_json` writes (orjson; numpy arrays and
    mappings allowed)."""
    option = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    if indent:
        option |= orjson.OPT_INDENT_2
    return orjson.dumps(obj, default=_mapping_as_dict, option=option)


def write_json(path: str | Path, obj: Any, *, indent: bool = False) -> Path:
    """Write ``obj`` as JSON (:func:`json_bytes`), creating parent folders; the file is
    replaced atomically (:func:`vqadiag.data.io.atomic.write_bytes_atomic`)."""
    from vqadiag.data.io.atomic import write_bytes_atomic

    return write_bytes_atomic(path, json_bytes(obj, indent=indent))


def require_field(record: Mapping[str, Any], field: str, path: str | Path, label: str) -> Any:
    """Return ``record[field]`` or raise ``DataError`` naming file, record and field."""
    if not isinstance(record, Mapping):
        raise DataError(path, f"expected an object, got {type(record).__name__}", label)
    if field not in record:
        raise DataError(path, f"missing field {field!r}", label)
    return record[field]


def finite_float(value: Any, path: str | Path, label: str, what: str) -> float:
    """Convert ``value`` to float, raising ``DataError`` for non-numbers, NaN and infinities."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataError(path, f"{what} must be a number, got {excerpt(value)}", label)
    out = float(value)
    if not math.isfinite(out):
        raise DataError(path, f"{what} is {excerpt(value)}, expected a finite number", label)
    return out


_CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def stable_hash(obj: Any) -> str:
    """SHA-256 of the canonical JSON of ``obj`` (sorted keys), 16 hex characters."""
    return hashlib.sha256(
        orjson.dumps(obj, default=_mapping_as_dict, option=_CANONICAL)
    ).hexdigest()[:16]
