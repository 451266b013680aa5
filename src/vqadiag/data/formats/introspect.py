"""VQA-introspect files (docs/protocols.md §6; Selvaraju et al. §3.2) and their sub-question ids.

Shape of the official files (``VQAIntrospect_{train,val}v1.0.json``)::

    {main_qid: {"reasoning_question": str, "reasoning_answer_most_common": str,
                "image_id": int, "introspect": [
                    {"pred_q_type": "reasoning" | "perception" | "invalid",
                     "sub_qa": [{"sub_question": str, "sub_answer": str}, ...]},
                    ...]}}

``main_qid`` is the VQA v2 question id of the Reasoning question, so VQA v2
annotations score the main questions directly.

Sub-questions carry no id in that format. We keep, per main question, the
sub-questions of every worker whose ``pred_q_type`` is in ``include_types``
(default: ``reasoning`` and ``perception``; ``invalid`` entries flag a
nonsensical main question and are skipped), in file order, drop duplicate
(question, answer) pairs as the paper does ("Removing duplicate question,
answer pairs", §3.2; compared after lower-casing and collapsing whitespace,
first spelling kept), and number the survivors from 0:

    sub_id = f"{main_qid}_{k}"        k = 0, 1, 2, …  in that order

so the same file always gives the same ids. A ``sub_qa`` entry may also carry the
sub-question's program, ``semantic`` (a synthetic world writes one, docs/synth.md
"Programs"; the symbolic model executes it). A sub-question that carries its own
``subquestion_id`` (the ``VQAIntrospect_{split}_withidv1.0.json`` files that imp_vqa's
``add_question_ids_to_introspect.py`` writes, with integer ids, and its prediction files
keyed by them) keeps that id instead: ``str(subquestion_id)``; two sub-questions with one
id, or an id equal to a main question's, is an error. :func:`write_vqa_style` writes
the main and sub-questions as VQA v2 question and annotation files under those
ids, for running a model on them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vqadiag.arguments import one_or_many
from vqadiag.data.io.jsonio import read_json, require_field
from vqadiag.errors import DataError, excerpt, record_label

Q_TYPES = ("reasoning", "perception", "invalid")
DEFAULT_INCLUDE = ("reasoning", "perception")


@dataclass(frozen=True, slots=True)
class SubQuestion:
    """One deduplicated Perception sub-question of a main question; ``semantic``: its
    program when its ``sub_qa`` entry carries one (a synthetic world's, docs/synth.md
    "Programs"), else None."""

    sub_id: str
    main_id: str
    question: str
    answer: str
    semantic: tuple[Mapping[str, Any], ...] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class MainQuestion:
    """One Reasoning question with its deduplicated sub-questions."""

    main_id: str
    question: str
    answer: str
    image_id: int | str
    subs: tuple[SubQuestion, ...] = ()


@dataclass(slots=True)
class Introspect:
    """A VQA-introspect file: main questions and all sub-questions, both by id."""

    mains: dict[str, MainQuestion] = field(default_factory=dict)
    subs: dict[str, SubQuestion] = field(default_factory=dict)
    #: own ``subquestion_id`` of sub-questions not kept (duplicates, excluded types):
    #: predictions for them are ignored, not refused
    left_out: set[str] = field(default_factory=set)


def sub_question_id(main_id: str, k: int) -> str:
    """Id of the k-th (0-based, after deduplication) sub-question: ``"<main_id>_<k>"``."""
    return f"{main_id}_{k}"


def _dedup_key(question: str, answer: str) -> tuple[str, str]:
    return " ".join(question.lower().split()), " ".join(answer.lower().split())


def _text(record: Mapping[str, Any], name: str, path: Path, label: str, where: str = "") -> str:
    value = require_field(record, name, path, label)
    prefix = f"{where}: " if where else ""
    if not isinstance(value, str):
        raise DataError(path, f"{prefix}{name!r} must be a string, got {excerpt(value)}", label)
    if not value.strip():
        raise DataError(path, f"{prefix}{name!r} is empty", label)
    return value


def _image_id(record: Mapping[str, Any], path: Path, label: str) -> int | str:
    value = require_field(record, "image_id", path, label)
    if isinstance(value, bool) or not isinstance(value, (int, str)) or value == "":
        raise DataError(
            path, f"'image_id' must be an integer or string, got {excerpt(value)}", label
        )
    return value


def _own_sub_id(qa: Mapping[str, Any], path: Path, label: str, where: str) -> str | None:
    """A sub-question's own ``subquestion_id`` (imp_vqa), as a string; None without one."""
    if "subquestion_id" not in qa:
        return None
    value = qa["subquestion_id"]
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip():
        raise DataError(
            path,
            f"{where}: 'subquestion_id' must be an integer or a string, got {excerpt(value)}",
            label,
        )
    return str(value).strip()


def _program(qa: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...] | None:
    """A sub-question's own program (``semantic``: a list of step objects), else None;
    a malformed one is ignored (the official files have none)."""
    program = qa.get("semantic")
    if not isinstance(program, list) or not all(isinstance(s, Mapping) for s in program):
        return None
    return tuple(program) or None


