"""Readers for the official VQA v2 files: questions, annotations, complementary pairs.

* questions ``{"questions": [{"image_id", "question", "question_id"}, ...], ...}``
* annotations ``{"annotations": [{"question_id", "image_id", "question_type",
  "answer_type", "answers": [{"answer", "answer_confidence", "answer_id"}] × 10,
  "multiple_choice_answer"}, ...], ...}``
* complementary pairs: a JSON list of ``[qid_a, qid_b]`` (docs/protocols.md §2).

Question ids become decimal strings (docs/protocols.md, conventions). Every problem raises
:class:`~vqadiag.errors.DataError` naming the file and the record.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from vqadiag.data.formats.predictions import normalize_id
from vqadiag.data.io.jsonio import paused_gc, read_json, require_field
from vqadiag.data.io.typed_json import read_records_sharing_nested
from vqadiag.errors import DataError, excerpt, record_label


def _records(path: Path, data: Any, key: str) -> list[Any]:
    """The list under ``key`` (the official shape) or a bare list."""
    if isinstance(data, Mapping):
        if key not in data:
            raise DataError(path, f"expected a JSON object with a {key!r} list")
        data = data[key]
    if not isinstance(data, list):
        raise DataError(path, f"{key!r} must be a list of records")
    if not data:
        raise DataError(path, f"no {key} in file")
    return data


def _record_id(record: Any, path: Path, position: int) -> tuple[str, str]:
    where = f"item {position}"
    qid = normalize_id(require_field(record, "question_id", path, where), path, where)
    return qid, record_label(qid)


def _string_field(record: Mapping[str, Any], field: str, path: Path, label: str) -> str:
    value = require_field(record, field, path, label)
    if not isinstance(value, str):
        raise DataError(path, f"{field!r} must be a string, got {excerpt(value)}", label)
    return value


def _image_id(record: Mapping[str, Any], path: Path, label: str) -> str:
    value = require_field(record, "image_id", path, label)
    if isinstance(value, bool) or not isinstance(value, (int, str)) or value == "":
        raise DataError(
            path, f"'image_id' must be an integer or string, got {excerpt(value)}", label
        )
    return str(value)


def read_vqa_questions(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read an official VQA v2 questions file into ``{qid: record}``.

    Each record keeps its fields, with ``question_id`` as a string and
    ``image_id`` as a string. Missing fields, non-string questions and
    duplicate ids raise DataError. Equal nested values (a synthetic world's ``semantic``
    programs) are one shared object, read-only
    (:func:`~vqadiag.data.io.typed_json.read_records_sharing_nested`).
    """
    p = Path(path)
    with paused_gc(freeze=True):
        return _read_questions(p)


def _read_questions(p: Path) -> dict[str, dict[str, Any]]:
    records = read_records_sharing_nested(p, "questions")
    if records is None:
        records = _records(p, read_json(p), "questions")
    out: dict[str, dict[str, Any]] = {}
    for i, record in enumerate(records):
        qid, label = _record_id(record, p, i)
        if qid in out:
            raise DataError(p, "duplicate question id", label)
        question = _string_field(record, "question", p, label)
        image = _image_id(record, p, label)
        # the three fields are required, so setting them keeps the file's key order
        record["question_id"], record["image_id"], record["question"] = qid, image, question
        out[qid] = record
    return out


def _answer_strings(record: Mapping[str, Any], path: Path, label: str) -> list[str]:
    answers = require_field(record, "answers", path, label)
    if not isinstance(answers, list):
        raise DataError(path, f"'answers' must be a list, got {type(answers).__name__}", label)
    if not answers:
        raise DataError(path, "empty answer list", label)
    out = []
    for k, item in enumerate(answers):
        value = require_field(item, "answer", path, f"{label}: answer {k}")
        if not isinstance(value, str):
            raise DataError(path, f"answer {k} must be a string, got {excerpt(value)}", label)
        out.append(value)
    return out


def _checked_annotation(record: Any, path: Path, position: int) -> dict[str, Any]:
    """Validate one annotation field by field; raises DataError naming the problem."""
    qid, label = _record_id(record, path, position)
    answers = _answer_strings(record, path, label)
    entry = {
        **record,
        "question_id": qid,
        "question_type": _string_field(record, "question_type", path, label),
        "answer_type": _string_field(record, "answer_type", path, label),
        "answer_list": answers,
    }
    if "image_id" in record:
        entry["image_id"] = _image_id(record, path, label)
    if "multiple_choice_answer" in record:
        _string_field(record, "multiple_choice_answer", path, label)
    else:
        entry["multiple_choice_answer"] = Counter(answers).most_common(1)[0][0]
    return entry


