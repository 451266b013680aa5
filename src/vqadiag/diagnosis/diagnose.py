"""``vqadiag diagnose``: one model, one dataset, every registered suite (docs/diagnose.md).

:func:`diagnose` loads the model (a run folder or an adapter spec,
:func:`vqadiag.models.registry.load_model_spec`), runs every requested suite of
the registry (:mod:`vqadiag.suites`: ``accuracy, pairs, gain, ood, fpvg, importance,
robustness, consistency`` and any plug-in's) through
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

import os
import platform
import shutil
import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from vqadiag.arguments import check_counts
from vqadiag.data.io.atomic import (
    FolderLock,
    atomic_write,
    file_digest,
)
from vqadiag.data.io.folders import (
    FolderKind,
    check_owned,
    claim_folder,
    owned_folder,
    read_json_file,
)
from vqadiag.data.io.jsonio import write_json
from vqadiag.data.io.outputs import folders_read, outputs_apart, spec_path
from vqadiag.data.sources.prepared import prepared_copy
from vqadiag.data.sources.resolve import DataSource, resolve_source
from vqadiag.diagnosis.row_lines import RowLines
from vqadiag.diagnosis.running import (
    SuiteRuns,
    require_questions,
    run_suites,
)
from vqadiag.errors import DataError
from vqadiag.models.base import check_model
from vqadiag.models.registry import load_model_spec
from vqadiag.probes.conditions import FILLS
from vqadiag.probes.fingerprints import combined_fingerprint, dataset_fingerprint
from vqadiag.probes.store import PredictionStore, is_prediction_store
from vqadiag.suites.base import registered_suites
from vqadiag.suites.declared import declarations
from vqadiag.suites.state import REPLACEMENTS, DiagnoseState, Options

SCHEMA_VERSION = 1
RESULTS_KIND = "vqadiag.results"


def _earlier_result_folder(folder: Path) -> bool:
    """A result folder an earlier vqadiag wrote: its ``results.json`` is of kind
    ``vqadiag.results``, or its ``store.sqlite`` is a prediction store."""
    results = read_json_file(folder / "results.json")
    if isinstance(results, dict) and results.get("kind") == RESULTS_KIND:
        return True
    return is_prediction_store(folder / "store.sqlite")


#: ``diagnose --out``
RESULT_FOLDER = FolderKind(
    "result folder", "vqadiag results (results.json / store.sqlite)", _earlier_result_folder
)


def parse_suites(text: str | Iterable[str]) -> tuple[str, ...]:
    """``"all"`` or a comma-separated list of suite names → suites in registry order;
    an empty list names no suite and is refused (it is not read as all of them)."""
    known = tuple(registered_suites())
    items = text.split(",") if isinstance(text, str) else list(text)
    names = {s.strip() for s in items if s.strip()}
    if not names:
        raise DataError("--suite", f"no suite named (give all, or some of {', '.join(known)})")
    if "all" in names:
        return known
    unknown = sorted(names - set(known))
    if unknown:
        raise DataError("--suite", f"unknown suite(s) {unknown} (known: all, {', '.join(known)})")
    return tuple(s for s in known if s in names)


#: the built-in options one suite alone reads: parameter → (command-line name, suite)
ONE_SUITE_OPTIONS = {
    "bqd": ("--bqd", "robustness"),
    "bq_ranker": ("--bq-ranker", "robustness"),
    "importance_sample": ("--importance-sample", "importance"),
}


def check_one_suite_options(chosen: Iterable[str], **given: Any) -> None:
    """One line for an option of :data:`ONE_SUITE_OPTIONS` ``given`` (not None) whose one
    suite ``chosen`` leaves out, and for a BQD given with a ranker (it was ranked when
    it was built), instead of accepting what would do nothing (docs/diagnose.md,
    "Options that would do nothing")."""
    chosen = tuple(chosen)
    if given.get("bqd") is not None and given.get("bq_ranker") is not None:
        raise DataError("--bq-ranker", "ranks the BQD built without --bqd: give one of them")
    for name, value in given.items():
        option, suite = ONE_SUITE_OPTIONS[name]
        if value is not None and suite not in chosen:
            raise DataError(option, f"is read by the {suite} suite alone, which --suite leaves out")


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("vqadiag", "numpy", "torch", "transformers"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


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


def _model_settings(model: Any) -> dict[str, Any]:
    """``{"settings": …}`` for a model that reports how it is asked (generative models:
    prompt, extraction, served model …), else nothing."""
    settings = getattr(model, "settings", None)
    return {"settings": settings()} if callable(settings) else {}


def diagnose(
    data: str | Path,
    model: str | Any,
    out: str | Path,
    *,
    suites: str | Iterable[str] = "all",
    split: str | None = None,
    batch_size: int = 256,
    workers: int = 1,
    seed: int = 0,
    n_bootstrap: int = 1000,
    replacement: str = "drop",
    bqd: str | Path | None = None,
    bq_ranker: str | None = None,
    max_questions: int | None = None,
    max_objects: int = 100,
    progress: bool = False,
    plugins: Iterable[str] = (),
    images: str | Path | None = None,
    pixel_fill: str = "mean",
    allow_missing_images: bool = False,
    model_args: Mapping[str, Any] | None = None,
    data_format: str = "auto",
    scene_graphs: str | Path | None = None,
    pairs: str | Path | None = None,
    ood_split: str | Path | None = None,
    choices: str | Path | None = None,
    plan: bool = False,
    rate: float | None = None,
    reuse_inputs: bool = True,
    importance_sample: int | None = None,
    suite_questions: Mapping[str, int] | None = None,
    model_name: str | None = None,
    ray: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ``model`` under every condition of the chosen suites and score them (module doc).

    ``reuse_inputs``: a probe whose model input another probe of the diagnosis had
    takes its answer (docs/diagnose.md, "No request asked twice"); False asks every
    probe. ``importance_sample``: importance on the first N FPVG questions only.
    ``suite_questions``: suite → the first N questions of the ``max_questions`` order that
    suite runs its own conditions on (what ``--precision`` grows suite by suite).
    ``model_name``: what ``results.json`` calls a model given as an object (its spec).
    ``ray``: run an in-process model on Ray actors, ``{"actors": N, "gpus_per_actor": G,
    "address": ADDR}`` (:mod:`vqadiag.models.ray_actors`; ``model`` must be a spec).
    ``plan``: call no model and write nothing to ``out``; return the plan
    (:func:`vqadiag.diagnosis.plan.plan_diagnosis`: per suite and condition the calls a
    run would send, their images and the answers already stored in ``out``; with
    ``rate`` questions per second, the estimated time).

    ``data``: the official folders, a Hugging Face dataset copy (its folder, a table
    file or its name in the local caches) or a VLMEvalKit TSV, detected unless
    ``data_format`` names it (docs/data-sources.md); a copy is read through its
    prepared copy in ``out``. ``scene_graphs``, ``pairs``, ``ood_split`` (GQA-OOD's
    released files' folder) and ``choices`` add those files beside any source.

    ``images``: the folder of the image files (default: found in the data folder);
    ``pixel_fill``: how a pixel model's replaced pixels are filled (mean, blur, noise);
    ``allow_missing_images``: leave out (and count) questions whose image is missing
    instead of stopping. ``model_args``: an adapter's settings (``--model-args``,
    docs/vlms.md). ``plugins``: modules or ``.py`` files that register more suites or model
    adapters (:func:`vqadiag.plugins.load_plugins`). Returns the ``results.json``
    object (also written to ``out``).
    """
    from vqadiag.plugins import load_plugins

    load_plugins(plugins)
    chosen = parse_suites(suites)  # after the plug-ins, which may register suites
    check_one_suite_options(
        chosen, bqd=bqd, bq_ranker=bq_ranker, importance_sample=importance_sample
    )
    read = spec_path(model) if isinstance(model, (str, os.PathLike)) else None
    outputs_apart(
        {"--out": out},
        {"--data": data, "--model": read, "--bqd": bqd, "--images": images,
         "--scene-graphs": scene_graphs, "--pairs": pairs, "--ood-split": ood_split,
         "--choices": choices},
        read_whole=folders_read(data=data, model=read, images=images),
    )  # fmt: skip
    if rate is not None and not plan:
        raise DataError("--rate", "goes with --plan (it estimates the plan's time)")
    if pixel_fill not in FILLS:
        raise DataError("--pixel-fill", f"must be one of {', '.join(FILLS)}")
    if images is not None and not Path(images).is_dir():
        raise DataError(Path(images), "images folder not found")
    if replacement not in REPLACEMENTS:
        raise DataError("--replacement", f"must be one of {', '.join(REPLACEMENTS)}")
    check_counts(batch_size=batch_size, workers=workers, seed=seed, n_bootstrap=n_bootstrap,
                 max_objects=max_objects, max_questions=max_questions)  # fmt: skip
    if importance_sample is not None and importance_sample < 1:
        raise DataError("--importance-sample", "must be at least 1")
    _check_suite_questions(suite_questions)
    source = resolve_source(data, data_format)
    split = source.default_split() if split is None else split
    extras = _extra_files(scene_graphs=scene_graphs, pairs=pairs, ood_split=ood_split,
                          choices=choices)  # fmt: skip
    if source.official:
        require_questions(source.location, split)
    if plan:  # a plan writes nothing to OUT: an archived, read-only folder may be planned
        check_owned(out, RESULT_FOLDER)
    else:
        owned_folder(out, RESULT_FOLDER)  # refused before the model loads
    options = Options(
        suites=chosen,
        split=split,
        batch_size=int(batch_size),
        workers=int(workers),
        seed=int(seed),
        n_bootstrap=int(n_bootstrap),
        replacement=replacement,
        bqd=None if bqd is None else str(bqd),
        **({} if bq_ranker is None else {"bq_ranker": bq_ranker}),
        max_questions=max_questions,
        max_objects=int(max_objects),
        progress=progress,
        images=None if images is None else str(Path(images).resolve()),
        fill=pixel_fill,
        allow_missing_images=bool(allow_missing_images),
        plan=bool(plan),
        reuse_inputs=bool(reuse_inputs),
        importance_sample=importance_sample,
        suite_questions=None if not suite_questions else dict(suite_questions),
        **extras,
    )
    if options.bqd is not None and "robustness" in options.suites:
        _check_bqd(options.bqd)
    if ray is not None and not isinstance(model, (str, os.PathLike)):
        raise DataError("--ray-actors", "the actors load the model from its spec: give one")
    if ray is not None and str(model).split(":", 1)[0] in ("openai", "files"):
        raise DataError(
            "--ray-actors", "runs in-process models; openai: spreads over its servers itself "
            "(openai:URL1,URL2) and files: calls no model",
        )  # fmt: skip
    if ray is not None:  # the actors load the model; the driver never does
        from vqadiag.models.ray_actors import RayModel

        model = str(model)
        the_model = RayModel(model, model_args, plugins=tuple(plugins), **ray)
    elif isinstance(model, (str, os.PathLike)):
        if model_name is not None:
            raise DataError("model_name", "names a model given as an object: a spec names itself")
        model = str(model)
        the_model = load_model_spec(model, model_args)
    else:  # a model object (the Python API; conditions export's recorder)
        check_model(model)
        if model_args:
            raise DataError(
                "--model-args", "set an adapter's settings as it loads; a model object is built"
            )
        the_model = model
        model = model_name or str(getattr(model, "name", type(model).__name__))
    try:
        _check_removal_options(the_model, options)
        return _plan_or_run(the_model, model, options, Path(out), source, rate, plan=plan)
    finally:
        if ray is not None:
            the_model.close()


