"""Images that live inside a dataset copy: Parquet / Arrow cells or base64 TSV cells.

A prepared copy (:mod:`vqadiag.data.sources.prepared`) writes ``images.index.json``
beside its question files: for each dataset (``gqa``, ``vqa2``) the tables that hold
its images and, per image id, the table and row of its cell. :class:`EmbeddedImages`
reads one image's bytes from there when a model needs them: a Parquet row group's
image column, a slice of a memory-mapped Arrow file, or a TSV cell decoded with
:func:`base64.b64decode`. The bytes are those of the image file the copy was made
from, so digests, pixels and the image cache are the same as for the file
(:class:`vqadiag.data.model_inputs.images.ImageFiles`, docs/diagnose.md, "Images").
"""

from __future__ import annotations

import base64
import binascii
import functools
import threading
from pathlib import Path
from typing import Any

from vqadiag.data.io.jsonio import read_json
from vqadiag.errors import DataError, excerpt

INDEX_NAME = "images.index.json"
INDEX_KIND = "vqadiag.embedded-images"


class EmbeddedImages:
    """The images of one dataset of a prepared copy (module docstring)."""

    def __init__(self, index: Path, dataset: str) -> None:
        doc = read_json(index)
        section = doc.get("datasets", {}).get(dataset) if isinstance(doc, dict) else None
        if not isinstance(section, dict):
            section = {"tables": [], "rows": {}}
        self.index = index
        self.tables: list[dict[str, Any]] = list(section["tables"])
        self.rows: dict[str, list[int]] = dict(section["rows"])
        self._open: dict[int, Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def beside(cls, root: Path, dataset: str) -> EmbeddedImages | None:
        """The embedded images of ``root``'s prepared copy, None for a plain folder."""
        index = root / INDEX_NAME
        return cls(index, dataset) if index.is_file() else None

    def __contains__(self, image_id: str) -> bool:
        return image_id in self.rows

    def __bool__(self) -> bool:
        return bool(self.rows)

    def container(self, image_id: str) -> Path:
        """The file whose cell holds ``image_id``."""
        return Path(self.tables[self.rows[image_id][0]]["path"])

    def read(self, image_id: str, question: str | None = None) -> bytes:
        """The bytes of ``image_id``'s image file; a cell that holds no image is one
        :class:`DataError` naming the file, the row and the question."""
        number, row = self.rows[image_id]
        table = self.tables[number]
        path = Path(table["path"])
        label = f"row {row}" + (f", question {question}" if question else "")
        if table["format"] == "tsv":
            return _base64_cell(_tsv_images(path), row, path, label)
        cell = self._table(number).cell(row, table.get("column", "image"))
        if isinstance(cell, dict):
            data = cell.get("bytes")
            if data is None and cell.get("path"):
                return _linked_file(Path(cell["path"]), path, label)
            cell = data
        if not isinstance(cell, (bytes, bytearray)) or not cell:
            raise DataError(path, f"image cell holds no image bytes ({excerpt(cell, 40)})", label)
        return bytes(cell)

    def _table(self, number: int) -> Any:
        with self._lock:
            if number not in self._open:
                from vqadiag.data.sources.tables import TableFile

                self._open[number] = TableFile(self.tables[number]["path"])
            return self._open[number]


def _base64_cell(cells: list[str], row: int, path: Path, label: str) -> bytes:
    try:
        return base64.b64decode(cells[row], validate=True)
    except (binascii.Error, ValueError, IndexError):
        raise DataError(path, "image cell is not valid base64", label) from None


@functools.lru_cache(maxsize=2)
def _tsv_cells(path: str, size: int, mtime: int) -> list[str]:
    from vqadiag.data.sources.vlmevalkit_tsv import read_frame

    return read_frame(Path(path), ["image"])["image"].tolist()


def _tsv_images(path: Path) -> list[str]:
    """The TSV's image column (read once per file version; strings, decoded per use)."""
    try:
        stat = path.stat()
    except OSError as err:
        raise DataError(path, f"cannot read: {err.strerror or err}") from None
    return _tsv_cells(str(path), stat.st_size, stat.st_mtime_ns)


def _linked_file(image: Path, table: Path, label: str) -> bytes:
    """An ``Image`` cell that names a file instead of holding bytes."""
    try:
        return image.read_bytes()
    except OSError as err:
        raise DataError(
            table, f"image cell names {image}, which cannot be read: {err.strerror or err}", label
        ) from None
