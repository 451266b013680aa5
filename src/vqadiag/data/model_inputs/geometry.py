"""Box geometry, in one place: areas, intersections, IoU and coverage of corner boxes.

Boxes are ``(x1, y1, x2, y2)`` in pixels. Two families:

* the official FPVG rules (``integer=True``, docs/protocols.md §5): widths and
  heights truncated with ``int()``, a box that is not strictly ordered scores 0
  against everything — used to decide relevant / irrelevant boxes;
* exact float geometry (``integer=False`` of the pairwise functions, and
  :func:`best_matches`) — used by the symbolic and pixel models and the synthetic
  world's detector statistics.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

OverlapDenominator = Literal["detected", "annotated"]


def strictly_ordered(boxes: np.ndarray) -> np.ndarray:
    return (boxes[..., 0] < boxes[..., 2]) & (boxes[..., 1] < boxes[..., 3])


def corner_areas(boxes: np.ndarray, integer: bool) -> np.ndarray:
    w = boxes[..., 2] - boxes[..., 0]
    h = boxes[..., 3] - boxes[..., 1]
    if integer:
        w, h = np.trunc(w), np.trunc(h)
    return np.where(strictly_ordered(boxes), w * h, 0.0)


def intersection_and_areas(
    a: np.ndarray, b: np.ndarray, integer: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Intersection and both areas of broadcastable box arrays ``a`` (..., 4) and ``b`` (..., 4).

    Official rule: the intersection is 0 when either box is not strictly
    ordered or the boxes do not meet, else ``int(x_right − x_left) ·
    int(y_bottom − y_top)``; areas ``int(x2 − x1) · int(y2 − y1)``.
    """
    w = np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0])
    h = np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1])
    valid = (w >= 0) & (h >= 0) & strictly_ordered(a) & strictly_ordered(b)
    if integer:
        w, h = np.trunc(w), np.trunc(h)
    return np.where(valid, w * h, 0.0), corner_areas(a, integer), corner_areas(b, integer)


def safe_divide(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num, den = np.broadcast_arrays(num, den)
    out = np.zeros(num.shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


def as_boxes(boxes: np.ndarray) -> np.ndarray:
    return np.asarray(boxes, dtype=np.float64).reshape(-1, 4)


def box_areas(boxes: np.ndarray, *, integer: bool = True) -> np.ndarray:
    """Areas of corner boxes ``(x1, y1, x2, y2)``: ``int(x2 − x1) · int(y2 − y1)``.

    With ``integer=False`` the exact product ``(x2 − x1)(y2 − y1)``. Boxes that
    are not strictly ordered get area 0.
    """
    return corner_areas(as_boxes(boxes), integer)


def pairwise_intersection(a: np.ndarray, b: np.ndarray, *, integer: bool = True) -> np.ndarray:
    """Intersection areas of every box of ``a`` (m × 4) with every box of ``b`` (n × 4) → m × n.

    Official rule: 0 when either box is not strictly ordered or the boxes do not
    meet; otherwise ``int(x_right − x_left) · int(y_bottom − y_top)``
    (exact product with ``integer=False``).
    """
    return intersection_and_areas(as_boxes(a)[:, None, :], as_boxes(b)[None, :, :], integer)[0]


def pairwise_iou(a: np.ndarray, b: np.ndarray, *, integer: bool = True) -> np.ndarray:
    """IoU of every box of ``a`` with every box of ``b`` → m × n.

    IoU = I / (area_a + area_b − I) with the official integer areas
    (docs/protocols.md §5); 0 where the union is empty.
    """
    inter, area_a, area_b = intersection_and_areas(
        as_boxes(a)[:, None, :], as_boxes(b)[None, :, :], integer
    )
    return safe_divide(inter, area_a + area_b - inter)


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
    inter, area_ann, area_det = intersection_and_areas(
        as_boxes(annotated)[:, None, :], as_boxes(detected)[None, :, :], integer
    )
    return safe_divide(inter, overlap_denominator_areas(area_ann, area_det, denominator))


def overlap_denominator_areas(
    area_ann: np.ndarray, area_det: np.ndarray, denominator: OverlapDenominator
) -> np.ndarray:
    if denominator == "detected":
        return area_det
    if denominator == "annotated":
        return area_ann
    raise ValueError(f"overlap denominator must be 'detected' or 'annotated', not {denominator!r}")


def best_matches(
    boxes: np.ndarray, targets: np.ndarray, threshold: float, *, inclusive: bool
) -> np.ndarray:
    """``(N,)``: for each box of ``boxes`` (N, 4), the index of the box of ``targets`` (M, 4)
    of largest IoU (exact float geometry; the first on ties) when that IoU is above
    ``threshold`` — or reaches it, with ``inclusive`` — else −1 (docs/protocols.md §5).

    Two conventions use it: the symbolic model names a detection after the object it
    overlaps by IoU > 0.5 (FPVG's relevance rule), the pixel model's box encoder learns
    from detections of IoU ≥ 0.5 (the usual detection threshold)."""
    if len(boxes) == 0 or len(targets) == 0:
        return np.full(len(boxes), -1, dtype=np.int64)
    overlap = pairwise_iou(boxes, targets, integer=False)
    best = overlap.argmax(axis=1)
    value = overlap[np.arange(len(boxes)), best]
    return np.where(value >= threshold if inclusive else value > threshold, best, -1)
