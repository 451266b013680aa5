"""Benchmark: the OpenAI-endpoint client against a local server (docs/vlms.md).

Target (issue "diagnose the VLMs researchers evaluate today"): the client is never the
bottleneck; it adds under 10% at 8 requests in flight, and a resumed run sends 0
requests. Builds a tiny random LLaVA offline (``tests/tiny_vlm.py``), renders a small
synthetic world (800 × 600 images), starts ``transformers serve`` on the model, then in
the same run:

1. **requests per second** with 1 and with 8 in flight (``EndpointModel.predict_stream``
   over the same questions, each with its own rendered image);
2. **what the client adds**: the same requests at 8 in flight from a client that costs
   nothing (images encoded beforehand), and how much longer the whole client takes;
3. **the client's own cost per request**: its process's CPU time at 8 in flight (image
   encoding, JSON, HTTP, threads) plus a prediction-store commit per answer (timed
   separately on the same answers), against the wall time per request
   (``transformers serve`` answers one VLM request at a time, so this shows the
   client's overhead, not batching gains);
4. **image encoding alone**: ``vqadiag.data.io.png`` against Pillow's PNG encoder;
5. **resume**: ``diagnose`` twice into one folder; the second run's ``requests_sent``.

    python benchmarks/bench_endpoint_client.py                 # 120 questions
    python benchmarks/bench_endpoint_client.py --questions 400
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=120)
    parser.add_argument("--images", type=int, default=60)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5, help="Interleaved repeats (median).")
    parser.add_argument("--keep", type=Path, default=None, help="Work folder to keep.")
    args = parser.parse_args()

    import numpy as np
    from PIL import Image

    sys.path.insert(0, str(ROOT / "tests"))
    from tiny_vlm import build_tiny_llava, transformers_serve
    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.diagnosis.diagnose import diagnose
    from vqadiag.models.adapters.generated_answer import Generation
    from vqadiag.models.adapters.openai_endpoint import EndpointModel, image_data_url
    from vqadiag.models.base import PixelInput, QuestionBatch
    from vqadiag.probes.store import Answer, PredictionStore
    from vqadiag.synth import generate_world

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench_endpoint_"))
    world, model_dir = work / "world", work / "llava"
    if not (world / "world.json").is_file():
        generate_world(world, images=args.images, seed=0)
    if not (model_dir / "config.json").is_file():
        build_tiny_llava(model_dir)
    data = GQAData(world)
    questions = data.questions("train")
    qids = sorted(questions)[: args.questions]
    images = [
        np.asarray(Image.open(world / "gqa" / "images" / f"{questions[q]['imageId']}.png")
                   .convert("RGB")).copy()  # one array per question: every request encodes
        for q in qids
    ]  # fmt: skip
    batch = QuestionBatch(qids, [questions[q]["question"] for q in qids],
                          [str(questions[q]["imageId"]) for q in qids])  # fmt: skip
    visual = PixelInput(images)
    h, w = images[0].shape[:2]
    print(f"{len(qids)} questions, images {w}×{h}, tiny LLaVA, transformers serve, 2 cores")

    with transformers_serve(model_dir, work / "serve.log") as url:
        generation = Generation(max_new_tokens=args.max_new_tokens)

        def client(in_flight: int) -> EndpointModel:
            return EndpointModel(
                url, served_model=str(model_dir), in_flight=in_flight, generation=generation
            )

        client(1).predict(QuestionBatch(qids[:4], batch.questions[:4], batch.image_ids[:4]),
                          PixelInput(images[:4]))  # warm-up  # fmt: skip
        timings, outputs = {}, {}
        for in_flight in (1, 8):
            model = client(in_flight)
            cpu0, t0 = time.process_time(), time.perf_counter()
            got = list(model.predict_stream(batch, visual))
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            timings[in_flight] = (wall, cpu)
            outputs[in_flight] = sorted((rows[0], out.texts[0]) for rows, out in got)
            print(f"in flight {in_flight}: {len(qids) / wall:6.1f} requests/s "
                  f"({1000 * wall / len(qids):.1f} ms each), client CPU "
                  f"{1000 * cpu / len(qids):.2f} ms/request")  # fmt: skip
        print(f"answers identical at 1 and 8 in flight: {outputs[1] == outputs[8]}")

        # the same requests from a client that costs nothing (images encoded beforehand),
        # interleaved with the whole client, medians of --repeats
        urls = [image_data_url(im) for im in images]
        # the plain condition as the data path gives it: one array per image, shared by
        # that image's questions, so a batch encodes each image once
        by_image: dict[str, np.ndarray] = {}
        shared = PixelInput([by_image.setdefault(i, im) for i, im in
                             zip(batch.image_ids, images, strict=True)])  # fmt: skip
        whole, plain, free, cpus = [], [], [], []
        for _ in range(args.repeats):
            model = client(8)
            cpu0, t0 = time.process_time(), time.perf_counter()
            list(model.predict_stream(batch, visual))
            whole.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - cpu0)
            t0 = time.perf_counter()
            list(model.predict_stream(batch, shared))
            plain.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            with ThreadPoolExecutor(max_workers=8) as pool:
                list(pool.map(model.ask, batch.questions, urls))
            free.append(time.perf_counter() - t0)
        wall_whole, wall_free = statistics.median(whole), statistics.median(free)
        wall_plain = statistics.median(plain)
        wall8, cpu8 = wall_whole, statistics.median(cpus)
        print(f"8 in flight, medians of {args.repeats}: images encoded beforehand "
              f"{len(qids) / wall_free:.1f} requests/s; the whole client, an image per "
              f"question {len(qids) / wall_whole:.1f} ({100 * (wall_whole / wall_free - 1):+.1f}%),"
              f" images shared as in the plain condition ({len(by_image)} images) "
              f"{len(qids) / wall_plain:.1f} ({100 * (wall_plain / wall_free - 1):+.1f}%; "
              f"target < 10%)")  # fmt: skip

        with tempfile.TemporaryDirectory() as tmp, PredictionStore(Path(tmp) / "s.sqlite") as st:
            t0 = time.perf_counter()
            for i, text in outputs[8]:
                st.put_many([(("m", "d", "c", qids[i]), Answer(text, raw=text))])
            store_each = (time.perf_counter() - t0) / len(qids)
        per_request = wall8 / len(qids)
        own = cpu8 / len(qids) + store_each
        print(f"client CPU + a store commit per answer: {1000 * own:.2f} ms "
              f"({1000 * store_each:.2f} ms of it the commit) against "
              f"{1000 * per_request:.1f} ms per request at 8 in flight (medians): "
              f"{100 * own / per_request:.1f}%")  # fmt: skip
        print(
            f"8 in flight vs 1: {timings[1][0] / timings[8][0]:.2f}× the requests per second "
            "(transformers serve answers one VLM request at a time)"
        )

        n = min(40, len(images))
        t0 = time.perf_counter()
        for im in images[:n]:
            image_data_url(im)
        ours = (time.perf_counter() - t0) / n
        t0 = time.perf_counter()
        for im in images[:n]:
            buffer = io.BytesIO()
            Image.fromarray(im).save(buffer, format="PNG", compress_level=1)
            base64.b64encode(buffer.getvalue())
        pillow = (time.perf_counter() - t0) / n
        print(f"image to data URL: {1000 * ours:.2f} ms (vqadiag.data.io.png); Pillow's PNG "
              f"encoder at level 1: {1000 * pillow:.2f} ms ({pillow / ours:.1f}×)")  # fmt: skip

        out = work / "resume"
        settings = {"model": str(model_dir), "max_new_tokens": str(args.max_new_tokens)}
        for attempt in ("first", "rerun"):
            diagnose(world, f"openai:{url}", out, suites="accuracy", max_questions=40,
                     n_bootstrap=20, model_args=settings)  # fmt: skip
            sent = json.loads((out / "timing.json").read_text())["requests_sent"]
            print(f"diagnose ({attempt}): {sent} requests sent")


if __name__ == "__main__":
    main()
