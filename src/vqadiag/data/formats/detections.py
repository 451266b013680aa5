"""Detected object boxes (and features) per image, read lazily.

Two layouts are accepted (docs/protocols.md §5, ARCHITECTURE.md "data/"):

* **GQA features layout**: an info JSON ``<prefix>_info.json`` mapping
  ``imageId → {width, height, objectsNum, file, idx}`` next to h5 files
  ``<prefix>_<file>.h5`` holding ``bboxes`` (N × 100 × 4, corners
  ``x1 y1 x2 y2``; rows past ``objectsNum`` are zero padding) and ``features``
  (N × 100 × D). ``read_detections`` takes the info JSON or the folder holding it.
  Each h5 file is opened once, on first use; rows are sliced on demand, and
  ``features`` is only touched by :meth:`Detections.features`.
* **Detectron / VinVL** (as FPVG's feature extraction writes them): the same info JSON
  with ``index`` in place of ``file`` and ``idx``, next to one h5 file ``<prefix>.h5``
  (e.g. ``output_gqa_detectron_objects_info.json`` + ``output_gqa_detectron_objects.h5``).
* **LXMERT**: a ``*_obj36.tsv`` file (base64 boxes and features per image line,
  :mod:`vqadiag.data.formats.lxmert_tsv`).
* **Simple**: a JSON or ``.npz`` file ``{imageId: [[x1, y1, x2, y2], ...]}``.

Boxes are validated when an image is read: every coordinate finite and
``x2 > x1``, ``y2 > y1`` unless the whole box is zero (a padding box, which
relevance matching skips). Problems raise :class:`~vqadiag.errors.DataError`
naming the file and the image.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.data.io.jsonio import read_json
from vqadiag.errors import DataError, excerpt

INFO_SUFFIX = "_info.json"


def image_label(image_id: object) -> str:
    """How an image is named in messages: ``image '2354786'``."""
    return f"image {excerpt(str(image_id))}"


class UnknownImageError(DataError, KeyError):
    """An image id that the detections do not hold (also a ``KeyError`` for mappings)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return DataError.__str__(self)


