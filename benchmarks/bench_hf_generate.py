"""Benchmark: vqadiag's ``hf:`` path against a bare ``generate`` loop over the same inputs
(docs/diagnose.md, "Benchmark"; the GPU check of the scale-out work).

In one run, nothing downloaded:

1. builds a LLaVA with random weights from its configuration (``--size 7b``: the shapes
   of LLaVA-1.5-7B, a CLIP ViT-L/14 tower at 336 px and a 32-layer Llama of width 4096,
   in bfloat16, built on the device; ``--size tiny``: a two-layer model that runs on a
   CPU in seconds), with a byte-level BPE tokenizer trained on the world's questions and
   the LLaVA-1.5 chat template, saved as a ``save_pretrained`` folder;
2. makes a synthetic world and diagnoses ``--questions`` val questions with the ``fpvg``
   suite (plain, relevant-only and irrelevant-only images) through ``hf:``: the model
   loaded, fingerprinted and warmed up before the clock starts, so the timed part is
   the diagnosis (data, conditions, store, scoring and every ``generate`` call);
3. replays exactly the batches the adapter generated (the same images after each
   condition, the same questions, batch size and ``max_new_tokens``) twice, after the
   same warm-up: through the adapter's own ``_generate`` alone, and through a bare
   loop of transformers calls (processor, ``generate``, ``batch_decode``) on a model
   loaded afresh; both with the one intra-op thread the diagnosis gives a model. Each
   ``generate`` call's tensors, settings and returned ids are hashed: both replays must
   send what the diagnosis sent and get the same tokens back;
4. prints the questions per second of the three and the ratios (the target: the ``hf:``
   diagnosis at ≥ 0.9× the bare loop; the adapter alone against the bare loop tells
   the adapter's cost from the diagnosis's).

Ratios, not absolute times: the machines are shared and noisy.

    python benchmarks/bench_hf_generate.py --size 7b --keep /tmp/bhg   # on a GPU (cuda)
    python benchmarks/bench_hf_generate.py --size tiny --questions 40    # on a CPU

On a machine with PyTorch but no internet: download here the wheels of the
dependencies its ``pip list`` lacks or has too old (transformers 5 and its tokenizers,
as vqadiag's adapter passes ``dtype=``), for its Python (``pip download -d wheels
--only-binary=:all: --python-version 3.X --platform manylinux2014_x86_64 transformers
msgspec orjson …``), carry the folder and install from it first: ``pip install
--no-index --find-links wheels -e .``. Not yet run on a GPU; the 7B run is estimated at
3–5 minutes on one H100 (building and saving 14 GB, two loads, hashing the weights, three
passes of about 60 batches). Without ``--keep`` the work folder is removed at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

#: one ``generate`` call's input: the images (None: asked without) and the questions
Batch = tuple[list[np.ndarray] | None, list[str]]

SIZES = {
    # LLaVA-1.5-7B's shapes: CLIP ViT-L/14-336 (the second-to-last layer read) and Llama-2-7B
    "7b": {
        "vision": {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
                   "num_attention_heads": 16, "image_size": 336, "patch_size": 14},
        "text": {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                 "num_attention_heads": 32, "num_key_value_heads": 32,
                 "max_position_embeddings": 4096, "vocab_size": 32064},
        "feature_layer": -2,
        "dtype": "bfloat16",
    },
    "tiny": {
        "vision": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                   "num_attention_heads": 2, "image_size": 336, "patch_size": 14},
        "text": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                 "num_attention_heads": 2, "num_key_value_heads": 2,
                 "max_position_embeddings": 1024, "vocab_size": 1024},
        "feature_layer": -1,
        "dtype": "float32",
    },
}  # fmt: skip


def build_model(size: str, world: Path, out: Path, device: str) -> None:
    """A random-weight LLaVA of ``SIZES[size]`` with its processor, saved in ``out``."""
    import torch
    import transformers

    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.models.reference.chat_vlm_build import (
        BOS,
        CHAT_TEMPLATE,
        EOS,
        IMAGE,
        PAD,
        train_tokenizer,
    )

    shape = SIZES[size]
    texts = [str(r["question"]) for r in GQAData(world).questions("train").values()]
    tokenizer = train_tokenizer(texts, 1024)
    image_class = getattr(transformers, "CLIPImageProcessorPil", transformers.CLIPImageProcessor)
    side = shape["vision"]["image_size"]
    processor = transformers.LlavaProcessor(
        image_processor=image_class(
            size={"shortest_edge": side}, crop_size={"height": side, "width": side}
        ),
        tokenizer=tokenizer,
        patch_size=shape["vision"]["patch_size"],
        vision_feature_select_strategy="default",
        chat_template=CHAT_TEMPLATE,
        num_additional_image_tokens=1,
    )
    config = transformers.LlavaConfig(
        vision_config={"model_type": "clip_vision_model", **shape["vision"]},
        text_config={"model_type": "llama", "bos_token_id": BOS, "eos_token_id": EOS,
                     "pad_token_id": PAD, **shape["text"]},
        image_token_id=IMAGE,
        vision_feature_select_strategy="default",
        vision_feature_layer=shape["feature_layer"],
        projector_hidden_act="gelu",
    )  # fmt: skip
    dtype = getattr(torch, shape["dtype"])
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # built in its own dtype: no float32 copy of 7B weights
    try:
        with torch.device(device):
            model = transformers.LlavaForConditionalGeneration(config)
    finally:
        torch.set_default_dtype(previous)
    model.generation_config.pad_token_id = PAD
    model.save_pretrained(out)
    processor.save_pretrained(out)


class GenerateLog:
    """Wraps a transformers model's ``generate``: a digest of each call's arguments
    (every tensor's bytes and every setting) and of the ids it returns, so two loops can
    be shown to have sent the same inputs and received the same tokens."""

    def __init__(self, model: Any) -> None:
        self.digests: list[str] = []
        self._generate = model.generate
        model.generate = self

    def __call__(self, **kwargs: Any) -> Any:
        out = self._generate(**kwargs)
        digest = hashlib.sha256()
        for key in sorted(kwargs):
            value = kwargs[key]
            digest.update(key.encode())
            if hasattr(value, "detach"):
                digest.update(value.detach().float().cpu().numpy().tobytes())
            else:
                digest.update(repr(value).encode())
        digest.update(out.detach().cpu().numpy().tobytes())
        self.digests.append(digest.hexdigest())
        return out


class Recorder:
    """Wraps the adapter's ``_generate`` (a :class:`ChatVLM`): keeps each batch it is given
    (images copied: the data path may reuse its buffers) and the seconds spent in it."""

    def __init__(self, model: Any) -> None:
        self.batches: list[Batch] = []
        self.seconds = 0.0
        self.inner = model._generate
        model._generate = self

    def __call__(self, images: list[np.ndarray] | None, questions: list[str]) -> list[str]:
        kept = None if images is None else [im.copy() for im in images]
        start = time.perf_counter()
        texts = self.inner(images, questions)
        self.seconds += time.perf_counter() - start
        self.batches.append((kept, list(questions)))
        return texts


def warm_up(generate: Callable[[list[np.ndarray] | None, list[str]], list[str]]) -> None:
    """The same warm-up for every loop: one question with a grey 640 × 480 image, one
    without (kernels, allocator, processor caches)."""
    generate([np.full((480, 640, 3), 128, np.uint8)], ["What is this?"])
    generate(None, ["What is this?"])


def replay(
    generate: Callable[[list[np.ndarray] | None, list[str]], list[str]], batches: list[Batch]
) -> float:
    """Seconds to send ``batches`` through ``generate`` (after :func:`warm_up`), with the one
    intra-op thread the diagnosis gives a model."""
    from vqadiag.probes.runner import single_torch_thread

    with single_torch_thread():
        warm_up(generate)
        start = time.perf_counter()
        for images, questions in batches:
            generate(images, questions)
        return time.perf_counter() - start


def bare_generate(
    model_dir: Path, prompt: str, max_new_tokens: int, device: str, dtype: str
) -> tuple[Callable[[list[np.ndarray] | None, list[str]], list[str]], Any]:
    """A loop step with transformers alone (processor, ``generate``, ``batch_decode``),
    as the adapter's ``_generate`` does it, and the model it loaded."""
    import torch
    import transformers

    from vqadiag.models.adapters.chat_vlm import user_turn

    processor = transformers.AutoProcessor.from_pretrained(str(model_dir), local_files_only=True)
    model = transformers.AutoModelForImageTextToText.from_pretrained(
        str(model_dir), local_files_only=True, dtype=getattr(torch, dtype)
    )
    model.eval().to(device)
    processor.tokenizer.padding_side = "left"

    def run(images: list[np.ndarray] | None, questions: list[str]) -> list[str]:
        prompts = [user_turn(processor, prompt.format(question=q), image=images is not None)
                   for q in questions]  # fmt: skip
        enc = processor(images=None if images is None else [[im] for im in images],
                        text=prompts, return_tensors="pt", padding=True)  # fmt: skip
        enc = {k: v.to(device) for k, v in enc.items()}
        if "pixel_values" in enc:
            enc["pixel_values"] = enc["pixel_values"].to(model.dtype)
        with torch.no_grad():
            out = model.generate(
                **enc, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                pad_token_id=processor.tokenizer.pad_token_id,
            )  # fmt: skip
        new = out[:, enc["input_ids"].shape[1] :]
        return [t.strip() for t in processor.batch_decode(new, skip_special_tokens=True)]

    return run, model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="7b")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=10)
    parser.add_argument("--images", type=int, default=200, help="Images of the world made.")
    parser.add_argument("--device", default=None, help="Default: cuda when present, else cpu.")
    parser.add_argument("--keep", type=Path, default=None,
                        help="Work folder to keep; reruns reuse its world and model.")  # fmt: skip
    args = parser.parse_args()

    import torch

    from vqadiag.diagnosis.diagnose import diagnose
    from vqadiag.models.adapters.chat_vlm import ChatVLM
    from vqadiag.models.adapters.generated_answer import Generation
    from vqadiag.probes.runner import single_torch_thread
    from vqadiag.synth import generate_world

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = SIZES[args.size]["dtype"]
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench_hf_generate_"))
    try:
        world, model_dir = work / "world", work / f"llava-{args.size}"
        t0 = time.perf_counter()
        if not (world / "world.json").exists():
            generate_world(world, images=args.images, seed=0, progress=False)
        if not (model_dir / "config.json").exists():
            build_model(args.size, world, model_dir, device)
        print(f"world and model ({args.size}, {device}): {time.perf_counter() - t0:.0f} s")

        t0 = time.perf_counter()
        model = ChatVLM(model_dir, device=device, dtype=dtype, batch_size=args.batch_size,
                        generation=Generation(max_new_tokens=args.max_new_tokens))  # fmt: skip
        _check_dtype("hf:", model.settings()["dtype"], dtype)
        model.fingerprint()  # hashes the weights once, before the clock
        recorder, log = Recorder(model), GenerateLog(model.model)
        with single_torch_thread():
            warm_up(recorder.inner)
        print(f"hf: model loaded, fingerprinted, warmed up: {time.perf_counter() - t0:.0f} s")

        out = work / "results"
        shutil.rmtree(out, ignore_errors=True)  # an earlier run's store would answer all
        log.digests.clear()
        t0 = time.perf_counter()
        result = diagnose(world, model, out, suites="fpvg", max_questions=args.questions,
                          n_bootstrap=200, model_name=f"hf:{model_dir}")  # fmt: skip
        diagnosis_seconds = time.perf_counter() - t0
        batches, sent, in_generate = recorder.batches, list(log.digests), recorder.seconds
        adapter_seconds = replay(recorder.inner, batches)
        adapter_same = log.digests[-len(batches) :] == sent
        prompt = model.generation.prompt
        del model, recorder, log  # one copy of the weights on the device at a time
        if device.startswith("cuda"):
            torch.cuda.empty_cache()

        run, bare_model = bare_generate(model_dir, prompt, args.max_new_tokens, device, dtype)
        _check_dtype("bare loop", str(bare_model.dtype).removeprefix("torch."), dtype)
        bare_log = GenerateLog(bare_model)
        bare_seconds = replay(run, batches)
        bare_same = bare_log.digests[-len(batches) :] == sent
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)

    asked = sum(len(q) for _, q in batches)
    per_condition = {k: c["computed"] for k, c in result["conditions"].items()}
    rates = {"diagnosis": asked / diagnosis_seconds, "adapter": asked / adapter_seconds,
             "bare": asked / bare_seconds}  # fmt: skip
    print(f"{asked} questions in {len(batches)} generate calls ({per_condition}):")
    print(f"  hf: diagnosis  {diagnosis_seconds:7.1f} s  {rates['diagnosis']:8.2f} questions/s  "
          f"({in_generate:.1f} s of it in the adapter's generate)")  # fmt: skip
    print(f"  adapter alone  {adapter_seconds:7.1f} s  {rates['adapter']:8.2f} questions/s  "
          f"same inputs and tokens: {adapter_same}")  # fmt: skip
    print(f"  bare loop      {bare_seconds:7.1f} s  {rates['bare']:8.2f} questions/s  "
          f"same inputs and tokens: {bare_same}")  # fmt: skip
    print(f"hf: diagnosis / bare = {rates['diagnosis'] / rates['bare']:.2f}× (target ≥ 0.9×); "
          f"adapter alone / bare = {rates['adapter'] / rates['bare']:.2f}×")  # fmt: skip
    print(json.dumps({"size": args.size, "device": device, "questions": asked,
                      "calls": len(batches), "q_per_s": rates,
                      "ratio": rates["diagnosis"] / rates["bare"],
                      "same_inputs": adapter_same and bare_same}))  # fmt: skip


def _check_dtype(who: str, loaded: str, wanted: str) -> None:
    """Stop when a loop loaded the weights in another dtype than asked (an old
    transformers ignores ``dtype=``)."""
    if loaded != wanted:
        raise SystemExit(f"error: {who} loaded the weights as {loaded}, not {wanted}")


if __name__ == "__main__":
    main()
