"""Benchmark: diagnostic condition throughput of ``vqadiag diagnose`` with UpDn.

Generates a synthetic world, trains UpDn briefly, then measures in the same run:

1. FPVG (3 passes: all / relevant-only / irrelevant-only objects) over
   ``--fpvg-questions`` GQA questions through the full ``diagnose`` (store, scoring);
2. Leave-One-Out over ``--loo-objects`` objects for ``--loo-questions`` questions
   (one forward row per question × removed object, many questions per pass);
3. batched (``--batch-size``) against unbatched (batch size 1) condition
   throughput on ``--compare-questions`` questions × (all, rel, irrel) conditions,
   checking both give the same answers.

Figures: questions × conditions per second and the batched / unbatched ratio.

    python benchmarks/bench_conditions.py                      # 2,000 images (full size)
    python benchmarks/bench_conditions.py --images 200 --fpvg-questions 500 --loo-questions 50
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--fpvg-questions", type=int, default=10000)
    parser.add_argument("--loo-questions", type=int, default=1000)
    parser.add_argument("--loo-objects", type=int, default=36)
    parser.add_argument("--compare-questions", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None, help="Work folder to keep.")
    args = parser.parse_args()

    from vqadiag.data.formats.relevance_files import read_relevance
    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.diagnosis.diagnose import diagnose
    from vqadiag.models.reference.updn import UpDnModel
    from vqadiag.probes.conditions import Condition, Probe
    from vqadiag.probes.runner import ProbeContext
    from vqadiag.probes.store import PredictionStore
    from vqadiag.suites.state import subsample
    from vqadiag.synth import generate_world

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench_conditions_"))
    world = work / "world"
    t0 = time.perf_counter()
    generate_world(world, images=args.images, seed=0)
    data = GQAData(world)
    print(f"world: {args.images} images, {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    model = UpDnModel.train(data, epochs=args.epochs, progress=False)
    run_dir = work / "updn"
    model.save(run_dir)
    print(f"UpDn: {args.epochs} epochs in {time.perf_counter() - t0:.1f} s")

    # 1. FPVG through diagnose (split train: a 2,000-image world has ~18k train questions)
    out = work / "fpvg"
    t0 = time.perf_counter()
    result = diagnose(
        world, str(run_dir), out, suites="fpvg", split="train",
        max_questions=args.fpvg_questions, batch_size=args.batch_size, workers=args.workers,
        n_bootstrap=1000,
    )  # fmt: skip
    total = time.perf_counter() - t0
    timing = json.loads((out / "timing.json").read_text())["conditions"]
    n_fpvg = result["suites"]["fpvg"]["n"]
    cond_s = sum(timing[c] for c in ("gqa.all", "gqa.rel", "gqa.irrel"))
    rows = sum(result["conditions"][c]["questions"] for c in ("gqa.all", "gqa.rel", "gqa.irrel"))
    print(
        f"FPVG: {result['conditions']['gqa.all']['questions']} questions, {n_fpvg} scored, "
        f"3 passes: model {cond_s:.1f} s ({rows / cond_s:.0f} question-conditions/s), "
        f"diagnose total {total:.1f} s (relevance, store, scoring, bootstrap)"
    )

    # 2. LOO: removed object j = 0..K-1 for each question (batched rows of (question, j))
    records = data.questions("train")
    rel = read_relevance(out / "inputs" / "relevance.json")
    qids = subsample([q for q in records if q in rel and rel[q][2] is None], args.loo_questions)
    with PredictionStore(work / "loo.sqlite") as store:
        ctx = ProbeContext(model, data, store, batch_size=args.batch_size, workers=args.workers,
                           max_objects=args.loo_objects)  # fmt: skip
        probes = [
            Probe(q, records[q]["question"], str(records[q]["imageId"]), records[q], remove=(j,))
            for q in qids
            for j in range(args.loo_objects)
        ]
        t0 = time.perf_counter()
        run = ctx.run(Condition("loo", "objects", {"replacement": "drop"}), probes)
        loo_s = time.perf_counter() - t0
    print(
        f"LOO: {len(qids)} questions x {args.loo_objects} objects = {len(probes)} rows in "
        f"{loo_s:.1f} s ({len(probes) / loo_s:.0f} rows/s; computed {run.computed})"
    )

    # 3. batched vs unbatched, same conditions, fresh stores
    few = qids[: args.compare_questions]
    conditions = [
        (Condition("all", "plain"), lambda q: {}),
        (Condition("rel", "objects", {"replacement": "drop"}), lambda q: {"keep": rel[q][0]}),
        (Condition("irrel", "objects", {"replacement": "drop"}),
         lambda q: {"keep": rel[q][1]}),
    ]  # fmt: skip
    answers, speed = {}, {}
    for bs in (args.batch_size, 1):
        with PredictionStore(work / f"cmp{bs}.sqlite") as store:
            ctx = ProbeContext(model, data, store, batch_size=bs, workers=args.workers)
            got = []
            t0 = time.perf_counter()
            for cond, extra in conditions:
                ps = [
                    Probe(
                        q,
                        records[q]["question"],
                        str(records[q]["imageId"]),
                        records[q],
                        **{k: tuple(v) for k, v in extra(q).items()},
                    )
                    for q in few
                ]
                got.extend(a.answer for a in ctx.run(cond, ps).answers)
            seconds = time.perf_counter() - t0
        answers[bs] = got
        speed[bs] = len(got) / seconds
        print(f"batch size {bs:>4}: {len(got)} question-conditions in {seconds:.2f} s "
              f"({speed[bs]:.0f}/s)")  # fmt: skip
    same = sum(a == b for a, b in zip(answers[args.batch_size], answers[1], strict=True))
    print(
        f"batched / unbatched throughput: {speed[args.batch_size] / speed[1]:.1f}x; "
        f"identical answers: {same}/{len(answers[1])}"
    )
    if same != len(answers[1]):
        raise SystemExit("batched and unbatched answers differ")


if __name__ == "__main__":
    main()
