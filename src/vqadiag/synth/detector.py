"""A simulated object detector writing the GQA features layout.

For each true object: detected with probability 0.93 (0.7 for boxes under
32 × 32 px); its box is jittered (corner noise σ = 0.06 × box size, or 0.3 for
the 7% "poorly localized" detections, which mostly have IoU ≤ 0.5); 8% of
detections get a duplicate (σ = 0.12); each image gets Poisson(2.5) false
positives. Boxes are sorted by a simulated confidence and cut at 100 per image.

Features (``feature_dim`` D) encode what the box shows, with noise::

    f = e_category + e_class + 1.0 · (e_color + e_material + e_state) + 0.4 · ε

(embeddings and ε standard normal, missing attributes contribute 0). A poorly
localized box mixes half of that with the background embedding; a false
positive is ``e_background + 0.5 · e_random class + 0.4 · ε``. A learned model
can therefore recover class and attributes, but not perfectly (poor boxes,
duplicates, false positives and missed objects remain).

``ATTR_WEIGHT`` and ``NOISE`` set how readable the attributes are. With the
earlier 0.5 and 0.8, UpDn on the demo's world (2,000 images, ~9,900 training
questions) beat the question-only model by only about 1 point. With 1.0 and 0.4 it
beats it by about 8 (docs/models.md, "UpDn pooling"). A linear probe on the
features of true objects recovers class and color almost perfectly either way
(99.9% / 96% before, 100% / 100% now). The settings differ in how many questions a
model needs before it learns to read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vqadiag.data.io.jsonio import write_json
from vqadiag.synth.image_splits import gqa_image_id
from vqadiag.synth.scenes import Scenes
from vqadiag.synth.taxonomy import CATEGORIES, CLASSES, FAMILY_VALUES

if TYPE_CHECKING:
    from rich.progress import Progress

MAX_BOXES = 100
P_DETECT, P_DETECT_SMALL, SMALL_AREA = 0.93, 0.7, 32 * 32
P_POOR, SIGMA, SIGMA_POOR = 0.07, 0.06, 0.3
P_DUPLICATE, SIGMA_DUPLICATE = 0.08, 0.12
FALSE_POSITIVES = 2.5
ATTR_WEIGHT, NOISE = 1.0, 0.4
#: images detected at once
DETECTION_BLOCK = 2000

_CAT_OF_CLASS = np.array([CATEGORIES.index(c.category) for c in CLASSES])


@dataclass(frozen=True)
class FeatureSpace:
    """The embeddings that features are built from (drawn once per world)."""

    category: np.ndarray
    cls: np.ndarray
    color: np.ndarray
    material: np.ndarray
    state: np.ndarray
    background: np.ndarray

    @classmethod
    def draw(cls, dim: int, rng: np.random.Generator) -> FeatureSpace:
        """Standard normal embeddings of every category, class, attribute and the background."""
        return cls(
            rng.standard_normal((len(CATEGORIES), dim)),
            rng.standard_normal((len(CLASSES), dim)),
            rng.standard_normal((len(FAMILY_VALUES["color"]) + 1, dim)),
            rng.standard_normal((len(FAMILY_VALUES["material"]) + 1, dim)),
            rng.standard_normal((len(FAMILY_VALUES["state"]) + 1, dim)),
            rng.standard_normal(dim),
        )

    def encode(self, cls: np.ndarray, color: np.ndarray, material: np.ndarray, state: np.ndarray):
        """Noise-free features of objects (attribute index −1 contributes nothing)."""
        attrs = np.zeros((cls.shape[0], self.cls.shape[1]))
        for table, idx in ((self.color, color), (self.material, material), (self.state, state)):
            attrs += np.where((idx >= 0)[:, None], table[idx], 0.0)
        return self.category[_CAT_OF_CLASS[cls]] + self.cls[cls] + ATTR_WEIGHT * attrs


@dataclass
class Detections:
    """Detections of a block of images in the GQA layout (rows past ``num`` are zero)."""

    bboxes: np.ndarray  # (n, 100, 4) float32 x1 y1 x2 y2
    features: np.ndarray  # (n, 100, D) float32
    num: np.ndarray  # (n,) int
    source: np.ndarray  # (n, 100) int64: global object index, −1 false positive / padding


def _jitter(x1, y1, x2, y2, sigma, rng):
    w, h = x2 - x1, y2 - y1
    noise = rng.standard_normal((4, x1.shape[0])) * sigma
    return x1 + noise[0] * w, y1 + noise[1] * h, x2 + noise[2] * w, y2 + noise[3] * h


@dataclass
class _Boxes:
    """Boxes of a block of images, one row each: the image (index in the block), the
    source object (global index, −1 for a false positive), whether it is poorly
    localized, its corners ``x1 y1 x2 y2``, its confidence and, for a false positive,
    the class its features mimic (0 otherwise)."""

    img: np.ndarray
    src: np.ndarray
    poor: np.ndarray
    coords: np.ndarray
    conf: np.ndarray
    fp_cls: np.ndarray

    def __getitem__(self, rows: np.ndarray) -> _Boxes:
        return _Boxes(
            self.img[rows], self.src[rows], self.poor[rows], self.coords[rows],
            self.conf[rows], self.fp_cls[rows],
        )  # fmt: skip


def simulate_detections(
    scenes: Scenes, start: int, stop: int, space: FeatureSpace, rng: np.random.Generator
) -> Detections:
    """Detect the objects of images ``start:stop`` (see the module docstring)."""
    n = stop - start
    true = _true_boxes(scenes, start, stop, rng)
    false = _false_positive_boxes(scenes, start, stop, rng)
    boxes = _ranked(_clipped(_joined(true, false), scenes, start, stop))
    rank = np.arange(boxes.img.shape[0]) - np.searchsorted(boxes.img, np.arange(n))[boxes.img]
    keep = rank < MAX_BOXES
    boxes, rank = boxes[keep], rank[keep]
    feats = _features(boxes, scenes, space, rng)
    dim = space.cls.shape[1]
    bboxes = np.zeros((n, MAX_BOXES, 4), np.float32)
    features = np.zeros((n, MAX_BOXES, dim), np.float32)
    source = np.full((n, MAX_BOXES), -1, np.int64)
    bboxes[boxes.img, rank] = boxes.coords
    features[boxes.img, rank] = feats
    source[boxes.img, rank] = boxes.src
    num = np.bincount(boxes.img, minlength=n)
    return Detections(bboxes, features, num, source)


def _true_boxes(scenes: Scenes, start: int, stop: int, rng: np.random.Generator) -> _Boxes:
    """The detections of true objects: each object found with probability ``P_DETECT``
    (``P_DETECT_SMALL`` under ``SMALL_AREA``), its box jittered (σ ``SIGMA``, or
    ``SIGMA_POOR`` for the ``P_POOR`` poorly localized), then a ``P_DUPLICATE`` share of
    the found ones again as duplicates (σ ``SIGMA_DUPLICATE``, lower confidence)."""
    n = stop - start
    lo, hi = int(scenes.offsets[start]), int(scenes.offsets[stop])
    obj = np.arange(lo, hi)
    img = np.repeat(np.arange(n), np.diff(scenes.offsets[start : stop + 1]))
    box = scenes.box[lo:hi].astype(np.float64)
    x1, y1 = box[:, 0], box[:, 1]
    x2, y2 = x1 + box[:, 2], y1 + box[:, 3]
    area = box[:, 2] * box[:, 3]
    p_det = np.where(area < SMALL_AREA, P_DETECT_SMALL, P_DETECT)
    detected = rng.random(obj.shape[0]) < p_det
    poor = rng.random(obj.shape[0]) < P_POOR
    sigma = np.where(poor, SIGMA_POOR, SIGMA)
    jx1, jy1, jx2, jy2 = _jitter(x1, y1, x2, y2, sigma, rng)
    dup = detected & (rng.random(obj.shape[0]) < P_DUPLICATE)
    dx1, dy1, dx2, dy2 = _jitter(x1, y1, x2, y2, SIGMA_DUPLICATE, rng)
    conf_true = 0.5 + 0.5 * rng.random(obj.shape[0])
    conf_dup = 0.3 + 0.5 * rng.random(obj.shape[0])
    keep_t, keep_d = np.flatnonzero(detected), np.flatnonzero(dup)
    coords = np.stack(
        [
            np.concatenate([jx1[keep_t], dx1[keep_d]]),
            np.concatenate([jy1[keep_t], dy1[keep_d]]),
            np.concatenate([jx2[keep_t], dx2[keep_d]]),
            np.concatenate([jy2[keep_t], dy2[keep_d]]),
        ],
        axis=1,
    )
    return _Boxes(
        img=np.concatenate([img[keep_t], img[keep_d]]),
        src=np.concatenate([obj[keep_t], obj[keep_d]]),
        poor=np.concatenate([poor[keep_t], np.zeros(keep_d.shape[0], bool)]),
        coords=coords,
        conf=np.concatenate([conf_true[keep_t], conf_dup[keep_d]]),
        fp_cls=np.zeros(keep_t.shape[0] + keep_d.shape[0], int),
    )


def _false_positive_boxes(
    scenes: Scenes, start: int, stop: int, rng: np.random.Generator
) -> _Boxes:
    """Poisson(``FALSE_POSITIVES``) boxes per image at random places (3-40 % of the
    image's width and height), low confidence, each mimicking a random class."""
    n = stop - start
    W = scenes.width[start:stop].astype(np.float64)
    H = scenes.height[start:stop].astype(np.float64)
    n_fp = rng.poisson(FALSE_POSITIVES, n)
    fp_img = np.repeat(np.arange(n), n_fp)
    fw = (0.03 + 0.37 * rng.random(fp_img.shape[0])) * W[fp_img]
    fh = (0.03 + 0.37 * rng.random(fp_img.shape[0])) * H[fp_img]
    fx1 = rng.random(fp_img.shape[0]) * (W[fp_img] - fw)
    fy1 = rng.random(fp_img.shape[0]) * (H[fp_img] - fh)
    fp_cls = rng.integers(0, len(CLASSES), fp_img.shape[0])
    conf_fp = 0.05 + 0.55 * rng.random(fp_img.shape[0])
    return _Boxes(
        img=fp_img,
        src=np.full(fp_img.shape[0], -1),
        poor=np.zeros(fp_img.shape[0], bool),
        coords=np.stack([fx1, fy1, fx1 + fw, fy1 + fh], axis=1),
        conf=conf_fp,
        fp_cls=fp_cls,
    )


def _joined(first: _Boxes, second: _Boxes) -> _Boxes:
    """The rows of ``first`` then those of ``second``."""
    return _Boxes(
        *(
            np.concatenate([a, b])
            for a, b in (
                (first.img, second.img),
                (first.src, second.src),
                (first.poor, second.poor),
                (first.coords, second.coords),
                (first.conf, second.conf),
                (first.fp_cls, second.fp_cls),
            )
        )
    )


def _clipped(boxes: _Boxes, scenes: Scenes, start: int, stop: int) -> _Boxes:
    """``boxes`` with corners clipped into their image (at least 1 px wide and high)."""
    W = scenes.width[start:stop].astype(np.float64)
    H = scenes.height[start:stop].astype(np.float64)
    coords = boxes.coords
    Wb, Hb = W[boxes.img], H[boxes.img]
    coords[:, 0] = np.clip(coords[:, 0], 0, Wb - 2)
    coords[:, 1] = np.clip(coords[:, 1], 0, Hb - 2)
    coords[:, 2] = np.clip(coords[:, 2], coords[:, 0] + 1, Wb - 1)
    coords[:, 3] = np.clip(coords[:, 3], coords[:, 1] + 1, Hb - 1)
    return boxes


def _ranked(boxes: _Boxes) -> _Boxes:
    """``boxes`` sorted by image, then by decreasing confidence."""
    return boxes[np.lexsort((-boxes.conf, boxes.img))]


def _features(
    boxes: _Boxes, scenes: Scenes, space: FeatureSpace, rng: np.random.Generator
) -> np.ndarray:
    """Noisy features of ``boxes``: their object's encoding (mixed half with the background
    for poorly localized boxes), or background + half a class for false positives."""
    true = boxes.src >= 0
    src = np.where(true, boxes.src, 0)
    clean = space.encode(
        scenes.cls[src], scenes.color[src], scenes.material[src], scenes.state[src]
    )
    fp_feat = space.background + 0.5 * space.cls[boxes.fp_cls]
    clean = np.where(true[:, None], clean, fp_feat)
    clean = np.where(boxes.poor[:, None], 0.5 * clean + 0.5 * space.background, clean)
    dim = space.cls.shape[1]
    return clean + NOISE * rng.standard_normal((boxes.img.shape[0], dim))


class FeatureWriter:
    """Writes ``gqa_objects_<k>.h5`` files (``bboxes``, ``features``) block by block.

    Files hold up to ``per_file`` images; datasets are gzip-compressed in chunks
    of 16 images, without timestamps, so the same data gives the same bytes.
    """

    def __init__(self, folder: Path, n_images: int, dim: int, per_file: int = 10000) -> None:
        import h5py

        self._h5py = h5py
        self.folder = folder
        self.n_images = n_images
        self.dim = dim
        self.per_file = per_file
        self.files: dict[int, object] = {}
        folder.mkdir(parents=True, exist_ok=True)

    def _file(self, k: int):
        if k not in self.files:
            size = min(self.per_file, self.n_images - k * self.per_file)
            fh = self._h5py.File(self.folder / f"gqa_objects_{k}.h5", "w", track_order=False)
            opts = {"compression": "gzip", "compression_opts": 1, "shuffle": True}
            for name, shape, dtype in (
                ("bboxes", (size, MAX_BOXES, 4), np.float32),
                ("features", (size, MAX_BOXES, self.dim), np.float32),
                ("synth_object_index", (size, MAX_BOXES), np.int64),
            ):
                chunk = (min(16, size), *shape[1:])
                fh.create_dataset(name, shape, dtype, chunks=chunk, track_times=False, **opts)
            self.files[k] = fh
        return self.files[k]

    def write(self, start: int, det: Detections) -> list[tuple[int, int]]:
        """Store detections of images ``start, start + 1, …``; returns ``(file, idx)`` of each."""
        where = []
        i = 0
        n = det.num.shape[0]
        while i < n:
            g = start + i
            k, idx = divmod(g, self.per_file)
            take = min(n - i, self.per_file - idx)
            fh = self._file(k)
            fh["bboxes"][idx : idx + take] = det.bboxes[i : i + take]
            fh["features"][idx : idx + take] = det.features[i : i + take]
            fh["synth_object_index"][idx : idx + take] = det.source[i : i + take]
            where.extend((k, idx + j) for j in range(take))
            i += take
        return where

    def close(self) -> None:
        """Close all files."""
        for fh in self.files.values():
            fh.close()  # type: ignore[attr-defined]


def write_detections(
    out: Path, scenes: Scenes, feature_dim: int, rng: np.random.Generator, bar: Progress
) -> tuple[list[str], dict[str, Any]]:
    """Detect the objects of every image of ``scenes`` and write ``gqa/objects`` under
    ``out``: ``gqa_objects_<k>.h5`` (:class:`FeatureWriter`) and
    ``gqa_objects_info.json`` (per GQA image id: width, height, ``objectsNum``, file,
    index). Returns the files written (relative to ``out``) and ``{"boxes", "files"}``
    (boxes detected, feature files written)."""
    folder = out / "gqa" / "objects"
    space = FeatureSpace.draw(feature_dim, rng)
    writer = FeatureWriter(folder, scenes.n_images, feature_dim)
    info: dict[str, Any] = {}
    boxes = 0
    task = bar.add_task("detections", total=scenes.n_images)
    try:
        for lo in range(0, scenes.n_images, DETECTION_BLOCK):
            hi = min(scenes.n_images, lo + DETECTION_BLOCK)
            d = simulate_detections(scenes, lo, hi, space, rng)
            where = writer.write(lo, d)
            nums = d.num.tolist()
            boxes += sum(nums)
            for j, (k, idx) in enumerate(where):
                i = lo + j
                info[gqa_image_id(i)] = {
                    "width": int(scenes.width[i]),
                    "height": int(scenes.height[i]),
                    "objectsNum": nums[j],
                    "file": k,
                    "idx": idx,
                }
            bar.advance(task, hi - lo)
    finally:
        writer.close()
    write_json(folder / "gqa_objects_info.json", info)
    files = ["gqa/objects/gqa_objects_info.json"]
    files += [f"gqa/objects/gqa_objects_{k}.h5" for k in range(len(writer.files))]
    return files, {"boxes": boxes, "files": len(writer.files)}
