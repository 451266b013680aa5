"""Name a binary file from its first bytes, so that a pickle or a workbook given where JSON
is expected is one line saying what it is, not "malformed JSON at line 1"
(README, "Prediction files")."""

from __future__ import annotations

#: leading bytes of common binary formats researchers have lying around
_MAGIC = (
    (b"PK\x03\x04", "a zip archive"),
    (b"PAR1", "a Parquet table"),
    (b"\x1f\x8b", "a gzip-compressed file"),
    (b"BZh", "a bzip2-compressed file"),
    (b"\xfd7zXZ\x00", "an xz-compressed file"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"\x93NUMPY", "a NumPy .npy array"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"%PDF", "a PDF document"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Excel (.xls) or other OLE2 file"),
)


def binary_kind(head: bytes) -> str | None:
    """What a file starting with ``head`` is (``"a Python pickle"``, ``"an Excel workbook
    (.xlsx)"`` …), or None when it does not start like a known binary format."""
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return "a Python pickle"
    if head.startswith(b"PK\x03\x04") and (b"[Content_Types].xml" in head or b"xl/" in head):
        return "an Excel workbook (.xlsx)"
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    return None


def is_xlsx(head: bytes) -> bool:
    """The bytes start an Excel workbook (a zip holding ``[Content_Types].xml`` / ``xl/``)."""
    return binary_kind(head) == "an Excel workbook (.xlsx)"
