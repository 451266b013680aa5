"""Benchmark: vqadiag's ``hf:`` path against a bare ``generate`` loop over the same inputs
(docs/diagnose.md, "Many GPUs"; the GPU check of the scale-out work).

In one run, nothing downloaded:

1. builds a LLaVA with random weights from its configuration (``--size 7b``: the shapes
   of LLaVA-1.5-7B, a CLIP ViT-L/14 tower at 336 px and a 32-layer Llama of width 4096,
   in bfloat16; ``--size tiny``: a two-layer model that runs on a CPU in seconds), with
   a byte-level BPE tokenizer trained on the world's questions and the LLaVA-1.5 chat
   template, saved as a ``save_pretrained`` folder;
2. makes a synthetic world and diagnoses ``--questions`` val questions with the ``fpvg``
   suite (plain, relevant-only and irrelevant-only images) through ``hf:`` — the model
   loaded, warmed up and fingerprinted before the clock starts, so the timed part is
   the diagnosis: data, conditions, store and every ``generate`` call;
3. replays exactly the batches the adapter generated (the same images after each
   condition, the same questions, batch size and ``max_new_tokens``) in a bare loop:
   processor, ``generate``, ``batch_decode``, with the one intra-op thread the diagnosis
   gives a model; and checks that it produces the same texts;
4. prints the questions per second of each and their ratio (the target: ``hf:`` at
   ≥ 0.9× the bare loop).

Ratios, not absolute times: the machines are shared and noisy.

    python benchmarks/bench_hf_generate.py --size 7b     # on a GPU (cuda): about 5 minutes
    python benchmarks/bench_hf_generate.py --size tiny --questions 40    # on a CPU

On a machine with PyTorch but no internet: download here the wheels of the
dependencies its ``pip list`` lacks or has too old (transformers 5 and its tokenizers,
as vqadiag's adapter passes ``dtype=``), for its Python (``pip download -d wheels
--only-binary=:all: --python-version 3.X --platform manylinux2014_x86_64 transformers
msgspec orjson …``), carry the folder and install from it first: ``pip install
--no-index --find-links wheels -e .``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

SIZES = {
    # LLaVA-1.5-7B's shapes: CLIP ViT-L/14-336 (the second-to-last layer read) and Llama-2-7B
    "7b": {
        "vision": {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
                   "num_attention_heads": 16, "image_size": 336, "patch_size": 14,
                   "projection_dim": 768},
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


class Recorder:
    """Wraps the adapter's ``_generate``: keeps each batch it is given and the seconds it
    spends (the model's share of the diagnosis)."""

    def __init__(self, model) -> None:
        self.batches: list[tuple[list | None, list[str]]] = []
        self.texts: list[str] = []
        self.seconds = 0.0
        self._inner = model._generate
        model._generate = self

    def __call__(self, images, questions):
        kept = None if images is None else [im.copy() for im in images]
        start = time.perf_counter()
        texts = self._inner(images, questions)
        self.seconds += time.perf_counter() - start
        self.batches.append((kept, list(questions)))
        self.texts += texts
        return texts


def bare_loop(model_dir: Path, batches, prompt: str, max_new_tokens: int, device: str, dtype: str):
    """The same batches through transformers alone: processor, ``generate``, decode."""
    import torch
    import transformers

    from vqadiag.models.adapters.chat_vlm import user_turn
    from vqadiag.probes.runner import single_torch_thread

    processor = transformers.AutoProcessor.from_pretrained(str(model_dir), local_files_only=True)
    model = transformers.AutoModelForImageTextToText.from_pretrained(
        str(model_dir), local_files_only=True, dtype=getattr(torch, dtype)
    )
    model.eval().to(device)
    processor.tokenizer.padding_side = "left"

    def run(images, questions):
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

    with single_torch_thread():  # the intra-op threads the diagnosis gives a model
        run(*batches[0])  # warm-up, as the adapter had
        texts: list[str] = []
        start = time.perf_counter()
        for images, questions in batches:
            texts += run(images, questions)
        return texts, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="7b")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=10)
    parser.add_argument("--images", type=int, default=200, help="Images of the world made.")
    parser.add_argument("--device", default=None, help="Default: cuda when present, else cpu.")
    parser.add_argument("--keep", type=Path, default=None, help="Work folder to keep.")
    args = parser.parse_args()

    import torch

    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.diagnosis.diagnose import diagnose
    from vqadiag.models.adapters.chat_vlm import ChatVLM
    from vqadiag.models.adapters.generated_answer import Generation
    from vqadiag.synth import generate_world

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = SIZES[args.size]["dtype"]
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench_hf_generate_"))
    world, model_dir = work / "world", work / f"llava-{args.size}"
    t0 = time.perf_counter()
    if not (world / "world.json").exists():
        generate_world(world, images=args.images, seed=0, progress=False)
    if not (model_dir / "config.json").exists():
        build_model(args.size, world, model_dir, device)
    print(f"world and model ({args.size}, {dtype}, {device}): {time.perf_counter() - t0:.0f} s")

    t0 = time.perf_counter()
    model = ChatVLM(model_dir, device=device, dtype=dtype, batch_size=args.batch_size,
                    generation=Generation(max_new_tokens=args.max_new_tokens))  # fmt: skip
    model.fingerprint()  # hashes the weights once, before the clock
    recorder = Recorder(model)
    first = next(iter(GQAData(world).questions("val").values()))
    recorder(None, [str(first["question"])])  # warm-up (kernels, allocator)
    recorder.batches.clear()
    recorder.texts.clear()
    recorder.seconds = 0.0
    print(f"hf: model loaded and fingerprinted: {time.perf_counter() - t0:.0f} s")

    out = work / "results"
    shutil.rmtree(out, ignore_errors=True)  # an earlier run's store would answer everything
    t0 = time.perf_counter()
    result = diagnose(world, model, out, suites="fpvg", max_questions=args.questions,
                      n_bootstrap=200, model_name=f"hf:{model_dir}")  # fmt: skip
    vqadiag_seconds = time.perf_counter() - t0
    asked = sum(len(q) for _, q in recorder.batches)
    computed = sum(c["computed"] for c in result["conditions"].values())
    del model, recorder._inner  # one copy of the weights at a time on the device
    if device.startswith("cuda"):
        torch.cuda.empty_cache()

    texts, bare_seconds = bare_loop(model_dir, recorder.batches, Generation().prompt,
                                    args.max_new_tokens, device, dtype)  # fmt: skip
    same = texts == recorder.texts
    per_condition = {k: c["computed"] for k, c in result["conditions"].items()}
    rate_vqadiag, rate_bare = asked / vqadiag_seconds, asked / bare_seconds
    print(f"hf: {asked} questions generated ({computed} calls; {per_condition}) in "
          f"{vqadiag_seconds:.1f} s, {recorder.seconds:.1f} s of them in generate: "
          f"{rate_vqadiag:.2f} questions/s")  # fmt: skip
    print(f"bare generate loop, the same {len(recorder.batches)} batches: {bare_seconds:.1f} s, "
          f"{rate_bare:.2f} questions/s; same texts: {same}")  # fmt: skip
    print(f"hf: / bare = {rate_vqadiag / rate_bare:.2f}× (target ≥ 0.9×)")
    print(json.dumps({"size": args.size, "device": device, "questions": asked,
                      "hf_q_per_s": rate_vqadiag, "bare_q_per_s": rate_bare,
                      "ratio": rate_vqadiag / rate_bare, "same_texts": same,
                      "work": str(work)}))  # fmt: skip


if __name__ == "__main__":
    main()
