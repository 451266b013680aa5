"""Bounded reads of a user's input files (docs/reliability.md, "Hostile and malformed
inputs").

A reader takes a regular file of at most :data:`MAX_INPUT_BYTES` and reads no more than
the file's size; anything else is one line naming the path: a device such as
``/dev/zero`` (which never ends), a socket, a file over the limit. Pipes and process
substitutions are copied once by :mod:`vqadiag.data.io.streams`, and that copy stops at the
same limit.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import BinaryIO

from vqadiag.errors import DataError

#: the largest input file vqadiag reads, in bytes (4 GiB): above the largest official
#: file (GQA's train_all question shards, VQA v2's train annotations: hundreds of MB to
#: about 1.5 GB), below what a JSON parser can hold in memory on a workstation
MAX_INPUT_BYTES = 4 << 30

#: what a file that is not regular is, by its ``stat`` mode test
_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISFIFO, "a pipe"),
)

_CHUNK = 1 << 20


def too_large(path: str | Path) -> DataError:
    """The error of an input over :data:`MAX_INPUT_BYTES`."""
    return DataError(
        path, f"larger than {MAX_INPUT_BYTES} bytes, the most vqadiag reads (MAX_INPUT_BYTES)"
    )


def kind_of(mode: int) -> str:
    """What a file of ``stat`` ``mode`` is, in words (``"a character device"`` …)."""
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def input_file(path: str | Path) -> tuple[Path, int]:
    """``(path, size)`` of an existing regular file within :data:`MAX_INPUT_BYTES`; one
    :class:`DataError` naming the path otherwise (missing, a folder, a device …)."""
    p = Path(path)
    try:
        info = p.stat()
    except FileNotFoundError:
        raise DataError(p, "file not found") from None
    except OSError as err:  # permission denied on a folder above it, a name too long …
        raise DataError(p, f"cannot read: {err.strerror or err}") from None
    except ValueError:  # a NUL byte in the name
        raise DataError(p, "file not found") from None
    if stat.S_ISDIR(info.st_mode):
        raise DataError(p, "is a directory, expected a file")
    if not stat.S_ISREG(info.st_mode):
        raise DataError(p, f"is {kind_of(info.st_mode)}, expected a regular file")
    if info.st_size > MAX_INPUT_BYTES:
        raise too_large(p)
    return p, info.st_size


def read_input(path: str | Path) -> bytes:
    """The bytes of an input file checked by :func:`input_file`, reading no more than its
    size (and the limit) even if it grows meanwhile."""
    p, size = input_file(path)
    try:
        with p.open("rb") as fh:
            return fh.read(size)
    except OSError as err:
        raise DataError(p, f"cannot read: {err.strerror or err}") from None


def read_stream(fh: BinaryIO, path: str | Path) -> bytes:
    """All bytes of a stream (a pipe), read in chunks; more than :data:`MAX_INPUT_BYTES`
    is one :class:`DataError` naming ``path``, found after reading the limit, not all."""
    chunks: list[bytes] = []
    total = 0
    while chunk := fh.read(_CHUNK):
        total += len(chunk)
        if total > MAX_INPUT_BYTES:
            raise too_large(path)
        chunks.append(chunk)
    return b"".join(chunks)
