"""Atomic artefacts, content digests and result-folder locks (docs/reliability.md).

* :func:`atomic_write` / :func:`write_bytes_atomic`: the bytes go to a temporary file
  beside the target (``.{name}.{pid}.{random}.tmp``), are flushed and fsynced, and the
  file is renamed over the target (``os.replace``, atomic on POSIX and Windows). A reader
  sees the old file or the whole new one, never a torn one; a killed writer leaves at
  most a temporary file, which no reader looks at.
* :func:`file_digest`: the sha256 of a file's bytes, for committing files that record
  the digest of the artefacts they describe (``results.json`` → ``per_question.jsonl``,
  ``bqd.meta.json`` → ``bqd.json``).
* :class:`FolderLock`: an exclusive ``fcntl.flock`` on ``FOLDER/.vqadiag.lock`` held
  while a run writes the folder; a second run refuses with one line naming the holder
  (pid, host, start time, command). The kernel releases the lock when the holder
  dies, so a killed run never leaves a stale lock. The lock file is opened without
  following a link (``O_NOFOLLOW``): a lock that is a link, a hard link or not a regular
  file is refused and left untouched. Where ``fcntl`` does not exist
  (Windows) the lock is not taken. Taking the lock removes the temporary files killed
  writers left in the folder (:func:`remove_stale_temporaries`).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import shutil
import socket
import stat
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import orjson

from vqadiag.data.io.faults import write_point
from vqadiag.errors import DataError

LOCK_NAME = ".vqadiag.lock"


@contextmanager
def atomic_write(path: str | Path) -> Iterator[BinaryIO]:
    """Write ``path`` atomically: ``with atomic_write(p) as fh: fh.write(...)``; the target
    is replaced only when the block ends without an exception."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "xb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        write_point(f"before rename {target.name}")
        os.replace(tmp, target)
        write_point(f"after rename {target.name}")
    except OSError as err:
        with suppress(OSError):
            tmp.unlink()
        named = named_os_error(err, target)
        if named is err:
            raise
        raise named from err
    except BaseException:
        with suppress(OSError):
            tmp.unlink()
        raise


def named_os_error(err: OSError, path: str | Path) -> OSError:
    """``err`` itself when it names a file, else the same error naming ``path`` (a write
    that fails for a full disk names no file)."""
    if err.filename is not None or err.errno is None:
        return err
    return type(err)(err.errno, err.strerror or str(err), str(path))


def remove_stale_temporaries(
    folder: str | Path, pattern: str = "*", *, recursive: bool = False
) -> int:
    """Delete the temporary files (``.{name}.{pid}.{random}.tmp``) that :func:`atomic_write`
    calls of dead processes left in ``folder`` (names matching ``.{pattern}.*.tmp``, a glob
    pattern; in its subfolders too with ``recursive``); returns how many. A live writer's
    are kept; so are files of other names. Process ids are this machine's: two machines
    writing one folder over a network file system are not supported."""
    root = Path(folder)
    glob = root.rglob if recursive else root.glob
    removed = 0
    for tmp in glob(f".{pattern}.*.tmp"):
        match = _TEMPORARY.match(tmp.name)
        if match is None or pid_alive(int(match.group(1))):
            continue
        with suppress(OSError):
            tmp.unlink()
            removed += 1
    return removed


#: the name :func:`atomic_write` gives its temporary files: ``.{name}.{pid}.{8 hex}.tmp``
_TEMPORARY = re.compile(r"^\..+\.([0-9]{1,10})\.[0-9a-f]{8}\.tmp$", re.ASCII)


def is_temporary_name(name: str) -> bool:
    """Whether ``name`` is one :func:`atomic_write` gives its temporary files."""
    return _TEMPORARY.match(name) is not None


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """``path`` holds exactly ``data`` afterwards, or is unchanged (:func:`atomic_write`)."""
    with atomic_write(path) as fh:
        fh.write(data)
    return Path(path)


