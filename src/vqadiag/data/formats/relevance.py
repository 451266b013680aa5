"""Which detected boxes are relevant / irrelevant to a question (docs/protocols.md §5, FPVG App. A).

Box geometry only; nothing here knows about models.

* Annotated objects of a question: the union of the object ids in
  ``annotations.question``, ``annotations.answer`` and ``annotations.fullAnswer``;
  their scene-graph boxes ``(x, y, x + w, y + h)``.
* A detected box is **relevant** if IoU(annotated, detected) > 0.5 for any
  annotated object.
* It is **excluded from irrelevant** if area(detected ∩ annotated) / area(detected)
  > 0.25 for any annotated object (``overlap_denominator="detected"``, the
  official code) or ÷ area(annotated) (``"annotated"``, the paper's wording).
  Irrelevant = all detected boxes minus the excluded ones.

Official quirks, reproduced by default (``official=True``), facts taken from the
FPVG repository's ``get_object_relevance.py``:

* detected coordinates are truncated with ``int()`` before matching;
* the intersection and box areas use truncated widths and heights,
  ``int(x2 − x1) · int(y2 − y1)`` (no ``+ 1``);
* a box that is not strictly ordered (``x1 < x2`` and ``y1 < y2``) after
  truncation scores 0 against everything;
* detected boxes whose four raw coordinates sum to 0 (zero padding) are skipped
  when matching, so they are never relevant and always irrelevant;
* both thresholds use strict ``>``.

With ``official=False`` coordinates and areas are exact floats, and only
all-zero boxes are skipped.

Everything is vectorized per image: one (objects × boxes) IoU matrix and one
coverage matrix, then one (questions × objects) incidence product gives every
question's relevant and excluded boxes at once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vqadiag.data.formats.gqa_typed import SceneObjects
from vqadiag.data.io.jsonio import paused_gc
from vqadiag.data.model_inputs.geometry import (
    OverlapDenominator,
    as_boxes,
    corner_areas,
    overlap_denominator_areas,
    strictly_ordered,
)
from vqadiag.errors import DataError, excerpt, record_label

IOU_THRESHOLD = 0.5
OVERLAP_THRESHOLD = 0.25
ANNOTATION_FIELDS = ("question", "answer", "fullAnswer")

NO_ANNOTATED_OBJECTS = "no_annotated_objects"
NO_RELEVANT_BOXES = "no_relevant_boxes"
NO_IRRELEVANT_BOXES = "no_irrelevant_boxes"
EXCLUSION_REASONS = (NO_ANNOTATED_OBJECTS, NO_RELEVANT_BOXES, NO_IRRELEVANT_BOXES)


def prepare_detected(raw: np.ndarray, *, official: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Detected boxes as matched, and the mask of boxes skipped when matching.

    Official: coordinates truncated toward zero (``int()``), skipped where the
    raw coordinates sum to 0. Otherwise: unchanged, skipped where all zero.
    Works on any array whose last axis holds the four corners.
    """
    r = np.asarray(raw, dtype=np.float64)
    if official:
        return np.trunc(r), r.sum(axis=-1) == 0
    return r, (r == 0).all(axis=-1)


@dataclass(frozen=True)
class MatchSettings:
    """Thresholds and rules of the matching (defaults: the official ones, docs/protocols.md §5)."""

    overlap_denominator: OverlapDenominator = "detected"
    official: bool = True
    iou_threshold: float = IOU_THRESHOLD
    overlap_threshold: float = OVERLAP_THRESHOLD


