"""Benchmark: loading a 1M-question GQA file and building the GQA-OOD split.

Generates a GQA-format question file (realistic records: question, answer,
fullAnswer, imageId, isBalanced, groups, types, annotations, semantic,
semanticStr, entailed, equivalent) in a temporary folder, then, in the same
run, measures in separate child processes (so peak memory is each loader's own):

* ``vqadiag.data.formats.gqa.read_gqa_questions`` (orjson, cyclic garbage collector
  paused while parsing, then validation) vs the stdlib ``json.load`` (no
  validation) as the official scripts call it and with the collector paused:
  wall and CPU time, peak resident memory above the interpreter's baseline, and
  a digest of the parsed data, which must match;
* the GQA-OOD split over the official α grid: ``ood_groups`` once and a split
  per α, vs rebuilding the whole split per α (as the official construction
  does), with identical id lists.

The file is deleted afterwards. Usage::

    python benchmarks/bench_gqa_loading.py               # 1,000,000 questions
    python benchmarks/bench_gqa_loading.py --size 20000  # quick run
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

OBJECTS = [
    "table", "cup", "car", "man", "shirt", "tree", "sky", "dog", "chair", "window", "plate",
    "woman", "building", "grass", "wall", "bag", "bus", "horse", "lamp", "sign", "fence",
    "bottle", "boat", "pillow", "bike", "train", "cat", "truck", "hat", "bench", "door",
    "glass", "jacket", "helmet", "bowl", "laptop", "umbrella", "street", "bird", "clock",
]  # fmt: skip
COLORS = [
    "red", "blue", "white", "black", "green", "brown", "gray", "yellow", "orange", "pink",
    "silver", "purple",
]  # fmt: skip
RELATIONS = ["on", "to the left of", "near", "behind", "in front of", "holding"]
GLOBAL = ["furniture", "clothing", "animal", "vehicle", "color", None]
LOADERS = {
    "vqadiag": "read_gqa_questions (orjson + checks)",
    "json-nogc": "json.load (stdlib, no checks), collector paused",
    "json": "json.load (stdlib, no checks), as eval.py",
}


def _group_bias(seed: int) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], Any]]:
    """Per local group: P(yes) of verify groups, (favourite answer, P) of query groups.

    Groups differ in how skewed their answers are, as in GQA, so that the OOD
    construction keeps some groups and finds both head and tail answers.
    """
    rng = random.Random(seed + 1)
    yes = {(a, c): 0.5 + 0.49 * rng.random() ** 2 for a in OBJECTS for c in COLORS}
    fav = {
        (b, r): (rng.choice(OBJECTS), 0.15 + 0.8 * rng.random()) for b in OBJECTS for r in RELATIONS
    }
    return yes, fav


def _record(
    rng: random.Random, i: int, n: int, bias: tuple[dict, dict], balanced: float = 0.6
) -> str:
    """One question record as JSON text (fast string formatting, valid JSON)."""
    a, b = rng.sample(OBJECTS, 2)
    ia, ib = rng.randrange(10**6, 10**7), rng.randrange(10**6, 10**7)
    kind = rng.random()
    if kind < 0.45:
        color = rng.choice(COLORS)
        question = f"Is the {a} {color}?"
        answer = "yes" if rng.random() < bias[0][(a, color)] else "no"
        full = f"{answer.capitalize()}, the {a} is {color}."
        semantic = (
            f'[{{"operation": "select", "dependencies": [], "argument": "{a} ({ia})"}}, '
            f'{{"operation": "verify color", "dependencies": [0], "argument": "{color}"}}]'
        )
        sem_str = f"select: {a} ({ia})->verify color: {color} [0]"
        types = '{"detailed": "verifyAttr", "semantic": "attr", "structural": "verify"}'
        local = f"06-{a}_{color}"
        global_group = None
    else:
        rel = rng.choice(RELATIONS)
        question = f"What is the object {rel} the {b}?"
        favourite, p_favourite = bias[1][(b, rel)]
        answer = favourite if rng.random() < p_favourite else rng.choice(OBJECTS)
        full = f"The {answer} is {rel} the {b}."
        semantic = (
            f'[{{"operation": "select", "dependencies": [], "argument": "{b} ({ib})"}}, '
            f'{{"operation": "relate", "dependencies": [0], "argument": "_,{rel},s ({ia})"}}, '
            f'{{"operation": "query", "dependencies": [1], "argument": "name"}}]'
        )
        sem_str = f"select: {b} ({ib})->relate: _,{rel},s ({ia}) [0]->query: name [1]"
        types = '{"detailed": "relS", "semantic": "rel", "structural": "query"}'
        local = f"14-{b}_{rel},s"
        global_group = rng.choice(GLOBAL)
    entailed = ", ".join(f'"{(i + d) % n:08d}"' for d in range(1, rng.randint(1, 5)))
    glob = "null" if global_group is None else f'"{global_group}"'
    is_balanced = "true" if rng.random() < balanced else "false"
    return (
        f'"{i:08d}": {{"semantic": {semantic}, "entailed": [{entailed}], '
        f'"equivalent": ["{i:08d}"], "question": "{question}", "imageId": "n{ia % 150000}", '
        f'"isBalanced": {is_balanced}, "groups": {{"global": {glob}, "local": "{local}"}}, '
        f'"answer": "{answer}", "semanticStr": "{sem_str}", '
        f'"annotations": {{"answer": {{}}, "question": {{"3": "{ia}"}}, '
        f'"fullAnswer": {{"1": "{ia}", "5": "{ib}"}}}}, "types": {types}, '
        f'"fullAnswer": "{full}"}}'
    )


def generate(path: Path, n: int, seed: int = 0, balanced: float = 0.6) -> int:
    """Write ``n`` GQA question records to ``path``, each ``isBalanced`` with probability
    ``balanced`` (the other fields do not depend on it); returns the file size in bytes."""
    rng = random.Random(seed)
    bias = _group_bias(seed)
    with path.open("w") as fh:
        fh.write("{")
        chunk: list[str] = []
        for i in range(n):
            chunk.append(_record(rng, i, n, bias, balanced))
            if len(chunk) == 20000:
                fh.write(", ".join(chunk))
                chunk = []
                if i + 1 < n:
                    fh.write(", ")
        fh.write(", ".join(chunk))
        fh.write("}")
    return path.stat().st_size


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _digest(data: object) -> str:
    import orjson

    return hashlib.sha256(orjson.dumps(data, option=orjson.OPT_SORT_KEYS)).hexdigest()


def child(loader: str, path: str, repeat: int) -> None:
    """Load ``path`` with one loader and print its figures as JSON (child process).

    ``loader`` is ``vqadiag`` or ``json``, with ``-nogc`` to pause the collector.
    The file is loaded ``repeat`` times: peak memory is the first load's, times
    are the fastest (the first load of a fresh process also pays for the
    operating system handing it new memory pages).
    """
    import gc

    import numpy  # noqa: F401  (imported before the baseline, as in real use)
    import orjson  # noqa: F401

    from vqadiag.data.formats.gqa import read_gqa_questions
    from vqadiag.protocols.ood.formulas import OOD_ALPHA_GRID, build_ood_split, ood_groups

    def load() -> dict:
        if loader == "vqadiag":
            return read_gqa_questions(path)
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)

    loader, _, nogc = loader.partition("-")
    baseline = _peak_mb()
    walls, cpus = [], []
    data: dict = {}
    for attempt in range(repeat):
        data = {}  # drop the previous load before the next one
        if nogc:
            gc.disable()
        cpu = time.process_time()
        start = time.perf_counter()
        data = load()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
        gc.enable()
        if attempt == 0:
            peak = _peak_mb() - baseline
    out: dict[str, object] = {
        "seconds": min(walls),
        "first_seconds": walls[0],
        "cpu": min(cpus),
        "peak_mb": peak,
        "n": len(data),
    }
    out["digest"] = _digest(data)
    if loader == "vqadiag":
        start = time.perf_counter()
        groups = ood_groups(data)
        split = groups.split(0.2)
        out["ood_split_seconds"] = time.perf_counter() - start
        out["ood_counts"] = [len(split.all_ids), len(split.head_ids), len(split.tail_ids)]
        start = time.perf_counter()
        groups = ood_groups(data)
        fast = [groups.split(a) for a in OOD_ALPHA_GRID]
        out["curve_seconds"] = time.perf_counter() - start
        start = time.perf_counter()
        naive = [build_ood_split(data, a) for a in OOD_ALPHA_GRID]
        out["curve_naive_seconds"] = time.perf_counter() - start
        out["curve_identical"] = all(
            (f.all_ids, f.head_ids, f.tail_ids) == (s.all_ids, s.head_ids, s.tail_ids)
            for f, s in zip(fast, naive, strict=True)
        )
    print(json.dumps(out))


def run_child(loader: str, path: Path, repeat: int) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", loader, str(path), str(repeat)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--size", type=int, default=1_000_000, help="number of questions (at least 1000)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", type=Path, default=None, help="folder for the temporary file")
    parser.add_argument("--repeat", type=int, default=2, help="loads per loader (min time)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.size < 1000 and not args.child:
        parser.error("--size must be at least 1000")
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = Path(tmp) / "questions.json"
        start = time.perf_counter()
        size = generate(path, args.size, args.seed)
        gen = time.perf_counter() - start
        print(f"generated {args.size:,} questions, {size / 2**20:,.0f} MiB, in {gen:.1f} s")
        runs = {name: run_child(name, path, args.repeat) for name in LOADERS}
    digests = {r["digest"] for r in runs.values()}
    same = len(digests) == 1 and all(r["n"] == args.size for r in runs.values())
    print(f"{'loader':<46}{'wall s':>8}{'CPU s':>8}{'first s':>9}{'peak MiB':>10}")
    for name, label in LOADERS.items():
        r = runs[name]
        print(
            f"{label:<46}{r['seconds']:>8.2f}{r['cpu']:>8.2f}{r['first_seconds']:>9.2f}"
            f"{r['peak_mb']:>10,.0f}"
        )
    ours = runs["vqadiag"]
    for name in ("json", "json-nogc"):
        other = runs[name]
        print(
            f"read_gqa_questions vs {LOADERS[name]}: time "
            f"{other['seconds'] / ours['seconds']:.2f}x faster (CPU "
            f"{other['cpu'] / ours['cpu']:.2f}x), peak memory "
            f"{ours['peak_mb'] / max(other['peak_mb'], 1e-9):.2f}x"
        )
    print(
        f"read_gqa_questions peak memory {ours['peak_mb'] * 2**20 / size:.1f}x the file size; "
        f"identical data: {same}"
    )
    n_all, n_head, n_tail = ours["ood_counts"]
    print(
        f"GQA-OOD split (alpha 0.2) from {args.size:,} questions: "
        f"{ours['ood_split_seconds']:.2f} s -> all {n_all:,}, head {n_head:,}, tail {n_tail:,}"
    )
    print(
        f"curve over the 22-alpha grid: groups once + 22 splits {ours['curve_seconds']:.2f} s vs "
        f"22 full constructions {ours['curve_naive_seconds']:.2f} s "
        f"({ours['curve_naive_seconds'] / ours['curve_seconds']:.1f}x), "
        f"identical: {ours['curve_identical']}"
    )
    if not (same and ours["curve_identical"]):
        sys.exit(1)


if __name__ == "__main__":
    main()
