"""Errors raised on bad input.

Every problem with a user's file is a :class:`DataError` whose message names the
file, the record and the problem in one line, e.g.::

    preds.json: record 'q17': missing field 'answer'

The command line prints that line and exits with code 2 (never a traceback).
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Iterator
from contextlib import contextmanager
from os import PathLike
from typing import Any

#: the most characters of a value quoted in an error message (:func:`excerpt`)
EXCERPT_CHARS = 120
#: the most characters of the problem part of a :class:`DataError`'s line
PROBLEM_CHARS = 1000

_LINE_BREAKS = re.compile(r"\s*[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+\s*")


class _BoundedRepr(reprlib.Repr):
    """:mod:`reprlib` limits, with an integer too long to print shown by its size."""

    def repr_int(self, x: int, level: int) -> str:
        try:
            return super().repr_int(x, level)
        except ValueError:  # beyond Python's int-to-text digit limit
            return f"<integer of {x.bit_length()} bits>"


_REPR = _BoundedRepr()
_REPR.maxlevel = 3
_REPR.maxstring = _REPR.maxother = EXCERPT_CHARS
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = _REPR.maxdeque = 6
_REPR.maxdict = 4
_REPR.maxlong = 40


def excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    """``value`` as an error message quotes it: its ``repr``, on one line and at most
    ``limit`` characters, made with bounded work (:mod:`reprlib`: a few items of each
    container, a few levels deep), so a 50,000-item answer or a pickle whose shared
    references expand to gigabytes is quoted in a few dozen characters."""
    try:
        text = _REPR.repr(value)
    except Exception:  # a value whose repr fails: name its type
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: temporary copies shown under the name the user gave (:func:`show_path_as`)
_SHOWN_AS: dict[str, str] = {}


def show_path_as(actual: str | PathLike[str], shown: str | PathLike[str]) -> None:
    """Name ``actual`` (a private copy, e.g. of a pipe) as ``shown`` in every error."""
    _SHOWN_AS[str(actual)] = str(shown)


def shown_path(path: str | PathLike[str]) -> str:
    """How a path is named in an error: the path the user gave for a private copy of
    it, quoted (``repr``) when it holds a line break or another unprintable character."""
    text = str(path)
    text = _SHOWN_AS.get(text, text)
    return text if text.isprintable() else repr(text)


def one_line(text: str, limit: int = PROBLEM_CHARS) -> str:
    """``text`` with its line breaks (and the space around them) made one space, cut to
    ``limit`` characters."""
    text = _LINE_BREAKS.sub(" ", text.strip())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class DataError(ValueError):
    """A problem with an input file: which file, which record, what is wrong; always one
    line (the path quoted when it holds a line break, the problem's breaks made spaces)."""

    def __init__(
        self, path: str | PathLike[str] | None, problem: str, record: str | None = None
    ) -> None:
        self.path = None if path is None else shown_path(path)
        self.problem = problem
        self.record = record
        super().__init__(str(self))

    def __str__(self) -> str:
        parts = [p for p in (self.path, self.record and one_line(self.record)) if p]
        parts.append(one_line(self.problem))
        return ": ".join(parts)

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled as shown (the path already named as the user gave it), so that an error
        # raised in another process (the demo's chat VLM lane) reads the same there
        return _restored_data_error, (type(self), self.path, self.problem, self.record)


def _restored_data_error(
    cls: type[DataError], path: str | None, problem: str, record: str | None
) -> DataError:
    """A :class:`DataError` rebuilt from its pickled fields, the path taken as shown."""
    err = cls.__new__(cls)
    err.path, err.problem, err.record = path, problem, record
    ValueError.__init__(err, str(err))
    return err


class SuiteSkipped(Exception):
    """A suite cannot run (missing data or model capability); the message is the reason."""


#: how much of what a first line ending in a colon introduces :func:`first_line` keeps
INTRODUCED_CHARS = 300


def first_line(err: object) -> str:
    """The first non-empty line of an error's text (its type name when it has none). A
    first line that ends with a colon introduces the rest, which follows on the same line
    up to :data:`INTRODUCED_CHARS`; of a Python traceback, its last line (the error)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    if not lines:
        return type(err).__name__
    if lines[0].startswith("Traceback (most recent call last)"):
        return lines[-1]
    if lines[0].endswith(":"):
        return one_line("\n".join(lines), INTRODUCED_CHARS)
    return lines[0]


def record_label(record_id: object) -> str:
    """How a record is named in messages: ``record 'q17'`` (ids are quoted, a long one
    cut to an :func:`excerpt`)."""
    if isinstance(record_id, str):
        return f"record {excerpt(record_id)}"
    if isinstance(record_id, int) and record_id.bit_length() < 64:
        return f"record {excerpt(str(record_id))}"
    return f"record {excerpt(record_id)}"  # not str(): a huge value is never written out


@contextmanager
def option_errors(*kinds: type[Exception]) -> Iterator[None]:
    """Turn a model's complaint about its options (``kinds``, default ValueError and
    TypeError) into ``DataError("--option", message)``; DataErrors pass unchanged."""
    caught: tuple[type[Exception], ...] = kinds or (ValueError, TypeError)
    try:
        yield
    except caught as err:
        if isinstance(err, DataError):
            raise
        raise DataError("--option", str(err)) from None
