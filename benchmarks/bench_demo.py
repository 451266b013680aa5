"""`vqadiag demo`: wall time per stage, peak memory, and the cost of a resumed run.

Runs ``vqadiag demo --size SIZE --json`` in a fresh process (a new folder), prints
each stage's seconds, the CPU time (on a shared machine wall time measures the
neighbours; CPU time does not) and the peak resident memory (``ru_maxrss``),
then runs the same command again and compares: the second run must skip every
stage and produce the identical ``report.json``.

    python benchmarks/bench_demo.py --size small
    python benchmarks/bench_demo.py --size tiny          # seconds, for a quick check
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_demo(out: Path, size: str, extra: list[str]) -> tuple[dict, float, float, float]:
    """(demo JSON, wall seconds, CPU seconds, peak RSS MiB of this child)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    before, cpu_before = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    start = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "vqadiag",
            "demo",
            "--out",
            str(out),
            "--size",
            size,
            "--json",
            *extra,
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime - cpu_before
    # ru_maxrss of children is the max over all waited children (KiB on Linux)
    return json.loads(proc.stdout), wall, cpu, max(usage.ru_maxrss, before) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="small", choices=["tiny", "small", "medium"])
    parser.add_argument("--out", type=Path, default=None, help="demo folder (default: temp)")
    parser.add_argument("extra", nargs="*", help="more `vqadiag demo` options")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp) / "demo"
        first, wall1, cpu1, peak = run_demo(out, args.size, args.extra)
        print(
            f"vqadiag demo --size {args.size}: {first['images']} images, {wall1:.1f} s wall, "
            f"{cpu1:.1f} s CPU (user + system; on 2 idle cores wall ≥ CPU / 2), "
            f"peak RSS {peak:.0f} MiB"
        )
        for stage in first["stages"]:
            print(f"  {stage['stage']:<24} {stage['status']:<8} {stage['seconds']:8.1f} s")
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


if __name__ == "__main__":
    main()