def _block_masks(
    detected: np.ndarray,
    n_boxes: np.ndarray,
    annotated: np.ndarray,
    annotated_image: np.ndarray,
    question_rows: np.ndarray,
    question_starts: np.ndarray,
    question_image: np.ndarray,
    settings: MatchSettings,
) -> tuple[np.ndarray, np.ndarray]:
    """Relevant / irrelevant masks (questions × box slots) for a block of images.

    ``detected`` (images × slots × 4) holds each image's raw boxes in its first
    ``n_boxes`` slots; annotated box k belongs to image ``annotated_image[k]``;
    question q refers to the annotated rows
    ``question_rows[question_starts[q] : question_starts[q + 1]]`` (never empty).
    One (annotated × slots) IoU and coverage matrix for the whole block.
    """
    n_slots = detected.shape[1]
    integer = settings.official
    det, skip = prepare_detected(detected, official=integer)
    annotated = np.asarray(annotated, dtype=np.float64)
    integral = integer and bool(np.all(annotated == np.trunc(annotated)))
    dtype = _work_dtype(det, annotated, integral, settings)
    # Per box slot, once per image: corners as contiguous planes, area, and whether
    # the box can match at all (exists, is not skipped padding, strictly ordered;
    # unordered boxes score 0 in the official code).
    x1, y1, x2, y2 = (np.ascontiguousarray(det[..., k], dtype=dtype) for k in range(4))
    exists = np.arange(n_slots)[None, :] < n_boxes[:, None]
    ordered = (x1 < x2) & (y1 < y2)
    usable = exists & ~skip & ordered
    dw, dh = x2 - x1, y2 - y1
    if integer:  # int(x2 − x1); the truncated corners make this a no-op, kept for clarity
        dw, dh = np.trunc(dw), np.trunc(dh)
    det_area = np.where(ordered, dw * dh, dtype.type(0))
    ann = annotated.astype(dtype)
    ann_area = corner_areas(ann, integer)[:, None]
    ann_ok = strictly_ordered(ann)[:, None]

    def take(plane: np.ndarray) -> np.ndarray:  # per (annotated object, slot of its image)
        return np.take(plane, annotated_image, axis=0)

    w = np.minimum(ann[:, 2:3], take(x2))
    w -= np.maximum(ann[:, 0:1], take(x1))
    h = np.minimum(ann[:, 3:4], take(y2))
    h -= np.maximum(ann[:, 1:2], take(y1))
    np.maximum(w, 0, out=w)  # boxes that do not meet intersect in 0
    np.maximum(h, 0, out=h)
    if integer and not integral:
        # int(x_right − x_left); already integral when every corner is an integer
        np.trunc(w, out=w)
        np.trunc(h, out=h)
    inter = w
    inter *= h
    can_match = take(usable) & ann_ok
    area_det = take(det_area)
    union = area_det + ann_area
    union -= inter
    iou_hit = _greater_ratio(inter, union, settings.iou_threshold, integer)
    den = overlap_denominator_areas(ann_area, area_det, settings.overlap_denominator)
    cov_hit = _greater_ratio(inter, den, settings.overlap_threshold, integer)
    iou_hit &= can_match
    cov_hit &= can_match
    relevant = _any_per_question(iou_hit, question_rows, question_starts, n_slots)
    excluded = _any_per_question(cov_hit, question_rows, question_starts, n_slots)
    return relevant, exists[question_image] & ~excluded


_FLOAT32_EXACT_BELOW = 2048.0
"""Integer corners in [0, 2048): sides < 2**11, areas < 2**22, unions < 2**23 — all exact
in float32, so the official integer arithmetic can run at half the memory traffic."""


def _dyadic(threshold: float) -> bool:
    return (threshold * 2**20).is_integer()


def _work_dtype(
    det: np.ndarray, annotated: np.ndarray, integral: bool, settings: MatchSettings
) -> np.dtype:
    """float32 when the official integer arithmetic is exact in it, else float64."""
    if not (integral and _dyadic(settings.iou_threshold) and _dyadic(settings.overlap_threshold)):
        return np.dtype(np.float64)
    for arr in (det, annotated):
        if arr.size and (arr.min() < 0 or arr.max() >= _FLOAT32_EXACT_BELOW):
            return np.dtype(np.float64)
    return np.dtype(np.float32)


