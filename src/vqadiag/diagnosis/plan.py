"""``vqadiag diagnose --plan``: what a diagnosis will cost, before it runs (docs/diagnose.md,
"Plan a run").

The plan goes through the very code a run goes through: the same suites build the same
probes of the same conditions and look each up in the prediction store of ``OUT``, but
the probe runner, in planning mode, sends nothing to the model
(:meth:`vqadiag.probes.runner.ProbeContext.run`). A probe whose answer is stored is
*cached*; every other probe is a *call* a run would send, and gets a stand-in answer (its
reference answer, or "") so that the suites go on to build their next conditions, whose
probes never depend on the answers but for the reference answer that keys them. So the
calls the plan announces are the calls the run sends (``tests/test_plan.py`` checks it
on every suite, with and without a warm store).

Nothing is written to ``OUT``: the suites' files go to a scratch folder that is removed
afterwards, and the store is opened read-only. Harness work that is not a model call
(reading images to fingerprint them, building the basic-question dataset when ``--bqd``
is not given and ``OUT`` holds none for these questions) is done as a run would do it.

With ``rate`` (questions per second, e.g. from an earlier run's ``timing.json``) the plan
estimates the wall time of the calls: ``calls / rate`` seconds.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from vqadiag.data.sources.resolve import DataSource
from vqadiag.errors import DataError
from vqadiag.probes.store import PlanningStore, PredictionStore, is_prediction_store
from vqadiag.suites.base import registered_suites
from vqadiag.suites.state import DiagnoseState, Options

PLAN_KIND = "vqadiag.plan"


def plan_diagnosis(
    the_model: Any,
    model_spec: str,
    options: Options,
    out: Path,
    source: DataSource,
    rate: float | None = None,
) -> dict[str, Any]:
    """The plan of ``diagnose`` with these arguments (module docstring)."""
    from vqadiag.diagnosis.running import SuiteRuns, require_questions, run_suites

    if rate is not None and not rate > 0:
        raise DataError("--rate", "must be a positive number of questions per second")
    stored = out / "store.sqlite"
    warm = is_prediction_store(stored)
    with tempfile.TemporaryDirectory(prefix="vqadiag-plan-") as scratch_name:
        scratch = Path(scratch_name)
        root = source.location
        if not source.official:
            from vqadiag.data.sources.prepared import prepared_copy

            root = prepared_copy(source, scratch, options.split)
            require_questions(root, options.split, shown=source.location)
        base = PredictionStore(stored, readonly=True) if warm else None
        store = PlanningStore(base or PredictionStore(scratch / "store.sqlite"))
        for cached in ("bqd.json", "bqd.meta.json"):  # a run's basic questions, if any
            if (out / cached).is_file():
                shutil.copyfile(out / cached, scratch / cached)
        state = DiagnoseState(the_model, store, options, scratch, root)  # type: ignore[arg-type]
        ran = SuiteRuns()
        try:
            run_suites(ran, the_model, state, options, registered_suites())
        finally:
            store.close()
    conditions = {}
    for suite, names in ran.conditions.items():
        for name in names:
            run = state.runs[name]
            conditions[name] = {
                "suite": suite,
                "probes": len(run.answers),
                "cached": run.cached,
                "calls": run.computed,
                "images": len(run.planned_images),
            }
    images = frozenset().union(*(r.planned_images for r in state.runs.values()))
    total = {
        "probes": sum(c["probes"] for c in conditions.values()),
        "cached": sum(c["cached"] for c in conditions.values()),
        "calls": sum(c["calls"] for c in conditions.values()),
        "images": len(images),
    }
    return {
        "kind": PLAN_KIND,
        "model": {
            "name": the_model.name,
            "run": model_spec,
            "fingerprint": the_model.fingerprint(),
        },
        "data": {"root": str(source.location), "split": options.split},
        "store": str(stored) if warm else None,
        "suites": {name: {"conditions": names} for name, names in ran.conditions.items()},
        "skipped": ran.skipped,
        "conditions": conditions,
        "total": total,
        "rate": rate,
        "estimated_seconds": None if rate is None else total["calls"] / rate,
    }
