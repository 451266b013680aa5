"""Symbolic model on a synthetic world: training time, val accuracy, inference rate.

Prints training seconds, val accuracy overall and on the questions whose annotated
objects all have a detected box with IoU > 0.5 (vs the group-prior fallback alone),
and questions/s batched (256) against batch size 1 in the same run, checking that
both give identical answers.

    python benchmarks/bench_symbolic.py --images 2000          # the demo world
    python benchmarks/bench_symbolic.py --images 150 --epochs 5 # quick
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.models.reference.symbolic import SymbolicModel
from vqadiag.models.reference.symbolic_features import grounded_question_ids
from vqadiag.synth import generate_world


def _predict(model, data, qids, batch_size):
    answers = []
    for start in range(0, len(qids), batch_size):
        batch = data.batch("val", qids[start : start + batch_size])
        answers += model.predict(batch, data.object_input(batch.image_ids)).answers
    return answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000, help="world size (scale)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--data", type=Path, default=None, help="an existing GQA-format folder")
    parser.add_argument("--single", type=int, default=300, help="questions for batch size 1")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.data or Path(tmp) / "world"
        if args.data is None:
            generate_world(root, images=args.images, seed=args.seed, progress=False)
        data = GQAData(root)
        t0 = time.perf_counter()
        model = SymbolicModel.train(data, seed=args.seed, epochs=args.epochs, progress=True)
        train_s = time.perf_counter() - t0
        records = data.questions("val")
        qids = sorted(records)
        data.object_input([records[q]["imageId"] for q in qids[:1]])  # open the h5 files
        t0 = time.perf_counter()
        answers = _predict(model, data, qids, 256)
        batched_s = time.perf_counter() - t0
        few = qids[: args.single]
        t0 = time.perf_counter()
        single = _predict(model, data, few, 1)
        single_s = time.perf_counter() - t0
        assert single == answers[: len(few)], "batch size 1 and 256 disagree"
        correct = {q: a == records[q]["answer"] for q, a in zip(qids, answers, strict=True)}
        prior = [model.fallback_answer(records[q]) == records[q]["answer"] for q in qids]
        grounded = grounded_question_ids(data, "val")
        print(f"train: {train_s:.1f} s on {len(data.questions('train'))} questions")
        print(f"val accuracy: {100 * np.mean(list(correct.values())):.2f}% (n={len(qids)})")
        g = [correct[q] for q in grounded]
        print(f"val accuracy, annotated objects detected: {100 * np.mean(g):.2f}% (n={len(g)})")
        rest = [correct[q] for q in set(qids) - set(grounded)]
        if rest:
            print(f"val accuracy, some object missed: {100 * np.mean(rest):.2f}% (n={len(rest)})")
        print(f"group-prior fallback alone: {100 * np.mean(prior):.2f}%")
        rate, rate1 = len(qids) / batched_s, len(few) / single_s
        print(f"inference: {rate:.0f} q/s batched (256), {rate1:.0f} q/s batch size 1, "
              f"ratio {rate / rate1:.1f}x; answers identical")  # fmt: skip


if __name__ == "__main__":
    main()