def _greater_ratio(num: np.ndarray, den: np.ndarray, threshold: float, integer: bool) -> np.ndarray:
    """``num / den > threshold`` as the official code computes it (0 / 0 is not greater).

    With integer operands (< 2**33) and a dyadic threshold such as 0.5 or 0.25,
    ``num > threshold · den`` gives exactly the same answers without dividing.
    """
    if integer and _dyadic(threshold):
        return num > den * threshold
    with np.errstate(divide="ignore", invalid="ignore"):
        return num / den > threshold


def _any_per_question(
    hits: np.ndarray, rows: np.ndarray, starts: np.ndarray, n_slots: int
) -> np.ndarray:
    """OR of the hit rows of each question's annotated objects (bit-packed for speed)."""
    packed = np.packbits(hits, axis=1)
    merged = np.bitwise_or.reduceat(packed[rows], starts, axis=0)
    return np.unpackbits(merged, axis=1, count=n_slots).view(bool)


def image_relevance(
    detected: np.ndarray,
    annotated: np.ndarray,
    question_objects: Sequence[Sequence[int]],
    *,
    overlap_denominator: OverlapDenominator = "detected",
    official: bool = True,
    iou_threshold: float = IOU_THRESHOLD,
    overlap_threshold: float = OVERLAP_THRESHOLD,
) -> tuple[np.ndarray, np.ndarray]:
    """Relevant and irrelevant masks (questions × boxes) for all questions of one image.

    ``annotated`` holds the image's annotated boxes (m × 4, corners);
    ``question_objects[q]`` lists the rows of ``annotated`` that question ``q``
    refers to (at least one). relevant[q, j] = ∃ k ∈ objects(q): IoU_kj >
    iou_threshold; irrelevant[q, j] = ¬∃ k ∈ objects(q): coverage_kj >
    overlap_threshold.
    """
    det = as_boxes(detected)
    ann = as_boxes(annotated)
    if any(len(rows) == 0 for rows in question_objects):
        raise ValueError("every question needs at least one annotated object")
    if not question_objects:
        empty = np.zeros((0, det.shape[0]), dtype=bool)
        return empty, empty.copy()
    rows = np.fromiter((r for q in question_objects for r in q), dtype=np.int64)
    starts = np.cumsum([0] + [len(q) for q in question_objects[:-1]])
    settings = MatchSettings(overlap_denominator, official, iou_threshold, overlap_threshold)
    return _block_masks(
        det[None],
        np.array([det.shape[0]]),
        ann,
        np.zeros(ann.shape[0], dtype=np.int64),
        rows,
        starts,
        np.zeros(len(question_objects), dtype=np.int64),
        settings,
    )


def annotated_object_ids(record: Mapping[str, Any], path: Any = None, qid: str = "") -> list[str]:
    """Union of the object ids in ``annotations.{question, answer, fullAnswer}`` (sorted).

    Each annotation maps a token span (``"3"`` or ``"3:5"``) to an object id
    (a string; integers are turned into strings). A question without
    ``annotations`` has no annotated objects.
    """
    annotations = record.get("annotations")
    if not annotations:
        return []
    if type(annotations) is not dict and not isinstance(annotations, Mapping):
        raise DataError(path, "'annotations' must be an object", record_label(qid))
    ids: set[Any] = set()
    for name in ANNOTATION_FIELDS:
        spans = annotations.get(name)
        if not spans:
            continue
        if type(spans) is not dict and not isinstance(spans, Mapping):
            raise DataError(
                path, f"'annotations.{name}' must be an object span -> object id", record_label(qid)
            )
        for obj in spans.values():
            if type(obj) is not str:
                if isinstance(obj, int) and not isinstance(obj, bool):
                    obj = str(obj)
                else:
                    raise DataError(
                        path,
                        f"'annotations.{name}' has a non-id value {excerpt(obj)}",
                        record_label(qid),
                    )
            ids.add(obj)
    return sorted(ids)


