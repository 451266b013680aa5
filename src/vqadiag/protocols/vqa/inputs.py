"""What ``score vqa`` scores: the annotated questions with their aligned predictions
(docs/vqa.md, "`vqadiag score vqa`" and "Speed").

:func:`read_vqa_inputs` first tries the columnar fast path
(:mod:`vqadiag.data.formats.vqa2_columns`:
official files with integer ids, checked with array operations) and otherwise, or at
the first doubt, the checked readers, which give the same inputs or name the problem
(docs/reliability.md, "Fast paths defer to the checked readers").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vqadiag.data.formats.predictions import align_predictions, answers_of, read_predictions
from vqadiag.data.formats.vqa2 import check_questions, read_vqa_annotations, read_vqa_questions
from vqadiag.data.formats.vqa2_columns import (
    read_annotation_columns,
    read_question_columns,
    read_result_columns,
)
from vqadiag.data.io.jsonio import paused_gc


@dataclass(frozen=True)
class VQAInputs:
    """The annotated questions in annotation-file order: ids, predictions (None where
    missing), the flat annotator answers with a count per question, and the types."""

    question_ids: list[str]
    predictions: list[str | None]
    answers: list[str]
    answer_counts: np.ndarray
    answer_types: list[str]
    question_types: list[str]
    #: predictions that were JSON booleans or numbers, read as yes / no / digits
    converted: int = 0


def _positions(keys: np.ndarray, values: np.ndarray) -> np.ndarray | None:
    """For each of ``values``, its index in the unique ``keys``; None if one is absent."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    at = np.searchsorted(ordered, values)
    at_clipped = np.minimum(at, len(ordered) - 1)
    if not np.array_equal(ordered[at_clipped], values):
        return None
    return order[at_clipped]


def _fast_inputs(
    questions: str | Path, annotations: str | Path, predictions: str | Path, allow_missing: bool
) -> VQAInputs | None:
    question_cols = read_question_columns(questions)
    if question_cols is None:
        return None
    annotation_cols = read_annotation_columns(annotations)
    if annotation_cols is None:
        return None
    ann_ids = annotation_cols.question_ids
    in_questions = _positions(question_cols.question_ids, ann_ids)
    if in_questions is None:
        return None  # an annotation outside the questions file
    if annotation_cols.image_ids is not None and not np.array_equal(
        question_cols.image_ids[in_questions], annotation_cols.image_ids
    ):
        return None  # an annotation on another image
    del question_cols, in_questions
    results = read_result_columns(predictions)
    if results is None:
        return None
    annotated_at = _positions(ann_ids, results.question_ids)
    if annotated_at is None:
        return None  # a prediction for a question that is not annotated
    slot = np.full(len(ann_ids), -1, dtype=np.int64)
    slot[annotated_at] = np.arange(len(annotated_at))
    if not allow_missing and bool(np.any(slot < 0)):
        return None
    answers = results.answers
    if not np.array_equal(slot, np.arange(len(slot))):  # not already in annotation order
        answers = [answers[k] if k >= 0 else None for k in slot.tolist()]
    return VQAInputs(
        question_ids=list(map(str, ann_ids.tolist())),
        predictions=answers,  # in annotation order
        answers=annotation_cols.answers,
        answer_counts=annotation_cols.answer_counts,
        answer_types=annotation_cols.answer_types,
        question_types=annotation_cols.question_types,
    )


def _checked_inputs(
    questions: str | Path, annotations: str | Path, predictions: str | Path, allow_missing: bool
) -> VQAInputs:
    question_records = read_vqa_questions(questions)
    annotation_records = read_vqa_annotations(annotations)
    check_questions(question_records, annotation_records, annotations)
    del question_records
    qids = list(annotation_records)
    notes: dict[str, int] = {}
    with paused_gc(freeze=True):
        prediction_records = read_predictions(predictions, notes=notes)
    aligned = align_predictions(prediction_records, qids, predictions, allow_missing=allow_missing)
    records = list(annotation_records.values())
    return VQAInputs(
        question_ids=qids,
        predictions=answers_of(aligned),
        answers=[a for r in records for a in r["answer_list"]],
        answer_counts=np.array([len(r["answer_list"]) for r in records], dtype=np.int64),
        answer_types=[r["answer_type"] for r in records],
        question_types=[r["question_type"] for r in records],
        converted=notes.get("converted", 0),
    )


def read_vqa_inputs(
    questions: str | Path,
    annotations: str | Path,
    predictions: str | Path,
    *,
    allow_missing: bool = False,
) -> VQAInputs:
    """The inputs of ``score vqa`` from the three files.

    Every annotation must be a question of the questions file on the same image; a
    prediction id that is not annotated is an error; an annotated question without a
    prediction is an error unless ``allow_missing`` (its prediction is then None).
    Problems raise DataError naming file and record (from the checked readers).
    """
    fast = _fast_inputs(questions, annotations, predictions, allow_missing)
    if fast is not None:
        return fast
    return _checked_inputs(questions, annotations, predictions, allow_missing)
