"""Benchmark: FPVG box relevance, vectorized vs. a per-box Python loop (docs/protocols.md §5).

Target (issue 2): 132k questions × 100 detected boxes at least 20× faster than
a per-box Python loop, identical results, peak memory printed.

Both implementations run in this process on the same generated data:

* ``vectorized``: :func:`vqadiag.data.formats.relevance.compute_relevance` (one IoU and one
  coverage matrix per image, one incidence product for all its questions);
* ``per-box loop``: the official algorithm one box pair at a time — for every
  image, every annotated object and every detected box, Python ``int()``
  truncation, IoU and overlap on dicts, then set unions per question;
* ``official port``: the same loop with the official script's per-box idioms
  kept (``list(row)`` and ``np.sum([x1, y1, x2, y2]) == 0`` for every box).

All three must give identical relevant / irrelevant sets and exclusions.

With ``--h5`` the boxes are also written in the GQA features layout
(``gqa_objects_info.json`` + ``gqa_objects_<k>.h5``) and the whole path
``read_detections`` → ``compute_relevance`` is timed (h5 rows sliced lazily).

Usage: ``python benchmarks/bench_relevance.py [--size 132000] [--boxes 100] [--h5]``
"""

from __future__ import annotations

import argparse
import gc
import math
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from vqadiag.data.formats.relevance import annotated_object_ids, compute_relevance

QUESTIONS_PER_IMAGE = 13  # GQA balanced val: 132,062 questions over 10,234 images (≈ 12.9)
OBJECTS_PER_IMAGE = 16


