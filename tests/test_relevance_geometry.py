"""Box geometry and relevant / irrelevant sets (docs/protocols.md §5), on hand-worked boxes."""

from __future__ import annotations

import numpy as np
import pytest

from vqadiag.data.formats.relevance import (
    annotated_object_ids,
    compute_relevance,
    image_relevance,
    prepare_detected,
)
from vqadiag.data.model_inputs.geometry import (
    box_areas,
    pairwise_coverage,
    pairwise_intersection,
    pairwise_iou,
)
from vqadiag.errors import DataError

O1 = (10.0, 10.0, 30.0, 30.0)  # annotated object: x=10, y=10, w=20, h=20 → area 400
O2 = (100.0, 100.0, 150.0, 150.0)  # x=100, y=100, w=50, h=50 → area 2500

# Detected boxes of the hand-worked image (raw coordinates, as in an h5 file).
DETECTED = np.array(
    [
        (10.9, 10.9, 30.9, 30.9),  # 0: int() → exactly O1, IoU 1
        (0, 0, 0, 0),  # 1: zero padding: skipped, always irrelevant
        (20, 10, 40, 30),  # 2: ∩O1 = 10·20 = 200; 200/400 = 0.5 > 0.25 excluded; IoU 200/600
        (25, 10, 45, 30),  # 3: ∩O1 = 5·20 = 100; 100/400 = 0.25, not > 0.25 → irrelevant
        (100, 100, 150, 150),  # 4: exactly O2
        (0, 10, 13.99, 30),  # 5: int → (0,10,13,30): 3·20/13·20 = 0.23; exact 3.99/13.99 = 0.285
        (200, 200, 300, 300),  # 6: far from both
        (10.5, 10, 30, 49.5),  # 7: int → (10,10,30,49): IoU 400/780 = 0.513; exact 390/780.25
        (0, 0, 100, 100),  # 8: contains O1: 400/10000 of itself, 400/400 of O1
    ]
)


def test_intersection_and_areas_hand_worked():
    a = np.array([O1])
    b = np.array([(20, 10, 40, 30), (30, 30, 40, 40), (31, 0, 40, 5)])
    # (20,10,40,30) ∩ O1 = x 20..30 (10) × y 10..30 (20) = 200; touching corner = 0; apart = 0
    assert pairwise_intersection(a, b).tolist() == [[200.0, 0.0, 0.0]]
    assert box_areas(np.array([O1, (0, 0, 2.9, 3.9)])).tolist() == [400.0, 2.0 * 3.0]
    assert box_areas(np.array([(0, 0, 2.5, 2.0)]), integer=False).tolist() == [5.0]


def test_unordered_box_scores_zero():
    # Official get_iou returns 0 unless x1 < x2 and y1 < y2 for both boxes.
    flat = np.array([(10, 10, 10, 30)])
    assert pairwise_iou(np.array([O1]), flat).tolist() == [[0.0]]
    assert box_areas(flat).tolist() == [0.0]


def test_iou_hand_worked():
    # IoU(O1, (20,10,40,30)) = 200 / (400 + 400 − 200) = 1/3
    iou = pairwise_iou(np.array([O1]), np.array([(20, 10, 40, 30), O1]))
    assert iou[0, 0] == pytest.approx(1 / 3)
    assert iou[0, 1] == 1.0


def test_integer_areas_truncate_widths():
    # int(x2 − x1): a 2.9 × 2.9 box has area 4 officially, 8.41 exactly.
    a = np.array([(0.0, 0.0, 2.9, 2.9)])
    assert pairwise_iou(a, a).tolist() == [[1.0]]
    assert pairwise_intersection(a, a).tolist() == [[4.0]]
    assert pairwise_intersection(a, a, integer=False)[0, 0] == pytest.approx(8.41)


def test_coverage_denominators():
    ann = np.array([O1])
    det = np.array([(20, 10, 40, 30), (0, 0, 100, 100)])
    # detected: 200/400 = 0.5 and 400/10000 = 0.04; annotated: 200/400 and 400/400
    assert pairwise_coverage(ann, det).tolist() == [[0.5, 0.04]]
    assert pairwise_coverage(ann, det, denominator="annotated").tolist() == [[0.5, 1.0]]
    with pytest.raises(ValueError, match="denominator"):
        pairwise_coverage(ann, det, denominator="union")  # type: ignore[arg-type]


