"""Inputs that can be read only once: pipes, a shell's process substitution ``<(…)``,
``/dev/stdin`` (docs/reliability.md).

Some readers look at a file twice (the format sniffer reads its first bytes, then the
reader parses it from the start); a pipe gives its bytes once, so the second read would
see the rest of the stream. :func:`rereadable` copies such an input once into a private
temporary file, removed when the process exits, and returns that file's path (errors
name the path the user gave, :func:`vqadiag.errors.show_path_as`); the copy stops at
:data:`vqadiag.data.io.bounded.MAX_INPUT_BYTES`. Regular files (and anything that does not
exist, for the reader to report) pass unchanged; a device such as ``/dev/zero`` is one
line.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import stat
import tempfile
from pathlib import Path

from vqadiag.data.io.bounded import kind_of, read_stream
from vqadiag.errors import DataError, show_path_as


def rereadable(path: str | Path) -> Path:
    """``path`` itself when it is a regular file or folder (or missing), else a temporary
    copy of the stream's bytes (module docstring)."""
    source = Path(path)
    try:
        mode = source.stat().st_mode
    except OSError:
        return source
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return source
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):  # /dev/zero would never end
        raise DataError(source, f"is {kind_of(mode)}, expected a file or a pipe")
    try:
        with source.open("rb") as stream:
            data = read_stream(stream, source)
    except OSError as err:
        raise DataError(source, f"cannot read: {err.strerror or err}") from None
    fd, name = tempfile.mkstemp(prefix="vqadiag-stream-", suffix=source.suffix or ".json")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    atexit.register(_remove, name)
    show_path_as(name, source)  # errors name the path the user gave
    return Path(name)


def _remove(name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name)
