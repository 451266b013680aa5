"""Which detected boxes are relevant / irrelevant to a question (SPEC.md §5, FPVG App. A).

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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from vqadiag.errors import DataError, record_label

IOU_THRESHOLD = 0.5
OVERLAP_THRESHOLD = 0.25
ANNOTATION_FIELDS = ("question", "answer", "fullAnswer")

NO_ANNOTATED_OBJECTS = "no_annotated_objects"
NO_RELEVANT_BOXES = "no_relevant_boxes"
NO_IRRELEVANT_BOXES = "no_irrelevant_boxes"
EXCLUSION_REASONS = (NO_ANNOTATED_OBJECTS, NO_RELEVANT_BOXES, NO_IRRELEVANT_BOXES)

OverlapDenominator = Literal["detected", "annotated"]


def _sides(boxes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]


def box_areas(boxes: np.ndarray, *, integer: bool = True) -> np.ndarray:
    """Areas of corner boxes ``(x1, y1, x2, y2)``: ``int(x2 − x1) · int(y2 − y1)``.

    With ``integer=False`` the exact product ``(x2 − x1)(y2 − y1)``. Boxes that
    are not strictly ordered get area 0.
    """
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    w, h = _sides(b)
    if integer:
        w, h = np.trunc(w), np.trunc(h)
    return np.where(_ordered(b), w * h, 0.0)


def _ordered(boxes: np.ndarray) -> np.ndarray:
    return (boxes[:, 0] < boxes[:, 2]) & (boxes[:, 1] < boxes[:, 3])


def pairwise_intersection(a: np.ndarray, b: np.ndarray, *, integer: bool = True) -> np.ndarray:
    """Intersection areas of every box of ``a`` (m × 4) with every box of ``b`` (n × 4) → m × n.

    Official rule: 0 when either box is not strictly ordered or the boxes do not
    meet; otherwise ``int(x_right − x_left) · int(y_bottom − y_top)``
    (exact product with ``integer=False``).
    """
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    w = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    h = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    valid = (w >= 0) & (h >= 0) & _ordered(a)[:, None] & _ordered(b)[None, :]
    if integer:
        w, h = np.trunc(w), np.trunc(h)
    return np.where(valid, w * h, 0.0)


def _safe_divide(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.zeros(np.broadcast_shapes(num.shape, den.shape), dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


def pairwise_iou(a: np.ndarray, b: np.ndarray, *, integer: bool = True) -> np.ndarray:
    """IoU of every box of ``a`` with every box of ``b`` → m × n.

    IoU = I / (area_a + area_b − I) with the official integer areas
    (SPEC.md §5); 0 where the union is empty.
    """
    inter = pairwise_intersection(a, b, integer=integer)
    union = box_areas(a, integer=integer)[:, None] + box_areas(b, integer=integer)[None, :] - inter
    return _safe_divide(inter, union)


def pairwise_coverage(
    annotated: np.ndarray,
    detected: np.ndarray,
    *,
    denominator: OverlapDenominator = "detected",
    integer: bool = True,
) -> np.ndarray:
    """Overlap of annotated (m × 4) with detected (n × 4) boxes → m × n.

    ``"detected"`` (official): area(det ∩ ann) / area(det) — how much of the
    detected box shows the annotated object; ``"annotated"`` (paper, App. A):
    area(det ∩ ann) / area(ann). 0 where the denominator is 0.
    """
    inter = pairwise_intersection(annotated, detected, integer=integer)
    if denominator == "detected":
        return _safe_divide(inter, box_areas(detected, integer=integer)[None, :])
    if denominator == "annotated":
        return _safe_divide(inter, box_areas(annotated, integer=integer)[:, None])
    raise ValueError(f"overlap denominator must be 'detected' or 'annotated', not {denominator!r}")


def prepare_detected(raw: np.ndarray, *, official: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Detected boxes as matched, and the mask of boxes skipped when matching.

    Official: coordinates truncated toward zero (``int()``), skipped where the
    raw coordinates sum to 0. Otherwise: unchanged, skipped where all zero.
    """
    r = np.asarray(raw, dtype=np.float64).reshape(-1, 4)
    if official:
        return np.trunc(r), r.sum(axis=1) == 0
    return r, (r == 0).all(axis=1)


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
    refers to. relevant[q, j] = ∃ k ∈ objects(q): IoU_kj > iou_threshold;
    irrelevant[q, j] = ¬∃ k ∈ objects(q): coverage_kj > overlap_threshold.
    """
    det, skip = prepare_detected(detected, official=official)
    ann = np.asarray(annotated, dtype=np.float64).reshape(-1, 4)
    n_q, n_obj = len(question_objects), ann.shape[0]
    if n_q == 0:
        empty = np.zeros((0, det.shape[0]), dtype=bool)
        return empty, empty.copy()
    keep = ~skip
    iou_hit = np.zeros((n_obj, det.shape[0]), dtype=bool)
    cov_hit = np.zeros((n_obj, det.shape[0]), dtype=bool)
    if n_obj and keep.any():
        kept = det[keep]
        iou_hit[:, keep] = pairwise_iou(ann, kept, integer=official) > iou_threshold
        cover = pairwise_coverage(ann, kept, denominator=overlap_denominator, integer=official)
        cov_hit[:, keep] = cover > overlap_threshold
    incidence = np.zeros((n_q, n_obj), dtype=np.float32)
    for q, rows in enumerate(question_objects):
        incidence[q, list(rows)] = 1.0
    relevant = incidence @ iou_hit.astype(np.float32) > 0
    irrelevant = ~(incidence @ cov_hit.astype(np.float32) > 0)
    return relevant, irrelevant


def annotated_object_ids(record: Mapping[str, Any], path: Any = None, qid: str = "") -> list[str]:
    """Union of the object ids in ``annotations.{question, answer, fullAnswer}`` (sorted).

    Each annotation maps a token span (``"3"`` or ``"3:5"``) to an object id.
    A question without ``annotations`` has no annotated objects.
    """
    annotations = record.get("annotations")
    if annotations is None:
        return []
    label = record_label(qid)
    if not isinstance(annotations, Mapping):
        raise DataError(path, "'annotations' must be an object", label)
    ids: set[str] = set()
    for name in ANNOTATION_FIELDS:
        spans = annotations.get(name)
        if spans is None:
            continue
        if not isinstance(spans, Mapping):
            raise DataError(
                path, f"'annotations.{name}' must be an object span -> object id", label
            )
        for obj in spans.values():
            if not isinstance(obj, (str, int)) or isinstance(obj, bool):
                raise DataError(path, f"'annotations.{name}' has a non-id value {obj!r}", label)
            ids.add(str(obj))
    return sorted(ids)


@dataclass
class RelevanceResult:
    """Per-question box sets and the reasons questions were left out.

    ``sets[qid] = (relevant indices, irrelevant indices, n_boxes)`` for every
    question with annotated objects; ``excluded[qid]`` names the reason for the
    questions left out (first failing rule in the order of
    :data:`EXCLUSION_REASONS`).
    """

    sets: dict[str, tuple[list[int], list[int], int]] = field(default_factory=dict)
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

        Left-out questions also carry ``"excluded": reason``.
        """
        out: dict[str, dict[str, Any]] = {}
        for qid in question_ids:
            rel, irrel, _ = self.sets.get(qid, ([], [], 0))
            record: dict[str, Any] = {"relevant": rel, "irrelevant": irrel}
            if qid in self.excluded:
                record["excluded"] = self.excluded[qid]
            out[qid] = record
        return out


