"""``world_stats``: describe a generated world by reading its files back through vqadiag readers.

Rates (percent, with 95% bootstrap intervals under ``ci``):

* ``gqa.<split>.balanced_rate``: questions with ``isBalanced`` true / all;
* ``gqa.<split>.yes_rate``: balanced yes/no questions answered "yes";
* ``detections.recall_iou50``: scene-graph objects with a detected box of IoU > 0.5;
* ``detections.unmatched_rate``: detected boxes with IoU ≤ 0.5 to every object
  (false positives and poorly localized boxes; duplicates match);
* ``vqa2.<split>.unanimous_rate``: questions whose 10 answers are identical;
* ``vqa2.<split>.pair_possible_rate``: pair attempts that found a complementary image
  (attempt counts from ``world.json``, pairs from the pairs file);
* ``introspect.<split>.perception_rate``: introspect entries of type ``perception``.

Plus counts: images, objects per image, questions by structural / semantic type,
GQA-OOD head / tail sizes on the balanced questions (docs/protocols.md §3).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.data.formats.gqa import object_corners
from vqadiag.data.formats.introspect import introspect_path
from vqadiag.data.io.jsonio import read_json
from vqadiag.data.model_inputs.geometry import pairwise_iou
from vqadiag.errors import DataError
from vqadiag.metrics.bootstrap import mean_ci


def _rate(flags: list[bool] | np.ndarray, seed: int, n_bootstrap: int) -> dict[str, Any]:
    return mean_ci(
        np.asarray(flags, dtype=np.float64), n_resamples=n_bootstrap, seed=seed
    ).to_dict()


def world_stats(world_dir: str | Path, seed: int = 0, n_bootstrap: int = 1000) -> dict[str, Any]:
    """Statistics of the world under ``world_dir`` (see module docstring for the keys)."""
    root = Path(world_dir)
    world = _read_world(root)
    result: dict[str, Any] = {
        "world": {
            k: world.get(k)
            for k in ("version", "seed", "images", "bias", "feature_dim", "objects_per_image")
        },
        "gqa": {},
        "detections": {},
        "vqa2": {},
        "introspect": {},
    }
    ci: dict[str, Any] = {"gqa": {}, "detections": {}, "vqa2": {}, "introspect": {}}
    boxes = _Boxes()
    _gqa_into(root, result["gqa"], ci["gqa"], boxes, seed, n_bootstrap)
    result["detections"], ci["detections"] = _detection_stats(boxes, seed, n_bootstrap)
    vqa_splits = world.get("splits", {}).get("vqa2", {})
    for short in ("train", "val"):
        result["vqa2"][short], ci["vqa2"][short] = _vqa2_stats(
            root, short, vqa_splits, seed, n_bootstrap
        )
        result["introspect"][short], ci["introspect"][short] = _introspect_stats(
            root, short, seed, n_bootstrap
        )
    result["ci"] = ci
    return result


def _read_world(root: Path) -> dict[str, Any]:
    """The ``world.json`` of the world folder ``root`` (checked to be a vqadiag world)."""
    if not root.is_dir():
        raise DataError(root, "not a directory (expected the output folder of `vqadiag synth`)")
    world = read_json(root / "world.json")
    if not isinstance(world, dict) or world.get("generator") != "vqadiag.synth":
        raise DataError(root / "world.json", "not a vqadiag synthetic world description")
    return world


@dataclass
class _Boxes:
    """Detected boxes matched to scene-graph objects, over every GQA split."""

    #: per scene-graph object: a detected box has IoU > 0.5 with it
    recall: list[bool] = field(default_factory=list)
    #: per detected box: IoU ≤ 0.5 with every object
    unmatched: list[bool] = field(default_factory=list)
    #: detected boxes of each image
    per_image: list[int] = field(default_factory=list)


def _gqa_into(
    root: Path,
    result: dict[str, Any],
    ci: dict[str, Any],
    boxes: _Boxes,
    seed: int,
    n_bootstrap: int,
) -> None:
    """Fill ``result`` / ``ci`` with the figures of each GQA split and match each split's
    detected boxes to its scene graphs into ``boxes``."""
    from vqadiag.data.formats.detections import read_detections
    from vqadiag.data.formats.gqa import read_gqa_questions, read_scene_graphs

    detections = read_detections(root / "gqa" / "objects")
    try:
        for split in ("train", "val", "testdev"):
            questions = read_gqa_questions(root / "gqa" / f"{split}_balanced_questions.json")
            graphs = read_scene_graphs(root / "gqa" / f"{split}_sceneGraphs.json")
            result[split], ci[split] = _gqa_split_stats(questions, graphs, seed, n_bootstrap)
            _match_boxes(graphs, detections, boxes)
    finally:
        detections.close()


def _gqa_split_stats(
    questions: dict[str, Any], graphs: dict[str, Any], seed: int, n_bootstrap: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(figures, ci)`` of one GQA split's questions and scene graphs."""
    from vqadiag.protocols.ood.formulas import build_ood_split

    n_obj = np.array([len(g["objects"]) for g in graphs.values()])
    balanced = [q["isBalanced"] is not False for q in questions.values()]
    yes = [
        q["answer"] == "yes"
        for q in questions.values()
        if q["isBalanced"] is not False and q["answer"] in ("yes", "no")
    ]
    ood = build_ood_split(questions).summary()
    figures = {
        "images": len(graphs),
        "objects": int(n_obj.sum()),
        "objects_per_image": {
            "mean": float(n_obj.mean()),
            "min": int(n_obj.min()),
            "max": int(n_obj.max()),
        },
        "questions": len(questions),
        "balanced": int(sum(balanced)),
        "structural": dict(
            sorted(Counter(q["types"]["structural"] for q in questions.values()).items())
        ),
        "semantic": dict(
            sorted(Counter(q["types"]["semantic"] for q in questions.values()).items())
        ),
        "answers": len({q["answer"] for q in questions.values()}),
        "ood": {k: ood[k] for k in ("n_groups", "n_groups_kept", "n_head", "n_tail")},
        "balanced_rate": 100.0 * float(np.mean(balanced)),
        "yes_rate": 100.0 * float(np.mean(yes)) if yes else float("nan"),
    }
    ci = {
        "balanced_rate": _rate(balanced, seed, n_bootstrap),
        "yes_rate": _rate(yes, seed, n_bootstrap),
    }
    return figures, ci


