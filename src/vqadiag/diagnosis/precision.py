"""``vqadiag diagnose --precision EPS``: as many questions as the figures need (docs/diagnose.md,
"A precision budget").

A diagnosis over all questions can cost hundreds of GPU-hours; most figures are known to
within a point or two long before, and a figure that needs many questions (GQA-OOD's
tail, a rare subset) should not make every other suite run on all of them. With
``--precision EPS`` the diagnosis takes the questions in the fixed order of
``--max-questions`` (a prefix that never reshuffles), ``start`` of them first, and grows
**each suite's own prefix** until every bounded figure of that suite has a 95% interval
of half-width at most ``EPS`` points:

* **bounded figures** (:func:`suite_half_widths`): the suites' rates in points with an
  interval (accuracy, GQA-OOD head and tail, the FPVG figures, pairs, consistency, the
  gains, the accuracy under each basic-question noise partition, its widest), not a
  ratio (GQA-OOD's Δ), not R_score, not the importance figures, which run on a declared
  sample. A figure with a value but no finite interval (an empty subset so far) is
  unknown: not met;
* **a suite's next prefix** assumes a half-width shrinking as 1/√n:
  ``n' = ⌈n · (w / EPS)² · 1.2⌉``, at least ``1.5 n``, where ``w`` is the suite's widest
  half-width now;
* **the plain run is shared**: each dataset's plain answers cover the largest prefix
  (``max_questions``), so accuracy and GQA-OOD, which score the plain answers only, get
  every question some suite needed; the conditions a suite adds (relevant-only,
  irrelevant-only, the noise partitions, the no-image runs, the VQA v2 pairs, the
  introspect questions) run on its own prefix (``suite_questions``);
* **each step is an ordinary diagnosis** into the same folder, so the answers of the
  questions already asked come from the store: a step asks only for the new questions,
  and an interrupted run, run again, picks up where it stopped;
* **a suite stops growing** when its target is met, or when it was offered more
  questions than at the step before (its own prefix, or for accuracy and GQA-OOD the
  shared one) and its figures' sizes did not grow (it holds no more questions:
  ``every question taken``); **the
  run stops** when no suite grows, or before a step whose planned calls
  (:func:`vqadiag.diagnosis.plan.plan_diagnosis`) would take the run past ``max_calls``.
  The calls counted are those the steps need from a cold start: the answers a step reads
  from the store count as the calls that stored them, so a run interrupted and run again
  counts what the first attempt asked, and stops where an uninterrupted run stops.

Leave-one-out, GradCAM and attention importance run on the first ``importance_sample``
FPVG questions of the same order (500 by default when the importance suite runs;
``results.json`` ``suites.importance.sample`` states it). ``results.json`` ``precision`` records the
target, whether it was met, each bounded figure's half-width, each suite's prefix and
state, the steps and why the run stopped.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
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


def _bounded_estimates(summary: dict[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """``(suite, figure, estimate)`` of every bounded figure of ``summary``, one per
    estimate of a figure of many (the noise partitions)."""
    for suite, fig in figures():
        if fig.bounded and fig.unit in POINT_UNITS:
            value = summary.get(fig.key)
            for est in value if isinstance(value, list) else [value]:
                yield suite.name, fig.key, est


def _half_width(est: Any) -> float | None:
    """An estimate's half-width; inf for a value without a finite interval; None for no
    value."""
    if not isinstance(est, dict):
        return None
    low, high = est.get("ci_low"), est.get("ci_high")
    if isinstance(low, (int, float)) and isinstance(high, (int, float)):
        w = (float(high) - float(low)) / 2
        return w if math.isfinite(w) else math.inf
    return math.inf if est.get("value") is not None else None


def suite_half_widths(summary: dict[str, Any]) -> dict[str, dict[str, float]]:
    """``{suite: {figure: half-width}}`` of the bounded figures with a value (module
    docstring); a figure of many estimates (the noise partitions) takes its widest."""
    out: dict[str, dict[str, float]] = {}
    for suite, key, est in _bounded_estimates(summary):
        w = _half_width(est)
        if w is not None:
            widths = out.setdefault(suite, {})
            widths[key] = max(w, widths.get(key, w))
    return out


def half_widths(summary: dict[str, Any]) -> dict[str, float]:
    """``{figure: half-width}`` of every bounded figure with a value (module docstring)."""
    return {k: w for widths in suite_half_widths(summary).values() for k, w in widths.items()}


def suite_sizes(summary: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """``{suite: the n of each bounded figure}``: a suite whose prefix grew but whose sizes
    did not has taken every question it has."""
    out: dict[str, list[Any]] = {}
    for suite, key, est in _bounded_estimates(summary):
        if isinstance(est, dict):
            out.setdefault(suite, []).append((key, est.get("n")))
    return {suite: tuple(sizes) for suite, sizes in out.items()}


def widest_known(widths: dict[str, float], precision: float) -> float:
    """The widest finite half-width (what the next prefix is projected from); with none
    finite, a width that asks for :data:`LEAST_GROWTH`."""
    finite = [w for w in widths.values() if math.isfinite(w)]
    return max(finite, default=precision)


def next_prefix(n: int, widest: float, precision: float) -> int:
    """The next number of questions: ``⌈n · (w / EPS)² · 1.2⌉``, at least ``1.5 n``."""
    projected = math.ceil(n * (widest / precision) ** 2 * MARGIN)
    return max(projected, math.ceil(n * LEAST_GROWTH))


@dataclass
class SuitePrefixes:
    """Each suite's prefix and state across the steps (module docstring)."""

    precision: float
    start: int
    #: the suites that run their own conditions on their own prefix
    #: (:attr:`~vqadiag.suites.base.Suite.own_prefix`); the others score the shared
    #: plain run, so they see the largest prefix
    own: frozenset[str] = frozenset()
    prefix: dict[str, int] = field(default_factory=dict)
    #: suite → "met" or "every question taken"; suites not here still grow
    done: dict[str, str] = field(default_factory=dict)
    sizes: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    #: suite → the questions it was offered at the last step
    offered: dict[str, int] = field(default_factory=dict)
    grew: set[str] = field(default_factory=set)

    def max_questions(self) -> int:
        """The shared plain prefix: the largest suite prefix."""
        return max(self.prefix.values(), default=self.start)

    def update(self, summary: dict[str, Any]) -> None:
        """After a step: mark the suites that met the target or took every question, and
        grow the others' prefixes."""
        widths, sizes = suite_half_widths(summary), suite_sizes(summary)
        shared = self.max_questions()
        offered, self.offered, self.grew = self.offered, {}, set()
        for suite, suite_widths in widths.items():
            if suite in self.done:
                continue
            n = min(self.prefix.get(suite, shared), shared) if suite in self.own else shared
            self.offered[suite] = n
            more = suite in offered and n > offered[suite]
            if max(suite_widths.values()) <= self.precision:
                self.done[suite] = "met"
            elif more and sizes.get(suite) == self.sizes.get(suite):
                self.done[suite] = "every question taken"
            else:
                self.prefix[suite] = next_prefix(
                    n, widest_known(suite_widths, self.precision), self.precision
                )
                self.grew.add(suite)
        self.sizes = sizes

    def finished(self) -> bool:
        """No suite grows any more."""
        return not self.grew