def _fast_annotation(record: Any) -> dict[str, Any] | None:
    """The same entry as :func:`_checked_annotation` for a well-formed record, else None.

    Plain type checks only, no messages: a record that fails any check goes
    through the slow path, which names the problem.
    """
    try:
        qid = record["question_id"]
        answers = [item["answer"] for item in record["answers"]]
        question_type = record["question_type"]
        answer_type = record["answer_type"]
    except (KeyError, TypeError, AttributeError):
        return None
    if type(qid) is int:
        qid = str(qid)
    elif type(qid) is not str or not qid or qid.strip() != qid:
        return None
    if not answers or type(question_type) is not str or type(answer_type) is not str:
        return None
    if not all(type(a) is str for a in answers):
        return None
    entry = {**record, "question_id": qid, "answer_list": answers}
    if "image_id" in record:
        image = record["image_id"]
        if type(image) is not int and (type(image) is not str or not image):
            return None
        entry["image_id"] = str(image)
    mc = record.get("multiple_choice_answer")
    if mc is None:
        if "multiple_choice_answer" in record:
            return None
        entry["multiple_choice_answer"] = Counter(answers).most_common(1)[0][0]
    elif type(mc) is not str:
        return None
    return entry


#: the fields of an annotation entry read with ``slim=True``
SLIM_ANNOTATION_FIELDS = (
    "question_id", "image_id", "question_type", "answer_type", "multiple_choice_answer",
    "answer_list",
)  # fmt: skip


def read_vqa_annotations(path: str | Path, *, slim: bool = False) -> dict[str, dict[str, Any]]:
    """Read an official VQA v2 annotations file into ``{qid: record}``.

    Required per record: ``question_id``, ``question_type``, ``answer_type``
    (strings) and a non-empty ``answers`` list of ``{"answer": str, ...}``.
    ``image_id`` is optional (kept as a string when present);
    ``multiple_choice_answer`` is optional and, when absent, set to the most
    frequent annotator answer (first seen wins ties). Each record gains
    ``answer_list``: the answer strings in annotator order.

    ``slim``: each entry keeps only :data:`SLIM_ANNOTATION_FIELDS` (not the annotator
    ``answers`` objects nor other keys), read through the typed fast path when the file
    is plainly official (:func:`vqa2_columns.read_annotation_entries
    <vqadiag.data.formats.vqa2_columns.read_annotation_entries>`): a diagnosis holds a
    few fields per question, not the file's every object (docs/reliability.md, "Fast
    paths defer to the checked readers").
    """
    p = Path(path)
    if slim:
        from vqadiag.data.formats.vqa2_columns import read_annotation_entries

        fast = read_annotation_entries(p)
        if fast is not None:
            return fast
    with paused_gc(freeze=True):
        return _read_annotations(p, slim)


def _read_annotations(p: Path, slim: bool) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for i, record in enumerate(_records(p, read_json(p), "annotations")):
        entry = _fast_annotation(record) or _checked_annotation(record, p, i)
        qid = entry["question_id"]
        if qid in out:
            raise DataError(p, "duplicate question id", record_label(qid))
        out[qid] = slim_annotation(entry) if slim else entry
    return out


def slim_annotation(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An annotation entry's :data:`SLIM_ANNOTATION_FIELDS` (``image_id`` when it has one)."""
    return {k: entry[k] for k in SLIM_ANNOTATION_FIELDS if k in entry}


def check_questions(
    questions: Mapping[str, Mapping[str, Any]],
    annotations: Mapping[str, Mapping[str, Any]],
    annotations_path: str | Path,
) -> None:
    """Every annotation must belong to a question of the questions file, on the same image."""
    for qid, record in annotations.items():
        question = questions.get(qid)
        if question is None:
            raise DataError(
                annotations_path, "question id is not in the questions file", record_label(qid)
            )
        image = record.get("image_id")
        if image is not None and image != question["image_id"]:
            raise DataError(
                annotations_path,
                f"image_id {image} differs from the questions file ({question['image_id']})",
                record_label(qid),
            )


def read_pairs(path: str | Path, known_ids: Collection[str] | None = None) -> list[tuple[str, str]]:
    """Read complementary pairs (a JSON list of ``[qid_a, qid_b]``) as string tuples.

    Raises DataError for a pair that is not two ids, a question paired with
    itself, a pair listed twice, and (when ``known_ids`` is given, e.g. the
    annotated ids) ids outside ``known_ids``.
    """
    p = Path(path)
    data = read_json(p)
    if not isinstance(data, list):
        raise DataError(p, "expected a JSON list of [question_id_a, question_id_b] pairs")
    if not data:
        raise DataError(p, "no pairs in file")
    out: list[tuple[str, str]] = []
    seen: set[frozenset[str]] = set()
    for i, item in enumerate(data):
        where = f"pair {i}"
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise DataError(
                p, f"expected [question_id_a, question_id_b], got {excerpt(item)}", where
            )
        a, b = (normalize_id(v, p, where) for v in item)
        if a == b:
            raise DataError(p, f"question {excerpt(a)} is paired with itself", where)
        key = frozenset((a, b))
        if key in seen:
            raise DataError(p, f"pair [{excerpt(a)}, {excerpt(b)}] is listed twice", where)
        seen.add(key)
        if known_ids is not None:
            for qid in (a, b):
                if qid not in known_ids:
                    raise DataError(p, "question id is not in the annotations", record_label(qid))
        out.append((a, b))
    return out
