"""What ``score gqa`` scores: eval.py's fields of the scored questions and their choices
(docs/protocols.md §7, docs/gqa.md).

:func:`read_gqa_inputs` first tries the typed fast path (:mod:`vqadiag.data.formats.gqa_typed`:
only the fields eval.py reads are built) and otherwise, or at the first doubt, the
checked readers, which give the same inputs or name the problem (docs/reliability.md,
"Fast paths defer to the checked readers").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from vqadiag.data.formats.gqa import (
    GQAQuestions,
    check_gqa_questions,
    is_balanced,
    read_choices,
    read_gqa_questions,
)
from vqadiag.data.formats.gqa_typed import Choices, ScoredQuestion, read_typed_questions
from vqadiag.errors import DataError, excerpt, record_label
from vqadiag.protocols.gqa.formulas import (
    GQAQuestionColumns,
    question_columns,
    steps_of_pairs,
    words_count,
)

ChoiceLists = tuple[list[Sequence[str]], list[Sequence[str]]]


@dataclass(frozen=True)
class GQAInputs:
    """The scored questions' columns, each one's valid and plausible answers (None
    without a choices file) and, from the checked path only, the parsed records."""

    columns: GQAQuestionColumns
    choice_lists: ChoiceLists | None
    records: GQAQuestions | None


def _check_mapping(record: Mapping[str, Any], name: str, path: Path, label: str) -> Mapping:
    value = record.get(name)
    if value is None:
        raise DataError(path, f"missing field {name!r}", label)
    if not isinstance(value, Mapping):
        raise DataError(path, f"{name!r} must be an object", label)
    return value


def _check_string(parent: Mapping[str, Any], key: str, what: str, path: Path, label: str) -> None:
    if key not in parent:
        raise DataError(path, f"missing field {what!r}", label)
    if not isinstance(parent[key], str):
        raise DataError(path, f"{what!r} must be a string, got {excerpt(parent[key])}", label)


def _check_scored_record(
    record: Mapping[str, Any], path: Path, qid: str, need_detailed: bool
) -> None:
    """The fields eval.py reads from a scored question, with one-line errors."""
    label = record_label(qid)
    if not isinstance(record.get("question"), str):
        raise DataError(path, "'question' must be a string", label)
    types = _check_mapping(record, "types", path, label)
    _check_string(types, "structural", "types.structural", path, label)
    _check_string(types, "semantic", "types.semantic", path, label)
    if need_detailed:
        _check_string(types, "detailed", "types.detailed", path, label)
    groups = _check_mapping(record, "groups", path, label)
    if "global" not in groups:
        raise DataError(path, "missing field 'groups.global'", label)
    if groups["global"] is not None and not isinstance(groups["global"], str):
        raise DataError(path, "'groups.global' must be a string or null", label)
    semantic = record.get("semantic")
    if semantic is None:
        raise DataError(path, "missing field 'semantic'", label)
    for i, op in enumerate(semantic):
        if not isinstance(op, Mapping) or "operation" not in op or "argument" not in op:
            raise DataError(path, f"'semantic' step {i} needs 'operation' and 'argument'", label)


def _no_balanced(path: Path) -> DataError:
    return DataError(
        path, "no balanced questions (isBalanced true); use --all-questions to score all"
    )


def _checked_inputs(q_path: Path, choices: str | Path | None, all_questions: bool) -> GQAInputs:
    records = read_gqa_questions(q_path, require=("question", "answer"))
    return _inputs_of(records, q_path, choices, all_questions)


def gqa_inputs_of(
    records: GQAQuestions,
    q_path: Path,
    choices: str | Path | None,
    *,
    all_questions: bool = False,
) -> GQAInputs:
    """The inputs of ``score gqa`` from question records already read from ``q_path``
    (checked as :func:`read_gqa_inputs` checks them; errors name ``q_path``)."""
    check_gqa_questions(records, q_path, ("question", "answer"))
    return _inputs_of(records, q_path, choices, all_questions)


def _inputs_of(
    records: GQAQuestions, q_path: Path, choices: str | Path | None, all_questions: bool
) -> GQAInputs:
    scored = [qid for qid, r in records.items() if all_questions or is_balanced(r)]
    if not scored:
        raise _no_balanced(q_path)
    lists = None
    if choices is not None:
        c_path = Path(choices)
        choice_data = read_choices(c_path)
        for qid in scored:
            if qid not in choice_data:
                raise DataError(c_path, "no choices for this question", record_label(qid))
        lists = (
            [choice_data[qid]["valid"] for qid in scored],
            [choice_data[qid]["plausible"] for qid in scored],
        )
    for qid in scored:
        _check_scored_record(records[qid], q_path, qid, need_detailed=lists is not None)
    columns = question_columns(records, scored, detailed=lists is not None)
    return GQAInputs(columns, lists, records)


def _typed_inputs(
    q_path: Path, choices: str | Path | None, all_questions: bool
) -> GQAInputs | None:
    typed = read_typed_questions(q_path, ScoredQuestion)
    if typed is None:
        return None
    scored = [qid for qid, r in typed.items() if all_questions or r.isBalanced is not False]
    records = [typed[qid] for qid in scored]
    if not records:
        return None
    lists = None
    if choices is not None:
        choice_data = read_typed_questions(choices, Choices)
        if choice_data is None or any(qid not in choice_data for qid in scored):
            return None
        if any(r.types.detailed is msgspec.UNSET for r in records):
            return None
        lists = (
            [choice_data[qid].valid for qid in scored],
            [choice_data[qid].plausible for qid in scored],
        )
    columns = GQAQuestionColumns(
        question_ids=scored,
        answers=[r.answer for r in records],
        structural=[r.types.structural for r in records],
        semantic=[r.types.semantic for r in records],
        detailed=[r.types.detailed for r in records] if lists is not None else None,
        global_groups=[r.groups.global_ for r in records],
        words=[words_count(r.question) for r in records],
        steps=[steps_of_pairs((s.operation, s.argument) for s in r.semantic) for r in records],
        entailed=[r.entailed or () for r in records],
        answer_of={qid: r.answer for qid, r in typed.items()},
    )
    return GQAInputs(columns, lists, None)


def read_gqa_inputs(
    questions: str | Path,
    choices: str | Path | None,
    *,
    all_questions: bool = False,
    need_records: bool = False,
) -> GQAInputs:
    """The inputs of ``score gqa``: the ``isBalanced`` questions (all with
    ``all_questions``) and, with ``choices``, their valid and plausible answers; with
    ``need_records`` the parsed records too (the grounding score reads them). Problems
    raise DataError naming file and record (from the checked readers)."""
    q_path = Path(questions)
    if not need_records:
        fast = _typed_inputs(q_path, choices, all_questions)
        if fast is not None:
            return fast
    return _checked_inputs(q_path, choices, all_questions)
