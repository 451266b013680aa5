"""Answers from a harness run on exported conditions (docs/harnesses.md).

``vqadiag conditions export`` writes every input a diagnose run would show a model:
one *item* per distinct (question text, image pixels) pair, whichever condition asked
for it. The item's id is :func:`item_id` of the question and the pixels' digest, so it
names exactly what the model is shown. A harness (lmms-eval, VLMEvalKit, LLaVA's
``model_vqa``, your own loop) answers the items. :class:`ConditionAnswersModel` then
plays the model in ``diagnose``: for each probe it computes the item id of the question
and the condition's pixels it is given, and returns the harness's answer for that item,
after the answer extraction of docs/vlms.md. A probe with no answered item (another
``--max-questions``, fill, BQD … than at export) is an error naming the question.

:class:`RecordingModel` is the other half: ``conditions export`` runs the suites with
it, and it records each (question, image) it is asked instead of answering.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from vqadiag.data.formats.predictions import read_predictions
from vqadiag.data.io.jsonio import read_json
from vqadiag.errors import DataError, record_label
from vqadiag.models.adapters.generated_answer import EXTRACTIONS, Generation
from vqadiag.models.base import (
    TEXT_GENERATOR,
    ModelOutput,
    ObjectInput,
    PixelInput,
    QuestionBatch,
    pixel_images,
)
from vqadiag.models.model_args import ModelArgs

MANIFEST = "manifest.json"
MANIFEST_KIND = "vqadiag.conditions"


def pixel_digest(image: np.ndarray) -> str:
    """SHA-256 (hex) of an (H, W, 3) uint8 image: its shape and its bytes."""
    array = np.ascontiguousarray(image, dtype=np.uint8)
    digest = hashlib.sha256(repr(array.shape).encode())
    digest.update(memoryview(array).cast("B"))
    return digest.hexdigest()


def item_id(question: str, image_digest: str) -> str:
    """The id of one exported input: 16 hex of SHA-256 over the question and the pixels."""
    return hashlib.sha256(f"{question}\0{image_digest}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Item:
    """One exported input: the question and the pixels a condition shows."""

    id: str
    index: int
    question: str
    image_digest: str


class RecordingModel:
    """Records each (question, image) it is asked; answers nothing useful (empty text).

    ``sink(item, image)`` is called once per new item (the export writes the image
    there), so the images are not kept in memory."""

    name: ClassVar[str] = "conditions-export"
    input_size: ClassVar[None] = None
    capabilities = TEXT_GENERATOR
    answer_vocab: ClassVar[list[str]] = []

    def __init__(self, sink: Callable[[Item, np.ndarray], None] | None = None) -> None:
        self.items: dict[str, Item] = {}
        self.sink = sink

    def fingerprint(self) -> str:
        return "conditions-export"

    def predict(self, batch: QuestionBatch, visual: ObjectInput | PixelInput | None) -> ModelOutput:
        images = pixel_images(batch, visual)
        for question, image in zip(batch.questions, images, strict=True):
            digest = pixel_digest(image)
            key = item_id(question, digest)
            if key not in self.items:
                item = self.items[key] = Item(key, len(self.items), question, digest)
                if self.sink is not None:
                    self.sink(item, image)
        return ModelOutput([""] * len(batch), None, None, [""] * len(batch))


def read_manifest(folder: Path) -> dict[str, Any]:
    """The ``manifest.json`` of an export folder, checked."""
    path = folder / MANIFEST
    if not path.is_file():
        raise DataError(folder, f"no {MANIFEST}: not a folder written by vqadiag conditions export")
    manifest = read_json(path)
    if not isinstance(manifest, dict) or manifest.get("kind") != MANIFEST_KIND:
        raise DataError(path, f"expected a {MANIFEST_KIND!r} manifest")
    items = manifest.get("items")
    if not isinstance(items, list):
        raise DataError(path, "missing field 'items'")
    seen: dict[str, set[str]] = {"index": set(), "question_id": set()}
    for n, item in enumerate(items):
        keys = ("question_id", "index", "question")
        if not isinstance(item, dict) or not all(k in item for k in keys):
            raise DataError(path, "an item needs question_id, index and question", f"item {n}")
        for key, values in seen.items():
            value = str(item[key])
            if value in values:
                raise DataError(path, f"{key} {value!r} appears twice", f"item {n}")
            values.add(value)
    return manifest


def manifest_generation(manifest: Mapping[str, Any], path: Path, extraction: str) -> Generation:
    """The prompt and length the export asked for, with ``extraction``."""
    try:
        return Generation(
            prompt=str(manifest.get("prompt", Generation.prompt)),
            extraction=extraction,
            max_new_tokens=int(manifest.get("max_new_tokens", Generation.max_new_tokens)),
        )
    except (TypeError, ValueError) as err:
        raise DataError(path, f"prompt / max_new_tokens: {err}") from None


class ConditionAnswersModel:
    """A harness's answers to exported conditions, as a model (module docstring)."""

    name: ClassVar[str] = "harness"
    input_size: ClassVar[None] = None
    capabilities = TEXT_GENERATOR
    answer_vocab: ClassVar[list[str]] = []

    def __init__(
        self, answers: str | Path, conditions: str | Path, *, extraction: str = "short"
    ) -> None:
        self.answers_path = Path(answers)
        self.folder = Path(conditions)
        self.manifest = read_manifest(self.folder)
        self.generation = manifest_generation(self.manifest, self.folder / MANIFEST, extraction)
        by_index = {str(it["index"]): str(it["question_id"]) for it in self.manifest["items"]}
        known = set(by_index.values())
        self.texts: dict[str, str] = {}
        given_as: dict[str, str] = {}
        for key, prediction in read_predictions(self.answers_path).items():
            item = key if key in known else by_index.get(key)
            if item is None:
                raise DataError(
                    self.answers_path,
                    f"not an item of the export {str(self.folder)!r}",
                    record_label(key),
                )
            if item in given_as:
                raise DataError(
                    self.answers_path, f"answers item {item} twice: by {given_as[item]!r} and "
                    f"by {key!r} (its id and its index)", record_label(key),
                )  # fmt: skip
            given_as[item] = key
            self.texts[item] = prediction.answer
        self._check_answers()
        missing = [
            it["question_id"]
            for it in self.manifest["items"]
            if it["question_id"] not in self.texts
        ]
        if missing:
            raise DataError(
                self.answers_path,
                f"{len(missing)} of {len(known)} exported items have no answer "
                f"(first: {missing[0]}); answer every item of {self.folder / MANIFEST}",
            )
        self._fingerprint: str | None = None

    def _check_answers(self) -> None:
        """Refuse answers that are not a harness's answers: empty ones (a row the harness
        failed on: VLMEvalKit leaves its prediction empty) and, when every answer is the
        prompt the export wrote for its item, the export's own question file."""
        empty = [item for item, text in self.texts.items() if not text.strip()]
        if empty:
            raise DataError(
                self.answers_path, f"{len(empty)} of {len(self.texts)} answers are empty "
                f"(first: item {empty[0]}): rows the harness failed on? answer them again",
            )  # fmt: skip
        prompts = {
            str(it["question_id"]): self.generation.ask(str(it.get("question", "")))
            for it in self.manifest["items"]
        }
        if self.texts and all(
            text.strip() == prompts.get(item, "").strip() for item, text in self.texts.items()
        ):  # fmt: skip
            raise DataError(
                self.answers_path, "every answer is the prompt the export wrote for its item: "
                "this is the export's question file, not the harness's answers",
            )  # fmt: skip

    @classmethod
    def from_args(cls, answers: str, args: Mapping[str, Any] | None) -> ConditionAnswersModel:
        """``files:HARNESS_OUTPUT`` with ``--model-args conditions=EXPORT_DIR`` (and
        optionally ``extraction``)."""
        reader = ModelArgs(args, "files")
        folder = reader.text("conditions", None)
        extraction = reader.choice("extraction", "short", EXTRACTIONS)
        reader.finish()
        if not folder:
            raise DataError("--model-args", "files: takes settings only with conditions=EXPORT_DIR")
        return cls(answers, folder, extraction=extraction)

    def settings(self) -> dict[str, Any]:
        """What ``results.json`` records under ``model.settings``."""
        return {
            "adapter": "files",
            "answers": str(self.answers_path.resolve()),
            "conditions": str(self.folder.resolve()),
            **self.generation.to_json(),
        }

    def fingerprint(self) -> str:
        """SHA-256 (16 hex) of the answers file, the manifest and the extraction."""
        if self._fingerprint is None:
            digest = hashlib.sha256(self.generation.extraction.encode())
            for path in (self.answers_path, self.folder / MANIFEST):
                digest.update(path.read_bytes())
            self._fingerprint = digest.hexdigest()[:16]
        return self._fingerprint

    def predict(self, batch: QuestionBatch, visual: ObjectInput | PixelInput | None) -> ModelOutput:
        """The harness's answer to each (question, pixels) of the batch."""
        images = pixel_images(batch, visual)
        texts = []
        for qid, question, image in zip(batch.question_ids, batch.questions, images, strict=True):
            key = item_id(question, pixel_digest(image))
            text = self.texts.get(key)
            if text is None:
                raise DataError(
                    self.answers_path,
                    f"no answer for question {qid} as this run shows it (item {key}): run "
                    "diagnose with the options the conditions were exported with "
                    f"({self.folder / MANIFEST}, 'options')",
                )
            texts.append(text)
        return ModelOutput([self.generation.answer(t) for t in texts], None, None, texts)
