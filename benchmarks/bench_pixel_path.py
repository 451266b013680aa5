"""Benchmark: the pixel data path (decode + resize + mask) against the pixel model's forward.

Target (issue "images in the data path"): the data path adds under 20% to the pixel
model's FPVG time on 2 cores. Generates a rendered synthetic world, trains the pixel
model briefly (``--encoder``: ``boxes``, its default, or ``grid``), relevance-matches the
val questions, then in the same run:

1. **data path alone** on the FPVG batches (relevant-only and irrelevant-only probes):
   ``GQAData.pixel_input`` (decode from PNG on a cold cache, resize to the model's
   input size) + ``apply_pixel_condition`` (mean fill), per question;
2. **model alone**: ``PixelModel.predict`` on the same, already-built inputs (the box
   encoder cutting its crops from the images itself); and, for the box encoder, the
   network alone: ``predict`` on the crops ``prepare_pixels`` cut beforehand (timed
   apart as "crop cutting");
3. **the FPVG conditions through the runner** (``ProbeContext.run``, one background
   worker building the next batch while the model runs: decode, condition, and the
   model's ``prepare_pixels``, where the box encoder cuts its crops; an in-memory
   store), cold image cache, and its overhead over (2): (runner − model) / model.

Figures (medians of ``--repeats`` interleaved repeats, each with a cold cache): questions
per second of each, the data / model ratio, and the overhead of every repeat.

    python benchmarks/bench_pixel_path.py                  # 300 images, box encoder
    python benchmarks/bench_pixel_path.py --encoder grid
    python benchmarks/bench_pixel_path.py --images 1000 --questions 2000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def clear_crop_cache(model: Any) -> None:
    """Start a timing with the box encoder's crop-feature cache empty (grid: no cache)."""
    cache = getattr(model.net, "crop_cache", None)
    if cache is not None:
        cache.clear()


