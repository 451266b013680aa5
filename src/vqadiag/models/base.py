"""The ``VQAModel`` interface: what every model (built-in or adapter) offers.

A diagnostic asks a model the same questions under changed inputs ("conditions":
only the relevant objects, only the irrelevant ones, one object left out, a
noisy question …). So a model takes

* a :class:`QuestionBatch` — question ids, texts, image ids and the raw question
  records (GQA records carry ``semantic`` programs and ``groups``, which the
  symbolic and prior models use), and
* a visual input — :class:`ObjectInput` (detector features + boxes + a per-question
  object mask, so a caller drops objects by masking them, without copying
  features) or :class:`PixelInput` (images, for pixel models),

and returns a :class:`ModelOutput`: answers, a probability distribution over its
answer vocabulary, and — where the model has it — attention over objects.
Models declare what they can do in :class:`Capabilities`; a diagnostic that
needs gradients or attention checks them first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

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
    and removed objects are False); ``image_sizes`` (B, 2) float32 width, height.
    """

    features: np.ndarray
    boxes: np.ndarray
    mask: np.ndarray
    image_sizes: np.ndarray

    def __post_init__(self) -> None:
        b, n = self.mask.shape
        if self.features.shape[:2] != (b, n) or self.boxes.shape != (b, n, 4):
            raise ValueError("features (B, N, D), boxes (B, N, 4) and mask (B, N) must agree")
        if self.image_sizes.shape != (b, 2):
            raise ValueError("image_sizes must have shape (B, 2)")

    def with_mask(self, mask: np.ndarray) -> ObjectInput:
        """The same objects seen through another mask (no feature copy)."""
        return ObjectInput(self.features, self.boxes, np.asarray(mask, bool), self.image_sizes)


@dataclass(frozen=True)
class PixelInput:
    """Image-based visual input: ``images`` (B, H, W, 3) uint8, for pixel models."""

    images: np.ndarray


@dataclass(frozen=True)
class ModelOutput:
    """Answers of a batch; ``probs`` (B, A) over ``answer_vocab``; ``attention`` (B, N)."""

    answers: list[str]
    probs: np.ndarray | None = None
    attention: np.ndarray | None = None

    def top_probs(self, answer_vocab: Sequence[str], k: int = 5) -> list[dict[str, float]]:
        """Per question, the ``k`` most probable answers as ``{answer: p}`` (prediction files)."""
        if self.probs is None:
            return [{} for _ in self.answers]
        top = np.argsort(-self.probs, axis=1)[:, :k]
        return [
            {answer_vocab[j]: float(self.probs[i, j]) for j in row} for i, row in enumerate(top)
        ]


@dataclass(frozen=True)
class Capabilities:
    """What a model can do; diagnostics check these before asking for them."""

    visual: str = "objects"  # "objects", "pixels" or "none" (blind models)
    object_masking: bool = True  # honours ObjectInput.mask
    attention: bool = False  # returns ModelOutput.attention
    gradients: bool = False  # supports object_gradients()
    probabilities: bool = True  # returns ModelOutput.probs
    extra: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class VQAModel(Protocol):
    """A model vqadiag can diagnose."""

    name: str
    capabilities: Capabilities
    answer_vocab: Sequence[str]

    def predict(self, batch: QuestionBatch, visual: ObjectInput | PixelInput | None) -> ModelOutput:
        """Answer every question of ``batch`` from ``visual`` (None for blind models)."""
        ...

    def fingerprint(self) -> str:
        """A content hash of weights and config: equal fingerprints give equal answers."""
        ...


@runtime_checkable
class GradientModel(VQAModel, Protocol):
    """A model that can give gradients of an answer's logit w.r.t. its object features."""

    def object_gradients(
        self, batch: QuestionBatch, visual: ObjectInput, answer_index: np.ndarray
    ) -> np.ndarray:
        """∂ logit[answer_index[b]] / ∂ features[b] → (B, N, D) (GradCAM input, SPEC.md §5)."""
        ...
