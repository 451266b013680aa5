"""Files of the FPVG protocol (protocols.md §5): ``R.json`` box relevance (written by
:func:`relevance`, the ``vqadiag relevance`` command) and split id lists."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import numpy as np

from vqadiag.data.formats.gqa_typed import read_questions_with_images, read_scenes_with_boxes
from vqadiag.data.formats.relevance import (
    EXCLUSION_REASONS,
    NO_IRRELEVANT_BOXES,
    NO_RELEVANT_BOXES,
    OverlapDenominator,
    compute_relevance,
)
from vqadiag.data.io.jsonio import collector_paused_over, read_json, write_json
from vqadiag.data.io.typed_json import KeyedRecord, read_keyed_records
from vqadiag.errors import DataError, excerpt, record_label


def _index_list(value: Any, path: Path, label: str, field: str) -> list[int]:
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value
    ):
        raise DataError(path, f"{field!r} must be a list of non-negative box indices", label)
    return value


_BoxIndex = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]  # beyond: orjson may read a double


class _RelevanceRecord(KeyedRecord, gc=False):
    relevant: list[_BoxIndex]
    irrelevant: list[_BoxIndex]
    excluded: Literal[EXCLUSION_REASONS] | None = None  # type: ignore[valid-type]


_RELEVANCE = msgspec.json.Decoder(dict[str, _RelevanceRecord])


def _typed_relevance(path: Path) -> dict[str, tuple[list[int], list[int], str | None]] | None:
    """:func:`read_relevance` of a plain ``R.json`` decoded typed (msgspec checks the index
    lists and the reasons; a question id written twice is caught by counting the records
    decoded), or None for anything else: the checked reader then names the problem
    (docs/reliability.md, "Fast paths defer to the checked readers")."""
    records = read_keyed_records(path, _RELEVANCE)
    if records is None:
        return None
    out: dict[str, tuple[list[int], list[int], str | None]] = {}
    for qid, record in records.items():
        rel, irrel, reason = record.relevant, record.irrelevant, record.excluded
        if rel and not set(rel).isdisjoint(irrel):
            return None  # a box both relevant and irrelevant
        if reason is None and not rel:
            reason = NO_RELEVANT_BOXES
        elif reason is None and not irrel:
            reason = NO_IRRELEVANT_BOXES
        out[qid] = (rel, irrel, reason)
    return out


def read_relevance(path: str | Path) -> dict[str, tuple[list[int], list[int], str | None]]:
    """Read an ``R.json`` relevance file → ``{qid: (relevant, irrelevant, excluded reason)}``.

    The reason is the record's ``excluded`` field, else ``no_relevant_boxes`` /
    ``no_irrelevant_boxes`` when a list is empty, else ``None`` (kept).
    """
    p = Path(path)
    typed = _typed_relevance(p)
    if typed is not None:
        return typed
    data = read_json(p)
    if not isinstance(data, dict) or not data:
        raise DataError(p, "expected a JSON object {qid: {relevant: [...], irrelevant: [...]}}")
    out: dict[str, tuple[list[int], list[int], str | None]] = {}
    for qid, record in data.items():
        label = record_label(qid)
        if not isinstance(record, Mapping):
            raise DataError(p, f"expected an object, got {type(record).__name__}", label)
        for field in ("relevant", "irrelevant"):
            if field not in record:
                raise DataError(p, f"missing field {field!r}", label)
        rel = _index_list(record["relevant"], p, label, "relevant")
        irrel = _index_list(record["irrelevant"], p, label, "irrelevant")
        if set(rel) & set(irrel):
            raise DataError(p, "a box is both relevant and irrelevant", label)
        reason = record.get("excluded")
        if reason is not None and reason not in EXCLUSION_REASONS:
            raise DataError(p, f"unknown exclusion reason {reason!r}", label)
        if reason is None and not rel:
            reason = NO_RELEVANT_BOXES
        elif reason is None and not irrel:
            reason = NO_IRRELEVANT_BOXES
        out[str(qid)] = (rel, irrel, reason)
    return out


def read_object_pickles(
    relevant: str | Path, irrelevant: str | Path
) -> dict[str, tuple[list[int], list[int], str | None]]:
    """FPVG's own relevance files, ``{imageId: {qid: [box indices]}}`` pickles of the
    relevant and the irrelevant objects (read without running code,
    :mod:`vqadiag.data.io.safe_pickle`) → the :func:`read_relevance` mapping. A question in
    only one file has no boxes of the other kind."""
    from vqadiag.data.io.safe_pickle import load_plain_pickle

    lists: list[dict[str, list[int]]] = []
    for path in (Path(relevant), Path(irrelevant)):
        data = load_plain_pickle(path)
        if not isinstance(data, dict) or not data:
            raise DataError(path, "expected a pickled dict {imageId: {qid: [box indices]}}")
        boxes: dict[str, list[int]] = {}
        for image_id, per_question in data.items():
            if not isinstance(per_question, dict):
                raise DataError(
                    path, "expected {qid: [box indices]} per image", record_label(image_id)
                )
            for qid, indices in per_question.items():
                label = record_label(qid)
                if str(qid) in boxes:
                    raise DataError(path, "question id under two images", label)
                boxes[str(qid)] = _index_list(list(indices), path, label, "boxes")
        lists.append(boxes)
    rel_boxes, irrel_boxes = lists
    out: dict[str, tuple[list[int], list[int], str | None]] = {}
    for qid in dict.fromkeys([*rel_boxes, *irrel_boxes]):
        rel, irrel = rel_boxes.get(qid, []), irrel_boxes.get(qid, [])
        if set(rel) & set(irrel):
            raise DataError(
                Path(irrelevant), "a box is both relevant and irrelevant", record_label(qid)
            )
        reason = NO_RELEVANT_BOXES if not rel else NO_IRRELEVANT_BOXES if not irrel else None
        out[qid] = (rel, irrel, reason)
    return out


def read_split_ids(path: str | Path) -> list[str]:
    """Question ids of a split: a JSON list of ids or a GQA-format question dict (its keys)."""
    p = Path(path)
    data = read_json(p)
    if isinstance(data, dict):
        ids = [str(k) for k in data]
    elif isinstance(data, list):
        ids = []
        for i, item in enumerate(data):
            if isinstance(item, bool) or not isinstance(item, (str, int)):
                raise DataError(
                    p, f"question id must be a string, got {excerpt(item)}", f"item {i}"
                )
            ids.append(str(item))
    else:
        raise DataError(p, "expected a JSON list of question ids or a question dict")
    if not ids:
        raise DataError(p, "no question ids in file")
    return ids


@collector_paused_over("questions", "scenes", "detections")
def relevance(
    questions: str | Path,
    scenes: str | Path,
    detections: str | Path,
    out: str | Path,
    *,
    overlap_denominator: OverlapDenominator = "detected",
    official: bool = True,
    progress: bool = False,
) -> dict[str, Any]:
    """Write ``{qid: {"relevant": [...], "irrelevant": [...]}}`` to ``out`` (docs/protocols.md §5).

    Relevant: IoU > 0.5 with an annotated object; irrelevant: no annotated
    object covers > 25% of the box (÷ detected area by default, ÷ annotated
    area with ``overlap_denominator="annotated"``). Every question of the file
    gets a record; left-out ones also carry ``"excluded": reason``.

    Returns ``{"n_questions", "n_kept", "excluded": {reason: count},
    "detector": {"questions", "max_boxes": {all, rel, irrel}, "avg_boxes":
    {...}}, "overlap_denominator", "official", "out"}``. ``progress``: bars
    (stderr) for reading the files, matching the boxes and writing ``out``.
    """
    from vqadiag.data.formats.detections import read_detections
    from vqadiag.progress import progress_bar

    qpath, spath = Path(questions), Path(scenes)
    with progress_bar(progress) as bar:
        reading = bar.add_task("read questions and scene graphs", total=2)
        qs = read_questions_with_images(qpath)
        bar.advance(reading)
        needs_scenes = any(_has_annotations(r) for r in qs.values())
        sg = read_scenes_with_boxes(spath) if needs_scenes else {}
        bar.advance(reading)
        matching = bar.add_task("match boxes", total=len(qs))
        with read_detections(detections) as dets:
            result = compute_relevance(
                qs,
                sg,
                dets,
                overlap_denominator=overlap_denominator,
                official=official,
                questions_path=qpath,
                scenes_path=spath,
                on_progress=lambda k: bar.advance(matching, k),
            )
        writing = bar.add_task(f"write {Path(out).name}", total=1)
        write_json(out, result.records(qs))
        bar.advance(writing)
    kept = result.kept
    stats = detector_statistics(
        [result.sets[q][2] for q in kept],
        [len(result.sets[q][0]) for q in kept],
        [len(result.sets[q][1]) for q in kept],
    )
    return {
        "n_questions": len(qs),
        "n_kept": len(kept),
        "excluded": result.excluded_counts(),
        "detector": stats,
        "overlap_denominator": overlap_denominator,
        "official": official,
        "out": str(out),
    }


def _has_annotations(record: Mapping[str, Any]) -> bool:
    ann = record.get("annotations")
    return isinstance(ann, Mapping) and any(ann.get(k) for k in ann)


def detector_statistics(
    n_all: Sequence[int], n_rel: Sequence[int], n_irrel: Sequence[int]
) -> dict[str, object]:
    """#questions kept and max / mean box counts in all | rel | irrel (paper App. A, Table 4)."""
    out: dict[str, object] = {"questions": len(n_all), "max_boxes": {}, "avg_boxes": {}}
    for name, counts in (("all", n_all), ("rel", n_rel), ("irrel", n_irrel)):
        arr = np.asarray(counts, dtype=np.float64)
        out["max_boxes"][name] = int(arr.max()) if arr.size else 0  # type: ignore[index]
        out["avg_boxes"][name] = float(arr.mean()) if arr.size else float("nan")  # type: ignore[index]
    return out
