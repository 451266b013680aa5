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

from vqadiag.data.model_inputs.inputs import ObjectInput, PixelInput, QuestionBatch
from vqadiag.errors import DataError


@dataclass(frozen=True)
class ModelOutput:
    """Answers of a batch; ``probs`` (B, A) over ``answer_vocab``; ``attention`` (B, N);
    ``texts``: a generative model's raw text per question, before it became the answer."""

    answers: list[str]
    probs: np.ndarray | None = None
    attention: np.ndarray | None = None
    texts: list[str] | None = None

    def top_probs(self, answer_vocab: Sequence[str], k: int = 5) -> list[dict[str, float]]:
        """Per question, the ``k`` most probable answers as ``{answer: p}`` (prediction files)."""
        if self.probs is None:
            return [{} for _ in self.answers]
        top = np.argsort(-self.probs, axis=1)[:, :k]
        return [
            {answer_vocab[j]: float(self.probs[i, j]) for j in row} for i, row in enumerate(top)
        ]


#: what a model's visual input can be: detector objects, images, or nothing (blind)
VISUAL_INPUTS = ("objects", "pixels", "none")


@dataclass(frozen=True)
class Capabilities:
    """What a model can do; suites check these flags (``Suite.requires``), never names.

    ``visual``: the input it reads, "objects", "pixels" or "none" (blind);
    ``object_masking``: honours ``ObjectInput.mask``; ``attention``: returns
    ``ModelOutput.attention``; ``gradients``: supports ``object_gradients()``;
    ``probabilities``: returns ``ModelOutput.probs``; ``generative_text``: answers
    are generated text (post-processed to a short answer); ``reruns``: it can be
    asked again under a changed input (False for prediction files, which hold the
    answers of one plain run); ``text_only``: it can be asked with no image at all
    (``predict(batch, None)``: a chat template's turn of text alone), which its no-image
    condition then does (docs/diagnose.md, "The model without its image").
    """

    visual: str = "objects"
    object_masking: bool = True
    attention: bool = False
    gradients: bool = False
    probabilities: bool = True
    generative_text: bool = False
    reruns: bool = True
    text_only: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.visual not in VISUAL_INPUTS:
            raise ValueError(
                f"Capabilities.visual must be one of {', '.join(VISUAL_INPUTS)}, "
                f"got {self.visual!r}"
            )

    @property
    def object_input(self) -> bool:
        """Reads detector objects (a condition can remove objects from its input)."""
        return self.visual == "objects"

    @property
    def pixel_input(self) -> bool:
        """Reads images."""
        return self.visual == "pixels"

    @property
    def blind(self) -> bool:
        """Reads no visual input."""
        return self.visual == "none"

    @property
    def sees_features_or_nothing(self) -> bool:
        """Its visual input can be fed from a data folder's detector objects (or none)."""
        return self.visual in ("objects", "none")

    def to_json(self) -> dict[str, Any]:
        """The ``model.capabilities`` object of ``results.json``."""
        return {
            "visual": self.visual,
            "object_masking": self.object_masking,
            "attention": self.attention,
            "gradients": self.gradients,
            "probabilities": self.probabilities,
            "pixel_input": self.pixel_input,
            "generative_text": self.generative_text,
            "reruns": self.reruns,
            "text_only": self.text_only,
        }


#: a generative model that reads pixels and answers in text (chat VLMs, served models,
#: harness answers): no object masking, attention, gradients or probabilities
TEXT_GENERATOR = Capabilities(
    visual="pixels",
    object_masking=False,
    attention=False,
    gradients=False,
    probabilities=False,
    generative_text=True,
)


def pixel_images(batch: QuestionBatch, visual: ObjectInput | PixelInput | None) -> list[np.ndarray]:
    """The batch's images as (H, W, 3) uint8 arrays, one per question, checked: what a
    model that reads whole images (ViLT / BLIP, chat VLMs, served models) is given."""
    if not isinstance(visual, PixelInput):
        raise TypeError("this model needs PixelInput (images)")
    images = [np.asarray(im) for im in visual.images]
    if any(im.ndim != 3 or im.shape[-1] != 3 or im.dtype != np.uint8 for im in images):
        raise ValueError("PixelInput.images must be (H, W, 3) uint8 arrays")
    if len(images) != len(batch):
        raise ValueError(f"{len(images)} images for {len(batch)} questions")
    return images


@runtime_checkable
class VQAModel(Protocol):
    """A model vqadiag can diagnose.

    Optional, found by name: ``predict_stream(batch, visual)`` (answers as they arrive,
    served models) and ``prepare_pixels(pixel_input)`` → the input ``predict`` will be
    given, built in the probe runner's data-path workers (the pixel model's box encoder
    cuts its crops there; ``predict`` must still accept a plain ``PixelInput``)."""

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
        """∂ logit[answer_index[b]] / ∂ features[b] → (B, N, D) (GradCAM input, protocols.md §5)."""
        ...


def check_model(model: Any) -> None:
    """One :class:`DataError` line naming what is missing when ``model`` is not a model
    vqadiag can diagnose (:class:`VQAModel`): a class instead of its instance, a function,
    a torch module, None … were attribute errors from deep inside the run."""
    is_class = isinstance(model, type)
    got = f"a class ({model.__name__}), not an instance" if is_class else type(model).__name__
    missing = [
        what
        for what, ok in (
            ("name", isinstance(getattr(model, "name", None), str)),
            (
                "capabilities (a Capabilities)",
                isinstance(getattr(model, "capabilities", None), Capabilities),
            ),
            ("answer_vocab", getattr(model, "answer_vocab", None) is not None),
            ("predict()", callable(getattr(model, "predict", None))),
            ("fingerprint()", callable(getattr(model, "fingerprint", None))),
        )
        if not ok or is_class
    ]
    if missing:
        raise DataError(
            None,
            "a model is a run folder, an adapter spec (KIND:SPEC) or an object with "
            f"name, capabilities, answer_vocab, predict() and fingerprint(); got {got}, "
            f"without {', '.join(missing)}",
        )


def check_output(out: Any, questions: int, model: Any) -> None:
    """One :class:`DataError` line naming the model and what is wrong when its
    ``predict`` gave no :class:`ModelOutput` of one text answer per question, with
    probabilities (when given) finite, one row per question and one column per answer of
    its vocabulary: an int answer was stored as the answer, NaN probabilities filled the
    sufficiency figures, one answer short was an IndexError."""
    name = getattr(model, "name", type(model).__name__)
    if not isinstance(out, ModelOutput):
        raise DataError(
            None, f"model {name!r}: predict returned {type(out).__name__}, not a ModelOutput"
        )
    if len(out.answers) != questions:
        raise DataError(
            None, f"model {name!r}: {len(out.answers)} answers for {questions} questions"
        )
    wrong = next((a for a in out.answers if not isinstance(a, str)), None)
    if wrong is not None:
        raise DataError(
            None, f"model {name!r}: an answer is {type(wrong).__name__} {wrong!r}, not text"
        )
    if out.probs is not None:
        shape = (questions, len(model.answer_vocab))
        probs = np.asarray(out.probs)
        if probs.shape != shape:
            raise DataError(
                None,
                f"model {name!r}: probs of shape {probs.shape}, not (questions, answers) = {shape}",
            )
        if not np.isfinite(probs).all():
            raise DataError(None, f"model {name!r}: probs hold NaN or infinite values")
