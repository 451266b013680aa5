"""Outputs apart from inputs: an output that would replace a file or folder a command
or API call reads is refused before any work (docs/reliability.md, "Outputs in the
wrong place").

Every command and its Python function check their paths with :func:`outputs_apart`:
``predict(out=…)`` over the questions it reads, ``finetune`` over its source run or a
``diagnose`` result folder inside the data folder each destroyed what they read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vqadiag.errors import DataError


def outputs_apart(
    outputs: Mapping[str, Any],
    inputs: Mapping[str, Any],
    read_whole: Mapping[str, Any] | None = None,
    write_whole: Mapping[str, Any] | None = None,
) -> None:
    """Refuse, before any work, an output that would replace one of the command's inputs:
    one :class:`DataError` naming the output and the input's option.

    Each mapping takes an option (``--out``) to a path, a list of paths, or None (not
    given). ``outputs``: files or folders the command writes; ``inputs``: files or folders
    it reads; ``read_whole``: input folders it may read any file of (result folders), so
    an output inside one is refused too; ``write_whole``: output folders it writes files
    of its own naming into, so an input inside one is refused too. Paths are compared
    after resolving links, and by device and inode, so a link or hard link to an input
    is the same file."""
    sources = [*_given(inputs), *_given(read_whole or {})]
    targets = [*_given(outputs), *_given(write_whole or {})]
    for out_flag, out in targets:
        for in_flag, source in sources:
            if _same_path(out, source):
                why = f"is also the input {in_flag} ({source}); give another {out_flag}"
                raise DataError(out, why)
    for out_flag, out in targets:
        for in_flag, folder in _given(read_whole or {}):
            if _inside(out, folder):
                why = f"lies inside {in_flag} {folder}, which this command reads"
                raise DataError(out, f"{why}; write {out_flag} elsewhere")
    for out_flag, folder in _given(write_whole or {}):
        for in_flag, source in sources:
            if _inside(source, folder):
                why = f"holds the input {in_flag} ({source}), which this command could replace"
                raise DataError(folder, f"{why}; give another {out_flag}")


def folders_read(**given: str | Path | None) -> dict[str, Path]:
    """The options among ``given`` (``data=…`` is ``--data``) that name a folder the
    command reads as a whole (a data folder, a run folder, an images folder): an output
    inside one would write into the inputs (:func:`outputs_apart`'s ``read_whole``)."""
    folders = {f"--{k.replace('_', '-')}": Path(v) for k, v in given.items() if v is not None}
    return {flag: path for flag, path in folders.items() if path.is_dir()}


def spec_path(spec: str | Path) -> str:
    """The file or folder a ``--model`` reads: a run folder, or the ``SPEC`` of an
    adapter's ``KIND:SPEC`` (``files:P`` reads ``P``), for :func:`outputs_apart`."""
    text = str(spec)
    kind, sep, rest = text.partition(":")
    if sep and kind.isidentifier() and len(kind) > 1 and not Path(text).exists():
        return rest
    return text


def _given(paths: Mapping[str, Any]) -> list[tuple[str, Path]]:
    """``(option, path)`` for every path given (None skipped, lists flattened)."""
    out: list[tuple[str, Path]] = []
    for flag, value in paths.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        out.extend((flag, Path(v)) for v in values if v is not None and str(v) != "")
    return out


def _same_path(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file or folder (links resolved; hard links too)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` lies strictly inside ``folder`` (links resolved)."""
    inner, outer = os.path.realpath(path), os.path.realpath(folder)
    return inner != outer and os.path.commonpath([inner, outer]) == outer
