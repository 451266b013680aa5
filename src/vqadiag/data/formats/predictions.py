"""Prediction files in the shapes researchers already have.

Accepted shapes (detected from the file, not from flags):

* JSON object ``{qid: answer}`` or ``{qid: {"answer": ..., "probs": {...}}}``;
* VQA results ``[{"question_id": 1, "answer": "yes"}, ...]``;
* GQA ``[{"questionId": "01", "prediction": "yes"}, ...]``;
* JSON Lines with those fields, including LLaVA answer files (``question_id`` and
  ``text``) and lmms-eval sample logs (``filtered_resps`` or ``resps`` with the id in
  ``doc.question_id`` (before 0.4) or ``submission.question_id``; a log with only
  ``doc_id``, a dataset row number, is refused with one line saying so);
* CSV / TSV / Excel ``.xlsx`` (VLMEvalKit's default) with an id column
  (``question_id``, ``questionId``, ``qid``, ``index``, ``id``) and an answer column
  (``prediction``, ``answer``, ``pred``, ``text``). VLMEvalKit files hold the ground
  truth in ``answer`` and the model output in ``prediction``; ``prediction`` always wins.

* a pickled dict or list of those shapes (FPVG's prediction files), read without
  running any code (:mod:`vqadiag.data.io.safe_pickle`).

A binary file of another kind (Parquet, zip …) is one line naming what it is.

A record may carry ``probs``: a mapping answer → probability (the full softmax
or its top-k), used for sufficiency / comprehensiveness (docs/protocols.md §5).
Question ids are strings (docs/protocols.md, conventions); integer ids become decimal strings.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vqadiag.data.formats.result_lists import read_result_list
from vqadiag.data.io.binary_formats import binary_kind, is_xlsx
from vqadiag.data.io.jsonio import finite_float, iter_jsonl, read_json, read_table, read_workbook
from vqadiag.data.io.safe_pickle import load_plain_pickle
from vqadiag.errors import DataError, excerpt, record_label

ID_FIELDS = ("question_id", "questionId", "qid", "index", "id")
ANSWER_FIELDS = ("prediction", "answer", "pred", "text")
PROB_FIELDS = ("probs", "scores")


@dataclass(frozen=True, slots=True)
class Prediction:
    """One model answer; ``probs`` maps answers to probabilities when known."""

    answer: str
    probs: Mapping[str, float] | None = None

    def prob_of(self, answer: str) -> float:
        """Probability the model gave ``answer`` (0 for answers outside a top-k list)."""
        if self.probs is None:
            raise ValueError("this prediction carries no probabilities")
        return float(self.probs.get(answer, 0.0))


#: integers up to this magnitude are exact as JSON numbers read as doubles (2**53)
EXACT_FLOAT_INT = 2**53


def normalize_id(value: Any, path: str | Path, label: str) -> str:
    """Question ids are strings; ints become their exact decimal string. A number that
    is not exactly the integer written (a JSON integer beyond 2**64, which JSON readers
    round to a double, or a float id beyond :data:`EXACT_FLOAT_INT`) is refused with one
    line, never rounded into another question's id."""
    if isinstance(value, bool) or value is None:
        raise DataError(
            path, f"question id must be a string or integer, got {excerpt(value)}", label
        )
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:  # more digits than Python writes out
            raise DataError(path, f"question id {excerpt(value)} is too long", label) from None
    if isinstance(value, float) and value.is_integer():
        if abs(value) >= EXACT_FLOAT_INT:
            raise DataError(
                path, f"question id {value!r} is too large to be read exactly (beyond 2**64 "
                "as an integer, or 2**53 as a float): write it as a string", label,
            )  # fmt: skip
        return str(int(value))
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise DataError(path, f"question id must be a string or integer, got {excerpt(value)}", label)


#: the answer a JSON ``null`` prediction becomes under ``null_as_wrong``: equal to no
#: ground truth, so it is scored wrong, as the official GQA script scores it
NULL_ANSWER = ""


