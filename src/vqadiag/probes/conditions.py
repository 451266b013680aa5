"""Diagnostic conditions: what a model sees of a question under each probe.

A :class:`Probe` is one model call for one question under one condition: the
question text (the original or a noisy one), its image, and which of the
image's detected objects stay (``keep``: only these; ``remove``: all but
these; neither: all). :func:`object_visual` turns a batch of probes into the
:class:`~vqadiag.models.base.ObjectInput` the model gets. Removed objects are
handled by the replacement policy (docs/protocols.md §5; FPVG paper §3.2 and VisFIS):

* ``drop`` (default) — removed objects are masked out: the model never sees them;
* ``zeros`` — removed objects stay visible with all-zero features;
* ``minus-one`` — removed objects stay visible with features −1 (VisFIS default);
* ``other-images`` — removed objects stay visible with the features of another
  image's objects (the *donor*: the next image of the run in sorted id order;
  its k-th object replaces the k-th removed object, cycling). Boxes are kept.

Object indices are positions in the image's detections (those of ``R.json``);
indices at or past ``max_objects`` are not part of the input and are ignored.

Pixel models see the same conditions on the image (:func:`apply_pixel_condition`):
``keep`` replaces every pixel outside the union of the kept boxes, ``remove``
replaces the pixels inside the union of the removed boxes (FPVG's
irrelevant-only run of a pixel model removes the relevant boxes; leave-one-out
removes one box). Replaced pixels are filled by the policy (``fill``):

* ``mean`` (default) — the image's mean colour;
* ``blur`` — a Gaussian blur of the image (radius 1/20 of its larger side);
* ``noise`` — uniform noise, seeded by the question id and image (reproducible).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from vqadiag.models.base import ObjectInput, PixelInput

REPLACEMENTS = ("drop", "zeros", "minus-one", "other-images")
FILLS = ("mean", "blur", "noise")


@dataclass(frozen=True)
class Condition:
    """A named condition: ``kind`` (``plain``, ``objects``, ``text``, ``gradcam``) and
    the parameters that enter its fingerprint (replacement, ``max_objects``, ...)."""

    name: str
    kind: str
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def replacement(self) -> str:
        """The replacement policy for removed objects (``drop`` unless set)."""
        return str(self.params.get("replacement", "drop"))

    @property
    def fill(self) -> str:
        """The fill policy for replaced pixels (``mean`` unless set)."""
        return str(self.params.get("fill", "mean"))


@dataclass(frozen=True)
class Probe:
    """One question under one condition (see the module docstring)."""

    qid: str
    question: str
    image_id: str
    record: Mapping[str, Any]
    keep: tuple[int, ...] | None = None
    remove: tuple[int, ...] | None = None
    ref: str | None = None

    def row_params(self) -> dict[str, Any]:
        """The per-question parameters that enter the data fingerprint."""
        out: dict[str, Any] = {}
        if self.keep is not None:
            out["keep"] = list(self.keep)
        if self.remove is not None:
            out["remove"] = list(self.remove)
        return out


def visible_mask(probe: Probe, present: np.ndarray) -> np.ndarray:
    """Objects the probe keeps, as a mask over the row's N slots (``present`` = real objects)."""
    n = present.shape[0]
    if probe.keep is None and probe.remove is None:
        return present.copy()
    if probe.keep is not None:
        mask = np.zeros(n, dtype=bool)
        idx = [i for i in probe.keep if 0 <= i < n]
        mask[idx] = True
        return mask & present
    mask = present.copy()
    idx = [i for i in probe.remove or () if 0 <= i < n]
    mask[idx] = False
    return mask


def apply_replacement(
    visual: ObjectInput,
    keep: np.ndarray,
    replacement: str,
    donor_features: Callable[[int], np.ndarray] | None = None,
) -> ObjectInput:
    """The input where objects present in ``visual`` but not in ``keep`` are removed.

    ``drop``: masked out; ``zeros`` / ``minus-one``: features set to 0 / −1 and
    left visible; ``other-images``: ``donor_features(row)`` (n_d, D) fill the
    removed slots in order, cycling (an empty donor gives zeros).
    """
    if replacement not in REPLACEMENTS:
        raise ValueError(f"replacement must be one of {REPLACEMENTS}, got {replacement!r}")
    keep = np.asarray(keep, dtype=bool) & visual.mask
    if replacement == "drop":
        return visual.with_mask(keep)
    removed = visual.mask & ~keep
    features = visual.features  # fresh per batch: modified in place
    if replacement == "zeros":
        features[removed] = 0.0
    elif replacement == "minus-one":
        features[removed] = -1.0
    else:
        for row in np.flatnonzero(removed.any(axis=1)):
            slots = np.flatnonzero(removed[row])
            donor = donor_features(int(row)) if donor_features is not None else None
            if donor is None or len(donor) == 0:
                features[row, slots] = 0.0
                continue
            features[row, slots] = donor[np.arange(len(slots)) % len(donor)]
    return replace(visual, features=features)


def donor_map(image_ids: Sequence[str]) -> dict[str, str]:
    """``{image: donor}``: each image's donor is the next image in sorted order (cyclic);
    a single image is its own donor."""
    ordered = sorted(set(image_ids))
    return {img: ordered[(i + 1) % len(ordered)] for i, img in enumerate(ordered)}


