"""Which object a synthetic world's image shows at each patch centre (docs/chat-vlm.md,
"What limits it").

The chat VLM's patch labels name the smallest annotated box that contains the patch's
centre (:func:`~vqadiag.models.reference.chat_vlm_data.patch_labels`). A silhouette
does not fill its box (an animal's legs, a vehicle's roof, an ellipse's corners), so the
pixel at that centre may show a larger object drawn below it, or the background. The
world's renderer knows what it painted where (:func:`~vqadiag.synth.render.
render_indices`); this module re-runs it from ``world.json`` (seed, images, bias and
object range: the scenes are a pure function of them) and labels each patch by the
object painted at its centre pixel, its *visible owner*.

* :class:`VisibleOwners`: the owner map of an image of a world, checked against the
  boxes of its scene graph (a world written by another generator version is refused);
* :func:`visible_labels` / :func:`visible_image_labels`: patch names and attributes by
  the visible owner, mirrored and moved as the tower's augmentation moves them, as
  :func:`~vqadiag.models.reference.chat_vlm_data.scene_labeller` labels an image;
* :func:`centre_label_agreement`: over a split, what the pixel at each centre-rule
  object patch's centre shows: the labelled object, the background or another object.

Usage: ``python experiments/world_owners.py WORLD [--split val] [--grid 8]`` prints
:func:`centre_label_agreement` as one JSON line.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.models.reference.chat_vlm_data import ImageLabels, patch_centres, patch_labels
from vqadiag.models.reference.pixel_objective import attribute_row
from vqadiag.synth.image_splits import gqa_image_id
from vqadiag.synth.priors import build_priors
from vqadiag.synth.render import render_indices
from vqadiag.synth.scenes import MAX_OBJECTS, MIN_OBJECTS, check_object_range, sample_scenes
from world_patch_stats import named_by_id

#: the object range of a world.json written before it recorded ``objects_per_image``
DEFAULT_OBJECTS = (MIN_OBJECTS, MAX_OBJECTS)


class VisibleOwners:
    """The owner maps of the images of the synthetic world in ``world`` (a folder with
    ``world.json``): the scenes regenerated from its seed, image count, bias and object
    range, as ``vqadiag synth`` draws them."""

    def __init__(self, world: str | Path) -> None:
        path = Path(world) / "world.json"
        try:
            meta = json.loads(path.read_text())
            seed, images, bias = int(meta["seed"]), int(meta["images"]), float(meta["bias"])
            objects = check_object_range(tuple(meta.get("objects_per_image", DEFAULT_OBJECTS)))
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise SystemExit(f"{path}: not a vqadiag synth world.json ({err})") from None
        streams = np.random.SeedSequence(seed).spawn(6)  # as the generator spawns them
        priors = build_priors(bias, np.random.default_rng(streams[0]))
        rng = np.random.default_rng(streams[1])
        self.scenes = sample_scenes(images, priors, rng, objects)
        self.index = {gqa_image_id(i): i for i in range(images)}
        self._maps: dict[str, np.ndarray] = {}

    def owner_map(self, image_id: str, scene: Mapping[str, Any]) -> np.ndarray:
        """``(H, W)``: the position in ``scene["objects"]`` of the object painted at each
        pixel of the image (−1: background); SystemExit when the regenerated boxes are
        not the scene graph's."""
        if image_id not in self._maps:
            i = self.index.get(image_id)
            boxes = [[int(o[k]) for k in ("x", "y", "w", "h")] for o in scene["objects"].values()]
            if i is None or self._drawn_boxes(i) != boxes:
                raise SystemExit(
                    f"image {image_id}: its scene graph is not the one this world's seed "
                    "draws (another generator version?)"
                )
            self._maps[image_id] = render_indices(self.scenes, i)[1].astype(np.int16)
        return self._maps[image_id]

    def _drawn_boxes(self, i: int) -> list[list[int]]:
        """The ``[x, y, w, h]`` of image ``i``'s objects, as the regenerated scenes hold them."""
        lo, hi = int(self.scenes.offsets[i]), int(self.scenes.offsets[i + 1])
        return self.scenes.box[lo:hi].tolist()


