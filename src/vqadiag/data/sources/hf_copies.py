"""Where a Hugging Face dataset copy's tables are, and which config and split each holds.

A copy is found from what ``--data`` names (docs/data-sources.md, "Hugging Face
copies"):

* **a name** (``lmms-lab/GQA``, or ``hf:lmms-lab/GQA``): looked up in the local caches
  only, as ``HF_DATASETS_OFFLINE=1`` does: the hub cache (``HF_HUB_CACHE``, the
  snapshot ``refs/main`` names, through ``huggingface_hub``), then the ``datasets``
  cache (``HF_DATASETS_CACHE/<org>___<name>``). The hub is never contacted; a name in
  neither is one line naming both places and the download command;
* **a hub cache folder** (``…/hub/datasets--lmms-lab--GQA``): its ``refs/main``
  snapshot (the only snapshot when there is no ref);
* **any other folder**: a snapshot, a clone of the dataset repository, a ``datasets``
  cache folder or a ``save_to_disk`` folder; every ``.parquet`` and ``.arrow`` file
  under it is a table.

Each table's config and split come from its path, as the hub and ``datasets`` lay
them out: ``<config>/<split>-00000-of-00001.parquet``, ``<config>/<split>/0000.parquet``
(the hub's Parquet conversion), ``data/<split>-….parquet`` (the default config),
``<config>/<version>/<hash>/<builder>-<split>[-00000-of-00002].arrow`` (the
``datasets`` cache) and ``<split>/data-00000-of-00001.arrow`` beside a ``state.json``
(``save_to_disk``, whose ``state.json`` names the split).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vqadiag.data.io.jsonio import read_json
from vqadiag.errors import DataError

TABLE_SUFFIXES = (".parquet", ".arrow")
_SHARD = re.compile(r"-\d{5}-of-\d{5}(?:-[0-9a-f]{16})?$")
_HUB_FOLDER = re.compile(r"^datasets--(?P<org>[^/]+?)--(?P<name>[^/]+)$")
_NAME = re.compile(r"^(?:hf:)?(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)$")
#: files up to this size are digested whole; a larger one by its size, its first and
#: last MiB (a Parquet file's footer: schema, row groups and column statistics)
WHOLE_DIGEST_LIMIT = 256 << 20
_EDGE = 1 << 20


@dataclass(frozen=True)
class TablePath:
    """One table file of a copy and the config and split its path names."""

    path: Path
    relative: str
    config: str
    split: str


@dataclass(frozen=True)
class CopyFolder:
    """A dataset copy's folder, the tables under it, and what is known of where it came
    from (``name`` and ``revision`` when the hub cache names them)."""

    root: Path
    tables: tuple[TablePath, ...]
    name: str | None = None
    revision: str | None = None


def dataset_name(spec: str) -> str | None:
    """The repository id of ``spec`` when it reads as a dataset name (``org/name``,
    optionally ``hf:``-prefixed), else None."""
    match = _NAME.match(spec)
    return match.group("repo") if match else None


def has_tables(folder: Path) -> bool:
    """Whether ``folder`` is a hub cache folder or holds a Parquet or Arrow file."""
    if (folder / "snapshots").is_dir():
        return True
    return any(_table_files(folder))


def copy_of_name(repo: str) -> CopyFolder:
    """The local copy of the dataset ``repo`` (module docstring); one line when there is
    none."""
    from huggingface_hub import constants

    hub = Path(constants.HF_HUB_CACHE) / f"datasets--{repo.replace('/', '--')}"
    if (hub / "snapshots").is_dir():
        return copy_in_folder(hub)
    cache = _datasets_cache()
    org, name = repo.split("/", 1)
    for candidate in (cache / f"{org}___{name}", cache / f"{org}___{name}".lower()):
        if candidate.is_dir() and any(_table_files(candidate)):
            return _copy(candidate, name=repo)
    raise DataError(
        repo,
        f"is not in the local Hugging Face caches (looked in {hub} and "
        f"{cache / (org + '___' + name)}); vqadiag never downloads: fetch it once with "
        f"`hf download {repo} --repo-type dataset` (or load it with lmms-eval), then rerun",
    )


def copy_in_folder(folder: Path) -> CopyFolder:
    """The copy in ``folder``: a hub cache folder's ``refs/main`` snapshot, else the
    folder itself (module docstring)."""
    match = _HUB_FOLDER.match(folder.name)
    name = f"{match.group('org')}/{match.group('name')}" if match else None
    snapshots = folder / "snapshots"
    if snapshots.is_dir():
        revision = _main_revision(folder, snapshots)
        return _copy(snapshots / revision, name=name, revision=revision)
    if folder.parent.name == "snapshots":
        hub = _HUB_FOLDER.match(folder.parent.parent.name)
        if hub:
            name = f"{hub.group('org')}/{hub.group('name')}"
        return _copy(folder, name=name, revision=folder.name)
    return _copy(folder, name=name)


def _main_revision(folder: Path, snapshots: Path) -> str:
    ref = folder / "refs" / "main"
    if ref.is_file():
        revision = ref.read_text(encoding="utf-8").strip()
        if (snapshots / revision).is_dir():
            return revision
    found = sorted(p.name for p in snapshots.iterdir() if p.is_dir())
    if len(found) == 1:
        return found[0]
    raise DataError(
        snapshots,
        f"holds {len(found)} snapshots and no refs/main names one of them: give the "
        "snapshot folder itself as --data",
    )


def _datasets_cache() -> Path:
    """``datasets``' cache folder: ``HF_DATASETS_CACHE``, else ``$HF_HOME/datasets``."""
    from huggingface_hub import constants

    env = os.environ.get("HF_DATASETS_CACHE")
    return Path(env) if env else Path(constants.HF_HOME) / "datasets"


