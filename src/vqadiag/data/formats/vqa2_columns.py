"""Columnar reading of plain official VQA v2 files, for ``score vqa`` (docs/vqa.md, "Speed").

The official questions, annotations and results files are decoded with msgspec into
typed records holding only the fields scoring reads, then laid out as columns: integer
id arrays, the answer strings flat in annotator order with a count per question. No
dict per record is built. A diagnosis's slim annotation entries
(:func:`read_annotation_entries`) are read the same way.

Every reader returns ``None`` unless the file is plainly the official shape with integer
question and image ids and unique question ids; the checked readers of
:mod:`vqadiag.data.formats.vqa2` and :mod:`vqadiag.data.formats.predictions` then read it
and name any problem (docs/reliability.md, "Fast paths defer to the checked readers").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from vqadiag.data.formats.predictions import LINE_OR_TABLE_SUFFIXES
from vqadiag.data.formats.result_lists import VQA_RESULTS
from vqadiag.data.io.jsonio import paused_gc
from vqadiag.data.io.typed_json import JSONInt, decode_record, decode_records, raw_records


class _Question(msgspec.Struct, gc=False):
    question_id: JSONInt
    image_id: JSONInt
    question: str


class _Answer(msgspec.Struct, gc=False):
    answer: str


class _Annotation(msgspec.Struct, gc=False):
    question_id: JSONInt
    question_type: str
    answer_type: str
    answers: list[_Answer]
    image_id: JSONInt | msgspec.UnsetType = msgspec.UNSET
    multiple_choice_answer: str | msgspec.UnsetType = msgspec.UNSET


_QUESTIONS = msgspec.json.Decoder(list[_Question])
_ANNOTATIONS = msgspec.json.Decoder(list[_Annotation])
_ANNOTATION = msgspec.json.Decoder(_Annotation)


@dataclass(frozen=True)
class QuestionColumns:
    """A questions file: ``question_ids`` and ``image_ids`` (int64, file order)."""

    question_ids: np.ndarray
    image_ids: np.ndarray


@dataclass(frozen=True)
class AnnotationColumns:
    """An annotations file in file order. ``answers`` holds every annotator answer, flat,
    ``answer_counts[k]`` of them for question k; ``image_ids`` is None when no record
    has one."""

    question_ids: np.ndarray
    image_ids: np.ndarray | None
    question_types: list[str]
    answer_types: list[str]
    answers: list[str]
    answer_counts: np.ndarray


@dataclass(frozen=True)
class ResultColumns:
    """A VQA results list ``[{"question_id": int, "answer": str}, ...]`` in file order."""

    question_ids: np.ndarray
    answers: list[str]


def _int64(values: Iterable[int], n: int) -> np.ndarray | None:
    """The ids as an int64 array, or None when one does not fit (the checked reader takes
    it as a string)."""
    try:
        return np.fromiter(values, dtype=np.int64, count=n)
    except OverflowError:
        return None


def _question_ids(records: list) -> np.ndarray | None:
    """The records' question ids as int64, or None when one does not fit or one repeats
    (the checked reader names it)."""
    ids = _int64((r.question_id for r in records), len(records))
    if ids is None:
        return None
    ordered = np.sort(ids)
    return None if bool(np.any(ordered[1:] == ordered[:-1])) else ids


def read_question_columns(path: str | Path) -> QuestionColumns | None:
    """The ids of an official questions file, or None (see the module docstring)."""
    records = decode_records(path, "questions", _QUESTIONS)
    if records is None:
        return None
    ids = _question_ids(records)
    images = _int64((r.image_id for r in records), len(records))
    if ids is None or images is None:
        return None
    return QuestionColumns(ids, images)


def read_annotation_columns(path: str | Path) -> AnnotationColumns | None:
    """An official annotations file as columns, or None (see the module docstring)."""
    records = decode_records(path, "annotations", _ANNOTATIONS)
    if records is None:
        return None
    n = len(records)
    ids = _question_ids(records)
    counts = np.fromiter((len(r.answers) for r in records), dtype=np.int64, count=n)
    if ids is None or not counts.all():
        return None
    try:
        images = _int64((r.image_id for r in records), n)
    except TypeError:  # some record has no image_id: scored only if none has one
        if any(r.image_id is not msgspec.UNSET for r in records):
            return None
        images = np.zeros(0, dtype=np.int64)
    if images is None:
        return None
    return AnnotationColumns(
        question_ids=ids,
        image_ids=images if len(images) else None,
        question_types=[r.question_type for r in records],
        answer_types=[r.answer_type for r in records],
        answers=[a.answer for r in records for a in r.answers],
        answer_counts=counts,
    )


def read_annotation_entries(path: str | Path) -> dict[str, dict[str, Any]] | None:
    """``read_vqa_annotations(path, slim=True)`` of a plainly official annotations file
    (:func:`vqadiag.data.formats.vqa2.read_vqa_annotations`): ``{qid: {question_id,
    image_id (when present), question_type, answer_type, multiple_choice_answer (the most
    frequent answer, first seen wins ties, when absent), answer_list}}``, each answer
    string kept once, the records decoded one at a time (:func:`raw_records
    <vqadiag.data.io.typed_json.raw_records>`); None otherwise (see the module docstring)."""
    records = raw_records(path, "annotations")
    if records is None:
        return None
    with paused_gc():
        return _annotation_entries(records)


def _annotation_entries(records: list[msgspec.Raw]) -> dict[str, dict[str, Any]] | None:
    shared: dict[str, str] = {}
    keep = shared.setdefault
    out: dict[str, dict[str, Any]] = {}
    for raw in records:
        r = decode_record(raw, _ANNOTATION)
        if r is None:
            return None
        qid = str(r.question_id)
        answers = [keep(a.answer, a.answer) for a in r.answers]
        if not answers or qid in out:
            return None
        entry: dict[str, Any] = {
            "question_id": qid,
            "question_type": keep(r.question_type, r.question_type),
            "answer_type": keep(r.answer_type, r.answer_type),
            "multiple_choice_answer": (
                Counter(answers).most_common(1)[0][0]
                if r.multiple_choice_answer is msgspec.UNSET
                else keep(r.multiple_choice_answer, r.multiple_choice_answer)
            ),
            "answer_list": answers,
        }
        if r.image_id is not msgspec.UNSET:
            entry["image_id"] = str(r.image_id)
        out[qid] = entry
    return out


def read_result_columns(path: str | Path) -> ResultColumns | None:
    """A plain VQA results list as columns, or None (see the module docstring; a file
    with any other field, e.g. ``probs``, goes through the checked reader)."""
    if Path(path).suffix.lower() in LINE_OR_TABLE_SUFFIXES:
        return None
    records = decode_records(path, None, VQA_RESULTS)
    if records is None:
        return None
    ids = _question_ids(records)
    if ids is None:
        return None
    return ResultColumns(ids, [r.answer for r in records])