def _answer_text(
    value: Any,
    path: str | Path,
    label: str,
    notes: dict[str, int] | None = None,
    null_as_wrong: bool = False,
) -> str:
    """The answer as a string: ``true`` / ``false`` become ``yes`` / ``no`` and numbers
    their decimal text (counted in ``notes["converted"]``); ``null`` is an error, or with
    ``null_as_wrong`` :data:`NULL_ANSWER` (counted in ``notes["null"]``)."""
    if isinstance(value, str):
        return value
    if notes is not None and (value is not None or null_as_wrong):
        key = "null" if value is None else "converted"
        notes[key] = notes.get(key, 0) + 1
    if value is None and null_as_wrong:
        return NULL_ANSWER
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        number = finite_float(value, path, label, "answer")
        return str(int(number)) if number.is_integer() else str(number)
    raise DataError(path, f"answer must be a string, got {excerpt(value)}", label)


def _probs(value: Any, path: str | Path, label: str) -> dict[str, float]:
    if not isinstance(value, Mapping) or not value:
        raise DataError(path, "'probs' must be a non-empty object answer -> probability", label)
    out = {}
    for answer, p in value.items():
        prob = finite_float(p, path, label, f"probability of {excerpt(answer)}")
        if not -1e-6 <= prob <= 1 + 1e-6:
            raise DataError(
                path, f"probability of {excerpt(answer)} is {prob}, outside [0, 1]", label
            )
        out[str(answer)] = prob
    return out


def _first_string(value: Any) -> Any:
    """lmms-eval stores responses as nested lists: take the first leaf."""
    while isinstance(value, list) and value:
        value = value[0]
    return value


#: why an lmms-eval ≥ 0.4 sample log of most tasks cannot be scored as it is
LMMS_WITHOUT_IDS = (
    "an lmms-eval sample log without question ids: lmms-eval 0.4 and later log only "
    "'doc_id', the row number of the task's dataset, not its question id (and no 'doc'); "
    "use a task whose results log the id (VQA v2's 'submission.question_id'), or write "
    "{question_id: answer} from the dataset's rows in doc_id order"
)


def _is_lmms_sample(record: Mapping[str, Any]) -> bool:
    """A line of an lmms-eval ``--log_samples`` file (model responses under ``resps``)."""
    return "filtered_resps" in record or "resps" in record


#: why an empty answer cell of a table is not scored as the answer ""
EMPTY_CELL = (
    "empty answer cell: a table leaves a failed or missing answer empty (VLMEvalKit does), "
    "so it is not scored as an answer; fill it in, or delete the row (with --allow-missing "
    "its question counts as wrong)"
)


def _from_record(
    record: Any,
    path: str | Path,
    position: str,
    notes: dict[str, int] | None = None,
    null_as_wrong: bool = False,
    table: bool = False,
) -> tuple[str, Prediction]:
    if not isinstance(record, Mapping):
        raise DataError(path, f"expected an object, got {type(record).__name__}", position)
    raw_id = next((record[f] for f in ID_FIELDS if f in record), None)
    for nested in ("doc", "submission"):  # lmms-eval: the dataset row, a task's submission
        if raw_id is None and isinstance(record.get(nested), Mapping):
            inner = record[nested]
            raw_id = next((inner[f] for f in ID_FIELDS if f in inner), None)
    if raw_id is None and "doc_id" in record and _is_lmms_sample(record):
        raise DataError(path, LMMS_WITHOUT_IDS, position)
    if raw_id is None:
        fields = ", ".join(ID_FIELDS)
        raise DataError(path, f"missing question id (one of {fields})", position)
    qid = normalize_id(raw_id, path, position)
    label = record_label(qid)
    if _is_lmms_sample(record):
        answer = _first_string(record.get("filtered_resps", record.get("resps")))
    else:
        answer = record[_answer_field(record, path, label)]
        if table and not str(answer).strip():
            raise DataError(path, EMPTY_CELL, f"{position} (question {qid})")
    probs_field = next((f for f in PROB_FIELDS if f in record), None)
    probs = None if probs_field is None else _probs(record[probs_field], path, label)
    return qid, Prediction(_answer_text(answer, path, label, notes, null_as_wrong), probs)


