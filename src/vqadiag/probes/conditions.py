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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vqadiag.models.base import ObjectInput

REPLACEMENTS = ("drop", "zeros", "minus-one", "other-images")


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
    return ObjectInput(features, visual.boxes, visual.mask, visual.image_sizes)


def donor_map(image_ids: Sequence[str]) -> dict[str, str]:
    """``{image: donor}``: each image's donor is the next image in sorted order (cyclic);
    a single image is its own donor."""
    ordered = sorted(set(image_ids))
    return {img: ordered[(i + 1) % len(ordered)] for i, img in enumerate(ordered)}