def test_prepare_detected_truncates_and_skips_zero_sum():
    boxes, skip = prepare_detected(np.array([(1.9, 2.5, 10.99, 20.0), (0, 0, 0, 0)]))
    assert boxes.tolist() == [[1, 2, 10, 20], [0, 0, 0, 0]]
    assert skip.tolist() == [False, True]
    exact, skip_exact = prepare_detected(np.array([(1.9, 2.5, 10.99, 20.0)]), official=False)
    assert exact.tolist() == [[1.9, 2.5, 10.99, 20.0]] and skip_exact.tolist() == [False]


def test_image_relevance_official_hand_worked():
    # rows of the annotated matrix: 0 = O1, 1 = O2; questions: {O1}, {O2}, {O1, O2}
    rel, irrel = image_relevance(DETECTED, np.array([O1, O2]), [[0], [1], [0, 1]])
    assert [np.flatnonzero(r).tolist() for r in rel] == [[0, 7], [4], [0, 4, 7]]
    # excluded for O1: 0 (cover 1), 2 (0.5), 7 (400/780); box 3 sits exactly at 0.25
    assert [np.flatnonzero(r).tolist() for r in irrel] == [
        [1, 3, 4, 5, 6, 8],
        [0, 1, 2, 3, 5, 6, 7, 8],
        [1, 3, 5, 6, 8],
    ]


def test_image_relevance_exact_geometry():
    rel, irrel = image_relevance(DETECTED, np.array([O1]), [[0]], official=False)
    # box 0: IoU 19.1² / (800 − 19.1²) = 0.838; box 7: 390 / 780.25 = 0.4998 → not relevant
    assert np.flatnonzero(rel[0]).tolist() == [0]
    # box 5 now covered 3.99/13.99 = 0.285 > 0.25 → excluded
    assert np.flatnonzero(irrel[0]).tolist() == [1, 3, 4, 6, 8]


def test_image_relevance_annotated_denominator():
    rel, irrel = image_relevance(DETECTED, np.array([O1]), [[0]], overlap_denominator="annotated")
    assert np.flatnonzero(rel[0]).tolist() == [0, 7]
    # box 8 covers all of O1 (400/400) → excluded; box 5: 60/400 = 0.15 → irrelevant
    assert np.flatnonzero(irrel[0]).tolist() == [1, 3, 4, 5, 6]


def test_zero_sum_box_is_skipped_even_if_matching():
    # A box with coordinates summing to 0 never matches (official np.sum(...) == 0 test).
    rel, irrel = image_relevance(np.array([(0, 0, 0, 0), (10, 10, 30, 30)]), np.array([O1]), [[0]])
    assert rel.tolist() == [[False, True]] and irrel.tolist() == [[True, False]]


def test_annotated_object_ids_union():
    record = {
        "annotations": {
            "question": {"2": "11", "4:6": "12"},
            "answer": {"0": "12"},
            "fullAnswer": {"1": "13"},
        }
    }
    assert annotated_object_ids(record) == ["11", "12", "13"]
    assert annotated_object_ids({}) == []
    with pytest.raises(DataError, match="'annotations.answer' must be an object"):
        annotated_object_ids({"annotations": {"answer": ["12"]}}, "q.json", "q1")


def _question(image: str, *objects: str) -> dict:
    return {
        "imageId": image,
        "annotations": {"question": {str(i): o for i, o in enumerate(objects)}},
    }


def test_compute_relevance_exclusions_and_records():
    scenes = {
        "a": {"objects": {"o1": {"x": 10, "y": 10, "w": 20, "h": 20}}},
        "b": {"objects": {"o4": {"x": 0, "y": 0, "w": 100, "h": 100}}},
    }
    detections = {
        "a": DETECTED,
        "b": np.array([(0, 0, 100, 100), (10, 10, 20, 20)]),  # both boxes covered by o4
    }
    questions = {
        "q1": _question("a", "o1"),
        "q2": _question("a"),  # no annotated objects
        "q3": _question("b", "o4"),  # relevant 0, nothing irrelevant
        "q4": {"imageId": "zz"},  # no annotations at all: scene graph never needed
    }
    result = compute_relevance(questions, scenes, detections)
    assert result.kept == ["q1"]
    assert result.excluded_counts() == {
        "no_annotated_objects": 2,
        "no_relevant_boxes": 0,
        "no_irrelevant_boxes": 1,
    }
    records = {
        qid: {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in rec.items()}
        for qid, rec in result.records(questions).items()
    }
    assert records["q1"] == {"relevant": [0, 7], "irrelevant": [1, 3, 4, 5, 6, 8]}
    assert records["q3"] == {"relevant": [0], "irrelevant": [], "excluded": "no_irrelevant_boxes"}
    assert records["q2"]["excluded"] == "no_annotated_objects"


