"""Generative chat VLMs in-process with ``transformers`` (docs/vlms.md, "In-process").

``--model hf:DIR`` where ``DIR`` is a local ``save_pretrained`` folder of any model
``AutoModelForImageTextToText`` loads (LLaVA, Idefics3, Gemma 3, Qwen2-VL, InternVL …;
ViLT / BLIP folders go to :mod:`vqadiag.models.adapters.hf_adapter`). The hub is never contacted.

Per question the processor's chat template renders one user turn, an image followed by
the text ``prompt.format(question=…)``, with the generation prompt appended; a batch
is padded on the left, and ``generate`` decodes greedily (``do_sample=False``) at most
``max_new_tokens`` tokens. The new tokens, decoded with special tokens skipped, are the
raw text; :class:`vqadiag.models.adapters.generated_answer.Generation` turns it into the answer.
Asked with no image (``visual`` None: the no-image condition, docs/diagnose.md, "The model
without its image"), the user turn is the text alone and the processor gets no image.

Settings (``--model-args``): ``device`` (``cpu``; ``cuda`` …), ``dtype`` (``auto``:
float32 on CPU, the weights' own dtype elsewhere; ``float32``, ``bfloat16``,
``float16``; the fingerprint records the dtype it resolved to), ``batch_size`` (8),
``prompt``, ``extraction``, ``max_new_tokens``.

A generated text can depend on the other questions of its batch (left padding changes
floating-point sums, which may flip a near tie), so the batch size is part of the
fingerprint, and ``batch_size=1`` gives answers that depend on nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from vqadiag.errors import DataError, first_line
from vqadiag.models.adapters.generated_answer import Generation, read_generation
from vqadiag.models.base import (
    TEXT_GENERATOR,
    ModelOutput,
    ObjectInput,
    PixelInput,
    QuestionBatch,
    pixel_images,
)
from vqadiag.models.checkpoint import CONFIG, folder_digest, load_checkpoint, save_checkpoint
from vqadiag.models.model_args import ModelArgs

NAME = "hf-chat"
DTYPES = ("auto", "float32", "bfloat16", "float16")


def user_turn(processor: Any, text: str, *, image: bool) -> str:
    """The chat-template text of one user turn, with the generation prompt: the content
    is the image, then ``text`` (the text alone when ``image`` is False), rendered in the
    order the processor's chat template gives them."""
    content: list[dict[str, str]] = [{"type": "image"}] if image else []
    content.append({"type": "text", "text": text})
    messages = [{"role": "user", "content": content}]
    return str(processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))