def file_digest(path: str | Path) -> str:
    """Hex sha256 of the file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class FolderLock:
    """``with FolderLock(out):`` — exclusive use of a result folder (module docstring).

    ``tidy``: when the work under the lock fails and the lock made the folder, which
    still holds nothing but the lock, the folder goes too (an option refused by the
    training left an empty run folder)."""

    def __init__(self, folder: str | Path, *, tidy: bool = False) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME
        self._fh: BinaryIO | None = None
        self._made = tidy and not self.folder.exists()

    def __enter__(self) -> FolderLock:
        try:
            import fcntl
        except ImportError:  # Windows: no advisory locks here
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        fh = open_lock_file(self.path)
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = _holder_text(fh.read())
            fh.close()
            why = f"in use by another vqadiag run ({holder}); wait for it or use another --out"
            raise DataError(self.folder, why) from None
        try:
            self._write_holder(fh)
        except OSError as err:
            fh.close()
            named = named_os_error(err, self.path)
            if named is err:
                raise
            raise named from err
        self._fh = fh
        remove_stale_temporaries(self.folder, recursive=True)
        return self

    @staticmethod
    def _write_holder(fh: BinaryIO) -> None:
        """Replace the lock file's record by this process's (pid, host, start, command)."""
        fh.seek(0)
        fh.truncate()
        fh.write(
            orjson.dumps(
                {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "command": " ".join(sys.argv[:3]),
                }
            )
        )
        fh.flush()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._fh is not None:
            self._fh.close()  # closing releases the lock
            self._fh = None
        if exc_type is not None and self._made:
            try:
                if [entry.name for entry in self.folder.iterdir()] == [LOCK_NAME]:
                    shutil.rmtree(self.folder)
            except OSError:  # tidying must not hide the error that ended the work
                pass


def open_lock_file(path: Path) -> BinaryIO:
    """``path`` opened for reading and writing (created when missing) without following
    a link: a lock that is a link, or not a regular file of its own (a hard link to
    another file, a device, a pipe), is one :class:`DataError` and is left untouched."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NONBLOCK", 0)  # a pipe in its place must not hang the open
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP or path.is_symlink():
            why = "is a link; vqadiag does not follow links for its lock: remove it"
            raise DataError(path, why) from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        why = "is not a lock file of its own (a hard link, device or pipe): remove it"
        raise DataError(path, why)
    return os.fdopen(fd, "r+b")


def _holder_text(raw: bytes) -> str:
    """``pid 123 on host, since …`` from the lock file's record (best effort)."""
    try:
        rec = orjson.loads(raw)
        return f"pid {rec['pid']} on {rec['host']}, since {rec['started']}: {rec['command']}"
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return "holder unknown"


#: the free space below which a folder is refused as full before the work starts (a
#: training that ran to its end before the disk refused its first file, in review)
MIN_FREE_BYTES = 1 << 20


def writable_folder(path: str | Path, *, create: bool = True) -> Path:
    """``path`` as an output folder, checked before any long work starts: a file can be
    written in it (created when missing; with ``create=False`` a missing folder is left
    missing and its nearest existing parent is checked instead); otherwise one
    :class:`DataError` naming the folder (a file in its place, permission denied,
    read-only or full disk)."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise DataError(folder, "is a file, expected a folder")
    probe_in = folder
    if not create:
        while not probe_in.exists() and probe_in != probe_in.parent:
            probe_in = probe_in.parent
        if not probe_in.is_dir():
            raise DataError(folder, f"cannot write here: {probe_in} is not a folder")
    try:
        probe_in.mkdir(parents=True, exist_ok=True)
        probe = probe_in / f".vqadiag-write-check.{os.getpid()}.{secrets.token_hex(4)}"
        probe.write_bytes(b"")
        probe.unlink()
        free = shutil.disk_usage(probe_in).free
    except OSError as err:
        raise DataError(folder, f"cannot write here: {err.strerror or err}") from None
    if free < MIN_FREE_BYTES:  # an empty file fits on a full disk: the space is checked
        raise DataError(folder, f"cannot write here: the disk is full ({free:,} bytes free)")
    return folder


def writable_file(path: str | Path) -> Path:
    """``path`` as an output file: not a folder, in a folder :func:`writable_folder`
    accepts."""
    target = Path(path)
    if target.is_dir():
        raise DataError(target, "is a folder, expected a file")
    writable_folder(target.parent)
    return target


def check_reusable(folder: Path, ours: tuple[str, ...], what: str) -> None:
    """One :class:`DataError` when ``folder`` is a file, or a non-empty folder holding none
    of ``ours`` (the names a command writes there, described by ``what``): vqadiag never
    writes among a user's own files. A missing or empty folder passes."""
    if folder.exists() and not folder.is_dir():
        raise DataError(folder, "is a file, expected a folder")
    if folder.is_dir() and any(folder.iterdir()) and not any((folder / n).exists() for n in ours):
        why = f"is not empty and holds no {what}: not a folder vqadiag wrote"
        raise DataError(folder, f"{why}; give a new or empty one")


def output_folder(path: str | Path, ours: tuple[str, ...], *, create: bool = True) -> Path:
    """:func:`writable_folder` after :func:`check_reusable` (``ours``: the names the
    command writes there)."""
    folder = Path(path)
    check_reusable(folder, ours, " / ".join(n for n in ours if n != LOCK_NAME))
    return writable_folder(folder, create=create)
