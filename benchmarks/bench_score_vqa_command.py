"""Benchmark: the whole ``vqadiag score vqa`` command against an official-style program,
both run as a user runs them (a subprocess each, file reading included, peak memory from
the operating system), on files laid out as VQA v2's at VQA v2 val's size.

    python benchmarks/bench_score_vqa_command.py                # 214,354 questions
    python benchmarks/bench_score_vqa_command.py --size 20000   # quick

The official-style program is what the official ``vqa.py`` + ``vqaEval.py`` do, written
from the algorithm (docs/protocols.md §1): ``json.load`` of the three files, dicts keyed by
question id, and the per-question loop of ``bench_vqa_scoring.naive_vqa_accuracies``. Both
must print the same overall accuracy; the script prints wall time and peak RSS of each and
their ratios (issue target: vqadiag ≥ 20× faster, in no more memory).
"""

from __future__ import annotations

import argparse
import compileall
import functools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_vqa_scoring import generate  # noqa: E402

OFFICIAL_STYLE = r"""
import json, sys
sys.path.insert(0, sys.argv[4])
from bench_vqa_scoring import naive_vqa_accuracies
questions = json.load(open(sys.argv[1]))["questions"]
annotations = {a["question_id"]: a for a in json.load(open(sys.argv[2]))["annotations"]}
results = {r["question_id"]: r for r in json.load(open(sys.argv[3]))}
assert set(results) == {q["question_id"] for q in questions}, "results must match the questions"
ids = [q["question_id"] for q in questions]
accs = naive_vqa_accuracies([annotations[i] for i in ids], [results[i] for i in ids])
print(json.dumps({"accuracy": 100.0 * sum(accs) / len(accs)}))
"""

MEASURE = r"""
import json, resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - start
if done.returncode:
    sys.exit(done.stderr)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"wall": wall, "peak_mb": peak, "stdout": done.stdout}))
"""


def write_files(folder: Path, size: int, seed: int) -> tuple[Path, Path, Path]:
    """VQA v2 questions, annotations and results files of ``size`` questions."""
    gts, res = generate(size, seed)
    questions, annotations, results = [], [], []
    for k, (gt, r) in enumerate(zip(gts, res, strict=True)):
        qid, image = 100000 + k, 1000 + k // 5
        questions.append({"image_id": image, "question": f"What is it {k}?", "question_id": qid})
        answers = [{"answer": a["answer"], "answer_confidence": "yes", "answer_id": a["answer_id"]}
                   for a in gt["answers"]]  # fmt: skip
        annotations.append({"question_type": "what is", "multiple_choice_answer":
                            answers[0]["answer"], "answers": answers, "image_id": image,
                            "answer_type": "other", "question_id": qid})  # fmt: skip
        results.append({"question_id": qid, "answer": r["answer"]})
    paths = (folder / "questions.json", folder / "annotations.json", folder / "results.json")
    for path, obj in zip(paths, ({"questions": questions}, {"annotations": annotations},
                                 results), strict=True):  # fmt: skip
        path.write_text(json.dumps(obj))
    return paths


@functools.cache
def byte_compile_vqadiag() -> None:
    """Write vqadiag's ``.pyc`` files, as installing the package does; otherwise every
    timed run would compile its modules again where ``PYTHONDONTWRITEBYTECODE`` is set
    (as on the project's test machine): about 0.04 s of score ood's 0.7 s that no
    installed copy pays (docs/gqa.md)."""
    import vqadiag

    if not compileall.compile_dir(Path(vqadiag.__file__).parent, quiet=1):
        print("note: vqadiag could not be byte-compiled (read-only install?); timing it as is")


def measure(cmd: list[str]) -> dict:
    """Wall time, peak RSS (MB) and stdout of ``cmd`` run as a subprocess."""
    byte_compile_vqadiag()
    done = subprocess.run([sys.executable, "-c", MEASURE, *cmd], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{cmd[:4]} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def require_same(official: dict, ours: dict, keys: tuple[str, ...]) -> None:
    """Stop when the two programs disagree on one of the figures ``keys``."""
    for key in keys:
        if official[key] != ours[key]:
            raise SystemExit(
                f"{key} differs: official-style {official[key]!r}, vqadiag {ours[key]!r}"
            )


def median_runs(commands: dict[str, list[str]], repeat: int) -> dict[str, dict]:
    """Each command run ``repeat`` times, interleaved (a noisy machine hurts all alike);
    the run of median wall time is kept for each."""
    runs: dict[str, list[dict]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, cmd in commands.items():
            runs[name].append(measure(cmd))
    return {name: sorted(rows, key=lambda r: r["wall"])[len(rows) // 2]
            for name, rows in runs.items()}  # fmt: skip


def print_comparison(command: str, official: dict, ours: dict, target: float) -> None:
    """Wall time and peak RSS of both programs, and the two ratios against the targets."""
    for name, r in (("official-style program", official), (command, ours)):
        print(f"{name:24s} {r['wall']:7.2f} s   peak {r['peak_mb']:7.0f} MB")
    print(f"vqadiag is {official['wall'] / ours['wall']:.1f}× faster (target ≥ {target:g}×), in "
          f"{ours['peak_mb'] / official['peak_mb']:.2f}× the memory (target ≤ 1)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=214_354)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; the median is kept")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        q, a, r = write_files(folder, args.size, args.seed)
        mb = sum(p.stat().st_size for p in (q, a, r)) / 2**20
        print(f"{args.size:,} questions × 10 answers: {mb:.0f} MB of JSON")
        official = folder / "official_style.py"
        official.write_text(OFFICIAL_STYLE)
        commands = {
            "official-style": [sys.executable, str(official), str(q), str(a), str(r), str(HERE)],
            "vqadiag": [sys.executable, "-m", "vqadiag", "score", "vqa", "--questions", str(q),
                        "--annotations", str(a), "--predictions", str(r), "--json"],
        }  # fmt: skip
        median = median_runs(commands, args.repeat)
        acc_official = json.loads(median["official-style"]["stdout"])["accuracy"]
        acc_ours = json.loads(median["vqadiag"]["stdout"])["overall"]
        print(f"overall accuracy: official-style {acc_official:.6f}, vqadiag {acc_ours:.6f}")
        if abs(acc_official - acc_ours) > 1e-9:
            sys.exit("the two programs disagree")
        print(f"median of {args.repeat} interleaved runs each")
        print_comparison("vqadiag score vqa", median["official-style"], median["vqadiag"], 20)


if __name__ == "__main__":
    main()