def box_rectangles(height: int, width: int, boxes: np.ndarray) -> list[tuple[int, int, int, int]]:
    """``(r0, r1, c0, c1)`` per box: the rows ``r0:r1`` and columns ``c0:c1`` of the pixels
    whose centre lies in the box (corners x1 y1 x2 y2 in pixels: x1 ≤ x + ½ < x2 and
    y1 ≤ y + ½ < y2), clipped to the image."""

    def first_pixel(edge: float, limit: int) -> int:
        return int(np.clip(np.ceil(edge - 0.5), 0, limit))

    return [
        (first_pixel(y1, height), first_pixel(y2, height), first_pixel(x1, width),
         first_pixel(x2, width))
        for x1, y1, x2, y2 in np.asarray(boxes, np.float64).reshape(-1, 4)
    ]  # fmt: skip


def region_mask(height: int, width: int, boxes: np.ndarray) -> np.ndarray:
    """``(H, W)`` bool: the pixels covered by the union of ``boxes`` (corners x1 y1 x2 y2 in
    pixels; a pixel (x, y) is covered when x1 ≤ x + ½ < x2 and y1 ≤ y + ½ < y2, i.e. its
    centre lies in the box)."""
    return _union(height, width, box_rectangles(height, width, boxes))


def _union(height: int, width: int, rectangles: Sequence[tuple[int, int, int, int]]) -> np.ndarray:
    """``(H, W)`` bool: the union of ``rectangles`` (:func:`box_rectangles`)."""
    mask = np.zeros((height, width), dtype=bool)
    for r0, r1, c0, c1 in rectangles:
        mask[r0:r1, c0:c1] = True
    return mask


def image_mean(image: np.ndarray) -> np.ndarray:
    """``(3,)`` float64: the mean of each channel of an ``(H, W, 3)`` uint8 image, from its
    histogram (Pillow's, in C): Σ_v v · count(v) / (H · W), an exact integer divided once,
    so the same float as ``image.reshape(-1, 3).mean(axis=0)`` at a sixth of the time."""
    from PIL import Image

    counts = np.asarray(Image.fromarray(image).histogram(), np.int64).reshape(3, 256)
    return (counts * np.arange(256)).sum(axis=1) / (image.shape[0] * image.shape[1])


def _filler(image: np.ndarray, fill: str, seed_text: str) -> np.ndarray:
    """What replaced pixels become, as a full ``(H, W, 3)`` uint8 image."""
    if fill == "mean":
        return np.broadcast_to(np.round(image_mean(image)).astype(np.uint8), image.shape)
    if fill == "blur":
        from PIL import Image, ImageFilter

        radius = max(image.shape[:2]) / 20.0
        blurred = Image.fromarray(image).filter(ImageFilter.GaussianBlur(radius))
        return np.asarray(blurred, np.uint8)
    if fill == "noise":
        import zlib

        rng = np.random.default_rng(zlib.crc32(seed_text.encode()))
        return rng.integers(0, 256, size=image.shape, dtype=np.uint8)
    raise ValueError(f"fill must be one of {FILLS}, got {fill!r}")


def filler_image(image: np.ndarray, fill: str, seed_text: str) -> np.ndarray:
    """What replaced pixels of ``image`` become under ``fill``, as a full ``(H, W, 3)``
    uint8 image (module docstring; ``seed_text`` seeds the ``noise`` fill)."""
    if fill not in FILLS:
        raise ValueError(f"fill must be one of {FILLS}, got {fill!r}")
    return _filler(image, fill, seed_text)


def apply_pixel_condition(
    visual: PixelInput, probes: Sequence[Probe], fill: str = "mean"
) -> PixelInput:
    """The images of ``visual`` with the probes' conditions applied (module docstring).

    A probe with neither ``keep`` nor ``remove`` leaves its image as it is (no copy).
    Box indices refer to ``visual.boxes`` rows (the image's detections, ≤ ``max_objects``).
    """
    if fill not in FILLS:
        raise ValueError(f"fill must be one of {FILLS}, got {fill!r}")
    images = list(visual.images)
    boxes = visual.boxes if visual.boxes is not None else np.zeros((len(images), 0, 4))
    present = visual.mask if visual.mask is not None else np.ones(boxes.shape[:2], bool)
    fills: dict[int, np.ndarray] = {}  # mean / blur of an image, shared by its probes
    for row, probe in enumerate(probes):
        if probe.keep is None and probe.remove is None:
            continue
        image = images[row]
        height, width = image.shape[:2]
        chosen = [i for i in (probe.keep if probe.keep is not None else probe.remove or ())]
        chosen = [i for i in chosen if 0 <= i < boxes.shape[1] and present[row, i]]
        rectangles = box_rectangles(height, width, boxes[row, chosen])
        if probe.keep is not None:
            unchanged = bool(_union(height, width, rectangles).all())  # the boxes cover all
        else:
            unchanged = not any(r1 > r0 and c1 > c0 for r0, r1, c0, c1 in rectangles)
        if unchanged:
            continue  # nothing to replace
        if fill == "noise":  # seeded per question: never shared
            filler = _filler(image, fill, f"{probe.qid}|{probe.image_id}")
        else:
            filler = fills.get(id(image))
            if filler is None:
                filler = fills[id(image)] = _filler(image, fill, "")
        # pixels outside the union of the boxes (keep) or inside it (remove) become the
        # filler's: pasting rectangles gives exactly the union, without a per-pixel pass
        if probe.keep is not None:
            out, source = np.array(filler, copy=True), image
        else:
            out, source = image.copy(), filler
        for r0, r1, c0, c1 in rectangles:
            out[r0:r1, c0:c1] = source[r0:r1, c0:c1]
        images[row] = out
    return PixelInput(images, visual.boxes, visual.mask, visual.image_sizes)
