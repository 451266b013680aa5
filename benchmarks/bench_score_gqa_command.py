"""Benchmark: the whole ``vqadiag score gqa`` command against an official-style program,
both run as a user runs them (a subprocess each, file reading included, peak memory from
the operating system), on files laid out as GQA's at testdev-all's and val-balanced's sizes.

    python benchmarks/bench_score_gqa_command.py                # both official sizes
    python benchmarks/bench_score_gqa_command.py --split val-balanced --size 20000  # quick

Two files of the official sizes: testdev-all's (172,174 questions, of which the 12,578 of
testdev-balanced are ``isBalanced``; eval.py is run on the *all* file, since consistency
reads entailed questions outside the balanced one) and val-balanced's (132,062
questions, all balanced). The questions are ``bench_gqa_loading.generate``'s realistic
records (entailed questions, global groups); the choices file gives every question a
``valid`` and a ``plausible`` list; the predictions are GQA's ``[{"questionId", "prediction"}]``,
about 70 % right. The official-style program is what GQA's ``eval.py`` does, written from
its algorithm (docs/gqa.md): ``json.load`` of the three files, one loop over the
balanced questions appending per-question scores to lists, consistency over the
entailed questions, the χ² distribution. Both must print the same accuracy, validity,
plausibility, consistency and distribution; the script prints wall time and peak RSS of
each and their ratios (issue target: vqadiag ≥ 10× faster, in no more memory). For
reference it also times vqadiag with ``--n-bootstrap 10``, the fewest bootstrap replicates
allowed, since eval.py computes no intervals.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_gqa_loading import COLORS, OBJECTS, generate  # noqa: E402
from bench_score_vqa_command import median_runs, print_comparison, require_same  # noqa: E402

OFFICIAL_STYLE = r"""
import json, sys
from collections import defaultdict
questions = json.load(open(sys.argv[1]))
choices = json.load(open(sys.argv[2]))
predictions = {p["questionId"]: p["prediction"] for p in json.load(open(sys.argv[3]))}

def avg(values):
    return float(sum(values)) / len(values)

def belongs(element, group, question):
    if "Common" in question["types"]["detailed"]:
        group = ["color", "material", "shape"]
    return element in group

def steps(question):
    ops = [c for c in question["semantic"]
           if not any(o in "{}: {}".format(c["operation"], c["argument"])
                      for o in ["exist", "query: name", "choose name"])]
    return len(ops)

scores = {k: [] for k in ("accuracy", "binary", "open", "validity", "plausibility",
                          "consistency")}
per = {k: defaultdict(list) for k in ("structural", "semantic", "length", "steps")}
gold_dist = defaultdict(lambda: defaultdict(int))
pred_dist = defaultdict(lambda: defaultdict(int))
for qid, question in questions.items():
    if not question["isBalanced"]:
        continue
    gold, predicted = question["answer"], predictions[qid]
    correct = predicted == gold
    score = 1.0 if correct else 0.0
    scores["accuracy"].append(score)
    per["length"][len(question["question"].split())].append(score)
    per["steps"][steps(question)].append(score)
    per["structural"][question["types"]["structural"]].append(score)
    per["semantic"][question["types"]["semantic"]].append(score)
    scores["open" if question["types"]["structural"] == "query" else "binary"].append(score)
    scores["validity"].append(1.0 if belongs(predicted, choices[qid]["valid"], question) else 0.0)
    scores["plausibility"].append(
        1.0 if belongs(predicted, choices[qid]["plausible"], question) else 0.0)
    group = question["groups"]["global"]
    if group is not None:
        gold_dist[group][gold] += 1
        pred_dist[group][predicted] += 1
    inferred = [e for e in question["entailed"] if e != qid]
    if correct and inferred:
        scores["consistency"].append(avg(
            [1.0 if predictions[e] == questions[e]["answer"] else 0.0 for e in inferred]))

total, overall = 0.0, 0
for group in gold_dist:
    score, count = 0.0, 0
    for answer in gold_dist[group]:
        e = gold_dist[group][answer]
        o = pred_dist[group].get(answer, 0)
        score += float(o - e) ** 2 / e
        count += e
    total += score * count
    overall += count
