"""How a world's scenes look through the chat VLM's patches (docs/chat-vlm.md, "What
limits it").

A patch shows the object its label names: the smallest annotated box that contains the
patch's centre (:func:`~vqadiag.models.reference.chat_vlm_data.patch_labels`, the rule
the tower is pre-trained on and the oracle features use). An object *owns* the patches
it labels; one smaller than a patch, or covered at every patch centre by a smaller box,
owns none and is not in the image as the patches see it. Over the images of a split the
script prints one JSON line:

* ``objects_per_image``, ``attributes_per_object`` and ``shared_names_per_image`` (the
  objects of an image whose name another object of the image has);
* ``objects_shown``: the share of objects that own a patch, and
  ``patches_per_shown_object``: the mean number of patches such an object owns;
* ``asked_shown``: the share of the questions with annotated objects (``annotations``,
  as FPVG reads them) whose every annotated object owns a patch, overall and per
  detailed type (``asked_shown_by_type``, the types with at least 20 such questions).

``--labels overlap`` labels a patch by the smallest box that overlaps it instead (the
chat VLM's ``-o patch_labels=overlap``).

Usage: ``python experiments/world_patch_stats.py WORLD [--split val] [--grid 8]
[--labels centre|overlap]`` (WORLD as ``--data`` takes it; ``--grid``: patches per side,
``image_size / patch_size``).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np

from vqadiag.data.formats.relevance import annotated_object_ids
from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.models.reference.chat_vlm_data import LABEL_RULES, patch_labels

#: a detailed type needs this many questions with annotated objects to be listed
MIN_TYPE_QUESTIONS = 20


def owned_patches(scene: Mapping[str, Any], grid: int, rule: str = "centre") -> Counter[str]:
    """How many patches of a ``grid`` × ``grid`` split each object id of ``scene`` owns
    under the label ``rule`` (only the ids that own one)."""
    ids = list(scene["objects"])
    by_id = {**scene, "objects": {i: {**o, "name": i} for i, o in scene["objects"].items()}}
    labels, _ = patch_labels(by_id, grid, {i: k + 1 for k, i in enumerate(ids)}, {}, rule=rule)
    return Counter(ids[k - 1] for k in labels.tolist() if k)


def patch_stats(
    scenes: Mapping[str, Any],
    questions: Mapping[str, Mapping[str, Any]],
    grid: int,
    rule: str = "centre",
) -> dict[str, Any]:
    """The figures of the module docstring over ``scenes`` and the ``questions`` about
    them (a question about an image without a scene graph is skipped), the patches
    labelled by ``rule``."""
    owned = {image_id: owned_patches(scene, grid, rule) for image_id, scene in scenes.items()}
    objects = [o for scene in scenes.values() for o in scene["objects"].values()]
    shared = [
        sum(c for c in Counter(o["name"] for o in scene["objects"].values()).values() if c > 1)
        for scene in scenes.values()
    ]
    counts = [n for patches in owned.values() for n in patches.values()]
    asked: dict[str, list[bool]] = defaultdict(list)
    for qid, record in questions.items():
        image_id = str(record.get("imageId"))
        ids = annotated_object_ids(record, qid=qid)
        if image_id not in owned or not ids:
            continue
        detailed = str((record.get("types") or {}).get("detailed"))
        asked[detailed].append(all(owned[image_id][i] > 0 for i in ids))
    every = [hit for hits in asked.values() for hit in hits]
    return {
        "images": len(scenes),
        "objects_per_image": round(len(objects) / max(1, len(scenes)), 2),
        "attributes_per_object": round(
            float(np.mean([len(o.get("attributes") or []) for o in objects])) if objects else 0, 2
        ),
        "shared_names_per_image": round(float(np.mean(shared)) if shared else 0.0, 2),
        "objects_shown": round(100.0 * len(counts) / max(1, len(objects)), 2),
        "patches_per_shown_object": round(float(np.mean(counts)) if counts else 0.0, 2),
        "questions_with_objects": len(every),
        "asked_shown": round(100.0 * float(np.mean(every)) if every else 0.0, 2),
        "asked_shown_by_type": {
            kind: round(100.0 * float(np.mean(hits)), 2)
            for kind, hits in sorted(asked.items(), key=lambda item: -len(item[1]))
            if len(hits) >= MIN_TYPE_QUESTIONS
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("world")
    parser.add_argument("--split", default="val")
    parser.add_argument("--grid", type=int, default=8, help="patches per side")
    parser.add_argument(
        "--labels", choices=LABEL_RULES, default="centre",
        help="a patch's object: the smallest box with its centre, or the smallest overlapping it",
    )  # fmt: skip
    args = parser.parse_args()
    if args.grid < 1:
        parser.error(f"--grid must be at least 1, not {args.grid}")
    data = GQAData(args.world)
    scenes, questions = data.scene_graphs(args.split), data.questions(args.split)
    stats = patch_stats(scenes, questions, args.grid, args.labels)
    print(json.dumps({"split": args.split, "grid": args.grid, "labels": args.labels, **stats}))


if __name__ == "__main__":
    main()
