"""The robustness suite's built basic-question datasets, shared between output folders
through the user's cache (docs/reliability.md, "The shared cache").

Ranking a split's questions against the pool (LASSO especially) takes minutes to tens of
minutes, and gives the same dataset for every model diagnosed on those questions, and for
``diagnose --plan`` before the run. So a dataset the suite builds is also kept in
``<cache>/bqd/<key>/`` (:func:`~vqadiag.data.io.user_cache.user_cache_dir`), and a later
diagnosis of the same questions copies it instead of building it again.

``<key>`` hashes the suite's own key of the dataset (the pool file's sha256, the main
questions in order and the sha256 of their file, the ranker and the seed) with
:func:`code_key`: the source of the code that builds and writes datasets, and the numpy
and scipy versions its arithmetic runs on, so a changed ranking never reuses an old
dataset. An entry is ``bqd.json`` and ``meta.json``, written in that order, each
atomically; ``meta.json`` records the sha256 of ``bqd.json``'s bytes, and an entry whose
bytes do not match it is passed over and rebuilt (the bytes are hashed as they are
copied, and the copy is committed only when they match).
"""

from __future__ import annotations

import functools
import hashlib
import shutil
from pathlib import Path

from vqadiag.data.io.atomic import atomic_write
from vqadiag.data.io.jsonio import read_json, stable_hash, write_json
from vqadiag.data.io.user_cache import user_cache_dir
from vqadiag.errors import DataError


@functools.cache
def code_key() -> str:
    """Digest of the source of the modules that build and write basic-question datasets,
    with the numpy and scipy versions (module docstring)."""
    import numpy
    import scipy

    from vqadiag.data.formats import bqd as bqd_format
    from vqadiag.protocols.robustness import basic_questions

    files = sorted(Path(basic_questions.__file__).parent.glob("*.py"))
    files.append(Path(bqd_format.__file__))
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(f"numpy {numpy.__version__} scipy {scipy.__version__}".encode())
    return digest.hexdigest()[:16]


def _entry(key: str) -> Path | None:
    folder = user_cache_dir()
    return None if folder is None else folder / "bqd" / stable_hash([key, code_key()])


class _Mismatch(Exception):
    """A shared entry whose bytes are not the ones its ``meta.json`` records."""


def fetch_shared(key: str, target: Path) -> str | None:
    """Copy the shared dataset of ``key`` to ``target`` (atomically) and return its
    sha256, or None when the cache holds none, or none whose bytes match its record."""
    entry = _entry(key)
    if entry is None:
        return None
    try:
        meta = read_json(entry / "meta.json")
        if not isinstance(meta, dict) or meta.get("key") != key:
            return None
        digest = hashlib.sha256()
        with open(entry / "bqd.json", "rb") as src, atomic_write(target) as dst:
            for chunk in iter(lambda: src.read(1 << 20), b""):
                digest.update(chunk)
                dst.write(chunk)
            if digest.hexdigest() != meta.get("sha256"):
                raise _Mismatch  # leaves the target as it was: atomic_write commits nothing
    except (OSError, DataError, _Mismatch):
        return None
    return digest.hexdigest()


def keep_shared(key: str, built: Path, sha256: str) -> None:
    """Keep the dataset ``built`` (of digest ``sha256``) as the shared entry of ``key``;
    a cache that cannot be written is passed over."""
    entry = _entry(key)
    if entry is None:
        return
    try:
        with open(built, "rb") as src, atomic_write(entry / "bqd.json") as dst:
            shutil.copyfileobj(src, dst)
        write_json(entry / "meta.json", {"key": key, "sha256": sha256})
    except (OSError, DataError):
        return
