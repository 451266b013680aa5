"""Typed reading of GQA question, choices and scene-graph files for the commands that
read a few fields of each record: ``score ood`` (answer, balance, local group), the
basic-question pool (question text, image), ``relevance`` (image and annotated
objects; the scene graphs' object names and boxes), ``score gqa`` (eval.py's fields and
the choices) and ``score fpvg`` (the answer) (docs/reliability.md, "Fast paths defer to
the checked readers").

msgspec decodes the file into small typed records holding those fields; every other
field is skipped, so a 100 MB file costs a fraction of the time and memory of a dict per
question. ``relevance`` and ``score fpvg`` get the questions back as the slim dicts they
read (only their fields), so everything after reading is shared with the checked path;
``relevance`` reads the scene objects from the typed records, which answer ``obj["x"]``
as the checked reader's dicts do; ``score ood`` takes the typed records and lays them out
in columns, as it does the checked records.

A reader returns ``None`` unless the file is plainly the official shape, and the
checked reader (:func:`vqadiag.data.formats.gqa.read_gqa_questions`, or
:func:`~vqadiag.data.formats.gqa.read_scene_graphs` for scene graphs) then reads it and
names any problem. The typed records check at least what the checked reader checks:

* the optional fields it type-checks when present and not null
  (:data:`vqadiag.data.formats.gqa.QUESTION_FIELD_TYPES`) have the same types here (objects and
  lists are checked without building their contents: no Python object per item);
* a question id written twice is caught by counting the records decoded against the
  questions kept (:func:`~vqadiag.data.io.typed_json.read_keyed_records`);
* the bytes are valid UTF-8 (msgspec does not check the strings it skips).

Not checked: a number beyond the double range in a skipped field, which orjson refuses
(docs/reliability.md, "Fast paths defer to the checked readers").
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec

from vqadiag.data.io.typed_json import JSONInt, KeyedRecord, read_keyed_records


class _AnyObject(msgspec.Struct, gc=False):
    """Any JSON object; its fields are skipped (a type check only)."""


class _AnyArray(msgspec.Struct, array_like=True, gc=False):
    """Any JSON array; its items are skipped (a type check only: an array-like record
    with no fields ignores the items it does not name)."""


class QuestionFields(KeyedRecord, kw_only=True, gc=False):
    """The fields the checked reader type-checks when present and not null
    (``QUESTION_FIELD_TYPES``); subclasses make the ones they read required and typed."""

    answer: str | None = None
    groups: _AnyObject | None = None
    types: _AnyObject | None = None
    annotations: _AnyObject | None = None
    entailed: _AnyArray | None = None
    equivalent: _AnyArray | None = None
    semantic: _AnyArray | None = None
    isBalanced: bool | None = None


class _LocalGroup(msgspec.Struct, gc=False):
    local: str | None


class OODQuestion(QuestionFields, kw_only=True, gc=False):
    """What ``score ood`` reads (and the checked path requires): ``answer`` and
    ``groups.local`` (a string or null)."""

    answer: str
    groups: _LocalGroup


class AnswerQuestion(QuestionFields, kw_only=True, gc=False):
    """What ``score fpvg`` reads: the gold ``answer``."""

    answer: str


class RelevanceQuestion(QuestionFields, kw_only=True, gc=False):
    """What ``relevance`` reads: ``imageId`` and the ``annotations`` spans (token span →
    object id, a string or an integer)."""

    imageId: str
    annotations: dict[str, dict[str, str | JSONInt]] | None = None


class PoolQuestion(QuestionFields, kw_only=True, gc=False):
    """What a basic-question pool reads of a question: its ``question`` text, its
    ``imageId`` (a string, an integer or null, as the checked reader takes it) and its
    ``answer`` when present (docs/basic-questions.md, "The pool")."""

    question: str
    imageId: str | JSONInt | msgspec.UnsetType | None = msgspec.UNSET


class _Types(msgspec.Struct, gc=False):
    structural: str
    semantic: str
    detailed: str | msgspec.UnsetType = msgspec.UNSET


class _GlobalGroup(msgspec.Struct, gc=False):
    global_: str | None = msgspec.field(name="global")


class _Step(msgspec.Struct, gc=False):
    operation: str
    argument: str


class ScoredQuestion(QuestionFields, kw_only=True, gc=False):
    """What ``score gqa`` reads of a question (eval.py's fields, docs/protocols.md §7):
    question and answer strings, ``types.structural`` / ``.semantic`` (``.detailed`` when
    present), ``groups.global`` (a string or null), the ``semantic`` steps and the
    ``entailed`` ids. Stricter than the checked reader, which needs the types, groups and
    steps only on the scored questions and takes steps of any type."""

    question: str
    answer: str
    types: _Types
    groups: _GlobalGroup
    semantic: list[_Step]
    entailed: list[str] | None = None


class Choices(KeyedRecord, gc=False):
    """One question's ``valid`` and ``plausible`` answers in a GQA choices file."""

    valid: list[str]
    plausible: list[str]


#: a box side: positive (msgspec refuses a number beyond the double range, so it is finite)
_Side = Annotated[float, msgspec.Meta(gt=0)]


class SceneBox(msgspec.Struct, gc=False):
    """One scene-graph object as ``relevance`` reads it: its ``name`` (a string) and its
    box, positive ``w, h`` as the checked reader requires; ``obj["x"]`` reads a field as it
    does on the checked reader's dicts."""

    name: str
    x: float
    y: float
    w: _Side
    h: _Side

    def __getitem__(self, field: str) -> Any:
        return getattr(self, field)


class SceneObjects(KeyedRecord, gc=False):
    """One image of a scene-graph file: its ``objects`` keyed by object id (attributes,
    relations, the image size and every other field are skipped)."""

    objects: dict[str, SceneBox]

    def get(self, field: str, default: Any = None) -> Any:
        return self.objects if field == "objects" else default


T = TypeVar("T", bound=QuestionFields | Choices | SceneObjects)
_DECODERS: dict[type, msgspec.json.Decoder] = {}


def read_typed_questions(path: str | Path, record_type: type[T]) -> dict[str, T] | None:
    """``{id: record}`` of a GQA question, choices or scene-graph file decoded as
    ``record_type``, or None when the file is not plainly the official shape (see the
    module docstring)."""
    decoder = _DECODERS.get(record_type)
    if decoder is None:
        decoder = _DECODERS[record_type] = msgspec.json.Decoder(dict[str, record_type])
    return read_keyed_records(path, decoder)


def ood_questions(path: str | Path) -> dict[str, OODQuestion] | None:
    """The records ``score ood`` reads (``answer``, ``isBalanced``, ``groups.local``), or
    None (the checked reader then reads the file)."""
    return read_typed_questions(path, OODQuestion)


def relevance_questions(path: str | Path) -> dict[str, dict[str, Any]] | None:
    """The fields ``relevance`` reads, as ``{qid: {"imageId", "annotations"}}``, or None
    (the checked reader then reads the file)."""
    records = read_typed_questions(path, RelevanceQuestion)
    if records is None:
        return None
    return {qid: {"imageId": r.imageId, "annotations": r.annotations} for qid, r in records.items()}


def answer_questions(path: str | Path) -> dict[str, dict[str, Any]] | None:
    """The gold answers ``score fpvg`` reads, as ``{qid: {"answer"}}``, or None (the checked
    reader then reads the file)."""
    records = read_typed_questions(path, AnswerQuestion)
    if records is None:
        return None
    return {qid: {"answer": r.answer} for qid, r in records.items()}


def scene_boxes(path: str | Path) -> dict[str, SceneObjects] | None:
    """``{image_id: SceneObjects}`` of a scene-graph file, or None unless every object has
    a string ``name``, numbers ``x, y`` and positive ``w, h`` (:class:`SceneBox`; the
    checked reader, :func:`vqadiag.data.formats.gqa.read_scene_graphs`, then reads the
    file and names the problem). About a tenth of the memory of the checked reader's
    dicts."""
    return read_typed_questions(path, SceneObjects)


def read_scenes_with_boxes(path: str | Path) -> Mapping[str, Any]:
    """The scene graphs ``relevance`` reads (object names and boxes): the typed fast path,
    or the checked reader for a file it does not take (errors name file and record)."""
    from vqadiag.data.formats.gqa import read_scene_graphs

    return scene_boxes(path) or read_scene_graphs(path)


def read_questions_with_images(path: str | Path) -> dict[str, dict[str, Any]]:
    """The GQA questions ``relevance`` reads (``imageId`` and ``annotations``): the typed
    fast path, or the checked reader for a file it does not take (errors name file and
    record)."""
    from vqadiag.data.formats.gqa import read_gqa_questions

    return relevance_questions(path) or read_gqa_questions(path, require=("imageId",))


def read_questions_with_answers(path: str | Path) -> dict[str, dict[str, Any]]:
    """The GQA questions ``score fpvg`` reads (their ``answer``): the typed fast path, or
    the checked reader for a file it does not take (errors name file and record)."""
    from vqadiag.data.formats.gqa import read_gqa_questions

    return answer_questions(path) or read_gqa_questions(path, require=("answer",))