def timed_predictions(model: Any, batches: list[Any], inputs: list[Any]) -> float:
    """Seconds ``model.predict`` takes over ``batches`` with their ``inputs``, one torch
    thread, the crop-feature cache empty at the start."""
    from vqadiag.probes.runner import ProbeContext, single_torch_thread

    clear_crop_cache(model)
    t0 = time.perf_counter()
    with single_torch_thread():
        for batch, visual in zip(batches, inputs, strict=True):
            model.predict(ProbeContext.question_batch(batch), visual)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--encoder", choices=("boxes", "grid"), default="boxes")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5, help="Timed repeats (median).")
    parser.add_argument("--keep", type=Path, default=None, help="Work folder to keep.")
    args = parser.parse_args()

    from vqadiag.data.formats.relevance_files import read_relevance, relevance
    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.models.reference.pixel import PixelModel
    from vqadiag.probes.conditions import Condition, Probe, apply_pixel_condition
    from vqadiag.probes.runner import ProbeContext
    from vqadiag.probes.store import PredictionStore
    from vqadiag.synth import generate_world

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench_pixel_"))
    world = work / "world"
    t0 = time.perf_counter()
    if not (world / "world.json").is_file():
        generate_world(world, images=args.images, seed=0)
    print(f"world: {args.images} images, {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    model = PixelModel.train(
        GQAData(world), epochs=args.epochs, progress=False, encoder=args.encoder
    )
    print(f"pixel model ({args.encoder}): {args.epochs} epoch(s), {time.perf_counter() - t0:.1f} s")

    gqa = world / "gqa"
    rel_path = work / "relevance.json"
    relevance(
        gqa / "val_balanced_questions.json",
        gqa / "val_sceneGraphs.json",
        gqa / "objects",
        rel_path,
    )
    sets = read_relevance(rel_path)
    data = GQAData(world)
    records = data.questions("val")
    qids = [q for q in records if q in sets and sets[q][2] is None][: args.questions]
    probes = []
    for q in qids:
        rec = records[q]
        probes.append(Probe(q, rec["question"], str(rec["imageId"]), rec, keep=sets[q][0]))
        probes.append(Probe(q, rec["question"], str(rec["imageId"]), rec, remove=sets[q][0]))
    bs = args.batch_size
    batches = [probes[i : i + bs] for i in range(0, len(probes), bs)]
    n = len(probes)
    print(f"FPVG probes: {len(qids)} questions × (relevant-only, irrelevant-only) = {n}")

    rel = [p for p in probes if p.keep is not None]
    irrel = [p for p in probes if p.remove is not None]
    mask = {"replacement": "drop", "fill": "mean"}
    t_data, t_model, t_runner, t_cut, t_net = [], [], [], [], []
    for _ in range(args.repeats):  # interleaved, so a busy spell hits all three alike
        # 1. the data path alone, cold cache
        data = GQAData(world)
        t0 = time.perf_counter()
        inputs = []
        for batch in batches:
            pixels = data.pixel_input(
                [p.image_id for p in batch], size=model.input_size, max_objects=100
            )
            inputs.append(apply_pixel_condition(pixels, batch, "mean"))
        t_data.append(time.perf_counter() - t0)

        # 2. the model alone on the same inputs (the box encoder's crop features cold too)
        t_model.append(timed_predictions(model, batches, inputs))

        # 2b. the crops cut beforehand (box encoder), then the network alone on them
        t0 = time.perf_counter()
        prepared = [model.prepare_pixels(visual) for visual in inputs]
        t_cut.append(time.perf_counter() - t0)
        t_net.append(timed_predictions(model, batches, prepared))

        # 3. through the runner (cold cache, one prefetch worker, in-memory store)
        data = GQAData(world)
        store = PredictionStore(":memory:")
        ctx = ProbeContext(model, data, store, batch_size=bs, workers=1)
        clear_crop_cache(model)
        t0 = time.perf_counter()
        ctx.run(Condition("gqa.rel", "objects", mask), rel)
        ctx.run(Condition("gqa.irrel", "objects", mask), irrel)
        t_runner.append(time.perf_counter() - t0)
        store.close()

    overheads = sorted((r - m) / m for r, m in zip(t_runner, t_model, strict=True))
    over_net = sorted((r - m) / m for r, m in zip(t_runner, t_net, strict=True))
    t_data, t_model, t_runner, t_cut, t_net = (
        statistics.median(t) for t in (t_data, t_model, t_runner, t_cut, t_net)
    )
    print(f"{'data path (decode+resize+mask)':<34} {n / t_data:>9.0f} probes/s  {t_data:7.2f} s")
    print(f"{'model forward':<34} {n / t_model:>9.0f} probes/s  {t_model:7.2f} s")
    print(f"{'runner (prefetch worker)':<34} {n / t_runner:>9.0f} probes/s  {t_runner:7.2f} s")
    if args.encoder == "boxes":
        print(f"{'crop cutting (prepare_pixels)':<34} {n / t_cut:>9.0f} probes/s  {t_cut:7.2f} s")
        print(f"{'network on cut crops':<34} {n / t_net:>9.0f} probes/s  {t_net:7.2f} s")
    print(f"data path / model forward: {t_data / t_model:.2f}")
    overhead = statistics.median(overheads)
    runs = ", ".join(f"{100 * o:.1f}%" for o in overheads)
    verdict = "met" if overhead < 0.20 else "not met"
    print(f"runner overhead over the model alone, per repeat: {runs}")
    print(f"median runner overhead: {100 * overhead:.1f}% (target < 20%: {verdict})")
    if args.encoder == "boxes":
        runs = ", ".join(f"{100 * o:.1f}%" for o in over_net)
        print(f"runner over the network alone (crops cut elsewhere), per repeat: {runs}")
        print(f"median: {100 * statistics.median(over_net):.1f}%")


if __name__ == "__main__":
    main()
