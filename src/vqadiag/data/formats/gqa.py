"""GQA questions, scene graphs and choices (the official file shapes).

* questions: ``{qid: {question, answer, fullAnswer, imageId, isBalanced, groups:
  {global, local}, types: {structural, semantic, detailed}, annotations:
  {question, answer, fullAnswer}, semantic: [...], entailed: [...], equivalent: [...]}}``
* scene graphs: ``{imageId: {width, height, objects: {objId: {name, x, y, w, h,
  attributes: [...], relations: [{name, object}]}}}}``
* choices: ``{qid: {valid: [...], plausible: [...]}}``

Records are validated and kept as the parsed dicts (no second copy), so a
1M-question file costs one orjson parse.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.data.io.jsonio import finite_float, read_json, require_field
from vqadiag.errors import DataError, excerpt, record_label

GQAQuestions = dict[str, dict[str, Any]]
SceneGraphs = dict[str, dict[str, Any]]


def _top_object(data: Any, path: Path, what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise DataError(path, f"expected a JSON object keyed by {what}, got {type(data).__name__}")
    if not data:
        raise DataError(path, f"no {what}s in file")
    return data


#: Optional question fields and the JSON type each must have when present (not null).
QUESTION_FIELD_TYPES: tuple[tuple[str, type], ...] = (
    ("answer", str),
    ("groups", dict),
    ("types", dict),
    ("annotations", dict),
    ("entailed", list),
    ("equivalent", list),
    ("semantic", list),
    ("isBalanced", bool),
)


def question_ok(record: Any, required: frozenset[str]) -> bool:
    """Cheap check of one record (the common case); failures are explained by
    :func:`_question_problem`."""
    if type(record) is not dict or not required <= record.keys():
        return False
    get = record.get
    for field in required:
        if get(field) is None:
            return False
    for field, kind in QUESTION_FIELD_TYPES:
        value = get(field)
        if value is not None and type(value) is not kind:
            return False
    return True


def _question_problem(record: Any, required: tuple[str, ...], path: Path, label: str) -> None:
    """Raise the DataError that says what is wrong with a record."""
    for field in required:
        if require_field(record, field, path, label) is None:
            raise DataError(path, f"{field!r} is null", label)
    for field, kind in QUESTION_FIELD_TYPES:
        value = record.get(field)
        if value is not None and type(value) is not kind:
            expected = {str: "a string", dict: "an object", list: "a list", bool: "true or false"}
            raise DataError(
                path, f"{field!r} must be {expected[kind]}, got {excerpt(value)}", label
            )


def read_gqa_questions(
    path: str | Path, require: Iterable[str] = ("question", "answer", "imageId")
) -> GQAQuestions:
    """Read a GQA question file, checking that every record has the ``require`` fields.

    Optional fields are type-checked when present (:data:`QUESTION_FIELD_TYPES`:
    string ``answer``, ``groups`` / ``types`` / ``annotations`` objects,
    ``entailed`` / ``equivalent`` / ``semantic`` lists, boolean ``isBalanced``).
    The parsed dicts are returned as they are (no second copy).
    """
    p = Path(path)
    data = _top_object(read_json(p), p, "question id")
    check_gqa_questions(data, p, require)
    return data


def check_gqa_questions(
    records: Mapping[str, Any], path: str | Path, require: Iterable[str]
) -> None:
    """The checks of :func:`read_gqa_questions` on records already read from ``path``."""
    p = Path(path)
    required = tuple(require)
    required_set = frozenset(required)
    for qid, record in records.items():
        if type(record) is not dict and isinstance(record, Mapping):
            record = dict(record.items())  # a record kept as its bytes: decoded once
        if not question_ok(record, required_set):
            _question_problem(record, required, p, record_label(qid))


def read_scene_graphs(path: str | Path) -> SceneGraphs:
    """Read GQA scene graphs, checking every object's name and box.

    Boxes must have finite ``x, y`` and positive, finite ``w, h``.
    """
    p = Path(path)
    data = _top_object(read_json(p), p, "image id")
    for image_id, scene in data.items():
        label = f"image {excerpt(image_id)}"
        objects = require_field(scene, "objects", p, label)
        if not isinstance(objects, dict):
            raise DataError(p, "'objects' must be an object keyed by object id", label)
        for obj_id, obj in objects.items():
            obj_label = f"image {excerpt(image_id)} object {excerpt(obj_id)}"
            require_field(obj, "name", p, obj_label)
            for field in ("x", "y", "w", "h"):
                finite_float(require_field(obj, field, p, obj_label), p, obj_label, field)
            if obj["w"] <= 0 or obj["h"] <= 0:
                raise DataError(
                    p, f"box has non-positive size (w={obj['w']}, h={obj['h']})", obj_label
                )
    return data


def object_box_corners(obj: Mapping[str, Any]) -> tuple[float, float, float, float]:
    """Scene-graph ``x, y, w, h`` → corners ``(x, y, x + w, y + h)`` (docs/protocols.md §5)."""
    x, y = float(obj["x"]), float(obj["y"])
    return x, y, x + float(obj["w"]), y + float(obj["h"])


def object_corners(objects: Iterable[Mapping[str, Any]]) -> np.ndarray:
    """``(M, 4)`` float corners of scene-graph objects (:func:`object_box_corners` of each)."""
    rows = [object_box_corners(o) for o in objects]
    return np.asarray(rows, np.float64).reshape(len(rows), 4)


def read_choices(path: str | Path) -> dict[str, dict[str, list[str]]]:
    """Read a GQA choices file ``{qid: {valid: [...], plausible: [...]}}``."""
    p = Path(path)
    data = _top_object(read_json(p), p, "question id")
    for qid, record in data.items():
        label = record_label(qid)
        for field in ("valid", "plausible"):
            value = require_field(record, field, p, label)
            if not isinstance(value, list):
                raise DataError(p, f"{field!r} must be a list of answers", label)
    return data


def read_attentions(
    path: str | Path, *, map_size: int = 7, object_boxes: bool = False
) -> dict[str, list[Any]]:
    """Attention maps for GQA's grounding score (docs/gqa.md, "Grounding"): the official
    ``[{"questionId": ..., "attention": ...}]`` list (or ``{qid: attention}``). Each
    attention is a ``map_size × map_size`` grid of finite numbers, or with
    ``object_boxes`` a list of ``[x0, y0, x1, y1, weight]`` in 0–1 image coordinates."""
    p = Path(path)
    data = read_json(p)
    if isinstance(data, list):
        pairs = []
        for i, record in enumerate(data):
            qid = require_field(record, "questionId", p, f"item {i}")
            pairs.append((str(qid), require_field(record, "attention", p, record_label(qid))))
    elif isinstance(data, dict):
        pairs = [(str(k), v) for k, v in data.items()]
    else:
        raise DataError(p, "expected a list of {questionId, attention} or {qid: attention}")
    if not pairs:
        raise DataError(p, "no attention maps in file")
    out: dict[str, list[Any]] = {}
    for qid, attention in pairs:
        label = record_label(qid)
        if qid in out:
            raise DataError(p, "duplicate question id", label)
        rows = attention if isinstance(attention, list) else None
        if object_boxes:
            ok = rows is not None and all(isinstance(r, list) and len(r) == 5 for r in rows)
            shape = "a list of [x0, y0, x1, y1, weight] boxes"
        else:
            ok = (
                rows is not None
                and len(rows) == map_size
                and all(isinstance(r, list) and len(r) == map_size for r in rows)
            )
            shape = f"a {map_size} x {map_size} grid (--map-size)"
        if not ok:
            raise DataError(p, f"attention must be {shape}", label)
        for row in rows:
            for value in row:
                finite_float(value, p, label, "attention")
        out[qid] = rows
    return out


def is_balanced(record: Mapping[str, Any]) -> bool:
    """A GQA question is balanced unless its record says ``isBalanced: false``."""
    return record.get("isBalanced", True) is not False


def check_local_group(record: Mapping[str, Any], path: Path, qid: str) -> None:
    """``groups.local`` of a question (GQA-OOD's answer group): present, a string or null."""
    label = record_label(qid)
    groups = record.get("groups")
    if groups is None:
        raise DataError(path, "missing field 'groups'", label)
    if not isinstance(groups, Mapping):
        raise DataError(path, "'groups' must be an object", label)
    if "local" not in groups:
        raise DataError(path, "missing field 'groups.local'", label)
    if groups["local"] is not None and not isinstance(groups["local"], str):
        raise DataError(path, "'groups.local' must be a string or null", label)