def _scene_boxes(
    scene: Mapping[str, Any], object_ids: Sequence[str], scenes_path: Any, image_id: str
) -> np.ndarray:
    objects = scene.get("objects", {}) if isinstance(scene, Mapping) else {}
    rows = []
    for obj_id in object_ids:
        obj = objects.get(obj_id)
        if obj is None:
            raise DataError(
                scenes_path,
                f"annotated object {obj_id!r} is not in the scene graph",
                f"image {image_id!r}",
            )
        x, y = float(obj["x"]), float(obj["y"])
        rows.append((x, y, x + float(obj["w"]), y + float(obj["h"])))
    return np.asarray(rows, dtype=np.float64).reshape(-1, 4)


def compute_relevance(
    questions: Mapping[str, Mapping[str, Any]],
    scenes: Mapping[str, Mapping[str, Any]],
    detections: Mapping[str, np.ndarray],
    *,
    overlap_denominator: OverlapDenominator = "detected",
    official: bool = True,
    iou_threshold: float = IOU_THRESHOLD,
    overlap_threshold: float = OVERLAP_THRESHOLD,
    questions_path: Any = None,
    scenes_path: Any = None,
) -> RelevanceResult:
    """Relevant / irrelevant detected boxes for every question (SPEC.md §5).

    Questions are grouped by ``imageId``; each image's boxes are read once and
    matched against the union of its questions' annotated objects. Questions
    with no annotated objects, no relevant or no irrelevant boxes are recorded
    in ``excluded``. Raises ``DataError`` for an image missing from the scene
    graphs or detections, or an annotated object missing from its scene graph.
    """
    result = RelevanceResult()
    by_image: dict[str, list[tuple[str, list[str]]]] = defaultdict(list)
    for qid, record in questions.items():
        object_ids = annotated_object_ids(record, questions_path, qid)
        if not object_ids:
            result.excluded[qid] = NO_ANNOTATED_OBJECTS
            continue
        by_image[str(record["imageId"])].append((qid, object_ids))
    for image_id, entries in by_image.items():
        scene = scenes.get(image_id)
        if scene is None:
            raise DataError(
                scenes_path,
                f"image {image_id!r} of question {entries[0][0]!r} is not in the scene graphs",
            )
        object_rows: dict[str, int] = {}
        for _, object_ids in entries:
            for obj_id in object_ids:
                object_rows.setdefault(obj_id, len(object_rows))
        annotated = _scene_boxes(scene, list(object_rows), scenes_path, image_id)
        boxes = detections[image_id]
        relevant, irrelevant = image_relevance(
            boxes,
            annotated,
            [[object_rows[o] for o in object_ids] for _, object_ids in entries],
            overlap_denominator=overlap_denominator,
            official=official,
            iou_threshold=iou_threshold,
            overlap_threshold=overlap_threshold,
        )
        n_boxes = relevant.shape[1]
        rel_lists = _row_indices(relevant)
        irrel_lists = _row_indices(irrelevant)
        for (qid, _), rel, irrel in zip(entries, rel_lists, irrel_lists, strict=True):
            result.sets[qid] = (rel, irrel, n_boxes)
            if not rel:
                result.excluded[qid] = NO_RELEVANT_BOXES
            elif not irrel:
                result.excluded[qid] = NO_IRRELEVANT_BOXES
    return result


def _row_indices(mask: np.ndarray) -> list[list[int]]:
    """Column indices of the true entries of each row, as Python lists."""
    rows, cols = np.nonzero(mask)
    counts = np.bincount(rows, minlength=mask.shape[0])
    return [part.tolist() for part in np.split(cols, np.cumsum(counts)[:-1])]
