"""Benchmark: what a diagnosis costs and how it scales (docs/diagnose.md, "Plan a run",
"No request asked twice", "A precision budget", "Many GPUs: Ray actors").

In one run, on worlds made here (``--images``, and ``--small-images`` for the memory
ratio):

1. **harness overhead**: UpDn (trained 1 epoch) diagnosed with every suite; the seconds
   spent inside the model's ``predict`` against the whole diagnosis (the model alone vs
   the harness around it), and the calls the plan announced against those sent;
2. **no request asked twice**: the calls with and without the reuse (``--no-reuse``);
3. **precision budget**: the calls of ``--precision EPS`` against the calls of the full
   run (from the plan of the full run, which calls nothing);
4. **Ray**: a model whose forward dominates (single-threaded matrix products) on 2 Ray
   actors against one process, same questions, answers compared;
5. **peak memory**: a blind question-only model diagnosed with every suite on the small
   and the large world, each in its own process (peak RSS), and their ratio.

Ratios, not absolute times: the machines are shared and noisy.

    python benchmarks/bench_scale_out.py                       # 12,000 / 2,000 images
    python benchmarks/bench_scale_out.py --images 2000 --small-images 500 --precision 4
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = '''
import numpy as np
from vqadiag import plugins
from vqadiag.models.base import Capabilities, ModelOutput

class Heavy:
    """A forward that dominates: 300 single-threaded 192×192 matrix products a question."""
    name = "heavy"
    capabilities = Capabilities(visual="pixels", object_masking=False, probabilities=False)
    input_size = (32, 32)

    def __init__(self, spec):
        self.answer_vocab = ["yes", "no"]

    def predict(self, batch, visual):
        from threadpoolctl import threadpool_limits
        answers = []
        with threadpool_limits(1):
            for image in visual.images:
                m = np.asarray(image, np.float64)[:, :, 0].repeat(6, 0).repeat(6, 1)
                for _ in range(300):
                    m = np.tanh(m @ m.T / 1e4)
                answers.append("yes" if m.sum() > 0 else "no")
        return ModelOutput(answers)

    def fingerprint(self):
        return "heavy-v1"

plugins.register_adapter("heavy", Heavy, "benchmark: a forward that dominates")
'''

# The peak is the process's own high-water mark (VmHWM, kB). Not ru_maxrss: Linux carries
# the parent's high-water mark into a child started by vfork and exec (Python's
# subprocess does), so a child reports at least the benchmark's own peak.
PEAK = """
import re, sys
from pathlib import Path
from vqadiag.diagnosis.diagnose import diagnose
diagnose(sys.argv[1], sys.argv[2], sys.argv[3], n_bootstrap=200, bq_ranker="bleu1")
print(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1))
"""


class Timed:
    """A model whose ``predict`` seconds are added up."""

    def __init__(self, model) -> None:
        self._model = model
        self.seconds = 0.0

    def __getattr__(self, name):
        return getattr(self._model, name)

    def predict(self, batch, visual):
        start = time.perf_counter()
        try:
            return self._model.predict(batch, visual)
        finally:
            self.seconds += time.perf_counter() - start


def _fresh(*folders: Path) -> None:
    """Remove result folders of an earlier run (their stores would answer everything)."""
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


def _calls(result: dict) -> int:
    return sum(c["computed"] for c in result["conditions"].values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=12000)
    parser.add_argument("--small-images", type=int, default=2000)
    parser.add_argument("--max-questions", type=int, default=1000)
    parser.add_argument("--precision", type=float, default=2.0)
    parser.add_argument("--ray-questions", type=int, default=400)
    parser.add_argument("--keep", type=Path, default=None, help="Work folder to keep.")
    parser.add_argument("--parts", default="1,2,3,4,5", help="Which parts to run.")
    args = parser.parse_args()
    parts = {int(p) for p in args.parts.split(",")}

    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.models.registry import model_class
    from vqadiag.synth import generate_world

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench_scale_out_"))
    sizes = (args.small_images, args.images) if 5 in parts else (args.images,)
    worlds = {}
    for images in dict.fromkeys(sizes):
        t0 = time.perf_counter()
        worlds[images] = work / f"world{images}"
        if not (worlds[images] / "world.json").exists():
            generate_world(worlds[images], images=images, seed=0, progress=False)
        print(f"world: {images} images ({time.perf_counter() - t0:.0f} s)")
    world = worlds[args.images]
    runs = {}
    for name, kw in (("updn", {"epochs": 1}), ("question-only", {"epochs": 2})):
        runs[name] = work / name
        if not (runs[name] / "config.json").exists():
            model_class(name).train(GQAData(world), progress=False, **kw).save(runs[name])
    options = {"n_bootstrap": 200, "bq_ranker": "bleu1"}
    if 1 in parts:
        _harness(world, runs, work, args, options)
    if 2 in parts:
        _reuse(world, runs, work, args, options)
    if 3 in parts:
        _precision(world, runs, work, args, options)
    if 4 in parts:
        _ray(world, work, args, options)
    if 5 in parts:
        _memory(worlds, runs, work, args)
    print(json.dumps({"work": str(work)}))


def _harness(world, runs, work, args, options) -> None:
    """1. The harness around the model, and the plan against the calls sent."""
    from vqadiag.diagnosis.diagnose import diagnose
    from vqadiag.models.registry import load_model_spec

    spec = str(runs["updn"])
    _fresh(work / "r1")
    plan = diagnose(world, spec, work / "r1", plan=True, max_questions=args.max_questions,
                    **options)  # fmt: skip
    timed = Timed(load_model_spec(spec))
    t0 = time.perf_counter()
    full = diagnose(world, timed, work / "r1", max_questions=args.max_questions,
                    model_name=spec, **options)  # fmt: skip
    total = time.perf_counter() - t0
    print(f"1. harness: {args.max_questions} questions, every suite: {total:.1f} s in all, "
          f"{timed.seconds:.1f} s in the model's predict: whole / model = "
          f"{total / max(timed.seconds, 1e-9):.2f}×")  # fmt: skip
    exact = "exact" if plan["total"]["calls"] == _calls(full) else "DIFFERENT"
    print(f"   plan: {plan['total']['calls']} calls announced, {_calls(full)} sent ({exact})")
    reused = sum(c["reused"] for c in full["conditions"].values())
    print(f"   updn: {reused} of {_calls(full) + reused} probes reused")


def _reuse(world, runs, work, args, options) -> None:
    """2. No request asked twice: calls with and without, answers compared."""
    from vqadiag.diagnosis.diagnose import diagnose

    spec, n = str(runs["question-only"]), args.max_questions
    _fresh(work / "r2a", work / "r2b")
    ask = diagnose(world, spec, work / "r2a", max_questions=n, reuse_inputs=False, **options)
    reuse = diagnose(world, spec, work / "r2b", max_questions=n, **options)
    same = (work / "r2a/per_question.jsonl").read_bytes() == (
        work / "r2b/per_question.jsonl"
    ).read_bytes()
    print(f"2. reuse (question-only): {_calls(ask)} calls without, {_calls(reuse)} with "
          f"({_calls(reuse) / _calls(ask):.2f}×); answers identical: {same}")  # fmt: skip


def _precision(world, runs, work, args, options) -> None:
    """3. The precision budget against the full run (its plan: nothing is called)."""
    from vqadiag.diagnosis.diagnose import diagnose
    from vqadiag.diagnosis.precision import diagnose_to_precision

    spec = str(runs["updn"])
    _fresh(work / "r3")
    everything = diagnose(world, spec, work / "r3", plan=True, **options)["total"]["calls"]
    t0 = time.perf_counter()
    budget = diagnose_to_precision(world, spec, work / "r3", precision=args.precision,
                                   **options)["precision"]  # fmt: skip
    widths = budget["half_widths"]
    print(f"3. --precision {args.precision}: met {budget['met']} ({budget['stopped']}), "
          f"{budget['calls']} calls against {everything} for the full run "
          f"({budget['calls'] / everything:.2f}×), {time.perf_counter() - t0:.0f} s; "
          f"steps {[s['max_questions'] for s in budget['steps']]}")  # fmt: skip
    print(f"   suites: {budget['suites']}; their prefixes: {budget['suite_questions']}")
    print("   half-widths: " + ", ".join(
        f"{k} {'-' if w is None else f'{w:.2f}'}" for k, w in widths.items()))  # fmt: skip


def _ray(world, work, args, options) -> None:
    """4. Ray: 2 actors against one process (the local Ray started before the clock)."""
    import ray

    from vqadiag.diagnosis.diagnose import diagnose

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    _fresh(work / "r4-one", work / "r4-two")
    plugin = work / "heavy_plugin.py"
    plugin.write_text(HEAVY)
    seconds = {}
    for name, actors in (("one", None), ("two", {"actors": 2})):
        t0 = time.perf_counter()
        diagnose(world, "heavy:x", work / f"r4-{name}", suites="accuracy",
                 max_questions=args.ray_questions, batch_size=32, plugins=[str(plugin)],
                 ray=actors, **options)  # fmt: skip
        seconds[name] = time.perf_counter() - t0
    same = (work / "r4-one/per_question.jsonl").read_bytes() == (
        work / "r4-two/per_question.jsonl"
    ).read_bytes()
    one, two = seconds["one"], seconds["two"]
    print(f"4. Ray: {one:.1f} s in one process, {two:.1f} s on 2 actors (their start "
          f"included): {one / two:.2f}× faster; answers identical: {same}")  # fmt: skip
    ray.shutdown()


def _memory(worlds, runs, work, args) -> None:
    """5. Peak memory, small against large world, each diagnosis in its own process."""
    peaks = {}
    for images, folder in worlds.items():
        out = work / f"r5-{images}"
        _fresh(out)
        done = subprocess.run(
            [sys.executable, "-c", PEAK, str(folder), str(runs["question-only"]), str(out)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        peaks[images] = int(done.stdout.strip().splitlines()[-1]) / 1024
        print(f"5. peak memory, question-only, every suite, {images} images: "
              f"{peaks[images]:.0f} MiB")  # fmt: skip
    ratio = peaks[args.images] / peaks[args.small_images]
    print(f"   {args.images} / {args.small_images} images: {ratio:.2f}×")


if __name__ == "__main__":
    main()