@dataclass
class RelevanceResult:
    """Per-question box sets and the reasons questions were left out.

    ``sets[qid] = (relevant indices, irrelevant indices, n_boxes)`` (index
    arrays) for every question with annotated objects; ``excluded[qid]`` names the reason for the
    questions left out (first failing rule in the order of
    :data:`EXCLUSION_REASONS`).
    """

    sets: dict[str, tuple[np.ndarray, np.ndarray, int]] = field(default_factory=dict)
    excluded: dict[str, str] = field(default_factory=dict)

    @property
    def kept(self) -> list[str]:
        """Question ids with both relevant and irrelevant boxes."""
        return [qid for qid in self.sets if qid not in self.excluded]

    def excluded_counts(self) -> dict[str, int]:
        """How many questions each reason left out (every reason listed)."""
        counts = dict.fromkeys(EXCLUSION_REASONS, 0)
        for reason in self.excluded.values():
            counts[reason] += 1
        return counts

    def records(self, question_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The ``R.json`` contract: ``{qid: {"relevant": [...], "irrelevant": [...]}}``.

        Left-out questions also carry ``"excluded": reason``. Index lists are
        numpy arrays (``write_json`` serializes them as JSON lists).
        """
        out: dict[str, dict[str, Any]] = {}
        empty = np.zeros(0, dtype=np.int64)
        for qid in question_ids:
            rel, irrel, _ = self.sets.get(qid, (empty, empty, 0))
            record: dict[str, Any] = {"relevant": rel, "irrelevant": irrel}
            if qid in self.excluded:
                record["excluded"] = self.excluded[qid]
            out[qid] = record
        return out


BLOCK_PAIRS = 400_000
"""Annotated-object × box-slot pairs matched in one vectorized block (bounds memory)."""


def compute_relevance(
    questions: Mapping[str, Mapping[str, Any]],
    scenes: Mapping[str, Any],
    detections: Mapping[str, np.ndarray],
    *,
    overlap_denominator: OverlapDenominator = "detected",
    official: bool = True,
    iou_threshold: float = IOU_THRESHOLD,
    overlap_threshold: float = OVERLAP_THRESHOLD,
    questions_path: Any = None,
    scenes_path: Any = None,
    on_progress: Callable[[int], None] | None = None,
) -> RelevanceResult:
    """Relevant / irrelevant detected boxes for every question (docs/protocols.md §5).

    Questions are grouped by ``imageId``; each image's boxes are read once and
    matched against the union of its questions' annotated objects, many
    images per vectorized block. Questions with no annotated objects, no
    relevant or no irrelevant boxes are recorded in ``excluded``. Raises
    ``DataError`` for an image missing from the scene graphs or detections, or
    an annotated object missing from its scene graph. ``on_progress(k)`` is
    called as k more questions are done (a progress bar's ``advance``).
    """
    settings = MatchSettings(overlap_denominator, official, iou_threshold, overlap_threshold)
    done = on_progress or (lambda k: None)
    with paused_gc():  # many small acyclic lists; no rescans of the caller's big dicts
        return _compute(questions, scenes, detections, settings, questions_path, scenes_path, done)


def _compute(
    questions: Mapping[str, Mapping[str, Any]],
    scenes: Mapping[str, Any],
    detections: Mapping[str, np.ndarray],
    settings: MatchSettings,
    questions_path: Any,
    scenes_path: Any,
    done: Callable[[int], None],
) -> RelevanceResult:
    result = RelevanceResult()
    by_image: dict[str, list[tuple[str, list[str]]]] = defaultdict(list)
    for qid, record in questions.items():
        object_ids = annotated_object_ids(record, questions_path, qid)
        if not object_ids:
            result.excluded[qid] = NO_ANNOTATED_OBJECTS
            continue
        by_image[str(record["imageId"])].append((qid, object_ids))
    done(len(result.excluded))
    block = _Block()
    for image_id, entries in by_image.items():
        scene = scenes.get(image_id)
        if scene is None:
            raise DataError(
                scenes_path,
                f"image {excerpt(image_id)} of question {excerpt(entries[0][0])} "
                "is not in the scene graphs",
            )
        boxes = np.asarray(detections[image_id], dtype=np.float64).reshape(-1, 4)
        block.add_image(scene, entries, boxes, scenes_path, image_id)
        if block.pairs >= BLOCK_PAIRS:
            block.match(settings, result)
            done(len(block.qids))
            block = _Block()
    if block.qids:
        block.match(settings, result)
        done(len(block.qids))
    return result


class _Block:
    """Images matched together: their boxes, annotated objects and questions, flattened."""

    def __init__(self) -> None:
        self.boxes: list[np.ndarray] = []
        self.annotated: list[tuple[float, float, float, float]] = []
        self.annotated_image: list[int] = []
        self.qids: list[str] = []
        self.question_image: list[int] = []
        self.question_rows: list[int] = []
        self.question_starts: list[int] = []
        self.pairs = 0

    def add_image(
        self,
        scene: Mapping[str, Any] | SceneObjects,
        entries: Sequence[tuple[str, Sequence[str]]],
        boxes: np.ndarray,
        scenes_path: Any,
        image_id: str,
    ) -> None:
        """Add one image, its questions and the scene-graph boxes of their objects."""
        i = len(self.boxes)
        base = len(self.annotated)
        object_rows: dict[str, int] = {}
        rows, starts = self.question_rows, self.question_starts
        for qid, object_ids in entries:
            starts.append(len(rows))
            for obj_id in object_ids:
                row = object_rows.get(obj_id)
                if row is None:
                    row = object_rows[obj_id] = len(object_rows)
                rows.append(base + row)
            self.qids.append(qid)
        self.question_image.extend([i] * len(entries))
        readable = isinstance(scene, (Mapping, SceneObjects))
        objects = scene.get("objects", {}) if readable else {}
        for obj_id in object_rows:
            obj = objects.get(obj_id)
            if obj is None:
                raise DataError(
                    scenes_path,
                    f"annotated object {excerpt(obj_id)} is not in the scene graph",
                    f"image {excerpt(image_id)}",
                )
            x, y = float(obj["x"]), float(obj["y"])
            self.annotated.append((x, y, x + float(obj["w"]), y + float(obj["h"])))
        self.annotated_image.extend([i] * len(object_rows))
        self.boxes.append(boxes)
        self.pairs += len(object_rows) * max(boxes.shape[0], 1)

    def match(self, settings: MatchSettings, result: RelevanceResult) -> None:
        """Match the block and record every question's sets and exclusions in ``result``."""
        n_boxes = np.array([b.shape[0] for b in self.boxes], dtype=np.int64)
        detected = np.zeros((len(self.boxes), int(n_boxes.max()), 4), dtype=np.float64)
        for i, b in enumerate(self.boxes):
            detected[i, : b.shape[0]] = b
        relevant, irrelevant = _block_masks(
            detected,
            n_boxes,
            np.asarray(self.annotated, dtype=np.float64).reshape(-1, 4),
            np.asarray(self.annotated_image, dtype=np.int64),
            np.asarray(self.question_rows, dtype=np.int64),
            np.asarray(self.question_starts, dtype=np.int64),
            np.asarray(self.question_image, dtype=np.int64),
            settings,
        )
        sizes = n_boxes[self.question_image].tolist()
        result.sets.update(
            zip(
                self.qids,
                zip(_row_indices(relevant), _row_indices(irrelevant), sizes, strict=True),
                strict=True,
            )
        )
        no_rel = ~relevant.any(axis=1)
        no_irrel = ~no_rel & ~irrelevant.any(axis=1)
        for reason, mask in ((NO_RELEVANT_BOXES, no_rel), (NO_IRRELEVANT_BOXES, no_irrel)):
            for q in np.flatnonzero(mask).tolist():
                result.excluded[self.qids[q]] = reason


def _row_indices(mask: np.ndarray) -> list[np.ndarray]:
    """Column indices of the true entries of each row (views into one index array)."""
    rows, cols = np.nonzero(mask)
    cols = np.ascontiguousarray(cols)  # slices of it serialize directly (orjson)
    ends = np.cumsum(np.bincount(rows, minlength=mask.shape[0])).tolist()
    out = []
    start = 0
    for end in ends:
        out.append(cols[start:end])
        start = end
    return out
