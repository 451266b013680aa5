"""What ``--data`` names: the official folders, a Hugging Face copy or a VLMEvalKit TSV.

Detected from what it is (docs/data-sources.md), unless ``--data-format`` says:

* ``official``: a folder in the official layout (``gqa/``, ``vqa2/``, ``introspect/``
  folders, or the official file names at its top; a synthetic world);
* ``vlmevalkit``: a ``.tsv`` file;
* ``huggingface``: a ``.parquet`` or ``.arrow`` file, a folder holding them or a hub
  cache folder (``datasets--org--name``), or a dataset name (``org/name`` or
  ``hf:org/name``) found in the local caches (:mod:`vqadiag.data.sources.hf_copies`).

A path that exists is never read as a name, and a name is never looked up on the hub.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vqadiag.data.sources import hf_copies
from vqadiag.data.sources.hf_copies import CopyFolder
from vqadiag.errors import DataError

FORMATS = ("auto", "official", "huggingface", "vlmevalkit")
_OFFICIAL_MARKERS = ("gqa", "vqa2", "introspect", "world.json")
_OFFICIAL_SUFFIXES = ("_questions.json", "_annotations.json", "_sceneGraphs.json")


@dataclass(frozen=True)
class DataSource:
    """A resolved ``--data``: its format, what was given, where it is, and for a
    Hugging Face copy its tables."""

    format: str
    given: str
    location: Path
    copy: CopyFolder | None = None

    @property
    def official(self) -> bool:
        """Whether the data is read in place (the official layout)."""
        return self.format == "official"

    def default_split(self) -> str:
        """The split diagnosed when none is given: ``val``, or the split a VLMEvalKit
        TSV's file name names (docs/data-sources.md, "A VLMEvalKit TSV")."""
        if self.format == "vlmevalkit":
            from vqadiag.data.sources.vlmevalkit_tsv import split_of

            return split_of(self.location, "val")[0]
        return "val"

    def describe(self) -> dict[str, Any]:
        """``results.json`` ``data.source``: the format, what was given and where it is
        (and a copy's name, revision and tables)."""
        out: dict[str, Any] = {
            "format": self.format,
            "given": self.given,
            "path": str(self.location.resolve()),
        }
        if self.copy is not None:
            out.update(hf_copies.describe(self.copy))
        return out


def resolve_source(spec: str | Path, data_format: str = "auto") -> DataSource:
    """The data ``spec`` names (module docstring); one line when it names nothing."""
    if data_format not in FORMATS:
        raise DataError("--data-format", f"must be one of {', '.join(FORMATS)}")
    given = str(spec)
    path = Path(spec).expanduser()
    if not path.exists():
        name = hf_copies.dataset_name(given)
        if name is None or data_format not in ("auto", "huggingface"):
            raise DataError(path, "data folder not found")
        copy = hf_copies.copy_of_name(name)
        return DataSource("huggingface", given, copy.root, copy)
    chosen = data_format if data_format != "auto" else _detected(path)
    if chosen == "vlmevalkit":
        if not path.is_file():
            raise DataError(path, "a VLMEvalKit benchmark is a .tsv file, not a folder")
        return DataSource("vlmevalkit", given, path)
    if chosen == "huggingface":
        if path.is_file():
            table = hf_copies.copy_in_folder(path.parent)
            tables = tuple(t for t in table.tables if t.path == path)
            copy = CopyFolder(path.parent, tables, table.name, table.revision)
        else:
            copy = hf_copies.copy_in_folder(path)
        return DataSource("huggingface", given, copy.root, copy)
    if not path.is_dir():
        raise DataError(path, "is a file: --data takes a data folder, a .tsv, or a dataset copy")
    return DataSource("official", given, path)


def _detected(path: Path) -> str:
    if path.is_file():
        if path.suffix.lower() == ".tsv":
            return "vlmevalkit"
        if path.suffix in hf_copies.TABLE_SUFFIXES:
            return "huggingface"
        return "official"  # refused by the caller, naming the file
    if any((path / m).exists() for m in _OFFICIAL_MARKERS):
        return "official"
    if any(p.name.endswith(_OFFICIAL_SUFFIXES) for p in path.iterdir()):
        return "official"
    return "huggingface" if hf_copies.has_tables(path) else "official"
