"""A dataset copy as the official layout: question files written, images left in place.

``diagnose`` reads a Hugging Face copy or a VLMEvalKit TSV through a *prepared copy*
in its result folder (``OUT/source/``, docs/data-sources.md, "How a copy is read"):

    OUT/source/gqa/{split}_{balanced,all}_questions.json     the official records
    OUT/source/vqa2/v2_OpenEnded_mscoco_{val2014,…}_questions.json (+ annotations)
    OUT/source/images.index.json                             where each image's cell is
    OUT/source/source.json                                   the source and its fingerprint

Only the questions (and VQA v2 annotations) are written; every image stays in its
Parquet / Arrow / TSV cell and is read when a model needs it
(:mod:`vqadiag.data.sources.embedded_images`). Everything downstream (the suites, the
scorers, the image cache) reads the prepared copy as it reads the official folders.

``source.json`` is written last, so a copy without it is unfinished; the copy is
built in a temporary folder and moved into place whole. A later run reuses it when
its fingerprint is the source's (:func:`source_fingerprint`: the content of every table
or the TSV, never their paths, so two copies of the same data agree and copies of
different data never share a prepared copy or a store's answers by mistake) and its
files are where, and as large and as recent as, the image index says.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from vqadiag.data.io.jsonio import read_json, stable_hash, write_json
from vqadiag.data.sources.embedded_images import INDEX_KIND, INDEX_NAME
from vqadiag.data.sources.hf_copies import content_digest
from vqadiag.data.sources.resolve import DataSource
from vqadiag.errors import DataError

FOLDER = "source"
MANIFEST = "source.json"
MANIFEST_KIND = "vqadiag.prepared-source"
VQA_FILE_SPLITS = {"val": "val2014", "train": "train2014", "test": "test2015"}


def source_fingerprint(source: DataSource, split: str) -> str:
    """The content of the source as the diagnosis reads it: each table's digest with its
    config and split (a TSV: its digest and the split it is read as)."""
    if source.format == "vlmevalkit":
        from vqadiag.data.sources.vlmevalkit_tsv import split_of

        return stable_hash(
            ["vlmevalkit", content_digest(source.location), split_of(source.location, split)]
        )
    assert source.copy is not None
    tables = sorted([t.config, t.split, content_digest(t.path)] for t in source.copy.tables)
    return stable_hash(["huggingface", tables])


def prepared_copy(source: DataSource, out: Path, split: str) -> Path:
    """The official-layout folder of ``source`` in ``out`` (module docstring): reused
    when its manifest has the source's fingerprint, else (re)built."""
    folder = out / FOLDER
    fingerprint = source_fingerprint(source, split)
    where = _files_at(source)
    manifest = folder / MANIFEST
    if manifest.is_file():
        try:
            recorded = read_json(manifest)
        except DataError:
            recorded = None
        if (
            isinstance(recorded, dict)
            and recorded.get("fingerprint") == fingerprint
            and recorded.get("files") == where
        ):
            return folder
    building = out / f".{FOLDER}.building-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    try:
        _write_copy(source, building, split)
        write_json(
            building / MANIFEST,
            {
                "kind": MANIFEST_KIND,
                "fingerprint": fingerprint,
                "files": where,
                "source": source.describe(),
            },
            indent=True,
        )
        _replace_folder(building, folder)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return folder


def _files_at(source: DataSource) -> list[list[Any]]:
    """Where the source's files are now (path, size, modification time): the image index
    names them, so a copy moved or changed since is prepared again."""
    paths = [source.location] if source.copy is None else [t.path for t in source.copy.tables]
    out = []
    for path in paths:
        stat = path.resolve().stat()
        out.append([str(path.resolve()), stat.st_size, stat.st_mtime_ns])
    return out


def recorded_source(root: Path) -> dict[str, Any] | None:
    """``{fingerprint, source}`` of a prepared copy, None for any other folder."""
    manifest = root / MANIFEST
    if not manifest.is_file():
        return None
    recorded = read_json(manifest)
    if not isinstance(recorded, dict) or recorded.get("kind") != MANIFEST_KIND:
        return None
    return recorded


def _replace_folder(new: Path, folder: Path) -> None:
    old = folder.with_name(f".{folder.name}.old-{os.getpid()}")
    if folder.exists():
        folder.rename(old)
    new.rename(folder)
    shutil.rmtree(old, ignore_errors=True)


def _write_copy(source: DataSource, folder: Path, split: str) -> None:
    if source.format == "vlmevalkit":
        _write_tsv_copy(source.location, folder, split)
        return
    from vqadiag.data.sources.lmms_layout import read_copy

    assert source.copy is not None
    data = read_copy(source.copy.tables)
    if not (data.gqa_files or data.vqa_questions):
        raise DataError(
            source.location,
            "holds no GQA or VQA v2 table vqadiag reads (GQA: id, imageId, question, answer; "
            "VQA v2: question_id, question, image_id)",
        )
    for name, records in data.gqa_files.items():
        write_json(folder / "gqa" / name, records)
    for vqa_split, questions in data.vqa_questions.items():
        name = VQA_FILE_SPLITS.get(vqa_split, vqa_split)
        write_json(
            folder / "vqa2" / f"v2_OpenEnded_mscoco_{name}_questions.json",
            {"data_subtype": name, "questions": questions},
        )
        annotations = data.vqa_annotations.get(vqa_split)
        if annotations:
            write_json(
                folder / "vqa2" / f"v2_mscoco_{name}_annotations.json",
                {"data_subtype": name, "annotations": annotations},
            )
    index = {
        dataset: {
            "tables": [
                {"path": str(t.path.resolve()), "format": t.path.suffix[1:], "column": "image"}
                for t in rows.tables
            ],
            "rows": {k: list(v) for k, v in rows.rows.items()},
        }
        for dataset, rows in data.images.items()
    }
    write_json(folder / INDEX_NAME, {"kind": INDEX_KIND, "datasets": index})


def _write_tsv_copy(path: Path, folder: Path, split: str) -> None:
    from vqadiag.data.sources.vlmevalkit_tsv import read_tsv_questions

    tsv = read_tsv_questions(path, split)
    write_json(folder / "gqa" / tsv.file_name, tsv.records)
    table = {"path": str(path.resolve()), "format": "tsv", "column": "image"}
    rows = {image_id: [0, row] for image_id, row in tsv.image_rows.items()}
    write_json(
        folder / INDEX_NAME,
        {"kind": INDEX_KIND, "datasets": {"gqa": {"tables": [table], "rows": rows}}},
    )


def available_splits(folder: Path) -> list[str]:
    """The splits whose question files a prepared copy holds (for the error of a
    ``--split`` it lacks)."""
    names = [p.name for p in folder.glob("gqa/*_questions.json")]
    splits = {n.split("_", 1)[0] for n in names}
    for p in folder.glob("vqa2/v2_OpenEnded_mscoco_*_questions.json"):
        file_split = p.name.removeprefix("v2_OpenEnded_mscoco_").removesuffix("_questions.json")
        splits.add({v: k for k, v in VQA_FILE_SPLITS.items()}.get(file_split, file_split))
    return sorted(splits)
