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
  ``objects_shown_by_side``: the share that own one among the objects whose shorter
  side, at the model's ``--image-size`` input, is under 12 px, 12 to 24 px, and 24 px
  and up (:func:`object_side`);
* ``asked_shown``: the share of the questions with annotated objects (``annotations``,
  as FPVG reads them) whose every annotated object owns a patch, overall and per
  detailed type (``asked_shown_by_type``, the types with at least 20 such questions).

``--labels overlap`` labels a patch by the smallest box that overlaps it instead (the
chat VLM's ``-o patch_labels=overlap``).

Usage: ``python experiments/world_patch_stats.py WORLD [--split val] [--grid 8]
[--labels centre|overlap] [--image-size 128]`` (WORLD as ``--data`` takes it; ``--grid``:
patches per side, ``image_size / patch_size``).
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
#: groups of objects, and of the questions about them, by an object's shorter side in
#: model-input pixels (:func:`object_side`): upper bounds and names
SIDE_GROUPS = ((12.0, "under 12 px"), (24.0, "12-24 px"), (float("inf"), "24 px and up"))
#: the group of a question that names no object
NO_OBJECT = "no annotated object"


def object_side(obj: Mapping[str, Any], scene: Mapping[str, Any], size: int) -> float:
    """The shorter side of ``obj``'s box in pixels of the model's ``size`` × ``size``
    input (the processor resizes the whole image, width and height each to ``size``):
    ``min(w · size / width, h · size / height)``."""
    return min(
        float(obj["w"]) * size / float(scene["width"]),
        float(obj["h"]) * size / float(scene["height"]),
    )


def smallest_side(
    record: Mapping[str, Any], scene: Mapping[str, Any] | None, size: int
) -> float | None:
    """The :func:`object_side` of the smallest object the record's annotations name
    (question, answer and full answer); None without a scene graph or an annotated
    object it has."""
    if scene is None:
        return None
    named = (scene["objects"].get(i) for i in annotated_object_ids(record))
    return min((object_side(o, scene, size) for o in named if o is not None), default=None)


def side_group(side: float | None) -> str:
    """The :data:`SIDE_GROUPS` name of a side (:data:`NO_OBJECT` for None)."""
    if side is None:
        return NO_OBJECT
    return next(name for bound, name in SIDE_GROUPS if side < bound)


def named_by_id(scene: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
    """``scene`` with each object named by its id, and the name index id → k + 1 (the
    k-th object; 0 the background): patch labels over it name one object, not a class."""
    renamed = {**scene, "objects": {i: {**o, "name": i} for i, o in scene["objects"].items()}}
    return renamed, {i: k + 1 for k, i in enumerate(scene["objects"])}


def owned_patches(scene: Mapping[str, Any], grid: int, rule: str = "centre") -> Counter[str]:
    """How many patches of a ``grid`` × ``grid`` split each object id of ``scene`` owns
    under the label ``rule`` (only the ids that own one)."""
    ids = list(scene["objects"])
    renamed, by_id = named_by_id(scene)
    labels, _ = patch_labels(renamed, grid, by_id, {}, rule=rule)
    return Counter(ids[k - 1] for k in labels.tolist() if k)


def patch_sides(
    scene: Mapping[str, Any], grid: int, rule: str = "centre", size: int = 128
) -> np.ndarray:
    """``(G·G,)``: for each patch of a ``grid`` × ``grid`` split, the index into
    :data:`SIDE_GROUPS` of the object it shows under the label ``rule`` (by that
    object's :func:`object_side` at a ``size`` × ``size`` input), −1 for background."""
    objects = list(scene["objects"].values())
    renamed, by_id = named_by_id(scene)
    owners, _ = patch_labels(renamed, grid, by_id, {}, rule=rule)
    groups = [name for _, name in SIDE_GROUPS]
    side_of = [-1] + [groups.index(side_group(object_side(o, scene, size))) for o in objects]
    return np.asarray(side_of, dtype=np.int64)[owners]


def patch_stats(
    scenes: Mapping[str, Any],
    questions: Mapping[str, Mapping[str, Any]],
    grid: int,
    rule: str = "centre",
    size: int = 128,
) -> dict[str, Any]:
    """The figures of the module docstring over ``scenes`` and the ``questions`` about
    them (a question about an image without a scene graph is skipped), the patches
    labelled by ``rule``, object sides measured at a ``size`` × ``size`` input."""
    owned = {image_id: owned_patches(scene, grid, rule) for image_id, scene in scenes.items()}
    objects = [o for scene in scenes.values() for o in scene["objects"].values()]
    shown_by_side: dict[str, list[bool]] = defaultdict(list)
    for image_id, scene in scenes.items():
        for i, o in scene["objects"].items():
            shown_by_side[side_group(object_side(o, scene, size))].append(owned[image_id][i] > 0)
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
        "objects_shown_by_side": {
            name: round(100.0 * float(np.mean(shown_by_side[name])), 2)
            for _, name in SIDE_GROUPS
            if shown_by_side[name]
        },
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
    parser.add_argument("--image-size", type=int, default=128, help="model input side, pixels")
    args = parser.parse_args()
    if args.grid < 1:
        parser.error(f"--grid must be at least 1, not {args.grid}")
    if args.image_size < 1:
        parser.error(f"--image-size must be at least 1, not {args.image_size}")
    data = GQAData(args.world)
    scenes, questions = data.scene_graphs(args.split), data.questions(args.split)
    stats = patch_stats(scenes, questions, args.grid, args.labels, args.image_size)
    head = {"split": args.split, "grid": args.grid, "labels": args.labels}
    print(json.dumps({**head, "image_size": args.image_size, **stats}))


if __name__ == "__main__":
    main()