def diagnosed_questions(result: dict[str, Any]) -> int:
    """The most questions of one dataset a step diagnosed (``results.json``
    ``data.datasets``): a prefix asked for beyond the split's questions took them all."""
    counts = [d.get("questions", 0) for d in result["data"]["datasets"].values()]
    return max((int(n) for n in counts if isinstance(n, int)), default=0)


def _past_budget(
    planned: dict[str, Any], max_calls: int, step: dict[str, Any], last: dict[str, Any] | None
) -> str:
    """Why the run stops before ``step`` (its plan's ``total``: ``planned``) when the calls
    it needs from a cold start pass ``max_calls``, else ""; a first step that already
    does is one line (``last``: the previous step's results, None before the first)."""
    need = planned["calls"] + planned["cached"]
    if need <= max_calls:
        return ""
    if last is None:
        raise DataError(
            "--max-calls", f"the first {step['max_questions']} questions already need "
            f"{need} calls: give more, or a smaller start",
        )  # fmt: skip
    shown = min(step["max_questions"], diagnosed_questions(last))
    return f"the next step (up to {shown} questions) would pass --max-calls {max_calls}"


def _check_options(precision: float, max_calls: int | None, options: dict[str, Any]) -> None:
    """One line for options ``--precision`` cannot take; drops those it chooses itself."""
    if not precision > 0:
        raise DataError("--precision", "must be a positive number of points")
    if max_calls is not None and max_calls < 1:
        raise DataError("--max-calls", "must be at least 1")
    if options.pop("max_questions", None) is not None:
        raise DataError("--max-questions", "--precision chooses the number of questions")
    if options.pop("plan", False):
        raise DataError("--plan", "plans one diagnosis: give --max-questions, not --precision")
    options.pop("rate", None)
    options.pop("suite_questions", None)