def _table_files(folder: Path):
    """The tables under ``folder``: not hidden, not the ``cache-*.arrow`` files that
    ``datasets``' ``map`` leaves, and of a ``datasets`` cache folder holding several
    builds of one config (``<config>/<version>/<hash>/``) only the newest."""
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=True):
        dirnames[:] = _newest_build(Path(dirpath), sorted(d for d in dirnames if d[0] != "."))
        for name in sorted(filenames):
            if name.endswith(TABLE_SUFFIXES) and not name.startswith((".", "cache-")):
                yield Path(dirpath) / name


def _newest_build(parent: Path, names: list[str]) -> list[str]:
    """``names`` (sub-folders of ``parent``), or the newest one when they are the hash
    folders of ``datasets`` builds (each holding ``dataset_info.json``)."""
    builds = [n for n in names if (parent / n / "dataset_info.json").is_file()]
    if len(builds) < 2 or len(builds) != len(names):
        return names
    return [max(builds, key=lambda n: (parent / n / "dataset_info.json").stat().st_mtime_ns)]


def _copy(root: Path, *, name: str | None = None, revision: str | None = None) -> CopyFolder:
    tables = tuple(_table_path(root, p) for p in _table_files(root))
    if not tables:
        raise DataError(root, "holds no Parquet or Arrow file of a Hugging Face dataset")
    return CopyFolder(root, tables, name, revision)


def _table_path(root: Path, path: Path) -> TablePath:
    """The config and split that ``path``'s place in the copy names (module docstring)."""
    parts = path.relative_to(root).parts
    stem = _SHARD.sub("", path.stem)
    folders = parts[:-1]
    if path.suffix == ".arrow":
        state = path.parent / "state.json"
        if stem == "data" and state.is_file():  # save_to_disk
            split = _state_split(state) or path.parent.name
            config = _info_config(path.parent / "dataset_info.json") or "default"
            return TablePath(path, "/".join(parts), config, split)
        split = stem.split("-", 1)[1] if "-" in stem else stem
        config = folders[-3] if len(folders) >= 3 else (folders[0] if folders else "default")
        return TablePath(path, "/".join(parts), config, split)
    if stem.isdigit() and len(folders) >= 1:  # <config>/<split>/0000.parquet
        split = folders[-1]
        config = folders[-2] if len(folders) >= 2 else "default"
    else:
        split = stem
        config = folders[0] if folders and folders[0] != "data" else "default"
    return TablePath(path, "/".join(parts), config, split)


def _state_split(state: Path) -> str | None:
    try:
        value = read_json(state).get("_split")
    except (DataError, AttributeError):
        return None
    return str(value) if isinstance(value, str) else None


def _info_config(info: Path) -> str | None:
    if not info.is_file():
        return None
    try:
        value = read_json(info).get("config_name")
    except (DataError, AttributeError):
        return None
    return str(value) if isinstance(value, str) else None


def content_digest(path: Path) -> str:
    """A digest of a table file's content that needs no path: the hub blob's own name
    when the file is a hub cache link to ``blobs/<sha256>``; else BLAKE2b of the bytes
    (of the size and first and last MiB past :data:`WHOLE_DIGEST_LIMIT`)."""
    resolved = path.resolve()
    if resolved.parent.name == "blobs" and re.fullmatch(r"[0-9a-f]{40,64}", resolved.name):
        return resolved.name
    size = resolved.stat().st_size
    digest = hashlib.blake2b(digest_size=16)
    digest.update(str(size).encode())
    with resolved.open("rb") as handle:
        if size <= WHOLE_DIGEST_LIMIT:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        else:
            digest.update(handle.read(_EDGE))
            handle.seek(size - _EDGE)
            digest.update(handle.read(_EDGE))
    return digest.hexdigest()


def describe(copy: CopyFolder) -> dict[str, Any]:
    """The copy as ``results.json`` ``data.source`` records it."""
    return {
        "name": copy.name,
        "revision": copy.revision,
        "tables": [{"file": t.relative, "config": t.config, "split": t.split} for t in copy.tables],
    }
