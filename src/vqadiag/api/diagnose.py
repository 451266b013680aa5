"""``vqadiag diagnose``: one model, one dataset, every diagnostic of SPEC.md.

:func:`diagnose` loads the model (a run folder or an adapter spec, see
:func:`load_diagnosed_model`), runs every requested suite
(``accuracy, pairs, ood, fpvg, importance, robustness, consistency``) through
the SQLite prediction store in ``RESULT_DIR/store.sqlite`` (resumable: a
restarted run computes only what is not stored), scores each suite with the
same functions as ``vqadiag score ...`` and writes ``RESULT_DIR/results.json``
and ``RESULT_DIR/per_question.jsonl`` (contract: ``docs/results-schema.md``).
A suite whose data is missing or that needs a capability the model lacks is
reported under ``skipped`` with the reason. The same options and seed give a
byte-identical ``results.json`` apart from ``created``; timings go to
``RESULT_DIR/timing.json``.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson

from vqadiag.api.diagnose_common import (
    FPVG_KEYS,
    IMPORTANCE_KEYS,
    REPLACEMENTS,
    SUITES,
    DiagnoseState,
    Options,
    SuiteOutput,
    SuiteSkipped,
)
from vqadiag.data.jsonio import write_json
from vqadiag.errors import DataError
from vqadiag.probes.fingerprints import combined_fingerprint, dataset_fingerprint
from vqadiag.probes.store import PredictionStore

SCHEMA_VERSION = 1
SUMMARY_KEYS = (
    "accuracy",
    "acc_head",
    "acc_tail",
    "delta",
    *FPVG_KEYS,
    *IMPORTANCE_KEYS,
    "pair_both_correct",
    "r_score",
    "reasoning_consistency",
    "noise_accuracy",
)
ADAPTERS = {"files": "prediction files (plain condition only)", "hf": "Hugging Face ViLT / BLIP"}


def parse_suites(text: str | Iterable[str]) -> tuple[str, ...]:
    """``"all"`` or a comma-separated list of suite names → suites in canonical order."""
    items = text.split(",") if isinstance(text, str) else list(text)
    names = {s.strip() for s in items if s.strip()}
    if not names or "all" in names:
        return SUITES
    unknown = sorted(names - set(SUITES))
    if unknown:
        raise DataError("--suite", f"unknown suite(s) {unknown} (known: all, {', '.join(SUITES)})")
    return tuple(s for s in SUITES if s in names)


def load_diagnosed_model(spec: str) -> Any:
    """The model of ``--model``: a run folder (``vqadiag train``), ``files:PREDICTIONS``
    (a prediction file; only plain-prediction suites apply) or ``hf:MODEL_DIR``."""
    kind, sep, rest = spec.partition(":")
    if sep and kind in ADAPTERS and not Path(spec).exists():
        if not rest:
            raise DataError("--model", f"adapter {kind!r} needs a path: {kind}:PATH")
        if kind == "files":
            from vqadiag.models.file_adapter import PredictionFileModel

            return PredictionFileModel(rest)
        from vqadiag.models.hf_adapter import HFModel

        return HFModel(rest)
    from vqadiag.models.registry import load_model

    return load_model(spec)


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("vqadiag", "numpy", "torch", "transformers"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _suite_functions() -> dict[str, Callable[[DiagnoseState], SuiteOutput]]:
    from vqadiag.api import diagnose_gqa as g
    from vqadiag.api import diagnose_vqa as v

    return {
        "accuracy": g.accuracy_suite,
        "pairs": v.pairs_suite,
        "ood": g.ood_suite,
        "fpvg": g.fpvg_suite,
        "importance": g.importance_suite,
        "robustness": g.robustness_suite,
        "consistency": v.consistency_suite,
    }


def _capabilities(model: Any) -> dict[str, Any]:
    c = model.capabilities
    return {
        "visual": c.visual,
        "object_masking": c.object_masking,
        "attention": c.attention,
        "gradients": c.gradients,
        "probabilities": c.probabilities,
    }


def _datasets(state: DiagnoseState) -> dict[str, Any]:
    out: dict[str, Any] = {}
    gqa = state.memo.get("gqa")
    if gqa is not None:
        out["gqa"] = {"split": state.options.split, "questions": len(gqa.qids)}
    runs = state.runs
    if "vqa2.all" in runs:
        out["vqa2"] = {"split": state.options.split, "questions": len(runs["vqa2.all"].answers)}
    if "introspect.main" in runs:
        out["introspect"] = {
            "split": state.options.split,
            "questions": len(runs["introspect.main"].answers),
            "sub_questions": len(runs["introspect.sub"].answers),
        }
    return out


def diagnose(
    data: str | Path,
    model: str,
    out: str | Path,
    *,
    suites: str | Iterable[str] = "all",
    split: str = "val",
    batch_size: int = 256,
    workers: int = 1,
    seed: int = 0,
    n_bootstrap: int = 1000,
    replacement: str = "drop",
    bqd: str | Path | None = None,
    bq_ranker: str = "lasso",
    max_questions: int | None = None,
    max_objects: int = 100,
    progress: bool = False,
) -> dict[str, Any]:
    """Run ``model`` under every condition of the chosen suites and score them (module doc).

    Returns the ``results.json`` object (also written to ``out``).
    """
    if replacement not in REPLACEMENTS:
        raise DataError("--replacement", f"must be one of {', '.join(REPLACEMENTS)}")
    if max_questions is not None and max_questions < 1:
        raise DataError("--max-questions", "must be at least 1")
    root = Path(data)
    if not root.is_dir():
        raise DataError(root, "data folder not found")
    options = Options(
        suites=parse_suites(suites),
        split=split,
        batch_size=int(batch_size),
        workers=int(workers),
        seed=int(seed),
        n_bootstrap=int(n_bootstrap),
        replacement=replacement,
        bqd=None if bqd is None else str(bqd),
        bq_ranker=bq_ranker,
        max_questions=max_questions,
        max_objects=int(max_objects),
        progress=progress,
    )
    the_model = load_diagnosed_model(model)
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise DataError(out_dir, "is a file, expected a result folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    store = PredictionStore(out_dir / "store.sqlite")
    state = DiagnoseState(the_model, store, options, out_dir, root)
    results_by_suite: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = dict.fromkeys(SUMMARY_KEYS)
    functions = _suite_functions()
    try:
        for name in options.suites:
            try:
                output = functions[name](state)
            except SuiteSkipped as why:
                skipped[name] = str(why)
                continue
            results_by_suite[name] = output.result
            rows.extend(output.rows)
            summary.update(output.summary)
    finally:
        store.close()
    model_fp = the_model.fingerprint()
    plain = {n: combined_fingerprint(r.data_fingerprints) for n, r in state.runs.items()}
    data_fp = dataset_fingerprint(root, options.split)
    results: dict[str, Any] = {
        "kind": "vqadiag.results",
        "schema_version": SCHEMA_VERSION,
        "vqadiag_version": _versions()["vqadiag"],
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": {
            "name": the_model.name,
            "run": model,
            "fingerprint": model_fp,
            "capabilities": _capabilities(the_model),
        },
        "data": {
            "root": str(root),
            "fingerprint": data_fp,
            "datasets": _datasets(state),
        },
        "config": options.config(),
        "versions": _versions(),
        "fingerprints": {
            "model": model_fp,
            "data": data_fp,
            "inputs": combined_fingerprint(plain),
            "conditions": {n: r.fingerprint for n, r in sorted(state.runs.items())},
        },
        "suites": results_by_suite,
        "skipped": skipped,
        "summary": summary,
        "conditions": {n: r.counts() for n, r in sorted(state.runs.items())},
        "per_question": "per_question.jsonl",
    }
    write_json(out_dir / "results.json", results, indent=True)
    rows.sort(key=lambda r: (r["suite"], r["id"]))
    with (out_dir / "per_question.jsonl").open("wb") as fh:
        for row in rows:
            fh.write(orjson.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
    timing = {
        "seconds": time.perf_counter() - started,
        "conditions": {n: r.seconds for n, r in sorted(state.runs.items())},
    }
    write_json(out_dir / "timing.json", timing, indent=True)
    return results