def test_compute_relevance_missing_scene_and_object():
    det = {"a": DETECTED}
    with pytest.raises(DataError, match="sg.json: image 'a' of question 'q1' is not in the scene"):
        compute_relevance({"q1": _question("a", "o1")}, {}, det, scenes_path="sg.json")
    scenes = {"a": {"objects": {}}}
    with pytest.raises(DataError, match="sg.json: image 'a': annotated object 'o1' is not in"):
        compute_relevance({"q1": _question("a", "o1")}, scenes, det, scenes_path="sg.json")


def _reference(questions, scenes, detections, denominator="detected"):
    """Per-box reference of the official rules, one pair at a time (plain Python)."""

    def meet(a, b):
        if not (a[0] < a[2] and a[1] < a[3] and b[0] < b[2] and b[1] < b[3]):
            return None
        left, top = max(a[0], b[0]), max(a[1], b[1])
        right, bottom = min(a[2], b[2]), min(a[3], b[3])
        if right < left or bottom < top:
            return None
        area = [int(a[2] - a[0]) * int(a[3] - a[1]), int(b[2] - b[0]) * int(b[3] - b[1])]
        return int(right - left) * int(bottom - top), area[0], area[1]

    out = {}
    for qid, record in questions.items():
        objs = annotated_object_ids(record)
        if not objs:
            continue
        boxes = detections[record["imageId"]].tolist()
        rel, exc = set(), set()
        for o in objs:
            g = scenes[record["imageId"]]["objects"][o]
            ann = (g["x"], g["y"], g["x"] + g["w"], g["y"] + g["h"])
            for j, raw in enumerate(boxes):
                if sum(raw) == 0:
                    continue
                m = meet(ann, [int(v) for v in raw])
                if m is None:
                    continue
                inter, area_ann, area_det = m
                if inter / (area_ann + area_det - inter) > 0.5:
                    rel.add(j)
                den = area_det if denominator == "detected" else area_ann
                if den and inter / den > 0.25:
                    exc.add(j)
        out[qid] = (sorted(rel), sorted(set(range(len(boxes))) - exc))
    return out


@pytest.mark.parametrize(
    ("scale", "denominator"), [(1, "detected"), (10, "detected"), (1, "annotated")]
)
def test_compute_relevance_matches_per_box_reference(scale, denominator):
    # scale 1: corners < 2048 (float32 fast path); scale 10: up to ~6000 (float64 path)
    rng = np.random.default_rng(7)
    scenes, detections, questions = {}, {}, {}
    for i in range(40):
        xy = rng.integers(0, 400, size=(6, 2)) * scale
        wh = rng.integers(1, 150, size=(6, 2)) * scale
        objects = {f"o{k}": dict(zip("xywh", (*xy[k], *wh[k]), strict=True)) for k in range(6)}
        scenes[f"im{i}"] = {
            "objects": {k: {n: int(v) for n, v in o.items()} for k, o in objects.items()}
        }
        n = int(rng.integers(0, 30))
        ann = np.column_stack([xy, xy + wh])[rng.integers(0, 6, n)].astype(float)
        boxes = ann + rng.normal(0, 8 * scale, size=ann.shape)
        boxes[:, 2:] = np.maximum(boxes[:, 2:], boxes[:, :2] + 1)
        boxes = np.clip(boxes, 0, None)
        boxes[rng.random(n) < 0.1] = 0.0  # padding inside objectsNum
        detections[f"im{i}"] = boxes
        for j in range(5):
            picks = rng.choice(6, size=int(rng.integers(0, 4)), replace=False)
            spans = {str(t): f"o{p}" for t, p in enumerate(picks)}
            questions[f"q{i}_{j}"] = {"imageId": f"im{i}", "annotations": {"question": spans}}
    result = compute_relevance(questions, scenes, detections, overlap_denominator=denominator)
    got = {q: (r.tolist(), i.tolist()) for q, (r, i, _) in result.sets.items()}
    assert got == _reference(questions, scenes, detections, denominator)
