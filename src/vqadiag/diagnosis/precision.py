"""``vqadiag diagnose --precision EPS``: as many questions as the figures need (docs/diagnose.md,
"A precision budget").

A diagnosis over all questions can cost hundreds of GPU-hours; most figures are known to
within a point or two long before. With ``--precision EPS`` the diagnosis takes the
questions in the fixed order of ``--max-questions`` (a prefix that never reshuffles),
``start`` of them first, and grows the prefix until every bounded figure's 95% interval
has a half-width of at most ``EPS`` points:

* **bounded figures** (:func:`half_widths`): the report card's rates in points (accuracy,
  GQA-OOD head and tail, FPVG, pairs, consistency, gain …), not a ratio (GQA-OOD's Δ),
  not R_score, not the importance figures, which run on a declared sample. A figure
  with a value but no finite interval (an empty subset so far) is unknown: not met;
* **the next prefix** assumes a half-width shrinking as 1/√n:
  ``n' = ⌈n · (w / EPS)² · 1.2⌉``, at least ``1.5 n``, where ``w`` is the widest
  half-width now;
* **each step is an ordinary diagnosis** into the same folder, so the answers of the
  questions already asked come from the store: a step asks only for the new questions,
  and an interrupted run, run again, picks up where it stopped;
* **it stops** when the target is met, when the prefix holds every question (the data
  gave no more), or before a step whose planned calls
  (:func:`vqadiag.diagnosis.plan.plan_diagnosis`) would take the run past
  ``max_calls``.

Leave-one-out, GradCAM and attention importance run on the first ``importance_sample``
FPVG questions of the same order (500 by default; ``results.json``
``suites.importance.sample`` states it). ``results.json`` ``precision`` records the
target, whether it was met, each bounded figure's half-width, the steps and why the run
stopped.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from vqadiag.data.io.atomic import FolderLock
from vqadiag.data.io.jsonio import write_json
from vqadiag.errors import DataError
from vqadiag.suites.base import figures

START_QUESTIONS = 200
DEFAULT_IMPORTANCE_SAMPLE = 500
#: a margin on the 1/√n projection, and the least growth of a step
MARGIN = 1.2
LEAST_GROWTH = 1.5
POINT_UNITS = ("%", "points")


def half_widths(summary: dict[str, Any]) -> dict[str, float]:
    """``{figure: (ci_high − ci_low) / 2}`` of the bounded figures with an interval (module
    docstring)."""
    out: dict[str, float] = {}
    for _suite, fig in figures():
        if not (fig.card and fig.bounded and not fig.many and fig.unit in POINT_UNITS):
            continue
        est = summary.get(fig.key)
        if not isinstance(est, dict):
            continue
        low, high = est.get("ci_low"), est.get("ci_high")
        if isinstance(low, (int, float)) and isinstance(high, (int, float)):
            out[fig.key] = (float(high) - float(low)) / 2
        elif est.get("value") is not None:  # a figure without an interval yet: unknown
            out[fig.key] = math.inf
    return {k: (w if math.isfinite(w) else math.inf) for k, w in out.items()}


def widest_known(widths: dict[str, float], precision: float) -> float:
    """The widest finite half-width (what the next prefix is projected from); with none
    finite, a width that asks for :data:`LEAST_GROWTH`."""
    finite = [w for w in widths.values() if math.isfinite(w)]
    return max(finite, default=precision)


def next_prefix(n: int, widest: float, precision: float) -> int:
    """The next number of questions: ``⌈n · (w / EPS)² · 1.2⌉``, at least ``1.5 n``."""
    projected = math.ceil(n * (widest / precision) ** 2 * MARGIN)
    return max(projected, math.ceil(n * LEAST_GROWTH))


def diagnose_to_precision(
    data: str | Path,
    model: str,
    out: str | Path,
    *,
    precision: float,
    max_calls: int | None = None,
    start: int = START_QUESTIONS,
    **options: Any,
) -> dict[str, Any]:
    """Diagnose on growing prefixes of the questions until ``precision`` (module
    docstring); ``options`` are :func:`~vqadiag.diagnosis.diagnose.diagnose`'s. Returns
    the last step's ``results.json`` with its ``precision`` record."""
    from vqadiag.diagnosis.diagnose import diagnose
    from vqadiag.models.registry import load_model_spec
    from vqadiag.plugins import load_plugins

    if not precision > 0:
        raise DataError("--precision", "must be a positive number of points")
    if max_calls is not None and max_calls < 1:
        raise DataError("--max-calls", "must be at least 1")
    if options.pop("max_questions", None) is not None:
        raise DataError("--max-questions", "--precision chooses the number of questions")
    if options.pop("plan", False):
        raise DataError("--plan", "plans one diagnosis: give --max-questions, not --precision")
    options.pop("rate", None)
    if options.get("importance_sample") is None:
        options["importance_sample"] = DEFAULT_IMPORTANCE_SAMPLE
    load_plugins(options.get("plugins", ()))
    model_args = options.pop("model_args", None)
    if options.get("ray"):  # the actors load the model from its spec at each step
        target: Any = model
        options["model_args"] = model_args
    else:  # loaded once for every step
        target = load_model_spec(model, model_args)
        options["model_name"] = model
    steps: list[dict[str, Any]] = []
    calls, n, previous = 0, int(start), None
    result: dict[str, Any] | None = None
    stopped = "precision reached"
    while True:
        if max_calls is not None:
            planned = diagnose(data, target, out, plan=True, max_questions=n, **options)
            if calls + planned["total"]["calls"] > max_calls:
                stopped = f"the next step ({n} questions) would pass --max-calls {max_calls}"
                if result is None:
                    raise DataError(
                        "--max-calls", f"the first {n} questions already need "
                        f"{planned['total']['calls']} calls: give more, or a smaller start",
                    )  # fmt: skip
                break
        result = diagnose(data, target, out, max_questions=n, **options)
        step_calls = sum(c["computed"] for c in result["conditions"].values())
        calls += step_calls
        widths = half_widths(result["summary"])
        widest = max(widths.values(), default=0.0)
        steps.append({"max_questions": n, "calls": step_calls,
                      "widest_half_width": widest if math.isfinite(widest) else None})  # fmt: skip
        taken = result["data"]["datasets"]
        if widest <= precision:
            break
        if taken == previous:
            stopped = "every question was taken"
            break
        previous = taken
        n = next_prefix(n, widest_known(widths, precision), precision)
    assert result is not None
    widths = half_widths(result["summary"])
    result["precision"] = {
        "target": precision,
        "met": max(widths.values(), default=0.0) <= precision,
        "half_widths": {k: (w if math.isfinite(w) else None) for k, w in widths.items()},
        "questions": steps[-1]["max_questions"],
        "calls": calls,
        "max_calls": max_calls,
        "stopped": stopped,
        "steps": steps,
        "importance_sample": options["importance_sample"],
    }
    with FolderLock(Path(out)):
        write_json(Path(out) / "results.json", result, indent=True)
    return result
