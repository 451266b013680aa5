"""Basic-question datasets (BQD, docs/protocols.md §4) and the question files they are built from.

A BQD file is ``{"meta": {...}, "records": [...]}`` (a bare list of records is
accepted too); each record is::

    {"image_id": str, "question_id": str, "question": str,
     "basic": [{"question": str, "score": float, ...}, ...]}    # 21 in the paper

Question files (``--pool``, ``--main``, ``--questions``) are GQA question dicts
``{qid: {question, answer, imageId, ...}}`` or official VQA v2 question files
``{"questions": [...]}``; the format is sniffed from the first bytes. VQA v2
answers (needed for ``--yes-no``) come from a sibling annotations file when one
is found next to the questions file (:func:`sibling_annotations`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from vqadiag.data.formats.sniff import truth_format
from vqadiag.data.io.jsonio import (
    finite_float,
    json_bytes,
    paused_gc,
    read_json,
    require_field,
    write_json,
)
from vqadiag.data.io.typed_json import JSONInt, decode_record, decode_records, raw_records
from vqadiag.errors import DataError, excerpt, record_label

BQD_KIND = "vqadiag.bqd"


def _string(value: Any, path: Path, label: str, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DataError(path, f"{what!r} must be a string, got {excerpt(value)}", label)
    return str(value)


def read_bqd(path: str | Path) -> list[dict[str, Any]]:
    """Read a BQD file into checked records: vqadiag's ``{"meta", "records"}``, a bare
    list of records (VQABQ's ``combine.py`` output) or an object keyed by question id
    (VQABQ's per-question shape, ``{qid: {question, basic, ...}}``).

    Every record needs a ``question_id`` (strings or integers, kept as strings; the key
    in the keyed shape), a string ``question`` and a ``basic`` list of
    ``{"question": str, "score": finite number}``; ``image_id`` is optional (None when
    absent). A basic question identical to its main question (whitespace aside) is
    dropped, as VQABQ's own code drops it; ``dropped_identical`` counts them per record.
    Other keys are kept. Problems raise :class:`DataError` naming the file and the record.

    A file in vqadiag's own shape is read through a typed fast path first
    (:func:`_typed_bqd`) with the same result in a fraction of the memory.
    """
    p = Path(path)
    fast = _typed_bqd(p)
    if fast is not None:
        return fast
    data = read_json(p)
    if isinstance(data, Mapping) and "records" not in data:
        if not data or not all(isinstance(v, Mapping) and "basic" in v for v in data.values()):
            raise DataError(
                p, "expected a BQD object with a 'records' list, a list of records, or "
                "{question_id: {question, basic}}",
            )  # fmt: skip
        data = [{"question_id": qid, **record} for qid, record in data.items()]
    elif isinstance(data, Mapping):
        data = data["records"]
    if not isinstance(data, list):
        raise DataError(p, "'records' must be a list of records")
    if not data:
        raise DataError(p, "no records in file")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, record in enumerate(data):
        where = f"item {i}"
        qid = _string(require_field(record, "question_id", p, where), p, where, "question_id")
        label = record_label(qid)
        if qid in seen:
            raise DataError(p, "duplicate question id", label)
        seen.add(qid)
        image = record.get("image_id")
        image = None if image is None else _string(image, p, label, "image_id")
        question = require_field(record, "question", p, label)
        if not isinstance(question, str):
            raise DataError(p, f"'question' must be a string, got {excerpt(question)}", label)
        basic = require_field(record, "basic", p, label)
        if not isinstance(basic, list):
            raise DataError(p, f"'basic' must be a list, got {type(basic).__name__}", label)
        checked = []
        dropped = 0
        for k, item in enumerate(basic):
            where_k = f"{label}: basic {k}"
            text = require_field(item, "question", p, where_k)
            if not isinstance(text, str):
                raise DataError(p, f"'question' must be a string, got {excerpt(text)}", where_k)
            score = finite_float(require_field(item, "score", p, where_k), p, where_k, "score")
            if text.strip() == question.strip():
                dropped += 1  # the main question itself: noise it is not
                continue
            checked.append({**item, "question": text, "score": score})
        out.append(
            {
                **record,
                "question_id": qid,
                "image_id": image,
                "question": question,
                "basic": checked,
                "dropped_identical": dropped,
            }
        )
    return out


class _TypedBasic(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    question: str
    score: float
    pool_id: str | JSONInt | msgspec.UnsetType | None = msgspec.UNSET


class _TypedRecord(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    question_id: str | JSONInt
    question: str
    basic: list[_TypedBasic]
    image_id: str | JSONInt | None = None
    exact: bool | msgspec.UnsetType = msgspec.UNSET
    ranked: JSONInt | msgspec.UnsetType = msgspec.UNSET
    rounds: JSONInt | msgspec.UnsetType = msgspec.UNSET


_RECORDS_DECODER = msgspec.json.Decoder(list[_TypedRecord])
_RECORD_DECODER = msgspec.json.Decoder(_TypedRecord)
_OPTIONAL_KEYS = ("exact", "ranked", "rounds")


def _typed_checked(path: Path) -> list[_TypedRecord] | None:
    """The typed records of a file in vqadiag's own shape, checked as :func:`read_bqd`
    checks them (unique ids, finite scores), or None (see :func:`_typed_bqd`)."""
    typed = decode_records(path, "records", _RECORDS_DECODER)
    if typed is None:
        return None
    ids = {str(r.question_id) for r in typed}
    if len(ids) != len(typed):
        return None
    if not all(math.isfinite(item.score) for r in typed for item in r.basic):
        return None
    return typed


def check_same_main(
    bqd: str | Path, qid: str, bqd_question: str, question: str, questions: str | Path
) -> None:
    """A BQD record's main question is the question it is applied to (the same words,
    whitespace aside), else one line naming the BQD file, the record and the questions
    file: a dataset built for other main questions (another world's ids, say) must not
    lend its basic questions by id alone (docs/basic-questions.md, "Applying a BQD")."""
    if bqd_question.split() != question.split():
        raise DataError(
            bqd,
            f"its main question {excerpt(bqd_question)} is not the question of "
            f"{Path(questions).name}, {excerpt(question)}: built for other questions",
            record_label(qid),
        )


def read_bqd_texts(path: str | Path) -> Iterator[tuple[str, str, list[str]]]:
    """``(question_id, question, basic question texts)`` of every record of
    :func:`read_bqd`, in order (a basic question identical to its main one dropped),
    without a dict per basic question when the typed path applies: what the noise
    partitions read."""
    p = Path(path)
    typed = _typed_texts(p)
    if typed is None:
        for r in read_bqd(p):
            yield r["question_id"], r["question"], [b["question"] for b in r["basic"]]
        return
    yield from typed


def _typed_texts(path: Path) -> list[tuple[str, str, list[str]]] | None:
    """:func:`read_bqd_texts`' triples through msgspec, checked as :func:`_typed_checked`
    checks, or None (the checked reader then reads the file). The records are decoded one
    at a time from the list's raw bytes and each text is kept once, so the 318,000 basic
    questions of a 15,000-question dataset never exist as typed records together."""
    raws = raw_records(path, "records")
    if raws is None:
        return None
    with paused_gc():
        return _texts_of(raws)


def _texts_of(raws: list[msgspec.Raw]) -> list[tuple[str, str, list[str]]] | None:
    texts: dict[str, str] = {}
    keep = texts.setdefault
    ids: set[str] = set()
    out: list[tuple[str, str, list[str]]] = []
    for raw in raws:
        record = decode_record(raw, _RECORD_DECODER)
        if record is None:
            return None
        qid = str(record.question_id)
        if qid in ids or not all(math.isfinite(item.score) for item in record.basic):
            return None
        ids.add(qid)
        main = record.question.strip()
        basic = [keep(b.question, b.question) for b in record.basic if b.question.strip() != main]
        out.append((qid, record.question, basic))
    return out


def _typed_bqd(path: Path) -> list[dict[str, Any]] | None:
    """:func:`read_bqd` of a file in vqadiag's own shape (``{"meta", "records"}`` or a
    bare list, with only the keys vqadiag writes) through msgspec, or None when the file
    is not plainly that shape: the checked reader then reads it and names any problem
    (docs/reliability.md, "Fast paths defer to the checked readers"). The records equal
    the checked reader's; a basic question's text and pool id, repeated across the main
    questions that share it, are kept once."""
    typed = _typed_checked(path)
    if typed is None:
        return None
    shared: dict[Any, Any] = {}
    keep = shared.setdefault
    out: list[dict[str, Any]] = []
    for record in typed:
        qid = str(record.question_id)
        main = record.question.strip()
        checked, dropped = [], 0
        for item in record.basic:
            if item.question.strip() == main:
                dropped += 1
                continue
            basic = {"question": keep(item.question, item.question), "score": item.score}
            if item.pool_id is not msgspec.UNSET:
                basic["pool_id"] = keep(item.pool_id, item.pool_id)
            checked.append(basic)
        out.append({
            "question_id": qid,
            "image_id": None if record.image_id is None else str(record.image_id),
            "question": record.question,
            "basic": checked,
            **{k: getattr(record, k) for k in _OPTIONAL_KEYS
               if getattr(record, k) is not msgspec.UNSET},
            "dropped_identical": dropped,
        })  # fmt: skip
    return out


def write_bqd(
    path: str | Path, records: Iterable[Mapping[str, Any]], meta: Mapping[str, Any]
) -> int:
    """Write ``{"meta": {"kind": "vqadiag.bqd", ...meta}, "records": records}`` as JSON,
    atomically, one record at a time (``records`` may be a generator: neither the records
    nor the file's bytes are held whole). Returns the number of records."""
    from vqadiag.data.io.atomic import atomic_write

    head = json_bytes({"meta": {"kind": BQD_KIND, **meta}})
    n = 0
    with atomic_write(path) as fh:
        fh.write(head[:-1] + b',"records":[')
        for record in records:
            fh.write(b"," if n else b"")
            fh.write(json_bytes(record))
            n += 1
        fh.write(b"]}")
    return n


# ----------------------------------------------------------------------------- question files


@dataclass
class QuestionFile:
    """The questions of one file, in file order, with what is needed to write it back.

    ``format`` is ``"gqa"`` or ``"vqa_questions"``; ``ids``, ``texts``,
    ``image_ids`` are parallel lists; ``answers`` holds the answer of each id
    when known (GQA ``answer``; VQA ``multiple_choice_answer`` of the sibling
    annotations) and ``yes_no`` whether each id is a yes/no question (None
    when unknown). ``raw`` is the parsed file (to write noisy copies; None when read
    with ``keep_raw=False``).
    """

    path: Path
    format: str
    ids: list[str]
    texts: list[str]
    image_ids: list[str]
    yes_no: list[bool | None]
    raw: Any
    annotations: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def sibling_annotations(path: str | Path) -> Path | None:
    """The VQA v2 annotations file next to a questions file, if any.

    ``v2_OpenEnded_mscoco_train2014_questions.json`` → ``v2_mscoco_train2014_annotations.json``
    (the official names); otherwise the same name with ``questions`` replaced by
    ``annotations``.
    """
    p = Path(path)
    name = p.name
    candidates = []
    if name.endswith("_questions.json"):
        stem = name[: -len("_questions.json")]
        for prefix in ("v2_OpenEnded_", "OpenEnded_", "v2_MultipleChoice_", "MultipleChoice_"):
            if stem.startswith(prefix):
                rest = stem[len(prefix) :]
                candidates.append(("v2_" if prefix.startswith("v2_") else "") + rest)
        candidates.append(stem)
        candidates = [c + "_annotations.json" for c in candidates]
    if "questions" in name:
        candidates.append(name.replace("questions", "annotations"))
    for cand in candidates:
        q = p.with_name(cand)
        if q != p and q.is_file():
            return q
    return None


def read_question_file(
    path: str | Path, *, need_answers: bool = False, keep_raw: bool = True
) -> QuestionFile:
    """Read a GQA or VQA v2 questions file (sniffed) for basic-question building.

    ``need_answers``: every question must have a known answer type (GQA
    ``answer``; VQA sibling annotations), as ``--yes-no`` needs. A yes/no
    question is a VQA ``answer_type == "yes/no"`` or a GQA ``answer`` in
    {yes, no}. ``keep_raw=False`` (a pool or the main questions, never written
    back): a GQA file is read through its typed fast path (question, image and
    answer only; docs/reliability.md, "Fast paths defer to the checked readers"),
    so a pool of tens of thousands of questions never holds every record's
    programs and annotations, and ``raw`` is None.
    """
    p = Path(path)
    kind = truth_format(p)
    if kind == "gqa":
        lean = None if keep_raw else _lean_gqa_questions(p, need_answers)
        if lean is not None:
            return lean
        from vqadiag.data.formats.gqa import read_gqa_questions

        data = read_gqa_questions(p, require=("question",))
        ids, texts, images, yes_no = [], [], [], []
        for qid, record in data.items():
            text = record["question"]
            if not isinstance(text, str):
                raise DataError(
                    p, f"'question' must be a string, got {excerpt(text)}", record_label(qid)
                )
            answer = record.get("answer")
            if need_answers and not isinstance(answer, str):
                raise DataError(
                    p, "missing field 'answer' (needed to tell yes/no questions)", record_label(qid)
                )
            ids.append(str(qid))
            texts.append(text)
            images.append(str(record.get("imageId", "")))
            yes_no.append(None if answer is None else answer.strip().lower() in ("yes", "no"))
        return QuestionFile(p, "gqa", ids, texts, images, yes_no, data if keep_raw else None)
    if kind == "vqa_questions":
        from vqadiag.data.formats.vqa2 import read_vqa_annotations, read_vqa_questions

        data = read_vqa_questions(p)
        ann_path = sibling_annotations(p)
        types: dict[str, str] = {}
        if ann_path is not None:
            types = {q: r["answer_type"] for q, r in read_vqa_annotations(ann_path).items()}
        elif need_answers:
            raise DataError(
                p,
                "--yes-no needs answer types: no VQA v2 annotations file found next to it "
                "(e.g. v2_mscoco_<split>_annotations.json)",
            )
        ids = list(data)
        if need_answers:
            for qid in ids:
                if qid not in types:
                    raise DataError(
                        p, f"question id has no annotation in {ann_path.name}", record_label(qid)
                    )
        return QuestionFile(
            p,
            "vqa_questions",
            ids,
            [data[q]["question"] for q in ids],
            [data[q]["image_id"] for q in ids],
            [None if q not in types else types[q] == "yes/no" for q in ids],
            read_json(p),
            ann_path,
        )
    what = {"vqa_annotations": "VQA v2 annotations", "introspect": "VQA-introspect"}[kind]
    raise DataError(
        p, f"this is {what}, which has no question texts; pass a GQA or VQA v2 questions file"
    )


def _lean_gqa_questions(path: Path, need_answers: bool) -> QuestionFile | None:
    """:func:`read_question_file` of a GQA file through the typed fast path, or None when
    the file is not plainly the official shape or a question lacks the answer
    ``need_answers`` asks for (the checked reader then reads it and names the problem)."""
    from vqadiag.data.formats.gqa_typed import PoolQuestion, read_typed_questions

    typed = read_typed_questions(path, PoolQuestion)
    if not typed or (need_answers and any(r.answer is None for r in typed.values())):
        return None
    ids = list(typed)
    records = [typed[q] for q in ids]
    return QuestionFile(
        path, "gqa", ids, [r.question for r in records],
        ["" if r.imageId is msgspec.UNSET else str(r.imageId) for r in records],
        [None if r.answer is None else r.answer.strip().lower() in ("yes", "no") for r in records],
        None,
    )  # fmt: skip


def write_question_file(qf: QuestionFile, texts: Mapping[str, str], out: str | Path) -> Path:
    """Write a copy of ``qf`` in its own format with the question texts replaced.

    GQA: the question dict with ``question`` replaced (other fields kept).
    VQA v2: the questions file with each record's ``question`` replaced.
    Questions not in ``texts`` are left out.
    """
    if qf.format == "gqa":
        obj: Any = {q: {**qf.raw[q], "question": texts[q]} for q in qf.raw if str(q) in texts}
    else:
        raw = qf.raw
        records = raw["questions"] if isinstance(raw, Mapping) else raw
        kept = []
        for record in records:
            qid = str(record["question_id"]).strip()
            if qid in texts:
                kept.append({**record, "question": texts[qid]})
        obj = {**raw, "questions": kept} if isinstance(raw, Mapping) else kept
    return write_json(out, obj)