def _check_bqd(path: str) -> None:
    """Read the whole ``--bqd`` file before the model loads: a malformed one was found only
    when the robustness suite came to it, after every earlier suite's model calls."""
    from vqadiag.data.formats.bqd import read_bqd_texts

    for _ in read_bqd_texts(path):
        pass


def _check_removal_options(the_model: Any, options: Options) -> None:
    """``--pixel-fill`` fills the replaced pixels of a model that reads pixels, and
    ``--replacement`` replaces the removed objects of one that reads objects (any other
    model ignores it); one set away from its default for a model that never reads it is refused
    rather than recorded as if it had been used (docs/diagnose.md, "Options that would do
    nothing"). A model that answers no rerun (prediction files) is left to its own checks."""
    caps = the_model.capabilities
    if not caps.reruns:
        return
    name = getattr(the_model, "name", "the model")
    if caps.visual != "objects" and options.replacement != REPLACEMENTS[0]:
        instead = " (use --pixel-fill)" if caps.pixel_input else ""
        raise DataError(
            "--replacement", f"replaces removed objects; {name} reads {caps.visual}{instead}"
        )
    if not caps.pixel_input and options.fill != FILLS[0]:
        raise DataError(
            "--pixel-fill", f"fills replaced pixels; {name} reads {caps.visual}, not pixels"
        )


