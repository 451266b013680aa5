"""Remedies before / after on one synthetic world (issue 8; docs/remedies.md).

Trains, on the same world and seed, plain UpDn and UpDn with each remedy option
(RUBi, RUBi+QB, BP, LMH, HINT) on GQA, and scores each on GQA val with GQA-OOD
(acc-all, acc-tail, acc-head, Δ) and FPVG (FPVG+, Acc_all over the FPVG questions),
every figure with its 95% bootstrap interval. Then trains UpDn on the world's VQA v2
files and fine-tunes it with sub-question fine-tuning and SQuINT, printing
consistency, reasoning accuracy, attention correlation and VQA accuracy on the
introspect val file before and after. Each remedy is compared with plain UpDn in
the same run (differences in points).

    python benchmarks/bench_remedies.py --images 1000 --epochs 8
    python benchmarks/bench_remedies.py --images 150 --epochs 2     # smoke run
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

VARIANTS: dict[str, dict[str, Any]] = {
    "plain": {},
    "rubi": {"debias": "rubi"},
    "rubi+qb": {"debias": "rubi+qb"},
    "bp": {"debias": "bp"},
    "lmh": {"debias": "lmh"},
    "hint": {"hint": 1.0},
}


def fmt(est: dict[str, Any] | None) -> str:
    """``61.20 [59.3, 63.1]``."""
    if est is None or est["value"] is None or est["value"] != est["value"]:
        return "-"
    return f"{est['value']:6.2f} [{est['ci_low']:6.2f}, {est['ci_high']:6.2f}]"


def gqa_figures(model: Any, data: Any, world: Path, out: Path, n_bootstrap: int) -> dict:
    """GQA-OOD and FPVG figures of ``model`` on val."""
    from vqadiag.models.predict import predict_split, write_prediction_file
    from vqadiag.models.remedies.hint import model_fpvg_answers
    from vqadiag.protocols.fpvg.formulas import fpvg_rates
    from vqadiag.protocols.ood.score import score_ood

    preds = write_prediction_file(out, predict_split(model, data, "val"))
    ood = score_ood(world / "gqa" / "val_balanced_questions.json", preds, n_bootstrap=n_bootstrap)
    runs = model_fpvg_answers(model, data, "val")
    rates = fpvg_rates(
        runs["all"], runs["rel"], runs["irrel"], runs["gold"], n_resamples=n_bootstrap
    )
    return {
        "acc_all": ood["ci"]["acc_all"],
        "acc_tail": ood["ci"]["acc_tail"],
        "acc_head": ood["ci"]["acc_head"],
        "delta": ood["ci"]["delta"],
        "fpvg_plus": rates["fpvg_plus"].to_dict(),
        "fpvg_acc_all": rates["acc_all"].to_dict(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1000, help="world size (images)")
    parser.add_argument("--epochs", type=int, default=8, help="UpDn training epochs")
    parser.add_argument("--ft-epochs", type=int, default=3, help="fine-tuning epochs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-bootstrap", type=int, default=1000)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="GQA variants to run")
    parser.add_argument("--skip-finetune", action="store_true")
    args = parser.parse_args()

    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.models.reference.updn import UpDnModel
    from vqadiag.synth import generate_world

    tmp = Path(tempfile.mkdtemp(prefix="bench_remedies_"))
    world = tmp / "world"
    generate_world(world, images=args.images, seed=args.seed, progress=False)
    data = GQAData(world)
    print(
        f"world: {args.images} images, {len(data.questions('train'))} train questions, "
        f"{len(data.questions('val'))} val questions; UpDn {args.epochs} epochs"
    )

    results: dict[str, dict[str, Any]] = {}
    for name in args.variants.split(","):
        start = time.perf_counter()
        model = UpDnModel.train(
            data, epochs=args.epochs, seed=args.seed, progress=False, **VARIANTS[name]
        )
        seconds = time.perf_counter() - start
        results[name] = gqa_figures(model, data, world, tmp / f"{name}.json", args.n_bootstrap)
        results[name]["seconds"] = seconds
        print(f"  trained {name:8s} in {seconds:6.1f} s", flush=True)

    keys = ("acc_all", "acc_tail", "acc_head", "delta", "fpvg_plus", "fpvg_acc_all")
    print("\nGQA val (95% intervals); Δ = (head − tail) / tail × 100")
    print(f"{'variant':9s}" + "".join(f"{k:>26s}" for k in keys) + f"{'train s':>9s}")
    for name, figures in results.items():
        row = "".join(f"{fmt(figures[k]):>26s}" for k in keys)
        print(f"{name:9s}{row}{figures['seconds']:9.1f}")
    if "plain" in results:
        print("\ndifference to plain UpDn (points)")
        base = results["plain"]
        for name, figures in results.items():
            if name == "plain":
                continue
            diffs = "  ".join(
                f"{k} {figures[k]['value'] - base[k]['value']:+6.2f}"
                for k in keys
                if figures[k]
                and base[k]
                and figures[k]["value"] is not None
                and base[k]["value"] is not None
            )
            print(f"  {name:8s} {diffs}")

    if args.skip_finetune:
        return
    from vqadiag.workflows.finetune import finetune
    from vqadiag.workflows.models import train

    run = tmp / "updn_vqa2"
    start = time.perf_counter()
    train(
        world,
        "updn",
        run,
        epochs=args.epochs,
        seed=args.seed,
        progress=False,
        dataset="vqa2",
        n_bootstrap=args.n_bootstrap,
    )
    print(f"\nVQA v2 UpDn trained in {time.perf_counter() - start:.1f} s")
    ft_keys = (
        "consistency",
        "consistency_balanced",
        "reasoning_accuracy",
        "sub_accuracy",
        "attention_correlation",
        "vqa_accuracy",
    )
    for method in ("subq", "squint"):
        r = finetune(
            run,
            world,
            tmp / f"ft_{method}",
            method=method,
            epochs=args.ft_epochs,
            seed=args.seed,
            progress=False,
            n_bootstrap=args.n_bootstrap,
        )
        print(f"\n{method} ({r['pairs']} pairs, {r['seconds']:.1f} s incl. evaluation)")
        for key in ft_keys:
            b, a = r["ci"]["before"][key], r["ci"]["after"][key]
            print(
                f"  {key:22s} before {fmt(b)}   after {fmt(a)}   "
                f"change {a['value'] - b['value']:+.2f}"
            )


if __name__ == "__main__":
    main()