#: fields that only ground truth carries, and the file they show a record to be from
#: (``answers`` as VQA v2 annotations hold them: a list of ``{"answer": …}`` records)
TRUTH_FIELDS = {
    "fullAnswer": "a GQA questions file",
    "semantic": "a GQA questions file",
    "multiple_choice_answer": "VQA v2 annotations",
    "answers": "VQA v2 annotations",
}


def _truth_field(record: Mapping[str, Any]) -> str | None:
    """The first of :data:`TRUTH_FIELDS` that ``record`` carries as ground truth does."""
    for name in TRUTH_FIELDS:
        if name not in record:
            continue
        value = record[name]
        if name != "answers" or (
            isinstance(value, list) and value and isinstance(value[0], Mapping)
            and "answer" in value[0]
        ):  # fmt: skip
            return name
    return None


def _answer_field(record: Mapping[str, Any], path: str | Path, label: str) -> str:
    """The field of ``record`` that holds the model's answer (:data:`ANSWER_FIELDS`).

    ``prediction`` always wins (VLMEvalKit keeps the gold answer beside it in
    ``answer``). Without it, a record that carries ground truth's own fields
    (:data:`TRUTH_FIELDS`, or an ``image`` with its ``question`` and ``answer``: a
    benchmark's row) is the truth, not predictions, and a record with two candidate
    fields (``answer`` and ``text`` …) does not say which is the model's: both are
    refused, so that gold answers are never scored against themselves."""
    if "prediction" in record:
        return "prediction"
    truth = _truth_field(record)
    if truth is not None:
        raise DataError(
            path, f"looks like {TRUTH_FIELDS[truth]} (it has {truth!r}), not predictions: "
            "its answers are the ground truth", label,
        )  # fmt: skip
    if {"image", "question", "answer"} <= record.keys():
        raise DataError(
            path, "looks like a benchmark's rows (an image, its question and answer; no "
            "'prediction'), not predictions: its answers are the ground truth", label,
        )  # fmt: skip
    fields = [f for f in ANSWER_FIELDS if f in record]
    if not fields:
        raise DataError(path, f"missing answer field (one of {', '.join(ANSWER_FIELDS)})", label)
    if len(fields) > 1:
        named = " and ".join(repr(f) for f in fields)
        raise DataError(
            path, f"has both {named}: which is the model's answer? keep it alone, or name it "
            "'prediction' (the others are then ignored)", label,
        )  # fmt: skip
    return fields[0]


#: how a table row's position starts (its rows are read as strings: an empty cell is "")
TABLE_ROW = "row "

#: suffixes read line by line or as a table, never as one JSON text
LINE_OR_TABLE_SUFFIXES = {".jsonl", ".ndjson", ".csv", ".tsv", ".tab", ".xlsx", ".xlsm"}


def _records(path: Path, data: Any = None) -> Iterable[tuple[str, Any]]:
    """``(position, record)`` pairs of a file; ``data`` is its parsed JSON if already read.
    A table's positions are ``row N`` (:data:`TABLE_ROW`)."""
    suffix = path.suffix.lower()
    if suffix in {".jsonl", ".ndjson"}:
        for lineno, obj in iter_jsonl(path):
            yield f"line {lineno}", obj
        return
    if suffix in {".csv", ".tsv", ".tab"}:
        for i, row in enumerate(read_table(path), start=2):
            yield f"{TABLE_ROW}{i}", row
        return
    if suffix in {".xlsx", ".xlsm"} or (data is None and is_xlsx(_head(path))):
        for i, row in enumerate(read_workbook(path), start=2):
            yield f"{TABLE_ROW}{i}", row
        return
    if data is None:
        data = read_json(path)
    if isinstance(data, list):
        for i, obj in enumerate(data):
            yield f"item {i}", obj
    elif isinstance(data, Mapping):
        for key, value in data.items():
            if isinstance(value, Mapping):
                yield record_label(key), {"question_id": key, **value}
            else:
                yield record_label(key), {"question_id": key, "answer": value}
    else:
        raise DataError(path, "expected a JSON object {qid: answer} or a list of records")