class ChatVLM:
    """A local ``AutoModelForImageTextToText`` chat model (module docstring)."""

    name: ClassVar[str] = NAME
    #: what ``input_size`` tells the data path: None = the stored image size
    input_size: ClassVar[None] = None

    def __init__(
        self,
        model_dir: str | Path,
        *,
        device: str = "cpu",
        dtype: str = "auto",
        batch_size: int = 8,
        generation: Generation | None = None,
    ) -> None:
        import torch
        import transformers

        self.model_dir = Path(model_dir).resolve()
        if not (self.model_dir / CONFIG).is_file():
            raise DataError(self.model_dir, "no transformers config.json in the model folder")
        if dtype not in DTYPES:
            raise DataError("--model-args", f"dtype must be one of {', '.join(DTYPES)}")
        self.device = device
        self.dtype = dtype
        self.batch_size = max(1, int(batch_size))
        self.generation = generation or Generation()
        torch_dtype: Any = getattr(torch, dtype) if dtype != "auto" else None
        if torch_dtype is None and str(device).startswith("cpu"):
            torch_dtype = torch.float32
        transformers.utils.logging.disable_progress_bar()  # vqadiag draws its own bars
        try:
            self.processor = transformers.AutoProcessor.from_pretrained(
                str(self.model_dir), local_files_only=True
            )
            self.model = transformers.AutoModelForImageTextToText.from_pretrained(
                str(self.model_dir), local_files_only=True, dtype=torch_dtype or "auto"
            )
        except (OSError, ValueError, KeyError, ImportError) as err:
            raise DataError(
                self.model_dir, f"cannot load an image-text-to-text chat model: {first_line(err)}"
            ) from None
        if getattr(self.processor, "chat_template", None) is None:
            raise DataError(self.model_dir, "the processor has no chat template")
        try:
            self.model.eval().to(device)
        except (RuntimeError, AssertionError) as err:
            raise DataError("--device", f"cannot use device {device!r}: {err}") from None
        self._torch = torch
        self.answer_vocab: list[str] = []
        self.capabilities = replace(
            TEXT_GENERATOR, text_only=True, extra={"architecture": type(self.model).__name__}
        )
        self._fingerprint: str | None = None

    # -- construction -----------------------------------------------------------------
    @classmethod
    def from_args(cls, model_dir: str | Path, args: Mapping[str, Any] | None = None) -> ChatVLM:
        """The model of ``hf:DIR`` with its ``--model-args`` (module docstring)."""
        reader = ModelArgs(args, "hf")
        device = reader.text("device", "cpu") or "cpu"
        dtype = reader.choice("dtype", "auto", DTYPES)
        batch_size = reader.integer("batch_size", 8)
        generation = read_generation(reader)
        reader.finish()
        return cls(
            model_dir, device=device, dtype=dtype, batch_size=batch_size, generation=generation
        )

    def settings(self) -> dict[str, Any]:
        """What ``results.json`` records under ``model.settings`` (answers depend on them)."""
        return {
            "adapter": "hf",
            "architecture": type(self.model).__name__,
            "dtype": str(self.model.dtype).removeprefix("torch."),  # "auto" resolved
            "batch_size": self.batch_size,
            **self.generation.to_json(),
        }

    def run_config(self) -> dict[str, Any]:
        """The ``config.json`` of a run folder pointing at this model."""
        return {**self.settings(), "model": NAME, "path": str(self.model_dir),
                "device": self.device, "dtype": self.dtype}  # fmt: skip

    def save(self, run_dir: Path) -> None:
        """Write a run folder whose ``config.json`` points at the model folder."""
        save_checkpoint(run_dir, self.run_config(), {}, [])

    @classmethod
    def load(cls, run_dir: Path) -> ChatVLM:
        """Rebuild from a run folder written by :meth:`save`."""
        config, _, _ = load_checkpoint(Path(run_dir))
        path = Path(str(config.get("path", "")))
        if not path.is_absolute():
            path = Path(run_dir) / path
        if not path.is_dir():
            raise DataError(Path(run_dir) / CONFIG, f"model folder {str(path)!r} not found")
        generation = Generation(
            prompt=str(config.get("prompt", Generation.prompt)),
            extraction=str(config.get("extraction", Generation.extraction)),
            max_new_tokens=int(config.get("max_new_tokens", Generation.max_new_tokens)),
        )
        return cls(
            path,
            device=str(config.get("device", "cpu")),
            dtype=str(config.get("dtype", "auto")),
            batch_size=int(config.get("batch_size", 8)),
            generation=generation,
        )

    def fingerprint(self) -> str:
        """:func:`folder_digest` of the model folder with the settings (not the device)."""
        if self._fingerprint is None:
            self._fingerprint = folder_digest(self.model_dir, self.settings())
        return self._fingerprint

    # -- prediction -------------------------------------------------------------------
    def prompts(self, questions: Sequence[str], *, image: bool = True) -> list[str]:
        """The chat-template text of each question (one user turn, :func:`user_turn`; the
        text alone when ``image`` is False)."""
        return [user_turn(self.processor, self.generation.ask(q), image=image) for q in questions]

    def predict(self, batch: QuestionBatch, visual: ObjectInput | PixelInput | None) -> ModelOutput:
        """Generated answers, ``batch_size`` questions per ``generate`` call; ``visual``
        None asks each question with no image (module docstring)."""
        images = None if visual is None else pixel_images(batch, visual)
        texts: list[str] = []
        for start in range(0, len(batch), self.batch_size):
            stop = start + self.batch_size
            some = None if images is None else images[start:stop]
            texts += self._generate(some, list(batch.questions[start:stop]))
        return ModelOutput([self.generation.answer(t) for t in texts], None, None, texts)

    def _generate(self, images: list[np.ndarray] | None, questions: list[str]) -> list[str]:
        torch = self._torch
        tokenizer = getattr(self.processor, "tokenizer", self.processor)
        tokenizer.padding_side = "left"
        enc = self.processor(
            images=None if images is None else [[im] for im in images],
            text=self.prompts(questions, image=images is not None),
            return_tensors="pt",
            padding=True,
        )
        enc = {k: v.to(self.device) for k, v in enc.items()}
        dtype = self.model.dtype
        if "pixel_values" in enc and enc["pixel_values"].is_floating_point():
            enc["pixel_values"] = enc["pixel_values"].to(dtype)
        with torch.no_grad():
            out = self.model.generate(
                **enc,
                max_new_tokens=self.generation.max_new_tokens,
                do_sample=False,
                num_beams=1,  # greedy, whatever the folder's generation_config.json says
                pad_token_id=tokenizer.pad_token_id,
            )
        new = out[:, enc["input_ids"].shape[1] :]
        return [t.strip() for t in self.processor.batch_decode(new, skip_special_tokens=True)]
