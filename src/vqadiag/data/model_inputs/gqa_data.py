"""GQA-format training and evaluation data for models: questions, scene graphs, objects.

A data folder is a synthetic world (``vqadiag synth --out DIR``), a real GQA download
laid out the same way, or the prepared copy of a Hugging Face dataset or VLMEvalKit
TSV (docs/data-sources.md), whose images stay in the copy::

    DIR/gqa/{split}_balanced_questions.json      (or DIR/{split}_balanced_questions.json)
    DIR/gqa/{split}_sceneGraphs.json             (optional: symbolic training)
    DIR/gqa/objects/gqa_objects_info.json + gqa_objects_<k>.h5

Questions are read once per split; object features are read lazily from the h5
files, per image, and kept in a bounded cache, so real GQA (≈ 120 GB of
features) is never loaded whole.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.data.formats.detections import Detections, image_label, read_detections
from vqadiag.data.formats.gqa import (
    GQAQuestions,
    SceneGraphs,
    read_gqa_questions,
    read_scene_graphs,
)
from vqadiag.data.formats.question_store import QuestionStore, read_question_store
from vqadiag.data.io.lru import ByteLRU
from vqadiag.data.model_inputs.images import ImageFiles
from vqadiag.data.model_inputs.inputs import ObjectInput, PixelInput, QuestionBatch, padded_boxes
from vqadiag.data.sources.embedded_images import EmbeddedImages
from vqadiag.errors import DataError

DEFAULT_CACHE_BYTES = 1 << 30


def _gqa_dir(data_dir: Path) -> Path:
    nested = data_dir / "gqa"
    return nested if nested.is_dir() else data_dir


class GQAData:
    """Questions, scene graphs and detector objects of a GQA-format data folder."""

    #: the section of a prepared copy's image index this data reads
    dataset = "gqa"

    def __init__(
        self,
        data_dir: str | Path,
        *,
        detections: str | Path | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        images: str | Path | None = None,
        compact_questions: bool = False,
    ) -> None:
        self.root = Path(data_dir)
        if not self.root.is_dir():
            found = self.root.exists()
            raise DataError(
                self.root, "is a file, expected a data folder" if found else "data folder not found"
            )
        self.gqa_dir = _gqa_dir(self.root)
        self.images = ImageFiles(
            self.image_roots(),
            images_dir=images,
            embedded=EmbeddedImages.beside(self.root, self.dataset),
        )
        self._detections_path = Path(detections) if detections else self.gqa_dir / "objects"
        self._detections: Detections | None = None
        self._questions: dict[str, GQAQuestions | QuestionStore] = {}
        #: keep question records as their file's bytes (what a diagnosis holds)
        self._compact_questions = compact_questions
        self._scenes: dict[str, SceneGraphs] = {}
        self._cache: ByteLRU[str, tuple[np.ndarray, np.ndarray]] = ByteLRU(
            cache_bytes, lambda fb: fb[0].nbytes + fb[1].nbytes
        )
        #: detector reads (h5) are not thread-safe; the caches and images are
        self._detections_lock = threading.RLock()

    def questions_path(self, split: str) -> Path:
        """The question file of ``split`` (balanced, else all questions)."""
        for name in (f"{split}_balanced_questions.json", f"{split}_all_questions.json"):
            path = self.gqa_dir / name
            if path.is_file():
                return path
        raise DataError(self.gqa_dir, f"no question file for split {split!r}")

    def questions(self, split: str) -> GQAQuestions | QuestionStore:
        """``{qid: record}`` of a split (read once); with ``compact_questions``, a
        :class:`~vqadiag.data.formats.question_store.QuestionStore` (each record decoded
        when read)."""
        if split not in self._questions:
            read = read_question_store if self._compact_questions else read_gqa_questions
            self._questions[split] = read(self.questions_path(split))
        return self._questions[split]

    def forget_questions(self) -> None:
        """Let go of the question records read so far (a later :meth:`questions` reads
        the file again): what a diagnosis does between suites that do not read them."""
        self._questions.clear()

    def scene_graphs(self, split: str) -> SceneGraphs:
        """``{imageId: scene}`` of a split (read once)."""
        if split not in self._scenes:
            path = self.gqa_dir / f"{split}_sceneGraphs.json"
            self._scenes[split] = read_scene_graphs(path)
        return self._scenes[split]

    @property
    def detections_path(self) -> Path:
        """The detector output this data reads (``gqa/objects`` unless given)."""
        return self._detections_path

    @property
    def detections(self) -> Detections:
        """The detector boxes and features (opened on first use)."""
        with self._detections_lock:
            if self._detections is None:
                self._detections = read_detections(self._detections_path)
            return self._detections

    def batch(self, split: str, question_ids: Sequence[str]) -> QuestionBatch:
        """A :class:`QuestionBatch` of the given questions of ``split``."""
        records = self.questions(split)
        rows = [records[q] for q in question_ids]
        return QuestionBatch(
            question_ids=list(question_ids),
            questions=[r["question"] for r in rows],
            image_ids=[str(r["imageId"]) for r in rows],
            records=rows,
        )

    def image_objects(self, image_id: str) -> tuple[np.ndarray, np.ndarray]:
        """``(features (n, D) float32, boxes (n, 4) float32)`` of an image, cached."""
        hit = self._cache.get(image_id)
        if hit is not None:
            return hit
        with self._detections_lock:
            det = self.detections
            boxes = np.asarray(det[image_id], dtype=np.float32)
            feats = np.asarray(det.features(image_id), dtype=np.float32)
        return self._cache.put(image_id, (feats, boxes))

    def image_roots(self) -> list[Path]:
        """Folders whose ``images/`` (or COCO split folders) hold this data's images."""
        return [self.gqa_dir, self.root]

    def image_boxes(self, image_id: str) -> np.ndarray:
        """The image's detected boxes ``(n, 4)`` float32 (no features read)."""
        hit = self._cache.get(image_id, touch=False)
        if hit is not None:
            return hit[1]
        with self._detections_lock:
            return np.asarray(self.detections[image_id], dtype=np.float32)

    def _pixel_boxes(self, image_id: str) -> np.ndarray:
        """The detected boxes a pixel model is given: none when the data has no detector
        output, or none for this image; a malformed detection (a NaN coordinate …) is
        its one-line error, as for an object model, never an image without boxes."""
        if not self._detections_path.exists() or image_id not in self.detections:
            return np.zeros((0, 4), np.float32)
        return self.image_boxes(image_id)

    def _check_image_size(self, image_id: str, size: tuple[int, int], question: str | None) -> None:
        """One line when the image file is not the size the detections record for it: the
        boxes are in the recorded size, so a resized or EXIF-rotated copy would put every
        box, and every condition built from it, in the wrong place."""
        if not self._detections_path.exists() or image_id not in self.detections:
            return
        recorded = self.detections.image_size(image_id)
        if recorded is None or (round(recorded[0]), round(recorded[1])) == tuple(size):
            return
        raise DataError(
            self.images.path(image_id, question),
            f"the image is {size[0]} x {size[1]} pixels but {self.detections.source.name} "
            f"records {recorded[0]:g} x {recorded[1]:g}, the size its boxes are in (a "
            "resized or rotated copy?)",
            f"question {question}" if question else None,
        )

    def pixel_input(
        self,
        image_ids: Sequence[str],
        size: tuple[int, int] | None = None,
        max_objects: int = 100,
        questions: Sequence[str] | None = None,
        keep: bool = True,
    ) -> PixelInput:
        """The images of ``image_ids`` (resized to ``size`` = (width, height) when given)
        with their detected boxes in the same pixel coordinates (docs/diagnose.md, "Images").

        Arrays come from a cache: callers that change pixels copy first. ``questions``
        (one id per image) name the question in the error of a missing image. ``keep``
        False leaves full-size images that are not cached yet out of the cache, for a
        caller that reads each image once (:meth:`ImageFiles.pixels`).
        """
        images: list[np.ndarray] = []
        per_boxes: list[np.ndarray] = []
        sizes = np.zeros((len(image_ids), 2), dtype=np.float32)
        for row, image_id in enumerate(image_ids):
            image_id = str(image_id)
            question = questions[row] if questions is not None else None
            if size is None:
                array = self.images.pixels(image_id, question, keep=keep)
                width, height = array.shape[1], array.shape[0]
                scale = (1.0, 1.0)
            else:
                array, (width, height) = self.images.resized(image_id, size, question)
                scale = (size[0] / width, size[1] / height)
            self._check_image_size(image_id, (width, height), question)
            images.append(array)
            sizes[row] = (width, height)
            boxes = self._pixel_boxes(image_id)[:max_objects]
            per_boxes.append(boxes * np.array([*scale, *scale], np.float32))
        boxes, mask = padded_boxes(per_boxes)
        return PixelInput(images, boxes, mask, sizes)

    def object_input(self, image_ids: Sequence[str], max_objects: int = 100) -> ObjectInput:
        """Stack the objects of ``image_ids`` into an :class:`ObjectInput` padded to the
        batch's largest object count (at most ``max_objects``); padding is masked out."""
        per_image = [self.image_objects(str(i)) for i in image_ids]
        n = max(1, min(max_objects, max((len(b) for _, b in per_image), default=1)))
        dim = self._feature_width(image_ids, [f for f, _ in per_image])
        size = len(per_image)
        features = np.zeros((size, n, dim), dtype=np.float32)
        boxes = np.zeros((size, n, 4), dtype=np.float32)
        mask = np.zeros((size, n), dtype=bool)
        sizes = np.zeros((size, 2), dtype=np.float32)
        for row, (image_id, (f, b)) in enumerate(zip(image_ids, per_image, strict=True)):
            k = min(n, len(b))
            if k:  # an image with no detected object stays padding, fully masked
                features[row, :k] = f[:k]
                boxes[row, :k] = b[:k]
                mask[row, :k] = True
            wh = self.detections.image_size(str(image_id))
            sizes[row] = wh if wh is not None else boxes[row, :k, 2:].max(axis=0, initial=1.0)
        source = self.detections.source if per_image else None
        return ObjectInput(features, boxes, mask, sizes, source)

    def _feature_width(self, image_ids: Sequence[str], features: Sequence[np.ndarray]) -> int:
        """The one width D of the images' object features (1 when none has objects); a
        second width is refused naming the detections file and the image."""
        pairs = zip(image_ids, features, strict=True)
        widths = [(str(i), f.shape[1]) for i, f in pairs if f.ndim == 2]
        first, dim = widths[0] if widths else ("", 1)
        for image_id, width in widths:
            if width != dim:
                raise DataError(
                    self.detections.source,
                    f"object features have {width} dimensions here and {dim} for "
                    f"{image_label(first)}: one detections file has one width",
                    image_label(image_id),
                )
        return dim

    def describe(self) -> dict[str, Any]:
        """Where the data came from (for run configs and fingerprints)."""
        return {"root": str(self.root), "gqa_dir": str(self.gqa_dir)}