def generate(n_questions: int, n_boxes: int, seed: int):
    """Questions, scene graphs and detected boxes shaped like GQA balanced val: whole images
    of :data:`QUESTIONS_PER_IMAGE` questions each, so ``n_questions`` rounded down to a
    multiple of it (at least one image)."""
    rng = np.random.default_rng(seed)
    n_images = max(1, n_questions // QUESTIONS_PER_IMAGE)
    scenes, detections, questions = {}, {}, {}
    for i in range(n_images):
        image_id = f"{2300000 + i}"
        xy = rng.integers(0, 400, size=(OBJECTS_PER_IMAGE, 2))
        wh = rng.integers(5, 200, size=(OBJECTS_PER_IMAGE, 2))
        objects = {
            f"{image_id}{k:03d}": {
                "name": "thing",
                "x": int(xy[k, 0]),
                "y": int(xy[k, 1]),
                "w": int(wh[k, 0]),
                "h": int(wh[k, 1]),
            }
            for k in range(OBJECTS_PER_IMAGE)
        }
        scenes[image_id] = {"width": 640, "height": 480, "objects": objects}
        # detections: jittered copies of the scene objects, random boxes, zero padding
        ann = np.column_stack([xy, xy + wh]).astype(np.float64)
        # FPVG paper Table 4 (Detectron2): 100 boxes max, 91 on average
        n_real = int(rng.integers(max(1, (4 * n_boxes) // 5), n_boxes + 1))
        n_copies = min(n_real, 2 * OBJECTS_PER_IMAGE)
        copies = ann[rng.integers(0, OBJECTS_PER_IMAGE, n_copies)]
        copies = copies + rng.normal(0, 6, size=copies.shape)
        x1y1 = rng.uniform(0, 500, size=(n_real - n_copies, 2))
        rand = np.column_stack([x1y1, x1y1 + rng.uniform(2, 250, size=(n_real - n_copies, 2))])
        boxes = np.zeros((n_boxes, 4), dtype=np.float32)
        real = np.vstack([copies, rand])
        real = np.clip(real, 0, None)
        real[:, 2:] = np.maximum(real[:, 2:], real[:, :2] + 1.0)  # positive size
        boxes[:n_real] = real
        detections[image_id] = boxes
        ids = list(objects)
        for j in range(QUESTIONS_PER_IMAGE):
            n_objects = int(rng.choice(6, p=[0.08, 0.3, 0.3, 0.17, 0.1, 0.05]))
            picks = rng.choice(ids, size=n_objects, replace=False).tolist()
            spans = {str(t): o for t, o in enumerate(picks)}
            half = len(spans) // 2
            questions[f"{image_id}_{j}"] = {
                "imageId": image_id,
                "annotations": {
                    "question": dict(list(spans.items())[:half]),
                    "answer": dict(list(spans.items())[half:]),
                    "fullAnswer": {"0": picks[0]} if picks else {},
                },
            }
            if len(questions) >= n_questions:
                return questions, scenes, detections
    return questions, scenes, detections


# ---------------------------------------------------------------------------
# The per-box Python loop (the official algorithm, one box pair at a time).


def _iou(a: dict, b: dict) -> float:
    if not (a["x1"] < a["x2"] and a["y1"] < a["y2"] and b["x1"] < b["x2"] and b["y1"] < b["y2"]):
        return 0.0
    left, top = max(a["x1"], b["x1"]), max(a["y1"], b["y1"])
    right, bottom = min(a["x2"], b["x2"]), min(a["y2"], b["y2"])
    if right < left or bottom < top:
        return 0.0
    inter = int(right - left) * int(bottom - top)
    area_a = int(a["x2"] - a["x1"]) * int(a["y2"] - a["y1"])
    area_b = int(b["x2"] - b["x1"]) * int(b["y2"] - b["y1"])
    return inter / float(area_a + area_b - inter)


def _overlap(det: dict, ann: dict) -> float:
    if not (
        det["x1"] < det["x2"]
        and det["y1"] < det["y2"]
        and ann["x1"] < ann["x2"]
        and ann["y1"] < ann["y2"]
    ):
        return 0.0
    left, top = max(det["x1"], ann["x1"]), max(det["y1"], ann["y1"])
    right, bottom = min(det["x2"], ann["x2"]), min(det["y2"], ann["y2"])
    if right < left or bottom < top:
        return 0.0
    inter = int(right - left) * int(bottom - top)
    return inter / float(int(det["x2"] - det["x1"]) * int(det["y2"] - det["y1"]))


def per_box_loop(questions, scenes, detections, official_port=False):
    """Relevant / irrelevant lists and exclusions, one box pair at a time.

    ``official_port=True`` keeps the official script's per-box idioms
    (``list(row)``, ``np.sum([...]) == 0``); otherwise plain Python arithmetic.
    """
    by_image: dict[str, dict[str, list[str]]] = {}
    excluded: dict[str, str] = {}
    for qid, record in questions.items():
        objs = annotated_object_ids(record)
        if not objs:
            excluded[qid] = "no_annotated_objects"
            continue
        by_image.setdefault(record["imageId"], {})[qid] = objs
    sets = {}
    for image_id, qs in by_image.items():
        boxes = detections[image_id]
        rel_match: dict[str, list[int]] = {}
        exc_match: dict[str, list[int]] = {}
        for objs in qs.values():
            for obj_id in objs:
                if obj_id in rel_match:
                    continue
                o = scenes[image_id]["objects"][obj_id]
                ref = {"x1": o["x"], "y1": o["y"], "x2": o["x"] + o["w"], "y2": o["y"] + o["h"]}
                rel_match[obj_id], exc_match[obj_id] = [], []
                for j in range(len(boxes)):
                    if official_port:
                        x1, y1, x2, y2 = list(boxes[j])
                        if np.sum([x1, y1, x2, y2]) == 0:
                            continue
                    else:
                        x1, y1, x2, y2 = boxes[j].tolist()
                        if x1 + y1 + x2 + y2 == 0:
                            continue
                    hyp = {"x1": int(x1), "y1": int(y1), "x2": int(x2), "y2": int(y2)}
                    if _iou(ref, hyp) > 0.5:
                        rel_match[obj_id].append(j)
                    if _overlap(hyp, ref) > 0.25:
                        exc_match[obj_id].append(j)
        for qid, objs in qs.items():
            rel = sorted({j for o in objs for j in rel_match[o]})
            exc = {j for o in objs for j in exc_match[o]}
            irrel = sorted(set(range(len(boxes))) - exc)
            sets[qid] = (rel, irrel)
            if not rel:
                excluded[qid] = "no_relevant_boxes"
            elif not irrel:
                excluded[qid] = "no_irrelevant_boxes"
    return sets, excluded


# ---------------------------------------------------------------------------


def write_gqa_layout(folder: Path, detections, per_file: int = 4000) -> Path:
    """Write boxes in the GQA features layout (tiny 'features' so it stays small)."""
    import h5py
    import orjson

    ids = list(detections)
    n_boxes = next(iter(detections.values())).shape[0]
    info = {}
    for f, start in enumerate(range(0, len(ids), per_file)):
        chunk = ids[start : start + per_file]
        bb = np.stack([detections[i] for i in chunk])
        with h5py.File(folder / f"gqa_objects_{f}.h5", "w") as h5:
            h5["bboxes"] = bb
            h5["features"] = np.zeros((len(chunk), n_boxes, 2), np.float32)
        for k, image_id in enumerate(chunk):
            info[image_id] = {
                "width": 640,
                "height": 480,
                "objectsNum": n_boxes,
                "file": f,
                "idx": k,
            }
    path = folder / "gqa_objects_info.json"
    path.write_bytes(orjson.dumps(info))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=132_000, help="number of questions")
    parser.add_argument("--boxes", type=int, default=100, help="detected boxes per image")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--h5", action="store_true", help="also time reading the GQA h5 layout")
    parser.add_argument(
        "--skip-official-port", action="store_true", help="skip the slower official-idiom loop"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each implementation; the fastest counts"
    )
    args = parser.parse_args(argv)

    t = time.perf_counter()
    questions, scenes, detections = generate(args.size, args.boxes, args.seed)
    print(
        f"generated {len(questions):,} questions, {len(detections):,} images × {args.boxes} boxes "
        f"in {time.perf_counter() - t:.1f} s"
    )

    # The inputs live for the whole run: keep the cyclic GC from re-scanning them
    # during either implementation (same treatment for both).
    gc.collect()
    gc.freeze()
    t_fast = math.inf
    for _ in range(args.repeat):
        t = time.perf_counter()
        fast = compute_relevance(questions, scenes, detections)
        t_fast = min(t_fast, time.perf_counter() - t)
    t_slow = math.inf
    for _ in range(args.repeat):
        t = time.perf_counter()
        slow_sets, slow_excluded = per_box_loop(questions, scenes, detections)
        t_slow = min(t_slow, time.perf_counter() - t)
    t_port = math.inf
    if not args.skip_official_port:
        for _ in range(args.repeat):
            t = time.perf_counter()
            port_sets, port_excluded = per_box_loop(questions, scenes, detections, True)
            t_port = min(t_port, time.perf_counter() - t)

    fast_sets = {q: (r.tolist(), i.tolist()) for q, (r, i, _) in fast.sets.items()}
    identical = fast_sets == slow_sets and fast.excluded == slow_excluded
    if not args.skip_official_port:
        identical = identical and port_sets == slow_sets and port_excluded == slow_excluded
    kept = len(fast.kept)

    tracemalloc.start()
    compute_relevance(questions, scenes, detections)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    print(f"kept {kept:,} questions; excluded {fast.excluded_counts()}")
    print(f"vectorized     : {t_fast:8.2f} s  ({len(questions) / t_fast:,.0f} questions/s)")
    print(f"per-box loop   : {t_slow:8.2f} s  ({len(questions) / t_slow:,.0f} questions/s)")
    if not args.skip_official_port:
        print(f"official port  : {t_port:8.2f} s  ({len(questions) / t_port:,.0f} questions/s)")
    print(f"speed-up       : {t_slow / t_fast:8.1f}x over the per-box loop (target ≥ 20x)")
    if not args.skip_official_port:
        print(f"                 {t_port / t_fast:8.1f}x over the ported official loop")
    print(f"identical      : {identical}")
    print(f"peak memory of the vectorized run (tracemalloc): {peak / 2**20:.1f} MiB")

    if args.h5:
        from vqadiag.data.formats.detections import read_detections

        with tempfile.TemporaryDirectory() as tmp:
            info = write_gqa_layout(Path(tmp), detections)
            t = time.perf_counter()
            with read_detections(info) as dets:
                from_h5 = compute_relevance(questions, scenes, dets)
            t_h5 = time.perf_counter() - t
        same = {q: (r.tolist(), i.tolist()) for q, (r, i, _) in from_h5.sets.items()} == fast_sets
        print(f"from h5 layout : {t_h5:8.2f} s  (read + match), identical: {same}")
        identical = identical and same

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"process max RSS: {rss:.0f} MiB")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