def _plan_or_run(
    the_model: Any, model: str, options: Options, out: Path, source: DataSource,
    rate: float | None, *, plan: bool,
) -> dict[str, Any]:  # fmt: skip
    """The plan, or the run into the claimed and locked ``out``."""
    if plan:
        from vqadiag.diagnosis.plan import plan_diagnosis

        return plan_diagnosis(the_model, model, options, out, source, rate)
    out_dir = claim_folder(out, RESULT_FOLDER)
    with FolderLock(out_dir):
        root = source.location
        if not source.official:
            root = prepared_copy(source, out_dir, options.split)
            require_questions(root, options.split, shown=source.location)
        return _diagnose_into(the_model, model, options, out_dir, root, source)


def _extra_files(**given: str | Path | None) -> dict[str, str]:
    """The extra files' options that were given, checked (a file; ``ood_split`` a
    folder), as absolute paths."""
    out: dict[str, str] = {}
    for name, value in given.items():
        if value is None:
            continue
        path = Path(value)
        wanted = path.is_dir() if name == "ood_split" else path.is_file()
        if not wanted:
            kind = "folder" if name == "ood_split" else "file"
            raise DataError(path, f"--{name.replace('_', '-')}: {kind} not found")
        out[name] = str(path.resolve())
    return out


def _diagnose_into(
    the_model: Any, model: str, options: Options, out_dir: Path, root: Path, source: DataSource
) -> dict[str, Any]:
    """Run the suites into the locked ``out_dir``; per_question.jsonl is written before
    results.json, which records its row count and digest and so commits it."""
    started = time.perf_counter()
    _clear_derived(out_dir)
    store = PredictionStore(out_dir / "store.sqlite")
    state = DiagnoseState(the_model, store, options, out_dir, root)
    ran = SuiteRuns()
    registry = registered_suites()
    try:
        run_suites(ran, the_model, state, options, registry)
    finally:
        store.close()
    results = _results(the_model, model, options, root, source, state, registry, ran)
    _write_per_question(out_dir / "per_question.jsonl", ran.rows, results)
    write_json(out_dir / "results.json", results, indent=True)
    _write_timing(out_dir / "timing.json", the_model, state, started)
    return results


