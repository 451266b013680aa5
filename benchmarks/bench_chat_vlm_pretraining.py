"""Benchmark: the chat VLM's vision pre-training data path (docs/chat-vlm.md, "On a GPU").

Each augmented pre-training epoch labels every image's patches as it is shown (mirrored
and moved) and moves every batch's pixels. In the same run, on one device, this prints:

1. **labels**: one epoch's labels of every training image, by the per-image rule
   (``scene_labeller``: a Python loop over images and boxes, on the CPU) and by the
   batched table (``BoxTable``, on the device), and the ratio;
2. **moves**: one epoch's pixels mirrored and moved batch by batch, one image at a time
   (``moved_by_slices``, the naive way, which ``augment`` takes on the CPU) and by two
   gathers a batch (``moved_by_gathers``, which it takes on a GPU), and the ratio;
3. **pre-training**: images per second of ``pretrain_vision`` itself (the tower's
   forward and backward with both), and the share of its time each of the two ways of
   (1) and (2) would take.

Figures are medians of ``--repeats`` interleaved repeats. Needs a rendered world, or
makes one (``--images``, rendered, in a temporary folder).

    python benchmarks/bench_chat_vlm_pretraining.py                      # 300 images, CPU
    python benchmarks/bench_chat_vlm_pretraining.py --world world --device cuda --batch 256
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def timed(run: Callable[[], Any], device: Any) -> float:
    """Seconds ``run`` takes, waiting for the device before and after."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=Path, help="a rendered world (default: make one)")
    parser.add_argument("--images", type=int, default=300, help="images of the world made")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=32, help="pre-training batch size")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import torch

    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.models.reference import chat_vlm_build as build
    from vqadiag.models.reference import chat_vlm_data as cdata
    from vqadiag.models.reference import chat_vlm_fit as fit
    from vqadiag.models.reference.chat_vlm import TrainedChatVLM
    from vqadiag.models.reference.chat_vlm_box_labels import BoxTable
    from vqadiag.synth import generate_world

    device = torch.device(args.device)
    with tempfile.TemporaryDirectory() as tmp:
        world = args.world
        if world is None:
            world = Path(tmp) / "world"
            generate_world(world, images=args.images, seed=0)
        data = GQAData(world)
        scenes, names, attrs = cdata.patch_vocabulary(data, "train", 64)
        ids = sorted(scenes)
        opts = TrainedChatVLM.resolve_options(
            {"pretrain_epochs": 1, "pretrain_augment": True, "pretrain_batch_size": args.batch},
            None,
        )
        processor = build.build_processor(build.train_tokenizer(["what is it"], 64), opts)
        model = build.build_llava(64, opts, 0).to(device)
        pixels = cdata.pixel_values(processor, data, ids)
        size = int(opts["image_size"])
        grid = size // int(opts["patch_size"])
        slow = cdata.scene_labeller(scenes, ids, grid, names, attrs)
        table = BoxTable(scenes, ids, grid, names, attrs, device=device)
        shown = pixels.to(device)
        rng = np.random.default_rng(0)
        flips = rng.random(len(ids)) < 0.5
        reach = int(opts["patch_size"]) // 2
        shifts = rng.integers(-reach, reach + 1, size=(len(ids), 2))
        batches = [slice(s, s + args.batch) for s in range(0, len(ids), args.batch)]

        def move(how: Callable[..., Any]) -> None:
            for b in batches:
                how(shown[b], flips[b], shifts[b])

        def pretrain() -> None:
            fit.pretrain_vision(model, pixels, table, len(names), opts, np.random.default_rng(0))

        kinds = ("rule", "table", "naive", "gather", "fit")
        figures: dict[str, list[float]] = {k: [] for k in kinds}
        for _ in range(args.repeats):
            figures["rule"].append(timed(lambda: slow(flips, shifts / size), device))
            figures["table"].append(timed(lambda: table(flips, shifts / size), device))
            figures["naive"].append(timed(lambda: move(cdata.moved_by_slices), device))
            figures["gather"].append(timed(lambda: move(cdata.moved_by_gathers), device))
            figures["fit"].append(timed(pretrain, device))
    med = {k: statistics.median(v) for k, v in figures.items()}
    n = len(ids)
    print(f"{n} images, batch {args.batch}, device {device}, {args.repeats} repeats (medians)")
    print(f"labels per epoch: per-image rule {med['rule']:.3f} s, table {med['table']:.3f} s "
          f"({med['rule'] / med['table']:.1f}x)")  # fmt: skip
    print(f"moves per epoch: one image at a time {med['naive']:.3f} s, one gather a batch "
          f"{med['gather']:.3f} s ({med['naive'] / med['gather']:.2f}x)")  # fmt: skip
    print(f"pre-training epoch: {med['fit']:.2f} s ({n / med['fit']:.0f} images/s); as a share "
          f"of it, labels {100 * med['rule'] / med['fit']:.1f}% by the rule, "
          f"{100 * med['table'] / med['fit']:.1f}% by the table; moves "
          f"{100 * med['naive'] / med['fit']:.1f}% one at a time, "
          f"{100 * med['gather'] / med['fit']:.1f}% gathered")  # fmt: skip


if __name__ == "__main__":
    main()
