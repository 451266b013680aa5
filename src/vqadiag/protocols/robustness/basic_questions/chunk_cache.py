"""Per-chunk checkpoints of a basic-question ranking (docs/reliability.md, "Resume").

Ranking the main questions against the pool (LASSO especially) is the slow part of
``bq build`` and of the robustness suite's own dataset. Each finished chunk's results
are written atomically to ``.{out}.chunks-{key}/{i}.json`` beside the dataset file,
where ``key`` hashes everything that shapes the results (pool and main questions,
ranker and its parameters, chunk size, seed); a killed build resumes and computes only
the chunks it lacks, and the folder is removed once the dataset is written. Numpy
arrays are stored with their dtype and come back identical.
"""

from __future__ import annotations

import glob
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.data.io.atomic import remove_stale_temporaries
from vqadiag.data.io.jsonio import read_json, write_json
from vqadiag.errors import DataError


def _encode(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return {"__array__": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, np.generic):
        return value.item()
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and "__array__" in value:
        return np.asarray(value["__array__"], dtype=value["dtype"])
    return value


class ChunkCache:
    """The finished chunks of one build (module docstring)."""

    def __init__(self, out: str | Path, key: str) -> None:
        target = Path(out)
        self.prefix = f".{target.name}.chunks-"
        self.parent = target.parent
        self.folder = self.parent / f"{self.prefix}{key}"
        # killed builds' temporaries: of the dataset file, and of this build's chunks
        remove_stale_temporaries(self.parent, glob.escape(target.name))
        if self.folder.is_dir():
            remove_stale_temporaries(self.folder)

    def get(self, index: int) -> list[dict[str, Any]] | None:
        """Chunk ``index``'s results, or None when not finished (or unreadable)."""
        path = self.folder / f"{index}.json"
        if not path.is_file():
            return None
        try:
            rows = read_json(path)
        except DataError:
            return None
        return [{k: _decode(v) for k, v in row.items()} for row in rows]

    def put(self, index: int, rows: Sequence[dict[str, Any]]) -> None:
        """Record chunk ``index``'s results (atomically)."""
        encoded = [{k: _encode(v) for k, v in row.items()} for row in rows]
        write_json(self.folder / f"{index}.json", encoded)

    def clear(self) -> None:
        """Remove this build's checkpoints and those of other keys for the same file."""
        for folder in self.parent.glob(f"{self.prefix}*"):
            shutil.rmtree(folder, ignore_errors=True)
