"""UpDn inference throughput: batched vs batch size 1, with 36 and 100 objects per image.

Target (issue 4): ≥ 1,000 questions/s batched on 2 CPU cores. A randomly initialised
UpDn with the default sizes (hidden 256, embeddings 128) answers random questions over
random objects (features of ``--feature-dim``, 64 like the synthetic world); speed does
not depend on the weights. Both ways must give the same answers (probabilities equal to
float rounding), which the script checks.

    python benchmarks/bench_updn_inference.py [--size 4096] [--batch 512] [--single 256]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from vqadiag.models.base import ObjectInput, QuestionBatch
from vqadiag.models.reference.updn import UpDnModel
from vqadiag.models.vocab import AnswerVocab, WordVocab


def make_model(feature_dim: int, n_answers: int, seed: int = 0) -> UpDnModel:
    """A randomly initialised UpDn with the default options."""
    torch.manual_seed(seed)
    words = WordVocab(["<pad>", "<unk>", *[f"w{i}" for i in range(500)]])
    answers = AnswerVocab([f"a{i}" for i in range(n_answers)])
    options = UpDnModel.resolve_options({})
    net = UpDnModel.build_net(len(words), len(answers), feature_dim, options)
    return UpDnModel(net.eval(), words, answers, options, feature_dim)


def make_inputs(n: int, objects: int, feature_dim: int, seed: int = 0):
    """``n`` random 10-word questions and ``objects`` random objects each (some masked)."""
    rng = np.random.default_rng(seed)
    questions = [" ".join(f"w{j}" for j in rng.integers(0, 500, 10)) for _ in range(n)]
    batch = QuestionBatch([str(i) for i in range(n)], questions, ["1"] * n)
    feats = rng.normal(size=(n, objects, feature_dim)).astype(np.float32)
    xy = rng.uniform(0, 400, size=(n, objects, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + rng.uniform(5, 200, size=(n, objects, 2))], axis=-1)
    mask = rng.uniform(size=(n, objects)) < 0.9
    sizes = np.full((n, 2), 640.0, dtype=np.float32)
    return batch, ObjectInput(feats, boxes.astype(np.float32), mask, sizes)


def rows(batch: QuestionBatch, visual: ObjectInput, lo: int, hi: int):
    sub = QuestionBatch(batch.question_ids[lo:hi], batch.questions[lo:hi], batch.image_ids[lo:hi])
    vis = ObjectInput(
        visual.features[lo:hi], visual.boxes[lo:hi], visual.mask[lo:hi], visual.image_sizes[lo:hi]
    )
    return sub, vis


def run(model: UpDnModel, batch, visual, batch_size: int, limit: int):
    """Predict the first ``limit`` questions ``batch_size`` at a time: (answers, probs, s)."""
    answers, probs = [], []
    start = time.perf_counter()
    for lo in range(0, limit, batch_size):
        out = model.predict(*rows(batch, visual, lo, min(lo + batch_size, limit)))
        answers += out.answers
        probs.append(out.probs)
    return answers, np.concatenate(probs), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096, help="questions per batched run")
    parser.add_argument("--batch", type=int, default=512, help="batch size of the batched run")
    parser.add_argument("--single", type=int, default=256, help="questions run one at a time")
    parser.add_argument("--feature-dim", type=int, default=64)
    parser.add_argument("--answers", type=int, default=1000)
    parser.add_argument("--objects", type=int, nargs="+", default=[36, 100])
    args = parser.parse_args()

    model = make_model(args.feature_dim, args.answers)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; feature dim "
        f"{args.feature_dim}, {args.answers} answers, hidden {model.options['hidden_dim']}"
    )
    ok = True
    for n_obj in args.objects:
        batch, visual = make_inputs(args.size, n_obj, args.feature_dim)
        run(model, batch, visual, args.batch, min(args.batch, args.size))  # warm-up
        answers, probs, seconds = run(model, batch, visual, args.batch, args.size)
        single = min(args.single, args.size)
        one_answers, one_probs, one_seconds = run(model, batch, visual, 1, single)
        batched_qps = args.size / seconds
        single_qps = single / one_seconds
        same = answers[:single] == one_answers
        diff = float(np.abs(probs[:single] - one_probs).max())
        ok &= same and diff < 1e-5
        print(
            f"{n_obj:>3} objects: batched ({args.batch}) {batched_qps:8.0f} q/s | "
            f"batch size 1 {single_qps:6.0f} q/s | ratio {batched_qps / single_qps:5.1f}x | "
            f"same answers {same}, max |Δp| {diff:.1e} | target ≥ 1000 q/s: "
            f"{'met' if batched_qps >= 1000 else 'MISSED'}"
        )
    if not ok:
        raise SystemExit("batched and single predictions differ")


if __name__ == "__main__":
    main()
