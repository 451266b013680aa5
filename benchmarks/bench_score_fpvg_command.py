"""Benchmark: the whole ``vqadiag score fpvg`` command against its kernel, at GQA balanced
val's size (issue: the whole command should cost no more than twice its kernel).

    python benchmarks/bench_score_fpvg_command.py               # 131,989 (132,000 in whole images)
    python benchmarks/bench_score_fpvg_command.py --size 10000  # quick

Inputs: ``bench_relevance_command.write_inputs``'s questions (every field of GQA's),
scene graphs and h5 boxes, the ``R.json`` that ``vqadiag relevance`` writes from them
(not timed), and three GQA result lists (all / relevant-only / irrelevant-only runs,
about 70 / 60 / 45 % right). The command runs as a subprocess (file reading included,
peak memory from the operating system); the kernel is the same computation in this
process on answers already aligned in memory (``fpvg_rates``, the FPVG / mod-FPVG
indicators and the c2i report, 1,000 bootstrap resamples each, as the command).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_relevance_command import write_inputs  # noqa: E402
from bench_score_vqa_command import measure  # noqa: E402
from vqadiag.protocols.fpvg.formulas import (  # noqa: E402
    c2i_report,
    fpvg_indicators,
    fpvg_rates,
    mod_fpvg_indicators,
)


def kernel_seconds(gold: list[str], runs: list[list[str]], n_bootstrap: int) -> float:
    """The command's computation on aligned answers, timed in this process."""
    start = time.perf_counter()
    fpvg_rates(*runs, gold, n_resamples=n_bootstrap, seed=0)
    fpvg = fpvg_indicators(*runs)
    mod = mod_fpvg_indicators(runs[0], runs[1])
    correct = np.array([a == g for a, g in zip(runs[0], gold, strict=True)])
    categories = {"fpvg_plus": fpvg, "fpvg_minus": ~fpvg, "mod_fpvg_plus": mod,
                  "mod_fpvg_minus": ~mod}  # fmt: skip
    c2i_report(correct, categories, None, n_resamples=n_bootstrap, seed=0)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=132_000, help="Questions in the file.")
    parser.add_argument("--n-bootstrap", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        questions, scenes, info = write_inputs(folder, args.size, 100, 0)
        relevance = folder / "R.json"
        subprocess.run([sys.executable, "-m", "vqadiag", "relevance", "--questions",
                        str(questions), "--scenes", str(scenes), "--detections", str(info),
                        "--out", str(relevance), "--json", "--quiet"],
                       check=True, capture_output=True)  # fmt: skip
        records = json.loads(questions.read_text())
        scored = [q for q, r in json.loads(relevance.read_text()).items() if "excluded" not in r]
        rng = random.Random(0)
        paths, runs = [], []
        for name, right in (("all", 0.7), ("rel", 0.6), ("irrel", 0.45)):
            answers = {q: r["answer"] if rng.random() < right else "blue"
                       for q, r in records.items()}  # fmt: skip
            path = folder / f"{name}.json"
            path.write_text(json.dumps([{"questionId": q, "prediction": a}
                                        for q, a in answers.items()]))  # fmt: skip
            paths.append(path)
            runs.append([answers[q] for q in scored])
        gold = [records[q]["answer"] for q in scored]
        n_questions = len(records)
        del records
        command = measure([sys.executable, "-m", "vqadiag", "score", "fpvg", "--questions",
                           str(questions), "--relevance", str(relevance), "--all",
                           str(paths[0]), "--rel", str(paths[1]), "--irrel", str(paths[2]),
                           "--n-bootstrap", str(args.n_bootstrap), "--json"])  # fmt: skip
        kernel = kernel_seconds(gold, runs, args.n_bootstrap)
        result = json.loads(command["stdout"])
        print(f"{n_questions:,} questions ({questions.stat().st_size / 1e6:.0f} MB), "
              f"{result['n']:,} scored; FPVG+ {result['fpvg_plus']:.3f}")  # fmt: skip
        print(f"whole command {command['wall']:6.2f} s, peak {command['peak_mb']:5.0f} MB")
        print(f"kernel        {kernel:6.2f} s (in process, answers aligned)")
        print(f"the command costs {command['wall'] / kernel:.1f}× its kernel (target ≤ 2)")


if __name__ == "__main__":
    main()
