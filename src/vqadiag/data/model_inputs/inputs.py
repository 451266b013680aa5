"""What a model reads: a batch of questions and its visual input (objects or pixels).

The data layer builds these (:class:`~vqadiag.data.model_inputs.gqa_data.GQAData`); the models
(:mod:`vqadiag.models.base`) consume them. Kept here so that data never imports models.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class QuestionBatch:
    """Questions of one batch; ``records`` are the raw dataset records (may be empty dicts)."""

    question_ids: Sequence[str]
    questions: Sequence[str]
    image_ids: Sequence[str]
    records: Sequence[Mapping[str, Any]] = ()

    def __post_init__(self) -> None:
        n = len(self.question_ids)
        if len(self.questions) != n or len(self.image_ids) != n:
            raise ValueError("question_ids, questions and image_ids must have equal length")
        if self.records and len(self.records) != n:
            raise ValueError("records must be empty or one per question")

    def __len__(self) -> int:
        return len(self.question_ids)

    def record(self, i: int) -> Mapping[str, Any]:
        """The raw record of question ``i`` (an empty mapping when none was given)."""
        return self.records[i] if self.records else {}


@dataclass(frozen=True)
class ObjectInput:
    """Object-based visual input for a batch of B questions with up to N objects each.

    ``features`` (B, N, D) float32; ``boxes`` (B, N, 4) float32 corners x1 y1 x2 y2 in
    pixels; ``mask`` (B, N) bool, True where the object is visible to the model (padding
    and removed objects are False); ``image_sizes`` (B, 2) float32 width, height;
    ``source``: the detections file the features were read from, which an error about
    them names (None when they were made in memory).
    """

    features: np.ndarray
    boxes: np.ndarray
    mask: np.ndarray
    image_sizes: np.ndarray
    source: Path | None = None

    def __post_init__(self) -> None:
        b, n = self.mask.shape
        if self.features.shape[:2] != (b, n) or self.boxes.shape != (b, n, 4):
            raise ValueError("features (B, N, D), boxes (B, N, 4) and mask (B, N) must agree")
        if self.image_sizes.shape != (b, 2):
            raise ValueError("image_sizes must have shape (B, 2)")

    def with_mask(self, mask: np.ndarray) -> ObjectInput:
        """The same objects seen through another mask (no feature copy)."""
        return replace(self, mask=np.asarray(mask, bool))


@dataclass(frozen=True)
class PixelInput:
    """Image input for a batch of B questions, for pixel models.

    ``images``: B arrays ``(H_b, W_b, 3)`` uint8 RGB, at the size the model reads (its
    ``input_size``, or the stored size); ``boxes`` (B, N, 4) float32: the image's
    detected boxes, corners x1 y1 x2 y2 in the pixel coordinates of ``images[b]``
    (a pixel model turns attention over its grid into per-box importance with them);
    ``mask`` (B, N) bool: real boxes; ``image_sizes`` (B, 2) float32: the stored
    image's width and height.
    """

    images: Sequence[np.ndarray]
    boxes: np.ndarray | None = None
    mask: np.ndarray | None = None
    image_sizes: np.ndarray | None = None

    def __post_init__(self) -> None:
        b = len(self.images)
        if self.boxes is not None and (self.boxes.ndim != 3 or self.boxes.shape[0] != b):
            raise ValueError("boxes must be (B, N, 4) with one row per image")
        boxes, mask = self.boxes, self.mask
        if mask is not None and boxes is not None and mask.shape != boxes.shape[:2]:
            raise ValueError("mask must be (B, N) like boxes")

    def __len__(self) -> int:
        return len(self.images)


def padded_boxes(per_image: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each image's ``(n_b, 4)`` boxes laid out as ``boxes`` (B, N, 4) float32, zero
    padded, and ``mask`` (B, N) bool (True for real boxes), with N = max(1, max n_b): the
    ``boxes`` and ``mask`` of :class:`PixelInput`."""
    n = max(1, max((len(b) for b in per_image), default=1))
    boxes = np.zeros((len(per_image), n, 4), dtype=np.float32)
    mask = np.zeros((len(per_image), n), dtype=bool)
    for row, b in enumerate(per_image):
        boxes[row, : len(b)] = b
        mask[row, : len(b)] = True
    return boxes, mask
