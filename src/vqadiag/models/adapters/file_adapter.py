"""Prediction files as a model, for users whose model runs elsewhere.

:class:`PredictionFileModel` holds one prediction file per *condition* (``"plain"``
at least: the ordinary run; a diagnostic may add e.g. ``"relevant"``, ``"irrelevant"``
for its object-removal runs) in any shape :func:`~vqadiag.data.formats.predictions.read_predictions`
reads. :meth:`~PredictionFileModel.predict` looks answers up by question id in the
file of the current condition (``with_condition`` switches); a question without a
prediction raises :class:`~vqadiag.errors.DataError` naming the file and the question.
The answer vocabulary is every answer (and every answer with a probability) in any
file, sorted; ``probs`` is the file's distribution where it has one, else one-hot.
It never sees the image: ``Capabilities(visual="none", object_masking=False)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from vqadiag.data.formats.predictions import Prediction, read_predictions
from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError, record_label
from vqadiag.models.base import Capabilities, ModelOutput, ObjectInput, PixelInput, QuestionBatch
from vqadiag.models.checkpoint import CONFIG, load_checkpoint, save_checkpoint

PLAIN = "plain"


class PredictionFileModel:
    """Answers read from prediction files, one per condition."""

    name: ClassVar[str] = "files"
    #: answers are looked up by question id, not computed from the input: two questions
    #: with one input may have different answers (docs/diagnose.md, "No request asked
    #: twice")
    deterministic: ClassVar[bool] = False

    def __init__(
        self,
        files: Mapping[str, str | Path] | str | Path,
        condition: str = PLAIN,
        *,
        _loaded: Mapping[str, dict[str, Prediction]] | None = None,
    ) -> None:
        """``files``: ``{condition: path}`` or one path (the ``"plain"`` condition)."""
        mapping = {PLAIN: files} if isinstance(files, (str, Path)) else dict(files)
        if not mapping:
            raise ValueError("give at least one prediction file")
        self.files = {c: Path(p) for c, p in mapping.items()}
        self.predictions = (
            dict(_loaded) if _loaded else {c: read_predictions(p) for c, p in self.files.items()}
        )
        if condition not in self.files:
            raise ValueError(f"no prediction file for condition {condition!r}")
        self.condition = condition
        vocab = set()
        has_probs = True
        for preds in self.predictions.values():
            for p in preds.values():
                vocab.add(p.answer)
                if p.probs is None:
                    has_probs = False
                else:
                    vocab.update(p.probs)
        self.answer_vocab = sorted(vocab)
        self._index = {a: i for i, a in enumerate(self.answer_vocab)}
        self.capabilities = Capabilities(
            visual="none",
            object_masking=False,
            attention=False,
            gradients=False,
            probabilities=has_probs,
            reruns=False,
            extra={"conditions": sorted(self.files)},
        )
        self._fingerprint: str | None = None

    def missing_answers(self, qids: Sequence[str]) -> list[str]:
        """The ids among ``qids`` that the current condition's file does not answer."""
        known = self.predictions[self.condition]
        return [q for q in qids if q not in known]

    @property
    def conditions(self) -> list[str]:
        """The conditions that have a prediction file."""
        return sorted(self.files)

    def with_condition(self, condition: str) -> PredictionFileModel:
        """The same files answering from ``condition`` (no file is re-read)."""
        return PredictionFileModel(self.files, condition, _loaded=self.predictions)

    @classmethod
    def train(cls, data: GQAData, **_: Any) -> PredictionFileModel:
        """Prediction files are not trained: always raises ``ValueError``."""
        raise ValueError("the prediction-file model is built from files, not trained")

    def predict(
        self,
        batch: QuestionBatch,
        visual: ObjectInput | PixelInput | None = None,
        condition: str | None = None,
    ) -> ModelOutput:
        """Look each question id up in the file of ``condition`` (default: the current one)."""
        cond = condition or self.condition
        if cond not in self.files:
            raise ValueError(f"no prediction file for condition {cond!r}")
        preds, path = self.predictions[cond], self.files[cond]
        probs = np.zeros((len(batch), len(self.answer_vocab)), dtype=np.float32)
        answers = []
        for i, qid in enumerate(batch.question_ids):
            pred = preds.get(str(qid))
            if pred is None:
                raise DataError(path, "no prediction for this question", record_label(qid))
            answers.append(pred.answer)
            if pred.probs is None:
                probs[i, self._index[pred.answer]] = 1.0
            else:
                for answer, p in pred.probs.items():
                    probs[i, self._index[answer]] = p
        return ModelOutput(answers, probs, None)

    def save(self, run_dir: str | Path) -> None:
        """A run folder pointing at the files (absolute paths; no weights)."""
        files = {c: str(p.resolve()) for c, p in self.files.items()}
        config = {"model": self.name, "files": files, "condition": self.condition}
        save_checkpoint(run_dir, config, {}, self.answer_vocab)

    @classmethod
    def load(cls, run_dir: str | Path) -> PredictionFileModel:
        """Re-read the files a run folder written by :meth:`save` points at."""
        config, _, _ = load_checkpoint(run_dir)
        files = config.get("files")
        if not isinstance(files, dict) or not files:
            raise DataError(Path(run_dir) / CONFIG, "'files' must map conditions to paths")
        condition = config.get("condition", PLAIN)
        if condition not in files:
            raise DataError(Path(run_dir) / CONFIG, f"no file for condition {condition!r}")
        return cls(files, condition)

    def fingerprint(self) -> str:
        """SHA-256 (16 hex chars) over condition names and file contents."""
        if self._fingerprint is None:
            digest = hashlib.sha256()
            for cond in sorted(self.files):
                digest.update(cond.encode())
                digest.update(self.files[cond].read_bytes())
            self._fingerprint = digest.hexdigest()[:16]
        return self._fingerprint


def load_files(spec: str, args: Mapping[str, Any] | None = None) -> Any:
    """``--model files:PATH``: a prediction file of the plain questions
    (:class:`PredictionFileModel`), or with ``--model-args conditions=EXPORT_DIR`` a
    harness's answers to exported conditions
    (:class:`vqadiag.models.adapters.condition_answers.ConditionAnswersModel`)."""
    if not args:
        return PredictionFileModel(spec)
    from vqadiag.models.adapters.condition_answers import ConditionAnswersModel

    return ConditionAnswersModel.from_args(spec, args)
