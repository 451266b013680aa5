"""The features the symbolic model's classifiers read
(:mod:`vqadiag.models.reference.symbolic`): detections matched to scene-graph objects,
per-box geometry, pair geometry for the relation classifier, pooled image features for
the scene classifier, and the questions whose annotated objects were all detected."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from vqadiag.data.formats.gqa import object_box_corners
from vqadiag.data.model_inputs.geometry import pairwise_iou
from vqadiag.data.model_inputs.gqa_data import GQAData

MATCH_IOU = 0.5
N_PAIR_FEATURES = 18


def object_geometry(boxes: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Per box ``[log(w/W), log(h/H), cx/W, cy/H]`` (boxes (n, 4) corners, sizes (n, 2) W H)."""
    b = np.asarray(boxes, np.float64)
    wh = np.maximum(np.asarray(sizes, np.float64), 1.0)
    w = np.maximum(b[:, 2] - b[:, 0], 1e-3)
    h = np.maximum(b[:, 3] - b[:, 1], 1e-3)
    return np.stack(
        [
            np.log(w / wh[:, 0]),
            np.log(h / wh[:, 1]),
            (b[:, 0] + b[:, 2]) / 2 / wh[:, 0],
            (b[:, 1] + b[:, 3]) / 2 / wh[:, 1],
        ],
        axis=1,
    ).astype(np.float32)


def pair_geometry(boxes: np.ndarray, size: Sequence[float], a: np.ndarray, b: np.ndarray):
    """The 18 geometry features of ordered pairs (subject ``a``, object ``b``) of one image.

    With W, H the image size: gaps ``(x1_b − x2_a)/W``, ``(x1_a − x2_b)/W``; overlaps
    ``(min y2 − max y1)/H``, ``(min x2 − max x1)/W``; intersection / smaller area; IoU;
    bottom offset ``(y2_a − y2_b)/H``; centre offsets /W, /H; centre distance / diagonal;
    log area ratio; ``a``'s bottom and centre relative to ``b`` (``(y2_a − y1_b)/h_b``,
    ``(cx_a − x1_b)/w_b``, ``(x2_b − cx_a)/w_b``); log sizes of both boxes — clipped to ±5.
    """
    bx = np.asarray(boxes, np.float64)
    big_w, big_h = max(float(size[0]), 1.0), max(float(size[1]), 1.0)
    x1, y1, x2, y2 = (bx[:, k] for k in range(4))
    w = np.maximum(x2 - x1, 1e-3)
    h = np.maximum(y2 - y1, 1e-3)
    area = w * h
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    vo = np.minimum(y2[a], y2[b]) - np.maximum(y1[a], y1[b])
    ho = np.minimum(x2[a], x2[b]) - np.maximum(x1[a], x1[b])
    inter = np.clip(vo, 0, None) * np.clip(ho, 0, None)
    feats = np.stack(
        [
            (x1[b] - x2[a]) / big_w,
            (x1[a] - x2[b]) / big_w,
            vo / big_h,
            ho / big_w,
            inter / np.minimum(area[a], area[b]),
            inter / (area[a] + area[b] - inter),
            (y2[a] - y2[b]) / big_h,
            (cx[a] - cx[b]) / big_w,
            (cy[a] - cy[b]) / big_h,
            np.hypot(cx[a] - cx[b], cy[a] - cy[b]) / np.hypot(big_w, big_h),
            np.log(area[a] / area[b]),
            (y2[a] - y1[b]) / h[b],
            (cx[a] - x1[b]) / w[b],
            (x2[b] - cx[a]) / w[b],
            np.log(w[a] / big_w),
            np.log(h[a] / big_h),
            np.log(w[b] / big_w),
            np.log(h[b] / big_h),
        ],
        axis=1,
    )
    return np.clip(feats, -5, 5).astype(np.float32)


def pool_features(x: np.ndarray) -> np.ndarray:
    """Mean- and max-pooled rows of ``x`` (n, D) → (2D,); zeros for no rows."""
    if len(x) == 0:
        return np.zeros(2 * x.shape[1], dtype=np.float64)
    return np.concatenate([x.mean(axis=0), x.max(axis=0)])


def grounded_question_ids(data: GQAData, split: str, questions: Iterable[str] | None = None):
    """Question ids whose annotated objects (``annotations.question/answer/fullAnswer``)
    all have a detected box with IoU > 0.5 (questions annotating no object included)."""
    records = data.questions(split)
    scenes = data.scene_graphs(split)
    detected: dict[str, set[str]] = {}
    out = []
    for qid in questions if questions is not None else records:
        record = records[qid]
        image_id = str(record["imageId"])
        if image_id not in detected:
            scene = scenes.get(image_id, {"objects": {}})
            obj_ids = list(scene["objects"])
            found: set[str] = set()
            if obj_ids and image_id in data.detections:
                _, boxes = data.image_objects(image_id)
                corners = np.array([object_box_corners(scene["objects"][o]) for o in obj_ids])
                iou = pairwise_iou(boxes, corners, integer=False)
                if len(boxes):
                    found = {obj_ids[k] for k in np.nonzero(iou.max(axis=0) > MATCH_IOU)[0]}
            detected[image_id] = found
        annotated = {
            str(v)
            for part in (record.get("annotations") or {}).values()
            for v in (part or {}).values()
        }
        if annotated <= detected[image_id]:
            out.append(qid)
    return out
