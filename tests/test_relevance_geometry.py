"""Box geometry and relevant / irrelevant sets (SPEC.md §5), on hand-worked boxes."""

from __future__ import annotations

import numpy as np
import pytest

from vqadiag.errors import DataError
from vqadiag.relevance import (
    annotated_object_ids,
    box_areas,
    compute_relevance,
    image_relevance,
    pairwise_coverage,
    pairwise_intersection,
    pairwise_iou,
    prepare_detected,
)

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
    records = result.records(questions)
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