def _match_boxes(graphs: dict[str, Any], detections: Any, boxes: _Boxes) -> None:
    """Match each image's detected boxes to its scene-graph objects (IoU > 0.5) into
    ``boxes``."""
    for image_id, graph in graphs.items():
        truth = object_corners(graph["objects"].values())
        found = np.asarray(detections[image_id], dtype=np.float64)
        boxes.per_image.append(found.shape[0])
        if found.shape[0] == 0:
            boxes.recall.extend([False] * truth.shape[0])
            continue
        iou = pairwise_iou(truth, found, integer=False)
        boxes.recall.extend((iou.max(axis=1) > 0.5).tolist())
        boxes.unmatched.extend((iou.max(axis=0) <= 0.5).tolist())


def _detection_stats(
    boxes: _Boxes, seed: int, n_bootstrap: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(figures, ci)`` of the detected boxes matched over every GQA split."""
    figures = {
        "images": len(boxes.per_image),
        "boxes": int(sum(boxes.per_image)),
        "boxes_per_image": {
            "mean": float(np.mean(boxes.per_image)),
            "max": int(max(boxes.per_image)),
        },
        "recall_iou50": 100.0 * float(np.mean(boxes.recall)),
        "unmatched_rate": 100.0 * float(np.mean(boxes.unmatched)),
    }
    ci = {
        "recall_iou50": _rate(boxes.recall, seed, n_bootstrap),
        "unmatched_rate": _rate(boxes.unmatched, seed, n_bootstrap),
    }
    return figures, ci


def _vqa2_stats(
    root: Path, short: str, vqa_splits: Any, seed: int, n_bootstrap: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(figures, ci)`` of the VQA v2 annotations and complementary pairs of split
    ``short`` (``vqa_splits``: ``world.json``'s ``splits.vqa2``, with the pair attempts)."""
    from vqadiag.data.formats.vqa2 import read_pairs, read_vqa_annotations

    sub = f"{short}2014"
    ann = read_vqa_annotations(root / "vqa2" / f"v2_mscoco_{sub}_annotations.json")
    pairs = read_pairs(root / "vqa2" / f"v2_mscoco_{sub}_complementary_pairs.json", ann.keys())
    unanimous = [len(set(a["answer_list"])) == 1 for a in ann.values()]
    attempts = int(vqa_splits.get(short, {}).get("pair_attempts", len(pairs)))
    possible = [True] * len(pairs) + [False] * max(0, attempts - len(pairs))
    differ = [
        ann[a]["multiple_choice_answer"] != ann[b]["multiple_choice_answer"] for a, b in pairs
    ]
    figures = {
        "questions": len(ann),
        "pairs": len(pairs),
        "pair_attempts": attempts,
        "answer_types": dict(sorted(Counter(a["answer_type"] for a in ann.values()).items())),
        "question_types": len({a["question_type"] for a in ann.values()}),
        "pairs_with_different_answers": int(sum(differ)),
        "unanimous_rate": 100.0 * float(np.mean(unanimous)),
        "pair_possible_rate": 100.0 * float(np.mean(possible)) if possible else float("nan"),
    }
    ci = {
        "unanimous_rate": _rate(unanimous, seed, n_bootstrap),
        "pair_possible_rate": _rate(possible, seed, n_bootstrap),
    }
    return figures, ci


def _introspect_stats(
    root: Path, short: str, seed: int, n_bootstrap: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(figures, ci)`` of the VQA-introspect file of split ``short``."""
    path = introspect_path(root, short)
    intro = read_json(path)
    if not isinstance(intro, dict):
        raise DataError(path, "expected a JSON object keyed by question id")
    kinds = [e.get("pred_q_type") for r in intro.values() for e in r.get("introspect", [])]
    perception = [k == "perception" for k in kinds]
    figures = {
        "questions": len(intro),
        "entries": len(kinds),
        "perception_rate": 100.0 * float(np.mean(perception)) if kinds else float("nan"),
    }
    return figures, {"perception_rate": _rate(perception, seed, n_bootstrap)}