#: what a run writes into its folder afresh, its committing file first: an earlier run's
#: prediction files and inputs (another model, suites this run leaves out) must not stay
#: beside this run's results (the store and the basic-question dataset are kept)
DERIVED = ("results.json", "per_question.jsonl", "timing.json", "predictions", "inputs")


#: of :data:`DERIVED`, the folders a run writes (the others are files)
DERIVED_FOLDERS = ("predictions", "inputs")


def _clear_derived(out_dir: Path) -> None:
    """Remove :data:`DERIVED` from ``out_dir`` (a link is removed, not followed). A
    folder where a run writes a file, or a file where it writes a folder, is not one of
    them: one line, before anything is removed (a folder named ``results.json`` was
    deleted with what it held)."""
    for name in DERIVED:
        path = out_dir / name
        if path.is_symlink() or not path.exists():
            continue
        if path.is_dir() != (name in DERIVED_FOLDERS):
            expected = "folder" if name in DERIVED_FOLDERS else "file"
            found = "folder" if path.is_dir() else "file"
            raise DataError(path, f"is a {found}, expected a {expected}: not one vqadiag wrote")
    for name in DERIVED:
        path = out_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def _results(
    the_model: Any,
    model: str,
    options: Options,
    root: Path,
    source: DataSource,
    state: DiagnoseState,
    registry: Mapping[str, Any],
    ran: SuiteRuns,
) -> dict[str, Any]:
    """The ``results.json`` object, without the per_question.jsonl row count and digest."""
    model_fp = the_model.fingerprint()
    plain = {n: combined_fingerprint(r.data_fingerprints) for n, r in state.runs.items()}
    data_fp = _data_fingerprint(root, options)
    return {
        "kind": RESULTS_KIND,
        "schema_version": SCHEMA_VERSION,
        "vqadiag_version": _versions()["vqadiag"],
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": {
            "name": the_model.name,
            "run": model,
            "fingerprint": model_fp,
            "capabilities": the_model.capabilities.to_json(),
            **_model_settings(the_model),
        },
        "data": {
            "root": str(root.resolve()),
            "fingerprint": data_fp,
            **({} if source.official else {"source": source.describe()}),
            "datasets": _datasets(state),
            **({"missing_images": len(state.missing_images)} if state.missing_images else {}),
        },
        "config": options.config(),
        "versions": _versions(),
        "fingerprints": {
            "model": model_fp,
            "data": data_fp,
            "inputs": combined_fingerprint(plain),
            "conditions": {n: r.fingerprint for n, r in sorted(state.runs.items())},
        },
        "suites": ran.results,
        "skipped": ran.skipped,
        "summary": ran.summary,
        "declarations": declarations(registry),
        "conditions": {n: r.counts() for n, r in sorted(state.runs.items())},
        "per_question": "per_question.jsonl",
    }