def _step_model(model: str | Any, options: dict[str, Any]) -> Any:
    """What every step diagnoses, after the suite options are checked (in ``options``:
    the importance sample, when the importance suite runs, and how the model is named):
    the model loaded once from its spec; the spec itself on Ray (the actors load it at
    each step); a model object as it is."""
    from vqadiag.diagnosis.diagnose import ONE_SUITE_OPTIONS, check_one_suite_options, parse_suites
    from vqadiag.models.registry import load_model_spec
    from vqadiag.plugins import load_plugins

    load_plugins(options.get("plugins", ()))
    chosen = parse_suites(options.get("suites", "all"))
    check_one_suite_options(chosen, **{k: options.get(k) for k in ONE_SUITE_OPTIONS})
    if options.get("importance_sample") is None and "importance" in chosen:
        options["importance_sample"] = DEFAULT_IMPORTANCE_SAMPLE
    model_args = options.pop("model_args", None)
    if options.get("ray") or not isinstance(model, (str, os.PathLike)):
        options["model_args"] = model_args
        return model
    options["model_name"] = model
    return load_model_spec(model, model_args)


def diagnose_to_precision(
    data: str | Path,
    model: str | Any,
    out: str | Path,
    *,
    precision: float,
    max_calls: int | None = None,
    start: int = START_QUESTIONS,
    **options: Any,
) -> dict[str, Any]:
    """Diagnose on growing prefixes of the questions, suite by suite, until
    ``precision`` (module docstring); ``options`` are
    :func:`~vqadiag.diagnosis.diagnose.diagnose`'s. Returns the last step's
    ``results.json`` with its ``precision`` record."""
    from vqadiag.diagnosis.diagnose import diagnose
    from vqadiag.suites.base import registered_suites

    _check_options(precision, max_calls, options)
    if isinstance(start, bool) or not isinstance(start, int) or start < 1:
        raise DataError("start", f"must be a whole number of questions, 1 or more, got {start!r}")
    target = _step_model(model, options)

    own = frozenset(name for name, s in registered_suites().items() if s.own_prefix)
    prefixes = SuitePrefixes(precision, int(start), own)
    steps: list[dict[str, Any]] = []
    calls = 0  # the calls the steps so far need from a cold start (module docstring)
    result: dict[str, Any] | None = None
    stopped = ""
    while True:
        step = {"max_questions": prefixes.max_questions(),
                "suite_questions": dict(prefixes.prefix) or None}  # fmt: skip
        if max_calls is not None:
            planned = diagnose(data, target, out, plan=True, **step, **options)["total"]
            stopped = _past_budget(planned, max_calls, step, result)
            if stopped:
                break
        result = diagnose(data, target, out, **step, **options)
        need = sum(c["computed"] + c["cached"] for c in result["conditions"].values())
        widest = max(half_widths(result["summary"]).values(), default=0.0)
        steps.append({**step, "calls": need - calls,
                      "widest_half_width": widest if math.isfinite(widest) else None})  # fmt: skip
        calls = need
        prefixes.update(result["summary"])
        if prefixes.finished():
            break
    assert result is not None
    widths = half_widths(result["summary"])
    met = max(widths.values(), default=0.0) <= precision
    if not stopped:
        stopped = "precision reached" if met else "every question was taken"
    diagnosed = diagnosed_questions(result)
    last = steps[-1]["suite_questions"]
    result["precision"] = {
        "target": precision,
        "met": met,
        "half_widths": {k: (w if math.isfinite(w) else None) for k, w in widths.items()},
        "questions": min(steps[-1]["max_questions"], diagnosed),
        "suite_questions": (
            None if last is None else {suite: min(n, diagnosed) for suite, n in last.items()}
        ),
        "suites": dict(prefixes.done),
        "calls": calls,
        "max_calls": max_calls,
        "stopped": stopped,
        "steps": steps,
        "importance_sample": options.get("importance_sample"),
    }
    with FolderLock(Path(out)):
        write_json(Path(out) / "results.json", result, indent=True)
    return result
