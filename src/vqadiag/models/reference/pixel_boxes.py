"""The pixel model's box encoder (``-o encoder=boxes``; docs/models.md, "The pixel model").

Instead of one CNN over the whole image resized to a square, each detected box is cut
from the stored image and resized to ``crop_size`` × ``crop_size`` (Pillow's bilinear
resize, which averages over the box when shrinking), and a small CNN
(:func:`vqadiag.models.networks.pixel.crop_encoder`) turns each crop into one feature
vector, with the box's position appended
(:func:`~vqadiag.models.training.spatial_features`: ``x1/W, y1/H, x2/W, y2/H, area``).
The heads then attend over boxes instead of grid cells, so a box's importance is its
attention weight.

Why: at a 128-pixel input 44 % of the synthetic world's objects are under 12 pixels
and the grid CNN never learns to name them; cut from the stored image, every object
fills its crop.

Supervision from scene graphs matches each detection to an annotated object by
intersection over union (IoU): the object of largest IoU when it is at least
:data:`MATCH_IOU`, "background" otherwise. The boxes of an annotated object (for the
attention targets) are the detections that match it, or when none does, the one
detection of largest positive IoU.

Before the VQA training, :func:`pretrain_box_encoder` trains the crop CNN on the matched
boxes' names and attributes alone (``pretrain_epochs``), as bottom-up features are
trained on object labels before VQA.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vqadiag.data.formats.gqa import object_corners
from vqadiag.data.model_inputs.geometry import pairwise_iou
from vqadiag.data.model_inputs.inputs import padded_boxes

if TYPE_CHECKING:
    pass

#: a detection shows an object when their IoU reaches this (the usual detection threshold)
MATCH_IOU = 0.5
#: values of the pixel model's ``encoder`` option
ENCODERS = ("grid", "boxes")
#: values of the ``crop_pooling`` option: the mean over positions, or the flattened map
CROP_POOLINGS = ("mean", "layout")


def box_crops(image: np.ndarray, boxes: np.ndarray, crop: int) -> np.ndarray:
    """``(N, crop, crop, 3)`` uint8: each box (corners ``x1 y1 x2 y2`` in ``image``'s
    pixels, clipped to the image, at least one pixel wide and high) resized to ``crop``
    × ``crop`` with Pillow's bilinear filter."""
    from PIL import Image

    height, width = image.shape[:2]
    picture = Image.fromarray(np.ascontiguousarray(image))
    out = np.empty((len(boxes), crop, crop, 3), dtype=np.uint8)
    for k, (x1, y1, x2, y2) in enumerate(np.asarray(boxes, np.float64)):
        x1 = min(max(x1, 0.0), width - 1.0)
        y1 = min(max(y1, 0.0), height - 1.0)
        x2 = min(max(x2, x1 + 1.0), float(width))
        y2 = min(max(y2, y1 + 1.0), float(height))
        resized = picture.resize((crop, crop), Image.BILINEAR, box=(x1, y1, x2, y2))
        out[k] = np.asarray(resized, dtype=np.uint8)
    return out


def crops_tensor(crops: np.ndarray) -> Any:
    """``(K, 3, s, s)`` float32 tensor in [−1, 1] of ``(K, s, s, 3)`` uint8 crops."""
    import torch

    scaled = np.asarray(crops, np.float32) / 127.5 - 1.0
    return torch.from_numpy(np.ascontiguousarray(scaled.transpose(0, 3, 1, 2)))


def boxes_of_object(boxes: np.ndarray, obj: Mapping[str, Any]) -> np.ndarray:
    """``(N,)`` bool: the detections whose IoU with ``obj`` reaches :data:`MATCH_IOU`, or
    when none does, the one of largest positive IoU (none when no box overlaps it)."""
    out = np.zeros(len(boxes), dtype=bool)
    if len(boxes) == 0:
        return out
    overlap = pairwise_iou(boxes, object_corners([obj]), integer=False)[:, 0]
    out[overlap >= MATCH_IOU] = True
    if not out.any() and overlap.max() > 0:
        out[int(overlap.argmax())] = True
    return out


@dataclass(frozen=True)
class BoxCropInput:
    """A batch's boxes already cut out (the box encoder's training input, cached per image
    so that each training image is decoded and cropped once): ``crops[b]`` (K_b, s, s, 3)
    uint8, the crops of row b's real boxes in order, or with ``encoded`` their features
    (K_b, 4c) float32 (a frozen encoder's, :meth:`TrainingCrops.encode_with`); ``boxes``
    (B, N, 4) corners and ``mask`` (B, N) as in
    :class:`~vqadiag.data.model_inputs.inputs.PixelInput`;
    ``image_sizes`` (B, 2) the stored images' width and height."""

    crops: Sequence[np.ndarray]
    boxes: np.ndarray
    mask: np.ndarray
    image_sizes: np.ndarray
    encoded: bool = False


class TrainingCrops:
    """Crops of the training images' detected boxes, made once per image and kept for the
    whole training run (the images and boxes of a split do not change during it)."""

    def __init__(self, crop: int, max_objects: int) -> None:
        self.crop = crop
        self.max_objects = max_objects
        self._cache: dict[str, tuple[np.ndarray, np.ndarray, tuple[float, float]]] = {}
        self.encoder: Callable[[np.ndarray], np.ndarray] | None = None

    def encode_with(self, encoder: Callable[[np.ndarray], np.ndarray]) -> None:
        """From now on keep ``encoder(crops)`` ((K, s, s, 3) uint8 → (K, F) float32) in
        place of each image's crops: the frozen crop CNN's features, computed once."""
        self.encoder = encoder
        for image_id, (crops, real, size) in self._cache.items():
            self._cache[image_id] = (encoder(crops), real, size)

    def batch(self, data: Any, image_ids: Sequence[str]) -> BoxCropInput:
        """The :class:`BoxCropInput` of ``image_ids`` (decoding the images not seen yet)."""
        ids = [str(i) for i in image_ids]
        missing = [i for i in dict.fromkeys(ids) if i not in self._cache]
        if missing:
            # each training image is read once here: not kept in the decoded-image cache
            pixels = data.pixel_input(missing, max_objects=self.max_objects, keep=False)
            for row, image_id in enumerate(missing):
                real = pixels.boxes[row][pixels.mask[row]]
                image = pixels.images[row]
                size = (float(image.shape[1]), float(image.shape[0]))
                crops = box_crops(image, real, self.crop)
                if self.encoder is not None:
                    crops = self.encoder(crops)
                self._cache[image_id] = (crops, real, size)
        rows = [self._cache[i] for i in ids]
        boxes, mask = padded_boxes([r[1] for r in rows])
        sizes = np.asarray([r[2] for r in rows], np.float32).reshape(len(rows), 2)
        encoded = self.encoder is not None
        return BoxCropInput([r[0] for r in rows], boxes, mask, sizes, encoded)