def _main(
    main_id: str, record: Any, path: Path, include: frozenset[str]
) -> tuple[MainQuestion, list[SubQuestion], list[str]]:
    label = record_label(main_id)
    question = _text(record, "reasoning_question", path, label)
    answer = _text(record, "reasoning_answer_most_common", path, label)
    image_id = _image_id(record, path, label)
    entries = require_field(record, "introspect", path, label)
    if not isinstance(entries, list):
        raise DataError(path, "'introspect' must be a list", label)
    seen: set[tuple[str, str]] = set()
    subs: list[SubQuestion] = []
    left_out: list[str] = []
    for i, entry in enumerate(entries):
        where = f"introspect[{i}]"
        if not isinstance(entry, Mapping):
            raise DataError(path, f"{where}: expected an object", label)
        q_type = entry.get("pred_q_type")
        if q_type not in Q_TYPES:
            raise DataError(
                path,
                f"{where}: 'pred_q_type' must be one of {', '.join(Q_TYPES)}, "
                f"got {excerpt(q_type)}",
                label,
            )
        if "sub_qa" not in entry:
            raise DataError(path, f"{where}: missing field 'sub_qa'", label)
        sub_qa = entry["sub_qa"]
        if not isinstance(sub_qa, list):
            raise DataError(path, f"{where}: 'sub_qa' must be a list", label)
        for j, qa in enumerate(sub_qa):
            at = f"{where}.sub_qa[{j}]"
            if q_type not in include:  # not scored; only its own id is remembered
                own = _own_sub_id(qa, path, label, at) if isinstance(qa, Mapping) else None
                if own is not None:
                    left_out.append(own)
                continue
            if not isinstance(qa, Mapping):
                raise DataError(path, f"{at}: expected an object", label)
            for name in ("sub_question", "sub_answer"):
                if name not in qa:
                    raise DataError(path, f"{at}: missing field {name!r}", label)
            sub_q = _text(qa, "sub_question", path, label, at)
            sub_a = _text(qa, "sub_answer", path, label, at)
            key = _dedup_key(sub_q, sub_a)
            if key in seen:
                own = _own_sub_id(qa, path, label, at)
                if own is not None:
                    left_out.append(own)
                continue
            seen.add(key)
            sub_id = _own_sub_id(qa, path, label, at) or sub_question_id(main_id, len(subs))
            subs.append(SubQuestion(sub_id, main_id, sub_q, sub_a, _program(qa)))
    return MainQuestion(main_id, question, answer, image_id, tuple(subs)), subs, left_out


def parse_introspect(
    data: Any, path: str | Path, include_types: Iterable[str] = DEFAULT_INCLUDE
) -> Introspect:
    """Validate parsed VQA-introspect JSON and number its sub-questions (module docstring).

    Raises ``DataError`` naming the file, the main question and the problem
    (missing field, non-string text, empty text, unknown ``pred_q_type``, a
    generated sub id that collides with a main id).
    """
    p = Path(path)
    include = frozenset(one_or_many(include_types))
    unknown = include - set(Q_TYPES)
    if unknown:
        raise ValueError(f"unknown pred_q_type(s) {sorted(unknown)}; known: {Q_TYPES}")
    if not include:
        raise ValueError(f"no pred_q_type to include: give some of {Q_TYPES}")
    if not isinstance(data, Mapping):
        raise DataError(
            p, f"expected a JSON object keyed by question id, got {type(data).__name__}"
        )
    if not data:
        raise DataError(p, "no questions in file")
    out = Introspect()
    for raw_id, record in data.items():
        main_id = str(raw_id).strip()
        if not main_id:
            raise DataError(p, "empty question id", record_label(raw_id))
        if main_id in out.mains:
            raise DataError(p, "duplicate question id", record_label(main_id))
        main, subs, left_out = _main(main_id, record, p, include)
        out.left_out.update(left_out)
        out.mains[main_id] = main
        for sub in subs:
            if sub.sub_id in out.subs:
                raise DataError(
                    p, f"sub-question id {excerpt(sub.sub_id)} appears twice", record_label(main_id)
                )
            out.subs[sub.sub_id] = sub
    clash = next((sid for sid in out.subs if sid in out.mains), None)
    if clash is not None:
        raise DataError(p, "a sub-question id equals a main question id", record_label(clash))
    return out


#: the official name of a split's VQA-introspect file
INTROSPECT_FILE = "VQAIntrospect_{split}v1.0.json"


def introspect_path(data_dir: str | Path, split: str, introspect: str | Path | None = None) -> Path:
    """``<folder>/VQAIntrospect_<split>v1.0.json`` with folder ``introspect`` (default
    ``DATA/introspect``, or ``DATA`` itself when it has no such folder: the official file
    names at the folder's top, as GQA's and VQA v2's files are found)."""
    if introspect is None:
        nested = Path(data_dir) / "introspect"
        introspect = nested if nested.is_dir() else data_dir
    return Path(introspect) / INTROSPECT_FILE.format(split=split)


def read_introspect(path: str | Path, include_types: Iterable[str] = DEFAULT_INCLUDE) -> Introspect:
    """Read a VQA-introspect file (module docstring for the shape and the sub ids)."""
    return parse_introspect(read_json(path), path, include_types)


def answer_type(answer: str) -> str:
    """VQA v2 answer type of a single answer: ``yes/no``, ``number`` or ``other``."""
    text = answer.strip().lower()
    if text in {"yes", "no"}:
        return "yes/no"
    return "number" if text.replace(",", "").isdigit() else "other"