def _data_fingerprint(root: Path, options: Options) -> str:
    """The data folder's fingerprint (:func:`dataset_fingerprint`), with a prepared copy's
    source fingerprint and the extra files' digests when there are any
    (docs/data-sources.md, "Fingerprints")."""
    from vqadiag.data.sources.prepared import recorded_source

    base = dataset_fingerprint(root, options.split)
    recorded = recorded_source(root)
    extras = {
        name: file_digest(path) if Path(path).is_file() else dataset_fingerprint(path, "ood_")
        for name, path in (
            ("scene_graphs", options.scene_graphs), ("pairs", options.pairs),
            ("ood_split", options.ood_split), ("choices", options.choices),
        )
        if path is not None
    }  # fmt: skip
    if recorded is None and not extras:
        return base
    source = recorded["fingerprint"] if recorded is not None else None
    return combined_fingerprint([base, source, extras])


def _check_suite_questions(suite_questions: Mapping[str, int] | None) -> None:
    """One line for a ``suite_questions`` entry that names no suite or is not a positive
    number of questions."""
    known = registered_suites()
    for name, n in (suite_questions or {}).items():
        if name not in known:
            raise DataError("suite_questions", f"no suite is called {name!r}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise DataError("suite_questions", f"{name}: must be a positive number of questions")


def _write_per_question(table: Path, rows: RowLines, results: dict[str, Any]) -> None:
    """Write the rows (:attr:`~vqadiag.diagnosis.running.SuiteRuns.rows`), sorted by suite
    and id, to per_question.jsonl and record their count and the file's digest in
    ``results``."""
    with atomic_write(table) as fh:
        for line in rows.lines():
            fh.write(line)
    results["per_question_rows"] = len(rows)
    results["per_question_sha256"] = file_digest(table)


def _write_timing(path: Path, the_model: Any, state: DiagnoseState, started: float) -> None:
    """Write timing.json: the diagnosis' seconds, each condition's, and the requests an
    adapter sent."""
    timing: dict[str, Any] = {
        "seconds": time.perf_counter() - started,
        "conditions": {n: r.seconds for n, r in sorted(state.runs.items())},
    }
    if hasattr(the_model, "requests_sent"):
        timing["requests_sent"] = int(the_model.requests_sent)
    write_json(path, timing, indent=True)