def _head(path: Path) -> bytes:
    """The first bytes of a file, to recognise a workbook or a pickle whatever its name
    (empty when unreadable: the reader that follows names the problem)."""
    try:
        with path.open("rb") as fh:
            return fh.read(4096)
    except OSError:
        return b""


def _is_plain_answer_dict(data: Any) -> bool:
    """``{qid: "answer"}`` with clean, non-empty string ids: no per-record checks needed."""
    return (
        isinstance(data, Mapping)
        and bool(data)
        and all(
            isinstance(v, str) and isinstance(k, str) and k and k.strip() == k
            for k, v in data.items()
        )
    )


def read_predictions(
    path: str | Path, *, notes: dict[str, int] | None = None, null_as_wrong: bool = False
) -> dict[str, Prediction]:
    """Read a prediction file of any supported shape into ``{qid: Prediction}``.

    Raises ``DataError`` (naming file and record) for malformed files, missing
    fields, answers that are not text, numbers or booleans, NaN probabilities and
    duplicate ids. ``notes`` receives how many answers were ``converted`` from JSON
    booleans / numbers and how many were ``null`` (allowed with ``null_as_wrong``).
    """
    p = Path(path)
    plain, data = _load(p)
    if plain is not None:
        return {qid: Prediction(answer) for qid, answer in plain.items()}
    return _read_records(p, data, notes, null_as_wrong)


def read_answers(
    path: str | Path, *, notes: dict[str, int] | None = None, null_as_wrong: bool = False
) -> dict[str, str]:
    """``{qid: answer}`` of a prediction file: :func:`read_predictions` without the
    probabilities (the same checks and errors)."""
    return read_answers_and_probs(path, notes=notes, null_as_wrong=null_as_wrong)[0]


def read_answers_and_probs(
    path: str | Path, *, notes: dict[str, int] | None = None, null_as_wrong: bool = False
) -> tuple[dict[str, str], dict[str, Mapping[str, float]]]:
    """:func:`read_predictions` as ``({qid: answer}, {qid: probs})``, the second holding
    the predictions that carry probabilities. A plain result list (no probabilities)
    comes back as decoded, without a :class:`Prediction` per record."""
    p = Path(path)
    plain, data = _load(p)
    if plain is not None:
        return plain, {}
    predictions = _read_records(p, data, notes, null_as_wrong)
    answers = {qid: prediction.answer for qid, prediction in predictions.items()}
    probs = {qid: pr.probs for qid, pr in predictions.items() if pr.probs is not None}
    return answers, probs


def _load(p: Path) -> tuple[dict[str, str] | None, Any]:
    """A plain result list's answers (:func:`read_result_list`), or else the parsed data
    for the record reader (None for line and table files, which it reads itself)."""
    head = _head(p)
    if binary_kind(head) == "a Python pickle":
        return None, load_plain_pickle(p)  # FPVG's prediction files; no code is ever run
    if p.suffix.lower() in LINE_OR_TABLE_SUFFIXES or is_xlsx(head):
        return None, None
    plain = read_result_list(p)
    return (plain, None) if plain is not None else (None, read_json(p))


def _read_records(
    p: Path, data: Any, notes: dict[str, int] | None, null_as_wrong: bool
) -> dict[str, Prediction]:
    """``{qid: Prediction}`` of parsed ``data`` (or of the line / table file when None),
    record by record."""
    if _is_plain_answer_dict(data):
        return {qid: Prediction(answer) for qid, answer in data.items()}
    out: dict[str, Prediction] = {}
    for position, record in _records(p, data):
        table = position.startswith(TABLE_ROW)
        qid, prediction = _from_record(record, p, position, notes, null_as_wrong, table)
        if qid in out:
            raise DataError(p, "duplicate question id", record_label(qid))
        out[qid] = prediction
    if not out:
        raise DataError(p, "no predictions in file")
    return out


