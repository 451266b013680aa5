"""`vqadiag demo`: wall time per stage, peak memory, and the cost of a resumed run.

Runs ``vqadiag demo --size SIZE --json`` in a fresh process (a new folder), prints
each stage's seconds, the CPU time (on a shared machine wall time measures the
neighbours; CPU time does not) and the peak resident memory: the largest sum, sampled
twice a second, of the resident memory of the demo's process and every process it
started (the chat VLM's second process), where ``/proc`` exists; else the largest single
process (``ru_maxrss``). Then it runs the same command again and compares: the second
run must skip every stage and produce the identical ``report.json``. With ``--compare``
it also runs the demo in a fresh folder with ``--one-process`` (the chat VLM trained and
diagnosed in the demo's own process, after the naive way) and prints the ratios.

    python benchmarks/bench_demo.py --size small
    python benchmarks/bench_demo.py --size small --compare   # + the one-process demo
    python benchmarks/bench_demo.py --size tiny          # seconds, for a quick check
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _tree_rss(root: int) -> int:
    """Bytes resident in process ``root`` and all its descendants (Linux ``/proc``)."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            statm = (entry / "statm").read_text().split()
        except OSError:  # the process ended meanwhile
            continue
        pid = int(entry.name)
        parents[pid] = int(stat[stat.rindex(")") + 2 :].split()[1])
        rss[pid] = int(statm[1]) * page
    tree, todo = {root}, [root]
    while todo:
        parent = todo.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                todo.append(pid)
    return sum(rss.get(pid, 0) for pid in tree)


def run_demo(out: Path, size: str, extra: list[str]) -> tuple[dict, float, float, float]:
    """(demo JSON, wall seconds, CPU seconds, peak RSS MiB: of the process tree where
    ``/proc`` exists, else of the largest single child)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    before, cpu_before = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    start = time.perf_counter()
    command = [sys.executable, "-m", "vqadiag", "demo", "--out", str(out), "--size", size,
               "--json", *extra]  # fmt: skip
    with tempfile.TemporaryFile("w+") as stdout:
        proc = subprocess.Popen(command, stdout=stdout, stderr=subprocess.DEVNULL, text=True)
        tree_peak = 0
        while proc.poll() is None:
            if Path("/proc").is_dir():
                tree_peak = max(tree_peak, _tree_rss(proc.pid))
            time.sleep(0.5)
        if proc.returncode:
            raise SystemExit(f"vqadiag demo failed (exit {proc.returncode}): {' '.join(command)}")
        stdout.seek(0)
        result = json.loads(stdout.read())
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime - cpu_before
    # ru_maxrss of children is the max over all waited children (KiB on Linux)
    peak = tree_peak / 2**20 if tree_peak else max(usage.ru_maxrss, before) / 1024
    return result, wall, cpu, peak


def _print_run(label: str, result: dict, wall: float, cpu: float, peak: float) -> None:
    print(
        f"{label}: {result['images']} images, {wall:.1f} s wall, {cpu:.1f} s CPU (user + "
        f"system), peak RSS {peak:.0f} MiB"
    )
    for stage in result["stages"]:
        print(f"  {stage['stage']:<24} {stage['status']:<8} {stage['seconds']:8.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="small", choices=["tiny", "small", "medium"])
    parser.add_argument("--out", type=Path, default=None, help="demo folder (default: temp)")
    parser.add_argument(
        "--compare", action="store_true",
        help="also run the demo with --one-process in a fresh folder and print the ratios",
    )  # fmt: skip
    parser.add_argument("extra", nargs="*", help="more `vqadiag demo` options")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp) / "demo"
        first, wall1, cpu1, peak = run_demo(out, args.size, args.extra)
        _print_run(f"vqadiag demo --size {args.size}", first, wall1, cpu1, peak)
        report1 = Path(first["report"]["json"]).read_bytes()
        second, wall2, _, _ = run_demo(out, args.size, args.extra)
        skipped = all(s["status"] == "skipped" for s in second["stages"])
        same = Path(second["report"]["json"]).read_bytes() == report1
        print(
            f"resumed run: {wall2:.1f} s wall ({wall1 / wall2:.0f}x faster), "
            f"every stage skipped: {skipped}, identical report.json: {same}"
        )
        if not (skipped and same):
            raise SystemExit("the resumed run did not skip every stage or changed the report")
        if args.compare:
            one = [*args.extra, "--one-process"]
            naive, wall3, cpu3, peak3 = run_demo(Path(tmp) / "one-process", args.size, one)
            _print_run("the same with --one-process", naive, wall3, cpu3, peak3)
            print(
                f"second process vs one process: wall {wall1 / wall3:.2f}x, CPU "
                f"{cpu1 / cpu3:.2f}x, peak RSS {peak / peak3:.2f}x"
            )


if __name__ == "__main__":
    main()
