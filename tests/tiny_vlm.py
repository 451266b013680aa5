"""A tiny random LLaVA (CLIP vision tower + Llama language model) built offline.

Configs are written in code, the tokenizer is a byte-level BPE trained with
``tokenizers`` on a few sentences, the image processor is PIL-based, and the chat
template is a LLaVA-1.5-style ``USER: <image>\\n… ASSISTANT:``. Nothing is downloaded.
The folder loads through ``AutoProcessor`` / ``AutoModelForImageTextToText`` like a real
``save_pretrained`` folder, so vqadiag's ``hf:`` adapter and ``transformers serve``
both run it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CORPUS = [
    "What color is the cat? Is the table red or blue? Which is larger, the dog or the car?",
    "USER: ASSISTANT: Answer the question using a single word or phrase.",
    "yes no red blue green yellow white black left right large small wood metal the answer is",
]
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'].upper() }}: "
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for c in m['content'] %}{% if c['type'] == 'image' or c['type'] == 'image_url' %}"
    "<image>\n{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}\n"
    "{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)


def byte_level_tokenizer(special: list[str], **tokens: Any) -> Any:
    """A byte-level BPE tokenizer trained on :data:`CORPUS` with ``special`` tokens first
    (ids 0, 1, …), wrapped for transformers with ``tokens`` (bos/eos/pad names, extra
    special tokens)."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(CORPUS * 4, trainer)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, **tokens)


def build_tiny_llava(out: str | Path, *, seed: int = 0) -> Path:
    """Write a random tiny LLaVA chat model (weights, config, processor) to ``out``."""
    import transformers

    out = Path(out)
    tokenizer = byte_level_tokenizer(
        ["<pad>", "<s>", "</s>", "<image>"],
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        extra_special_tokens={"image_token": "<image>"},
    )
    image_processor = transformers.CLIPImageProcessorPil(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
    )
    processor = transformers.LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=16,
        vision_feature_select_strategy="default",
        chat_template=CHAT_TEMPLATE,
        num_additional_image_tokens=1,
    )
    config = transformers.LlavaConfig(
        vision_config={
            "model_type": "clip_vision_model", "hidden_size": 32, "intermediate_size": 37,
            "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": 32,
            "patch_size": 16,
        },
        text_config={
            "model_type": "llama", "vocab_size": len(tokenizer), "hidden_size": 32,
            "intermediate_size": 37, "num_hidden_layers": 1, "num_attention_heads": 2,
            "num_key_value_heads": 2, "max_position_embeddings": 256, "bos_token_id": 1,
            "eos_token_id": 2, "pad_token_id": 0,
        },
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )  # fmt: skip
    return _save_random(transformers.LlavaForConditionalGeneration, config, processor, out, seed)


def _save_random(model_class: Any, config: Any, processor: Any, out: Path, seed: int) -> Path:
    """A model of ``model_class`` with seeded random weights, saved with its processor."""
    import torch

    torch.manual_seed(seed)
    model = model_class(config)
    model.generation_config.pad_token_id = 0
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def free_port() -> int:
    """A TCP port nothing listens on now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def transformers_serve(model_dir: Path, log: Path) -> Iterator[str]:
    """``transformers serve`` on ``model_dir`` (offline, CPU); yields its API root."""
    import subprocess
    import sys
    import time
    import urllib.request

    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "transformers.cli.transformers", "serve", str(model_dir),
             "--port", str(port), "--host", "127.0.0.1", "--device", "cpu"],
            stdout=fh, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"transformers serve did not start:\n{tail}") from None
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


#: an interpreter that has lmms-eval (``scripts/test.sh`` makes one), or None
LMMS_EVAL_PYTHON = os.environ.get("VQADIAG_LMMS_EVAL_PYTHON")
#: skips a test that runs lmms-eval where no interpreter has it
needs_lmms_eval = pytest.mark.skipif(
    not LMMS_EVAL_PYTHON, reason="VQADIAG_LMMS_EVAL_PYTHON names no lmms-eval"
)


def lmms_eval_samples(model_dir: Path, export: Path, tmp: Path, *, simple: bool = False) -> Path:
    """The real lmms-eval's ``llava_hf`` model (offline, CPU, batch size 1) run on the
    task ``vqadiag conditions export --format lmms-eval`` wrote under ``export``; returns
    its samples log (``--log_samples``), the file ``diagnose --model files:`` imports.
    lmms-eval 0.7 runs its chat implementation (the image and the text as parts of one
    turn); ``simple`` asks for its older one (``--force_simple``: ``<image>\\n`` and the
    text in one string)."""
    import shutil
    import subprocess

    assert LMMS_EVAL_PYTHON, "set VQADIAG_LMMS_EVAL_PYTHON (mark the test needs_lmms_eval)"
    logs = tmp / "lmms"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_HOME": str(tmp / "hf")}  # fmt: skip
    done = subprocess.run(
        [LMMS_EVAL_PYTHON, "-m", "lmms_eval", "--model", "llava_hf", "--model_args",
         f"pretrained={model_dir},device_map=cpu", "--device", "cpu", "--tasks",
         "vqadiag_conditions", "--include_path", str(export / "lmms-eval"), "--log_samples",
         "--output_path", str(logs), "--batch_size", "1", *(["--force_simple"] * simple)],
        capture_output=True, env=env, timeout=900,
    )  # fmt: skip
    shutil.rmtree(tmp / "hf", ignore_errors=True)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    samples = sorted(logs.rglob("*_samples_vqadiag_conditions.jsonl"))
    assert len(samples) == 1, list(logs.rglob("*"))
    return samples[0]


GEMMA3_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>"
    "{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
    "{% for c in m['content'] %}{% if c['type'] == 'image' %}<start_of_image>"
    "{% else %}{{ c['text'] }}{% endif %}{% endfor %}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def build_tiny_gemma3(out: str | Path, *, seed: int = 0) -> Path:
    """Write a random tiny Gemma 3 chat model (SigLIP tower + Gemma 3 text) to ``out``."""
    import transformers

    out = Path(out)
    special = ["<pad>", "<bos>", "<eos>", "<start_of_image>", "<end_of_image>",
               "<image_soft_token>", "<start_of_turn>", "<end_of_turn>"]  # fmt: skip
    tokenizer = byte_level_tokenizer(
        special, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
        extra_special_tokens={"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
                              "image_token": "<image_soft_token>"},
    )  # fmt: skip
    processor = transformers.Gemma3Processor(
        image_processor=transformers.Gemma3ImageProcessorPil(size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        chat_template=GEMMA3_TEMPLATE,
        image_seq_length=4,
    )
    token = tokenizer.convert_tokens_to_ids
    config = transformers.Gemma3Config(
        text_config={
            "vocab_size": len(tokenizer), "hidden_size": 32, "intermediate_size": 37,
            "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
            "head_dim": 16, "max_position_embeddings": 256, "pad_token_id": 0,
            "bos_token_id": 1, "eos_token_id": 2, "sliding_window": 64,
        },
        vision_config={
            "hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 1,
            "num_attention_heads": 2, "image_size": 32, "patch_size": 8,
        },
        mm_tokens_per_image=4,
        boi_token_index=token("<start_of_image>"),
        eoi_token_index=token("<end_of_image>"),
        image_token_index=token("<image_soft_token>"),
    )  # fmt: skip
    return _save_random(transformers.Gemma3ForConditionalGeneration, config, processor, out, seed)
