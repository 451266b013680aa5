"""GQA-OOD's released split files in a diagnosis (docs/protocols.md §3, docs/data-sources.md).

GQA-OOD publishes its testdev and val splits as ``ood_{split}_head.json`` and
``ood_{split}_tail.json`` (with ``ood_{split}_all.json``, their union); testdev's
questions carry no ``groups`` to rebuild the split from in every copy, so a
diagnosis takes the released files when they are given (``--ood-split DIR``) or lie
beside the GQA question files.

The released records are joined to the diagnosed questions by question id. A copy
that numbers its questions itself (a VLMEvalKit TSV without a ``question_id`` column)
shares no id with them; then a released question is joined to the diagnosed question
with the same text and gold answer, where that pair is unique on both sides
(``split.joined_on`` says which join was made, ``split.n_joined`` how many questions
it matched). Released questions that were not diagnosed are left out of head and tail.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.errors import DataError


def released_files(folder: Path, split: str) -> tuple[Path, Path] | None:
    """``(head, tail)`` of ``split`` in ``folder``, None when they are not both there."""
    head, tail = folder / f"ood_{split}_head.json", folder / f"ood_{split}_tail.json"
    return (head, tail) if head.is_file() and tail.is_file() else None


def _text_key(record: Mapping[str, Any]) -> tuple[str, str]:
    return (" ".join(str(record.get("question", "")).lower().split()), str(record.get("answer")))


def _unique_keys(records: Mapping[str, Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    seen: dict[tuple[str, str], str | None] = {}
    for qid, record in records.items():
        key = _text_key(record)
        seen[key] = None if key in seen else qid
    return {k: q for k, q in seen.items() if q is not None}


def join_released(
    inputs: Any, diagnosed: Mapping[str, Mapping[str, Any]], source: Path
) -> tuple[Any, dict[str, str]]:
    """``inputs`` (a released split, :func:`~vqadiag.protocols.ood.score.released_inputs`)
    kept to the diagnosed questions, and ``{released id: diagnosed id}`` (module
    docstring); no question in common is one :class:`DataError`."""
    by_id = {q: q for q in inputs.ids if q in diagnosed}
    joined_on = "id"
    mapping = by_id
    if not by_id:
        released = _unique_keys(inputs.members)
        ours = _unique_keys(diagnosed)
        mapping = {released[k]: ours[k] for k in released.keys() & ours.keys()}
        joined_on = "question text and answer"
    if not mapping:
        raise DataError(
            source, "the released GQA-OOD split shares no question with the diagnosed ones "
            "(neither an id nor a question text with its answer)",
        )  # fmt: skip
    keep = np.fromiter((q in mapping for q in inputs.ids), dtype=bool, count=len(inputs.ids))
    split = {**inputs.split, "joined_on": joined_on, "n_joined": len(mapping)}
    kept = replace(
        inputs, scored=inputs.scored & keep, head=inputs.head & keep, tail=inputs.tail & keep,
        split=split,
    )  # fmt: skip
    return kept, mapping