def check_coverage(
    predictions: Mapping[str, Any],
    question_ids: Collection[str],
    path: str | Path,
    *,
    allow_missing: bool = False,
    allow_extra: bool = False,
) -> None:
    """Prediction ids that are not questions are an error (unless ``allow_extra``);
    questions without a prediction are an error unless ``allow_missing``. The questions
    may be a mapping or set keyed by id (looked up as it is) or a sequence of ids."""
    if not allow_extra:
        wanted = question_ids if isinstance(question_ids, Mapping | Set) else set(question_ids)
        for qid in predictions:
            if qid not in wanted:
                raise DataError(path, "question id is not among the questions", record_label(qid))
    if not allow_missing:
        missing = [qid for qid in question_ids if qid not in predictions]
        if missing:
            raise DataError(
                path,
                f"{len(missing)} of {len(question_ids)} questions have no prediction, first "
                f"{excerpt(missing[0])} (use --allow-missing to count them as wrong)",
            )


def align_predictions(
    predictions: Mapping[str, Prediction],
    question_ids: Sequence[str],
    path: str | Path,
    *,
    allow_missing: bool = False,
    allow_extra: bool = False,
) -> list[Prediction | None]:
    """Order predictions like ``question_ids``, after :func:`check_coverage`; questions
    without a prediction (with ``allow_missing``) come back as ``None`` (scored as wrong)."""
    check_coverage(
        predictions, question_ids, path, allow_missing=allow_missing, allow_extra=allow_extra
    )
    return [predictions.get(qid) for qid in question_ids]


def answers_of(aligned: Sequence[Prediction | None]) -> list[str | None]:
    """The answer strings of aligned predictions (``None`` where missing)."""
    return [None if p is None else p.answer for p in aligned]


def read_scored_answers(
    path: str | Path,
    questions: Mapping[str, Any],
    required_ids: Sequence[str],
    allow_missing: bool,
) -> tuple[dict[str, str], dict[str, int]]:
    """Predictions as ``{qid: answer}`` and counts: ``extra_predictions`` for questions
    outside ``questions`` (ignored, as the official scripts ignore them: a prediction
    file of a whole split may be scored against a subset), ``converted_predictions``
    (JSON booleans / numbers turned into ``yes`` / ``no`` / digits, where the official
    script compares the raw values and counts them wrong) and ``null_predictions``
    (scored wrong, as officially). ``required_ids`` (ids of ``questions``) without a
    prediction are an error unless ``allow_missing``; then they are scored wrong and
    counted (``missing_predictions``)."""
    p = Path(path)
    notes: dict[str, int] = {}
    answers = read_answers(p, notes=notes, null_as_wrong=True)
    extra: list[str] = []
    missing = 0
    # a file answering exactly the questions has none extra and none missing: one pass
    if answers.keys() != questions.keys():
        extra = [qid for qid in answers if qid not in questions]
        for qid in extra:
            del answers[qid]
        check_coverage(answers, required_ids, p, allow_missing=allow_missing, allow_extra=True)
        missing = count_missing(answers, required_ids)
    counts = {
        "extra_predictions": len(extra),
        "converted_predictions": notes.get("converted", 0),
        "null_predictions": notes.get("null", 0),
        "missing_predictions": missing,
    }
    return answers, counts


def count_missing(answers: Collection[str], question_ids: Iterable[str]) -> int:
    """How many of ``question_ids`` have no answer in ``answers`` (scored wrong with
    ``--allow-missing``)."""
    return sum(qid not in answers for qid in question_ids)


def in_memory_counts() -> dict[str, int]:
    """The counts of :func:`read_scored_answers` for a model's answers handed over in
    memory for exactly the questions scored: strings all, none extra, none null."""
    return {
        "extra_predictions": 0, "converted_predictions": 0, "null_predictions": 0,
        "missing_predictions": 0,
    }  # fmt: skip
