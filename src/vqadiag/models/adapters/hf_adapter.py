"""Hugging Face ``transformers`` VQA models (ViLT, BLIP) behind the ``VQAModel`` interface.

The model and its processor are read from a LOCAL folder written by
``save_pretrained`` (``local_files_only=True``: the hub is never contacted):

* **ViLT** (``ViltForQuestionAnswering``, a classifier over ``config.id2label``):
  the answer is ``id2label[argmax logits]``; ``probs`` (B, A) over
  ``answer_vocab = [id2label[0], …, id2label[A−1]]`` is ``softmax(logits)``
  (``probs="softmax"``, a distribution) or ``sigmoid(logits)`` (``probs="sigmoid"``,
  the per-answer scores ViLT's VQA head is trained for with binary cross-entropy);
* **BLIP** (``BlipForQuestionAnswering``, a generator): the answer is the decoded
  text of ``generate`` (special tokens skipped, stripped); no ``probs``, empty vocabulary.

Input is :class:`~vqadiag.models.base.PixelInput`: the stored images at their own size
(the processor resizes them); conditions replace pixels (docs/diagnose.md, "Images").

A run folder written by :meth:`HFModel.save` only points at the model folder:
``config.json`` = ``{"model": "hf", "path": <absolute model folder>, "kind",
"probs", "batch_size", "max_new_tokens"}`` (plus an empty weights file and the
answer list, so it reads like every other checkpoint). :meth:`HFModel.load`
accepts such a run folder or the ``save_pretrained`` folder itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from vqadiag.data.io.jsonio import read_json
from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError
from vqadiag.models.base import (
    Capabilities,
    ModelOutput,
    ObjectInput,
    PixelInput,
    QuestionBatch,
    pixel_images,
)
from vqadiag.models.checkpoint import CONFIG, folder_digest, load_checkpoint, save_checkpoint
from vqadiag.models.model_args import ModelArgs

NAME = "hf"
KINDS = {"vilt": "ViltForQuestionAnswering", "blip": "BlipForQuestionAnswering"}


def _kind_of(model_dir: Path) -> str | None:
    """``"vilt"`` or ``"blip"`` from the folder's transformers ``config.json``; None for
    any other model."""
    path = model_dir / CONFIG
    config = read_json(path)
    if not isinstance(config, dict):
        raise DataError(path, "expected a JSON object")
    arch = [str(a) for a in config.get("architectures") or []]
    for kind, cls_name in KINDS.items():
        if cls_name in arch:
            return kind
    model_type = str(config.get("model_type", ""))
    return model_type if model_type in KINDS else None


def load_hf(spec: str, args: Mapping[str, Any] | None = None) -> Any:
    """``--model hf:DIR``: a ViLT / BLIP folder gives :class:`HFModel` (settings ``probs``,
    ``batch_size``, ``max_new_tokens``, ``device``); any other folder a generative chat
    model, :class:`vqadiag.models.adapters.chat_vlm.ChatVLM` (docs/vlms.md)."""
    folder = Path(spec)
    if not (folder / CONFIG).is_file():
        raise DataError(folder, "no transformers config.json in the model folder")
    if _kind_of(folder) is None:
        from vqadiag.models.adapters.chat_vlm import ChatVLM

        return ChatVLM.from_args(folder, args)
    reader = ModelArgs(args, "hf")
    probs = reader.choice("probs", "softmax", ("softmax", "sigmoid"))
    batch_size = reader.integer("batch_size", 32)
    max_new_tokens = reader.integer("max_new_tokens", 10)
    device = reader.text("device", "cpu") or "cpu"
    reader.finish()
    return HFModel(
        folder, probs=probs, batch_size=batch_size, max_new_tokens=max_new_tokens, device=device
    )


def _sigmoid(logits: Any, dim: int = -1) -> Any:
    """``1 / (1 + e^−x)`` element-wise (``dim`` is ignored; same call shape as softmax)."""
    return logits.sigmoid()


class HFModel:
    """A local ViLT / BLIP question-answering model (see the module docstring)."""

    name: ClassVar[str] = NAME

    def __init__(
        self,
        model_dir: str | Path,
        *,
        probs: str = "softmax",
        batch_size: int = 32,
        max_new_tokens: int = 10,
        device: str = "cpu",
    ) -> None:
        import torch
        import transformers

        self.model_dir = Path(model_dir).resolve()
        if not (self.model_dir / CONFIG).is_file():
            raise DataError(self.model_dir, "no transformers config.json in the model folder")
        if probs not in ("softmax", "sigmoid"):
            raise ValueError("probs must be 'softmax' or 'sigmoid'")
        kind = _kind_of(self.model_dir)
        if kind is None:
            raise DataError(self.model_dir / CONFIG, "not a ViLT or BLIP question-answering model")
        self.kind = kind
        self.probs_mode = probs
        self.batch_size = int(batch_size)
        self.max_new_tokens = int(max_new_tokens)
        self.device = device
        model_cls = getattr(transformers, KINDS[self.kind])
        transformers.utils.logging.disable_progress_bar()  # vqadiag draws its own bars
        try:
            self.processor = transformers.AutoProcessor.from_pretrained(
                str(self.model_dir), local_files_only=True
            )
            self.model = model_cls.from_pretrained(str(self.model_dir), local_files_only=True)
        except (OSError, ValueError, KeyError) as err:
            raise DataError(self.model_dir, f"cannot load the {self.kind} model: {err}") from None
        self.model.eval().to(device)
        self._torch = torch
        if self.kind == "vilt":
            id2label = self.model.config.id2label
            self.answer_vocab: list[str] = [str(id2label[i]) for i in range(len(id2label))]
        else:
            self.answer_vocab = []
        self.capabilities = Capabilities(
            visual="pixels",
            object_masking=False,
            attention=False,
            gradients=False,
            probabilities=self.kind == "vilt",
            extra={"hf_kind": self.kind},
        )
        self._fingerprint: str | None = None

    # -- the model contract -----------------------------------------------------------
    @classmethod
    def train(
        cls,
        data: GQAData,
        *,
        split: str = "train",
        epochs: int | None = None,
        seed: int = 0,
        progress: bool = True,
        **options: Any,
    ) -> HFModel:
        """Not supported: fine-tune with ``transformers`` and load the saved folder."""
        raise DataError(
            data.root,
            "the 'hf' model cannot be trained by vqadiag; fine-tune it with transformers, "
            "save_pretrained() it and load that folder",
        )

    def run_config(self) -> dict[str, Any]:
        """The ``config.json`` of a run folder pointing at this model."""
        return {
            "model": NAME,
            "path": str(self.model_dir),
            "kind": self.kind,
            "probs": self.probs_mode,
            "batch_size": self.batch_size,
            "max_new_tokens": self.max_new_tokens,
        }

    def save(self, run_dir: Path) -> None:
        """Write a run folder whose ``config.json`` points at the model folder."""
        save_checkpoint(run_dir, self.run_config(), {}, self.answer_vocab)

    @classmethod
    def load(cls, run_dir: Path, *, device: str = "cpu") -> HFModel:
        """Load from a run folder written by :meth:`save` or a ``save_pretrained`` folder."""
        folder = Path(run_dir)
        config_path = folder / CONFIG
        if not config_path.is_file():
            raise DataError(folder, "no config.json (not a run folder nor a transformers model)")
        config = read_json(config_path)
        if isinstance(config, dict) and config.get("model") == NAME:
            config, _, _ = load_checkpoint(folder)
            if "path" not in config:
                raise DataError(config_path, "missing field 'path' (the model folder)")
            path = Path(str(config["path"]))
            if not path.is_absolute():
                path = folder / path
            if not path.is_dir():
                raise DataError(config_path, f"model folder {str(path)!r} not found")
            return cls(
                path,
                probs=str(config.get("probs", "softmax")),
                batch_size=int(config.get("batch_size", 32)),
                max_new_tokens=int(config.get("max_new_tokens", 10)),
                device=device,
            )
        return cls(folder, device=device)

    def fingerprint(self) -> str:
        """SHA-256 (16 hex) over the settings and the content of every file of the model
        folder (not its location: a copied folder has the same fingerprint)."""
        if self._fingerprint is None:
            settings = {k: v for k, v in self.run_config().items() if k != "path"}
            self._fingerprint = folder_digest(self.model_dir, settings)
        return self._fingerprint

    # -- prediction -------------------------------------------------------------------
    def predict(self, batch: QuestionBatch, visual: ObjectInput | PixelInput | None) -> ModelOutput:
        """Answer from pixels, ``batch_size`` questions per forward pass (module docstring)."""
        images = pixel_images(batch, visual)
        answers: list[str] = []
        probs: list[np.ndarray] = []
        for start in range(0, len(batch), max(self.batch_size, 1)):
            stop = start + self.batch_size
            inputs = self._encode(images[start:stop], list(batch.questions[start:stop]))
            if self.kind == "vilt":
                a, p = self._classify(inputs)
                answers += a
                probs.append(p)
            else:
                answers += self._generate(inputs)
        if self.kind == "vilt":
            stacked = np.concatenate(probs) if probs else np.zeros((0, len(self.answer_vocab)))
            return ModelOutput(answers, stacked.astype(np.float32), None)
        return ModelOutput(answers, None, None)

    def _encode(self, images: list[np.ndarray], questions: list[str]) -> Mapping[str, Any]:
        max_length = getattr(self.model.config, "max_position_embeddings", None)
        if self.kind == "blip":
            max_length = getattr(self.model.config.text_config, "max_position_embeddings", None)
        enc = self.processor(
            images=images,
            text=questions,
            return_tensors="pt",
            padding=True,
            truncation=max_length is not None,
            max_length=max_length,
        )
        return {k: v.to(self.device) for k, v in enc.items()}

    def _classify(self, inputs: Mapping[str, Any]) -> tuple[list[str], np.ndarray]:
        torch = self._torch
        with torch.no_grad():
            logits = self.model(**inputs).logits.float()
        squash = torch.softmax if self.probs_mode == "softmax" else _sigmoid
        p = squash(logits, dim=-1)
        top = logits.argmax(dim=-1).tolist()
        return [self.answer_vocab[i] for i in top], p.cpu().numpy()

    def _generate(self, inputs: Mapping[str, Any]) -> list[str]:
        torch = self._torch
        with torch.no_grad():
            out = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens)
        texts = self.processor.batch_decode(out, skip_special_tokens=True)
        return [t.strip() for t in texts]