out = {k: avg(v) * 100 for k, v in scores.items()}
out["distribution"] = float(total) / overall / 100
print(json.dumps(out))
"""


def write_inputs(folder: Path, size: int, balanced: float) -> tuple[Path, Path, Path]:
    """Questions (``bench_gqa_loading.generate``, ``balanced`` of them ``isBalanced``),
    choices and GQA-shaped predictions."""
    questions = folder / "questions.json"
    generate(questions, size, balanced=balanced)
    data = json.loads(questions.read_text())
    rng = random.Random(1)
    vocabulary = OBJECTS + COLORS + ["yes", "no"]
    choices, predictions = {}, []
    for qid, record in data.items():
        answer = record["answer"]
        valid = sorted({answer, *rng.sample(vocabulary, 8)})
        choices[qid] = {"valid": valid, "plausible": sorted({answer, *rng.sample(valid, 3)})}
        guess = answer if rng.random() < 0.7 else rng.choice(vocabulary)
        predictions.append({"questionId": qid, "prediction": guess})
    (folder / "choices.json").write_text(json.dumps(choices))
    (folder / "predictions.json").write_text(json.dumps(predictions))
    return questions, folder / "choices.json", folder / "predictions.json"


#: the official files the issue names: questions and the share of them ``isBalanced``
#: (testdev-all holds testdev-balanced's 12,578; val-balanced is balanced throughout)
SPLITS = {"testdev-all": (172_174, 12_578 / 172_174), "val-balanced": (132_062, 1.0)}


def compare(folder: Path, size: int, balanced: float, repeat: int) -> None:
    """Write the inputs, run the three commands ``repeat`` times and print the figures."""
    questions, choices, predictions = write_inputs(folder, size, balanced)
    official_script = folder / "official_style.py"
    official_script.write_text(OFFICIAL_STYLE)
    print(f"{size:,} questions ({balanced:.1%} balanced), "
          f"{questions.stat().st_size / 1e6:.0f} MB; choices "
          f"{choices.stat().st_size / 1e6:.0f} MB; predictions "
          f"{predictions.stat().st_size / 1e6:.0f} MB")  # fmt: skip
    ours = [sys.executable, "-m", "vqadiag", "score", "gqa", "--questions", str(questions),
            "--choices", str(choices), "--predictions", str(predictions), "--json"]  # fmt: skip
    runs = median_runs({
        "official": [sys.executable, str(official_script), str(questions), str(choices),
                     str(predictions)],
        "default": ours,
        "few intervals": [*ours, "--n-bootstrap", "10"],
    }, repeat)  # fmt: skip
    a = json.loads(runs["official"]["stdout"])
    keys = ("accuracy", "binary", "open", "validity", "plausibility", "consistency",
            "distribution")  # fmt: skip
    for name in ("default", "few intervals"):
        require_same(a, json.loads(runs[name]["stdout"]), keys)
    b = json.loads(runs["default"]["stdout"])
    print(f"identical figures (accuracy {b['accuracy']:.4f}, consistency "
          f"{b['consistency']:.4f}, distribution {b['distribution']:.6f}); "
          f"median of {repeat} interleaved runs each")  # fmt: skip
    print_comparison("vqadiag score gqa", runs["official"], runs["default"], target=10)
    few = runs["few intervals"]
    print(f"for reference, with --n-bootstrap 10 (eval.py computes no intervals): "
          f"{few['wall']:.2f} s, peak {few['peak_mb']:.0f} MB, "
          f"{runs['official']['wall'] / few['wall']:.1f}× faster")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=[*SPLITS, "both"], default="both",
                        help="the official file to imitate (default: both)")  # fmt: skip
    parser.add_argument("--size", type=int, help="questions in the file (default: the split's)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; the median is kept")
    args = parser.parse_args()
    for name in SPLITS if args.split == "both" else [args.split]:
        size, balanced = SPLITS[name]
        print(f"== {name}")
        with tempfile.TemporaryDirectory(prefix="bench_gqa_cmd_") as tmp:
            compare(Path(tmp), args.size or size, balanced, args.repeat)


if __name__ == "__main__":
    main()
