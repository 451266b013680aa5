"""Output folders vqadiag owns (docs/reliability.md, "Output folders, locks and links").

A folder is vqadiag's only when vqadiag marked it so: :func:`claim_folder` writes the
marker ``FOLDER/.vqadiag-folder.json`` (``{"kind": "vqadiag.folder", "folder": "result
folder"}`` …) before anything else goes there. :func:`owned_folder` checks an ``--out``
before the work: missing, empty or marked with its kind it passes; a folder an earlier
vqadiag wrote (before the marker existed) passes when its :class:`FolderKind` recognises
it by content (``results.json`` of kind ``vqadiag.results``, a run's ``config.json`` …);
anything else is refused with one line, and so is a link in the folder that leads out
of it (a ``predictions/`` that points elsewhere would receive every prediction file).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from vqadiag import __version__
from vqadiag.data.io.atomic import (
    LOCK_NAME,
    is_temporary_name,
    writable_folder,
    write_bytes_atomic,
)
from vqadiag.errors import DataError

MARKER = ".vqadiag-folder.json"
MARKER_KIND = "vqadiag.folder"


def _never(_: Path) -> bool:
    """No earlier vqadiag wrote such a folder without the marker."""
    return False


@dataclass(frozen=True)
class FolderKind:
    """One kind of output folder: its ``name`` (recorded in the marker, used in messages),
    what it holds (``what``, for the refusal) and ``earlier``, which recognises a folder an
    earlier vqadiag wrote before it marked its folders (it may raise a one-line
    :class:`DataError` about a file of ours it cannot read)."""

    name: str
    what: str
    earlier: Callable[[Path], bool] = _never


def read_json_file(path: Path, limit: int = 1 << 26) -> object | None:
    """The JSON value of a regular file (not a link, at most ``limit`` bytes), else None."""
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None


def marked_kind(folder: Path) -> str | None:
    """The kind name the folder's marker records, None without a (readable) marker."""
    raw = read_json_file(folder / MARKER, 1 << 16)
    if isinstance(raw, dict) and raw.get("kind") == MARKER_KIND:
        name = raw.get("folder")
        return name if isinstance(name, str) else None
    return None


def _nothing_of_anyones(entry: Path) -> bool:
    """Whether an entry is vqadiag's bookkeeping that says nothing about who owns the
    folder: a regular lock file, or a killed writer's temporary file."""
    if entry.name == LOCK_NAME:
        return not entry.is_symlink()
    return is_temporary_name(entry.name) and entry.is_file()


def check_owned(path: str | Path, kind: FolderKind) -> Path:
    """One :class:`DataError` unless ``path`` may be written as a ``kind`` folder: missing,
    empty, marked as one, or an earlier vqadiag's (``kind.earlier``); links in it must not
    lead out of it (:func:`refuse_links_out`)."""
    folder = Path(path)
    if not folder.exists() and not folder.is_symlink():
        return folder
    if not folder.is_dir():
        raise DataError(folder, "is a file, expected a folder")
    lock = folder / LOCK_NAME
    if lock.is_symlink():
        raise DataError(lock, "is a link; vqadiag does not follow links for its lock: remove it")
    entries = [e for e in folder.iterdir() if not _nothing_of_anyones(e)]
    marked = marked_kind(folder)
    if marked is not None and marked != kind.name:
        raise DataError(folder, f"is a vqadiag {marked}, not a {kind.name}; give another one")
    if entries and marked is None and not kind.earlier(folder):
        why = f"is not empty and holds no {kind.what}: not a folder vqadiag wrote"
        raise DataError(folder, f"{why}; give a new or empty one")
    refuse_links_out(folder)
    return folder


def owned_folder(path: str | Path, kind: FolderKind, *, create: bool = False) -> Path:
    """:func:`check_owned`, then :func:`~vqadiag.data.io.atomic.writable_folder` (before the
    work: by default a missing folder is not created)."""
    return writable_folder(check_owned(path, kind), create=create)


def claim_folder(path: str | Path, kind: FolderKind) -> Path:
    """Make ``path`` a ``kind`` folder before the first write: checked again
    (:func:`check_owned`), created, and marked (an earlier vqadiag's folder gains the
    marker now)."""
    folder = check_owned(path, kind)
    folder.mkdir(parents=True, exist_ok=True)
    if marked_kind(folder) is None:
        record = {"kind": MARKER_KIND, "folder": kind.name, "vqadiag_version": __version__}
        write_bytes_atomic(folder / MARKER, orjson.dumps(record) + b"\n")
    return folder


def refuse_links_out(folder: str | Path) -> None:
    """One :class:`DataError` naming the first link under ``folder`` (files or folders, at
    any depth; links are not followed) whose target lies outside ``folder``: vqadiag
    writes a folder it owns only inside it."""
    root = os.path.realpath(folder)
    for here, dirs, files in os.walk(root, followlinks=False):
        for name in (*dirs, *files):
            entry = os.path.join(here, name)
            if not os.path.islink(entry):
                continue
            target = os.path.realpath(entry)
            if os.path.commonpath([root, target]) != root:
                raise DataError(
                    Path(folder) / os.path.relpath(entry, root),
                    f"is a link out of the folder (to {target}); vqadiag writes only inside "
                    "its folders: remove the link",
                )
