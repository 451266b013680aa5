"""Files of the FPVG protocol (protocols.md §5): ``R.json`` box relevance and split id lists."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from vqadiag.data.jsonio import read_json
from vqadiag.data.relevance import EXCLUSION_REASONS, NO_IRRELEVANT_BOXES, NO_RELEVANT_BOXES
from vqadiag.data.typed_json import KeyedRecord, read_keyed_records
from vqadiag.errors import DataError, record_label


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
    :mod:`vqadiag.data.safe_pickle`) → the :func:`read_relevance` mapping. A question in
    only one file has no boxes of the other kind."""
    from vqadiag.data.safe_pickle import load_plain_pickle

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
                raise DataError(p, f"question id must be a string, got {item!r}", f"item {i}")
            ids.append(str(item))
    else:
        raise DataError(p, "expected a JSON list of question ids or a question dict")
    if not ids:
        raise DataError(p, "no question ids in file")
    return ids
