"""One Parquet or Arrow file of a Hugging Face dataset copy, read with pyarrow.

The copies that lmms-eval and ``datasets`` leave on disk are column files
(docs/data-sources.md, "Hugging Face copies"): Parquet in the hub cache or a clone of
the dataset repository, Arrow IPC streams in the ``datasets`` cache or a
``save_to_disk`` folder. :class:`TableFile` gives both the same three things:

* the column names (:attr:`TableFile.columns`);
* every row's small columns as Python values, in batches (:meth:`TableFile.rows`),
  never the image column;
* one cell of one row, read when asked (:meth:`TableFile.cell`): the image bytes. A
  Parquet file reads the one column of the row group that holds the row (the last few
  row groups read, of every file, are kept: :data:`ROW_GROUP_CACHE_BYTES` in all); an
  Arrow file is memory-mapped, so a cell is a slice of the mapping. Nothing is
  extracted to disk.

A file pyarrow cannot read is one :class:`DataError` naming it.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from vqadiag.data.io.lru import ByteLRU
from vqadiag.errors import DataError

#: the most bytes of Parquet row-group columns kept for image reads
ROW_GROUP_CACHE_BYTES = 256 << 20
#: rows converted to Python values at a time by :meth:`TableFile.rows`
ROWS_PER_BATCH = 4096
#: the row-group columns read for images, shared by every Parquet file of the process
ROW_GROUPS: ByteLRU[tuple[str, int, str], Any] = ByteLRU(
    ROW_GROUP_CACHE_BYTES, lambda column: int(column.nbytes)
)


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.ipc
        import pyarrow.parquet
    except ImportError:
        raise DataError(
            None,
            "reading a Hugging Face dataset copy needs pyarrow: pip install 'vqadiag[datasets]'",
        ) from None
    return pyarrow


class TableFile:
    """A Parquet (``.parquet``) or Arrow IPC (``.arrow``) file (module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.format = "parquet" if self.path.suffix == ".parquet" else "arrow"
        self._lock = threading.Lock()
        self._parquet: Any = None
        self._table: Any = None
        self._starts: list[int] = []
        pa = _pyarrow()
        try:
            if self.format == "parquet":
                self._parquet = pa.parquet.ParquetFile(str(self.path), memory_map=True)
                meta = self._parquet.metadata
                sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
                self._starts = [sum(sizes[:i]) for i in range(len(sizes))]
                self.columns: list[str] = list(self._parquet.schema_arrow.names)
                self.num_rows = int(meta.num_rows)
            else:
                self._table = _read_arrow(pa, self.path)
                self.columns = list(self._table.column_names)
                self.num_rows = int(self._table.num_rows)
        except (OSError, pa.ArrowException) as err:
            raise DataError(self.path, f"cannot read the {self.format} file: {err}") from None

    def rows(self, columns: Sequence[str]) -> Iterator[dict[str, Any]]:
        """Every row's ``columns`` as a dict of Python values (structs as dicts, lists as
        lists), in file order."""
        pa = _pyarrow()
        try:
            if self._parquet is not None:
                batches = self._parquet.iter_batches(
                    batch_size=ROWS_PER_BATCH, columns=list(columns)
                )
            else:
                batches = self._table.select(list(columns)).to_batches(ROWS_PER_BATCH)
            for batch in batches:
                yield from batch.to_pylist()
        except (OSError, pa.ArrowException) as err:
            raise DataError(self.path, f"cannot read the {self.format} file: {err}") from None

    def cell(self, row: int, column: str) -> Any:
        """The Python value of ``column`` in row ``row`` (0-based, file order)."""
        if not 0 <= row < self.num_rows:
            raise DataError(self.path, f"has no row {row} ({self.num_rows} rows)")
        pa = _pyarrow()
        try:
            if self._table is not None:
                return self._table.column(column)[row].as_py()
            group = bisect.bisect_right(self._starts, row) - 1
            key = (str(self.path), group, column)
            values = ROW_GROUPS.get(key)
            if values is None:
                with self._lock:  # pyarrow's ParquetFile is not safe across threads
                    values = self._parquet.read_row_group(group, columns=[column]).column(0)
                values = ROW_GROUPS.put(key, values)
            return values[row - self._starts[group]].as_py()
        except (OSError, pa.ArrowException) as err:
            raise DataError(self.path, f"cannot read row {row}: {err}") from None


def _read_arrow(pa: Any, path: Path) -> Any:
    """The memory-mapped table of an Arrow IPC file: a stream (what ``datasets`` writes)
    or the random-access file format."""
    source = pa.memory_map(str(path))
    try:
        return pa.ipc.open_stream(source).read_all()
    except pa.ArrowInvalid:
        return pa.ipc.open_file(source).read_all()
