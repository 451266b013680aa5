"""The no-image condition: the model asked the same question without its image
(docs/diagnose.md, "The model without its image").

One condition per dataset (``gqa.noimage``, ``vqa2.noimage``, kind ``noimage``); which
*variant* a model gets depends on what it can be asked (:func:`no_image_variant`):

* ``text-only`` — a model whose input allows it (``capabilities.text_only``: a chat VLM's
  template, a served chat model) is asked with no image at all: ``predict(batch, None)``,
  a chat turn of text alone;
* ``blank`` — any other pixel model gets a blank image: every pixel replaced by the fill
  (``mean``: the image's mean colour; ``noise``: seeded uniform noise, as for the pixel
  conditions of :mod:`vqadiag.probes.conditions`) and no detected boxes (mask all False,
  boxes zero), so nothing of the picture reaches it. The ``blur`` fill keeps the
  picture's layout, so a blank image uses ``mean`` instead;
* ``no-objects`` — an object model that honours the object mask sees none of the image's
  objects (every object masked out, as the ``drop`` replacement does, whatever
  ``--replacement`` says: ``zeros`` / ``minus-one`` / ``other-images`` keep the objects'
  boxes visible, so they are not "no image").

The variant and its fill are the condition's parameters, so they enter its fingerprint
(:func:`vqadiag.probes.fingerprints.condition_fingerprint`) and ``results.json``
``conditions`` names them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vqadiag.models.base import Capabilities, ObjectInput, PixelInput
from vqadiag.probes.conditions import Condition, Probe, filler_image

NO_IMAGE = "noimage"
TEXT_ONLY = "text-only"
BLANK = "blank"
NO_OBJECTS = "no-objects"
VARIANTS = (TEXT_ONLY, BLANK, NO_OBJECTS)


def no_image_variant(caps: Capabilities) -> str | None:
    """The variant a model of capabilities ``caps`` gets (module docstring); None when it
    has none (a blind model, or an object model that ignores the object mask)."""
    if caps.blind:
        return None
    if caps.text_only:
        return TEXT_ONLY
    if caps.pixel_input:
        return BLANK
    if caps.object_input and caps.object_masking:
        return NO_OBJECTS
    return None


def blank_fill(fill: str) -> str:
    """The fill of a blank image: the run's pixel fill, ``mean`` for ``blur`` (a blurred
    image still shows the scene)."""
    return "mean" if fill == "blur" else fill


def no_image_condition(name: str, caps: Capabilities, fill: str = "mean") -> Condition:
    """The no-image condition ``name`` for a model of capabilities ``caps``: kind
    ``noimage`` with ``{"variant": …}`` (and ``"fill"`` for ``blank``) as parameters.
    ValueError when the model has no variant (:func:`no_image_variant`)."""
    variant = no_image_variant(caps)
    if variant is None:
        raise ValueError("this model has no no-image condition")
    params: dict[str, Any] = {"variant": variant}
    if variant == BLANK:
        params["fill"] = blank_fill(fill)
    return Condition(name, NO_IMAGE, params)


def condition_variant(condition: Condition) -> dict[str, Any]:
    """``{"variant", "fill"?}`` of a no-image condition (what ``results.json`` shows)."""
    return {k: condition.params[k] for k in ("variant", "fill") if k in condition.params}


def blank_pixels(visual: PixelInput, probes: Sequence[Probe], fill: str) -> PixelInput:
    """The images of ``visual`` each replaced by its fill over every pixel (same size and
    dtype), with no boxes (all zero, mask all False): the ``blank`` variant."""
    images = []
    for image, probe in zip(visual.images, probes, strict=True):
        filler = filler_image(np.asarray(image), fill, f"{probe.qid}|{probe.image_id}")
        images.append(np.array(filler, dtype=np.uint8, copy=True))
    boxes = None if visual.boxes is None else np.zeros_like(visual.boxes)
    mask = None if boxes is None else np.zeros(boxes.shape[:2], dtype=bool)
    return PixelInput(images, boxes, mask, visual.image_sizes)


def no_objects(visual: ObjectInput) -> ObjectInput:
    """``visual`` with every object masked out: the ``no-objects`` variant."""
    return visual.with_mask(np.zeros_like(visual.mask, dtype=bool))
