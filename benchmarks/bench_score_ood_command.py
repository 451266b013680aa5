"""Benchmark: the whole ``vqadiag score ood`` command against an official-style program,
both run as a user runs them (a subprocess each, file reading included, peak memory from
the operating system), on a GQA questions file shaped as balanced val (132,062
questions, every one ``isBalanced``; GQA-OOD val is built from it).

    python benchmarks/bench_score_ood_command.py               # 132,062 questions
    python benchmarks/bench_score_ood_command.py --size 20000  # quick
    python benchmarks/bench_score_ood_command.py --balanced 0.6  # a mixed file

The questions are ``bench_gqa_loading.generate``'s realistic records and the predictions
GQA's ``[{"questionId", "prediction"}]`` (``bench_score_gqa_command.write_inputs``). The
official-style program does what GQA-OOD's released code does, written from the
construction of docs/protocols.md §3: ``json.load``, answer counts per local group in
dicts, the normalised entropy of each group with numpy, groups kept at
``H ≤ mean − std``, tail answers ``p < mean(p)·(α + 1)``, then the evaluation's
per-question loop over the balanced questions of all / head / tail. Both must print the
same acc-all, acc-head, acc-tail and question counts; the script prints wall time and
peak RSS of each (the median of ``--repeat`` interleaved runs) and their ratios (issue
target: vqadiag ≥ 10× faster, in no more memory).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_score_gqa_command import write_inputs  # noqa: E402
from bench_score_vqa_command import median_runs, print_comparison, require_same  # noqa: E402

OFFICIAL_STYLE = r"""
import json, sys
import numpy as np
questions = json.load(open(sys.argv[1]))
predictions = {p["questionId"]: p["prediction"] for p in json.load(open(sys.argv[2]))}
alpha = 0.2

def local(question):
    group = question["groups"]["local"]
    return "none" if group is None else group

counts = {}
for question in questions.values():
    group = counts.setdefault(local(question), {})
    group[question["answer"]] = group.get(question["answer"], 0) + 1
entropy, share, mean_share = {}, {}, {}
for name, answers in counts.items():
    c = np.array(list(answers.values()))
    p = c / c.sum()
    e = -(p * np.log(p + 1e-9)).sum()
    entropy[name] = e / (np.log(len(p)) if len(p) > 1 else e)
    share[name] = dict(zip(answers, p))
    mean_share[name] = p.mean()
values = np.array(list(entropy.values()))
threshold = values.mean() - values.std()
scores = {"all": [], "head": [], "tail": []}
for qid, question in questions.items():
    name = local(question)
    if not entropy[name] <= threshold or question.get("isBalanced") is False:
        continue
    part = "tail" if share[name][question["answer"]] < mean_share[name] * (alpha + 1) else "head"
    correct = 1.0 if predictions.get(qid) == question["answer"] else 0.0
    scores["all"].append(correct)
    scores[part].append(correct)
out = {f"acc_{k}": float(sum(v)) / len(v) * 100 for k, v in scores.items()}
out.update({f"n_{k}": len(v) for k, v in scores.items()})
print(json.dumps(out))
"""

FIGURES = ("acc_all", "acc_head", "acc_tail", "n_all", "n_head", "n_tail")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=132_062, help="Questions in the file.")
    parser.add_argument("--balanced", type=float, default=1.0,
                        help="share isBalanced (1: all, as val_balanced)")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; the median is kept")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        questions, _, predictions = write_inputs(Path(tmp), args.size, args.balanced)
        print(f"{args.size:,} questions ({args.balanced:.0%} balanced), "
              f"{questions.stat().st_size / 1e6:.0f} MB; predictions "
              f"{predictions.stat().st_size / 1e6:.0f} MB")  # fmt: skip
        script = Path(tmp) / "official_style.py"
        script.write_text(OFFICIAL_STYLE)
        runs = median_runs({
            "official": [sys.executable, str(script), str(questions), str(predictions)],
            "ours": [sys.executable, "-m", "vqadiag", "score", "ood", "--questions",
                     str(questions), "--predictions", str(predictions), "--json"],
        }, args.repeat)  # fmt: skip
        a, b = json.loads(runs["official"]["stdout"]), json.loads(runs["ours"]["stdout"])
        require_same(a, b, FIGURES)
        print(f"identical figures (acc-all {b['acc_all']:.4f}, head {b['acc_head']:.4f} over "
              f"{b['n_head']:,}, tail {b['acc_tail']:.4f} over {b['n_tail']:,}); "
              f"median of {args.repeat} interleaved runs each")  # fmt: skip
        print_comparison("vqadiag score ood", runs["official"], runs["ours"], target=10)


if __name__ == "__main__":
    main()