def visible_labels(
    scene: Mapping[str, Any],
    owner: np.ndarray,
    grid: int,
    names: Mapping[str, int],
    attrs: Mapping[str, int],
    *,
    flip: bool = False,
    shift: tuple[float, float] = (0.0, 0.0),
) -> tuple[np.ndarray, np.ndarray]:
    """``(G·G,)`` name indices and ``(G·G, A)`` attribute indicators of a ``grid`` ×
    ``grid`` split of the image: those of the object ``owner`` says is painted at each
    patch's centre pixel (background, index 0, where none is or the centre falls outside
    the image). ``flip`` and ``shift`` move the centres as
    :func:`~vqadiag.models.reference.chat_vlm_data.patch_labels` moves them."""
    height, width = owner.shape
    objects = list(scene["objects"].values())
    cx, cy = patch_centres(width, height, grid, flip=flip, shift=shift)
    inside = (cx >= 0) & (cx < width) & (cy >= 0) & (cy < height)
    painted = np.full(grid * grid, -1)
    painted[inside] = owner[cy[inside].astype(int), cx[inside].astype(int)]
    name = np.zeros(grid * grid, dtype=np.int64)
    attr = np.zeros((grid * grid, len(attrs)), dtype=np.float32)
    for patch in np.flatnonzero(painted >= 0):
        obj = objects[painted[patch]]
        name[patch] = names.get(str(obj["name"]), 0)
        attr[patch] = attribute_row(obj, attrs)
    return name, attr


def visible_image_labels(
    owners: VisibleOwners, grid: int, names: Mapping[str, int], attrs: Mapping[str, int]
) -> ImageLabels:
    """The per-image labeller that
    :func:`~vqadiag.models.reference.chat_vlm_data.scene_labeller` and
    :func:`~vqadiag.models.reference.chat_vlm.held_out_patches` take as ``label_image``:
    each patch labelled by its visible owner (:func:`visible_labels`)."""

    def label_image(
        image_id: str, scene: Mapping[str, Any], flip: bool, shift: tuple[float, float]
    ) -> tuple[np.ndarray, np.ndarray]:
        owner = owners.owner_map(image_id, scene)
        return visible_labels(scene, owner, grid, names, attrs, flip=flip, shift=shift)

    return label_image


def centre_label_agreement(
    owners: VisibleOwners, scenes: Mapping[str, Any], grid: int
) -> dict[str, Any]:
    """Over the images of ``scenes``: the patches the centre rule gives an object, and the
    percent of them whose centre pixel shows that object, the background, or another
    object; and the patches whose centre pixel shows an object."""
    counts = {"same": 0, "background": 0, "other": 0}
    patches = shown = 0
    for image_id, scene in scenes.items():
        renamed, by_id = named_by_id(scene)  # equal labels mean the same object
        labelled, _ = patch_labels(renamed, grid, by_id, {})
        painted, _ = visible_labels(renamed, owners.owner_map(image_id, scene), grid, by_id, {})
        patches += grid * grid
        shown += int((painted > 0).sum())
        on = labelled > 0
        counts["same"] += int((on & (painted == labelled)).sum())
        counts["background"] += int((on & (painted == 0)).sum())
        counts["other"] += int((on & (painted > 0) & (painted != labelled)).sum())
    labelled_patches = sum(counts.values())
    return {
        "images": len(scenes),
        "patches": patches,
        "centre_rule_object_patches": labelled_patches,
        "visible_object_patches": shown,
        **{
            f"centre_rule_shows_{k}": round(100.0 * n / max(1, labelled_patches), 2)
            for k, n in counts.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("world")
    parser.add_argument("--split", default="val")
    parser.add_argument("--grid", type=int, default=8, help="patches per side")
    args = parser.parse_args()
    if args.grid < 1:
        parser.error(f"--grid must be at least 1, not {args.grid}")
    scenes = GQAData(args.world).scene_graphs(args.split)
    out = centre_label_agreement(VisibleOwners(args.world), scenes, args.grid)
    print(json.dumps({"split": args.split, "grid": args.grid, **out}))


if __name__ == "__main__":
    main()