def check_boxes(boxes: Any, path: str | Path, image_id: str) -> np.ndarray:
    """Validate an image's boxes and return them as a float64 array (n, 4).

    Rules: shape (n, 4); every coordinate finite; ``x2 > x1`` and ``y2 > y1``
    unless all four coordinates are zero (padding).
    """
    label = image_label(image_id)
    try:
        arr = np.asarray(boxes, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(path, "boxes must be a list of [x1, y1, x2, y2] numbers", label) from None
    if arr.size == 0:
        return np.zeros((0, 4), dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise DataError(
            path, f"boxes must have shape (n, 4) [x1, y1, x2, y2], got {arr.shape}", label
        )
    finite = np.isfinite(arr).all(axis=1)
    if not finite.all():
        j = int(np.argmin(finite))
        raise DataError(path, f"box {j} has a NaN or infinite coordinate: {arr[j].tolist()}", label)
    padding = (arr == 0).all(axis=1)
    bad = ~padding & ((arr[:, 2] <= arr[:, 0]) | (arr[:, 3] <= arr[:, 1]))
    if bad.any():
        j = int(np.argmax(bad))
        x1, y1, x2, y2 = arr[j].tolist()
        raise DataError(
            path,
            f"box {j} has non-positive size (x1={x1:g}, y1={y1:g}, x2={x2:g}, y2={y2:g})",
            label,
        )
    return arr


class Detections(Mapping[str, np.ndarray]):
    """Mapping image id → validated boxes (float64 array of shape (n, 4)).

    Use as a context manager (or call :meth:`close`) to close the h5 files.
    """

    def __init__(self, source: Path) -> None:
        self.source = source

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids())

    def __len__(self) -> int:
        return len(self._ids())

    def __contains__(self, image_id: object) -> bool:
        return isinstance(image_id, str) and image_id in self._ids()

    def __getitem__(self, image_id: str) -> np.ndarray:
        if image_id not in self:
            raise UnknownImageError(
                self.source, "image is not in the detections", image_label(image_id)
            )
        boxes = self._boxes(image_id)
        size = self.image_size(image_id)
        if size is not None and len(boxes):
            check_inside(boxes, size, self.source, image_id)
        return boxes

    def features(self, image_id: str) -> np.ndarray:
        """Object features of an image (n × D, the rows matching its boxes)."""
        raise DataError(self.source, "this detections file holds boxes only, no features")

    def image_size(self, image_id: str) -> tuple[float, float] | None:
        """``(width, height)`` of an image when the file records it."""
        return None

    def close(self) -> None:
        """Release open files."""

    def __enter__(self) -> Detections:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ids(self) -> Mapping[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError

    def _boxes(self, image_id: str) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError


def check_inside(
    boxes: np.ndarray, size: tuple[float, float], path: str | Path, image_id: str
) -> None:
    """One line for a box (not padding) that lies wholly outside its ``(width, height)``
    image: a detector's boxes are on the image, so such a box is corrupt data (a shifted
    file, another image's row), and conditions built from it would drop or keep
    nothing."""
    width, height = size
    padding = (boxes == 0).all(axis=1)
    outside = ~padding & (
        (boxes[:, 0] >= width) | (boxes[:, 1] >= height) | (boxes[:, 2] <= 0) | (boxes[:, 3] <= 0)
    )
    if outside.any():
        j = int(np.argmax(outside))
        raise DataError(
            path, f"box {j} {[round(v, 2) for v in boxes[j].tolist()]} lies outside the "
            f"{width:g} x {height:g} image", image_label(image_id),
        )  # fmt: skip


def positive_size(value: Any, path: Path, label: str, field: str) -> float:
    """An image side from a file: a finite number above 0, else one line naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataError(path, f"{field!r} must be a number of pixels, got {excerpt(value)}", label)
    if not (math.isfinite(value) and value > 0):
        raise DataError(path, f"{field!r} must be a positive number of pixels, got {value}", label)
    return float(value)


def _int_field(record: Mapping[str, Any], field: str, path: Path, label: str) -> int:
    if not isinstance(record, Mapping):
        raise DataError(path, f"expected an object, got {type(record).__name__}", label)
    if field not in record:
        raise DataError(path, f"missing field {field!r}", label)
    value = record[field]
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DataError(
            path, f"{field!r} must be a non-negative integer, got {excerpt(value)}", label
        )
    return value


class GQAFeatureDetections(Detections):
    """The GQA ``<prefix>_info.json`` + ``<prefix>_<file>.h5`` layout, read lazily."""

    def __init__(self, info_path: Path) -> None:
        super().__init__(info_path)
        info = read_json(info_path)
        if not isinstance(info, dict) or not info:
            raise DataError(info_path, "expected a JSON object keyed by image id")
        self.info: dict[str, dict[str, Any]] = info
        self.prefix = info_path.name[: -len(INFO_SUFFIX)]
        self._files: dict[str, Any] = {}
        self._check_rows_apart()

    def _check_rows_apart(self) -> None:
        """Each image has its own h5 row: two info records naming the same ``file`` and
        ``idx`` would give one image the other's objects, so they are one line naming
        both. (A malformed record is left to the reader that needs it, which names it.)"""
        owner: dict[tuple[Any, Any], str] = {}
        for image_id, record in self.info.items():
            if not isinstance(record, Mapping):
                continue
            row = (record.get("file"), record.get("idx", record.get("index")))
            if row[1] is None:
                continue
            other = owner.setdefault(row, image_id)
            if other != image_id:
                raise DataError(
                    self.source, f"images {excerpt(other)} and {excerpt(image_id)} name the "
                    f"same h5 row (file {row[0]!r}, row {row[1]!r}): each image needs its own",
                )  # fmt: skip

    def _ids(self) -> Mapping[str, Any]:
        return self.info

    def h5_path(self, file: int | str | None) -> Path:
        """Path of the h5 file named by an info record's ``file`` field (None: the single
        ``<prefix>.h5`` of the Detectron / VinVL layout)."""
        if file is None:
            return self.source.parent / f"{self.prefix}.h5"
        return self.source.parent / f"{self.prefix}_{file}.h5"

    def _row(self, record: Any, label: str) -> tuple[int | None, int]:
        """``(file, row)`` of an info record: GQA's ``file`` and ``idx``, or the single-h5
        layout's ``index`` (file None)."""
        if isinstance(record, Mapping) and "index" in record and "idx" not in record:
            return None, _int_field(record, "index", self.source, label)
        return (
            _int_field(record, "file", self.source, label),
            _int_field(record, "idx", self.source, label),
        )

    def _locate(self, image_id: str, dataset: str) -> tuple[Any, Path, int, int]:
        label = image_label(image_id)
        record = self.info[image_id]
        num = _int_field(record, "objectsNum", self.source, label)
        file, idx = self._row(record, label)
        path = self.h5_path(file)
        handle = self._files.get(str(path))
        if handle is None:
            if not path.is_file():
                raise DataError(path, f"file not found (named by {label} in {self.source.name})")
            import h5py

            try:
                handle = h5py.File(path, "r")
            except OSError as err:
                raise DataError(path, f"cannot read as HDF5: {err}") from None
            self._files[str(path)] = handle
        if dataset not in handle:
            raise DataError(path, f"missing dataset {dataset!r}")
        data = handle[dataset]
        if data.ndim != 3 or idx >= data.shape[0] or num > data.shape[1]:
            raise DataError(
                path,
                f"dataset {dataset!r} of shape {data.shape} has no row {idx} with {num} objects",
                label,
            )
        return data, path, idx, num

    def _boxes(self, image_id: str) -> np.ndarray:
        data, path, idx, num = self._locate(image_id, "bboxes")
        if data.shape[2] != 4:
            raise DataError(path, f"dataset 'bboxes' must be N x objects x 4, got {data.shape}")
        return check_boxes(data[idx, :num], path, image_id)

    def features(self, image_id: str) -> np.ndarray:
        """Object features of an image: rows ``0 .. objectsNum - 1`` of ``features[idx]``."""
        if image_id not in self:
            raise UnknownImageError(
                self.source, "image is not in the detections", image_label(image_id)
            )
        data, path, idx, num = self._locate(image_id, "features")
        out = np.asarray(data[idx, :num])
        if not np.isfinite(out).all():
            raise DataError(path, "features contain NaN or infinite values", image_label(image_id))
        return out

    def image_size(self, image_id: str) -> tuple[float, float] | None:
        """``(width, height)`` from the info JSON, when given."""
        record = self.info.get(image_id)
        if isinstance(record, Mapping) and "width" in record and "height" in record:
            label = image_label(image_id)
            width = positive_size(record["width"], self.source, label, "width")
            return width, positive_size(record["height"], self.source, label, "height")
        return None

    def close(self) -> None:
        """Close every h5 file opened so far."""
        for handle in self._files.values():
            handle.close()
        self._files.clear()


class BoxListDetections(Detections):
    """``{imageId: [[x1, y1, x2, y2], ...]}`` from a JSON file or an ``.npz`` archive."""

    def __init__(self, path: Path, boxes: Mapping[str, Any]) -> None:
        super().__init__(path)
        self._data = boxes

    def _ids(self) -> Mapping[str, Any]:
        return self._data

    def _boxes(self, image_id: str) -> np.ndarray:
        try:
            boxes = self._data[image_id]  # an npz archive decodes its arrays here
        except (OSError, ValueError, zipfile.BadZipFile) as err:
            label = image_label(image_id)
            raise DataError(self.source, f"cannot read the boxes: {err}", label) from None
        return check_boxes(boxes, self.source, image_id)

    def close(self) -> None:
        """Close the npz archive, if any."""
        closer = getattr(self._data, "close", None)
        if closer is not None:
            closer()


class LXMERTTsvDetections(Detections):
    """LXMERT's ``*_obj36.tsv`` (:mod:`vqadiag.data.formats.lxmert_tsv`): boxes, features and the
    image size per line, decoded on demand."""

    def __init__(self, path: Path) -> None:
        from vqadiag.data.formats.lxmert_tsv import scan_offsets

        super().__init__(path)
        self._offsets = scan_offsets(path)

    def _ids(self) -> Mapping[str, Any]:
        return self._offsets

    def _row(self, image_id: str) -> Mapping[str, str]:
        from vqadiag.data.formats.lxmert_tsv import read_row

        if image_id not in self._offsets:
            raise UnknownImageError(
                self.source, "image is not in the detections", image_label(image_id)
            )
        return read_row(self.source, self._offsets[image_id])

    def _boxes(self, image_id: str) -> np.ndarray:
        from vqadiag.data.formats.lxmert_tsv import decode_array

        boxes = decode_array(self._row(image_id), "boxes", self.source, image_id)
        if boxes.shape[1] != 4:
            raise DataError(
                self.source, "'boxes' must hold 4 numbers per box", image_label(image_id)
            )
        return check_boxes(boxes.astype(np.float64), self.source, image_id)

    def features(self, image_id: str) -> np.ndarray:
        """The image's ``num_boxes × D`` features (float32)."""
        from vqadiag.data.formats.lxmert_tsv import decode_array

        return decode_array(self._row(image_id), "features", self.source, image_id)

    def image_size(self, image_id: str) -> tuple[float, float] | None:
        """``(img_w, img_h)`` of the line, each a finite number above 0 (else one line
        naming the file, the image and the column)."""
        row, label = self._row(image_id), image_label(image_id)

        def side(column: str) -> float:
            text = row[column]
            try:
                value: Any = float(text)
            except ValueError:
                value = text
            return positive_size(value, self.source, label, column)

        return side("img_w"), side("img_h")


def _info_file(folder: Path) -> Path:
    found = sorted(folder.glob(f"*{INFO_SUFFIX}"))
    if not found:
        raise DataError(folder, f"no '<prefix>{INFO_SUFFIX}' file in this folder")
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise DataError(folder, f"several info files ({names}); pass one of them")
    return found[0]


def read_detections(path: str | Path) -> Detections:
    """Open detected boxes: a GQA or Detectron / VinVL info JSON (or its folder), LXMERT's
    ``*_obj36.tsv``, a box-list JSON or an npz file.

    Nothing is read from the h5 files until an image is asked for.
    """
    p = Path(path)
    if p.is_dir():
        p = _info_file(p)
    if not p.exists():
        raise DataError(p, "file not found")
    if p.suffix.lower() == ".npz":
        try:
            archive = np.load(p, allow_pickle=False)
        except (OSError, ValueError, zipfile.BadZipFile) as err:
            raise DataError(p, f"cannot read as npz: {err}") from None
        return BoxListDetections(p, archive)
    if p.name.endswith(INFO_SUFFIX):
        return GQAFeatureDetections(p)
    if p.suffix.lower() == ".tsv":
        return LXMERTTsvDetections(p)
    data = read_json(p)
    if not isinstance(data, dict) or not data:
        raise DataError(p, "expected a JSON object {imageId: [[x1, y1, x2, y2], ...]}")
    first = next(iter(data.values()))
    if isinstance(first, Mapping) and "objectsNum" in first:
        raise DataError(
            p, f"looks like a GQA info file; name it '<prefix>{INFO_SUFFIX}' next to its h5 files"
        )
    return BoxListDetections(p, data)
