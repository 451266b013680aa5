"""Prior (blind) model: the most frequent training answer, globally or per question group.

``mode="global"``: every question gets ``argmax_a c(a)`` where ``c(a)`` counts the
training questions with answer ``a``; ``probs`` = ``c(a) / Σ c`` (the training answer
distribution). ``mode="group"``: the same within the question's GQA ``groups.global``
(the "Question Prior" of GQA, Hudson & Manning 2019, docs/protocols.md §2.3: per-global-group prior;
questions without a global group, e.g. yes/no questions, form their own group);
``mode="type"``: within ``types.detailed``. A group not seen in training falls back to
the global distribution. The answer vocabulary is ordered by global frequency (ties
alphabetical) and ties inside a group go to the answer first in that order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import orjson

from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError
from vqadiag.models.base import Capabilities, ModelOutput, ObjectInput, PixelInput, QuestionBatch
from vqadiag.models.checkpoint import CONFIG, load_checkpoint, save_checkpoint
from vqadiag.models.vocab import AnswerVocab

MODES = ("global", "group", "type")


def group_key(record: Mapping[str, Any], mode: str) -> str | None:
    """The key a question is grouped by: ``None`` (global), ``groups.global`` or
    ``types.detailed`` (``None`` when the record lacks it)."""
    if mode == "global":
        return None
    field, sub = ("groups", "global") if mode == "group" else ("types", "detailed")
    value = record.get(field)
    return value.get(sub) if isinstance(value, Mapping) else None


class PriorModel:
    """Most frequent training answer (of the question's group); ignores the image."""

    name: ClassVar[str] = "prior"
    capabilities: ClassVar[Capabilities] = Capabilities(
        visual="none", object_masking=False, attention=False, gradients=False
    )

    def __init__(
        self, answers: list[str], groups: list[str | None], counts: np.ndarray, mode: str
    ) -> None:
        """``counts`` (1 + G, A): row 0 all training questions, row 1 + g group ``groups[g]``."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.answer_vocab = list(answers)
        self.groups = list(groups)
        self.mode = mode
        self.counts = np.asarray(counts, dtype=np.float64)
        self._row = {g: i + 1 for i, g in enumerate(self.groups)}
        totals = self.counts.sum(axis=1, keepdims=True)
        self.probs = self.counts / np.maximum(totals, 1.0)
        self._fingerprint: str | None = None

    @classmethod
    def train(
        cls,
        data: GQAData,
        *,
        split: str = "train",
        epochs: int | None = None,
        seed: int = 0,
        progress: bool = True,
        mode: str = "group",
        **options: Any,
    ) -> PriorModel:
        """Count the answers of ``split`` (``epochs``, ``seed``, ``progress`` are ignored)."""
        if options:
            raise ValueError(f"unknown options for the prior model: {sorted(options)}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        questions = data.questions(split)
        if not questions:
            raise DataError(data.questions_path(split), "no questions to train on")
        vocab = AnswerVocab.build(r["answer"] for r in questions.values())
        keys = [group_key(r, mode) for r in questions.values()]
        groups = (
            [] if mode == "global" else sorted(set(keys), key=lambda k: (k is not None, k or ""))
        )
        row = {g: i + 1 for i, g in enumerate(groups)}
        counts = np.zeros((1 + len(groups), len(vocab)), dtype=np.float64)
        ans = vocab.encode([r["answer"] for r in questions.values()])
        np.add.at(counts[0], ans, 1.0)
        if groups:
            np.add.at(counts, ([row[k] for k in keys], ans), 1.0)
        return cls(vocab.answers, groups, counts, mode)

    @property
    def options(self) -> dict[str, Any]:
        """The training options (``{"mode": ...}``), as reported by ``vqadiag train``."""
        return {"mode": self.mode}

    def distribution(self, record: Mapping[str, Any]) -> np.ndarray:
        """The answer distribution used for a question (its group's, else the global one)."""
        return self.probs[self._row.get(group_key(record, self.mode), 0)]

    def predict(
        self, batch: QuestionBatch, visual: ObjectInput | PixelInput | None = None
    ) -> ModelOutput:
        """Per question: ``probs`` = its group's training distribution, answer = arg-max."""
        rows = [self._row.get(group_key(batch.record(i), self.mode), 0) for i in range(len(batch))]
        probs = self.probs[np.asarray(rows, dtype=np.int64)].astype(np.float32)
        best = probs.argmax(axis=1) if len(rows) else np.zeros(0, dtype=np.int64)
        return ModelOutput([self.answer_vocab[j] for j in best], probs, None)

    def save(self, run_dir: str | Path) -> None:
        """``config.json`` {model, mode, groups}, weights {"counts"}, ``answers.json``."""
        config = {"model": self.name, "mode": self.mode, "groups": self.groups}
        save_checkpoint(run_dir, config, {"counts": self.counts}, self.answer_vocab)

    @classmethod
    def load(cls, run_dir: str | Path) -> PriorModel:
        """Read a run folder written by :meth:`save`."""
        config, tensors, answers = load_checkpoint(run_dir)
        path = Path(run_dir) / CONFIG
        counts = tensors.get("counts")
        groups = config.get("groups")
        mode = config.get("mode")
        if mode not in MODES or not isinstance(groups, list):
            raise DataError(path, f"not a prior config (mode {mode!r}, groups {type(groups)})")
        if counts is None or counts.shape != (1 + len(groups), len(answers)):
            shape = None if counts is None else counts.shape
            raise DataError(
                Path(run_dir) / "weights.safetensors",
                f"'counts' must have shape {(1 + len(groups), len(answers))}, got {shape}",
            )
        return cls(answers, groups, counts, mode)

    def fingerprint(self) -> str:
        """SHA-256 (16 hex chars) over mode, groups, answers and counts."""
        if self._fingerprint is None:
            head = {"model": self.name, "mode": self.mode, "groups": self.groups}
            digest = hashlib.sha256(orjson.dumps([head, self.answer_vocab]))
            digest.update(np.ascontiguousarray(self.counts).tobytes())
            self._fingerprint = digest.hexdigest()[:16]
        return self._fingerprint
