"""LXMERT's detection files, ``*_obj36.tsv`` (docs/fpvg.md, the ``--detections`` formats).

One line per image, tab-separated, no header: ``img_id, img_h, img_w, objects_id,
objects_conf, attrs_id, attrs_conf, num_boxes, boxes, features``, where ``boxes`` and
``features`` are base64-encoded float32 arrays of ``num_boxes × 4`` (corners ``x1 y1 x2
y2`` in pixels) and ``num_boxes × D``. The file is scanned once for the byte offset of
each image's line; an image's boxes (and features) are decoded when asked for.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from vqadiag.errors import DataError, excerpt

#: the columns of an LXMERT detection TSV, in order
COLUMNS = ("img_id", "img_h", "img_w", "objects_id", "objects_conf", "attrs_id",
           "attrs_conf", "num_boxes", "boxes", "features")  # fmt: skip


def scan_offsets(path: Path) -> dict[str, int]:
    """``{img_id: byte offset of its line}``; one line naming the file and line for a
    line without the ten columns, a repeated image or an empty file."""
    offsets: dict[str, int] = {}
    with path.open("rb") as fh:
        position = 0
        for lineno, line in enumerate(fh, start=1):
            if line.strip():
                image_id, _, rest = line.partition(b"\t")
                if rest.count(b"\t") != len(COLUMNS) - 2:
                    raise DataError(
                        path, f"expected {len(COLUMNS)} tab-separated columns "
                        f"({', '.join(COLUMNS)})", f"line {lineno}",
                    )  # fmt: skip
                key = image_id.decode("utf-8", "replace")
                if key in offsets:
                    raise DataError(path, "image twice in the file", f"image {excerpt(key)}")
                offsets[key] = position
            position += len(line)
    if not offsets:
        raise DataError(path, "file is empty")
    return offsets


def read_row(path: Path, offset: int) -> Mapping[str, str]:
    """The columns of the line at ``offset``."""
    with path.open("rb") as fh:
        fh.seek(offset)
        fields = fh.readline().rstrip(b"\r\n").split(b"\t")
    return dict(zip(COLUMNS, (f.decode("ascii", "replace") for f in fields), strict=True))


def decode_array(row: Mapping[str, str], column: str, path: Path, image_id: str) -> np.ndarray:
    """``num_boxes × k`` float32 array of a base64 column (k = 4 for boxes)."""
    label = f"image {excerpt(image_id)}"
    try:
        n = int(row["num_boxes"])
        raw = base64.b64decode(row[column], validate=True)
    except (ValueError, binascii.Error):
        raise DataError(path, f"'num_boxes' or '{column}' is not readable", label) from None
    values = np.frombuffer(raw, dtype=np.float32)
    if n <= 0 or values.size % n:
        raise DataError(path, f"'{column}' holds {values.size} numbers for {n} boxes", label)
    return values.reshape(n, -1)
