"""Errors raised on bad input.

Every problem with a user's file is a :class:`DataError` whose message names the
file, the record and the problem in one line, e.g.::

    preds.json: record 'q17': missing field 'answer'

The command line prints that line and exits with code 2 (never a traceback).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from os import PathLike


class DataError(ValueError):
    """A problem with an input file: which file, which record, what is wrong."""

    def __init__(
        self, path: str | PathLike[str] | None, problem: str, record: str | None = None
    ) -> None:
        self.path = None if path is None else str(path)
        self.problem = problem
        self.record = record
        super().__init__(str(self))

    def __str__(self) -> str:
        parts = [p for p in (self.path, self.record) if p]
        parts.append(self.problem)
        return ": ".join(parts)


class SuiteSkipped(Exception):
    """A suite cannot run (missing data or model capability); the message is the reason."""


def first_line(err: object) -> str:
    """The first non-empty line of an error's text (its type name when it has none)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def record_label(record_id: object) -> str:
    """How a record is named in messages: ``record 'q17'`` (ids are quoted)."""
    return f"record {str(record_id)!r}"


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
