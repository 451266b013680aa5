"""Glue of ``vqadiag demo``: from nothing to a report comparing six models (five with
``--no-chat-vlm`` and in the ``tiny`` size).

Stages (each prints a header on stderr, then its own progress bars):

1. ``OUT/world``: a synthetic world (:func:`vqadiag.synth.generate_world`);
2. ``OUT/runs/<model>``: train prior, question-only, UpDn, symbolic, the pixel model and
   the chat VLM (:func:`vqadiag.workflows.models.train`);
3. ``OUT/results/<model>``: diagnose each with every suite
   (:func:`vqadiag.diagnosis.diagnose.diagnose`, resumable from its prediction store);
4. ``OUT/report``: ``report.json`` + ``report.html`` (:func:`vqadiag.workflows.report.report`).

The chat VLM's training and diagnosis run in the demo's second lane
(:mod:`vqadiag.workflows.demo_lane`): a process of its own on a core the others leave
idle, while the five models are trained and diagnosed here (docs/report.md, "Six models
on two cores").

Resume: each finished stage writes ``OUT/stages/<stage>.json`` with its
configuration and the fingerprint of what it produced (world: ``world.json``'s
seed / images / bias / feature dim / world version; a run: its model, epochs, seed,
world and a digest of the model's default options, and
:func:`~vqadiag.models.checkpoint.run_fingerprint`;
results: the model fingerprint and a hash of ``results.json``; report: the hashes of its
inputs). A stage whose record matches its configuration and whose output still has that
fingerprint is skipped; otherwise it runs again (and so do the stages after it, whose inputs
changed). An interrupted diagnosis resumes from its store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vqadiag.data.io.heap import HeapTrimmer
from vqadiag.errors import DataError
from vqadiag.workflows.demo_lane import InlineLane, ProcessLane, open_lane, outcome
from vqadiag.workflows.demo_records import (
    Stages,
    defaults_digest,
    file_hash,
    results_hash,
    run_fingerprint_of,
)

MODELS = ("prior", "question-only", "updn", "symbolic", "pixel")
#: the sixth model, trained and diagnosed with ``chat_vlm`` (``vqadiag demo --chat-vlm``;
#: docs/chat-vlm.md, "In the demo")
CHAT_VLM = "chat-vlm"

#: the chat VLM's answering epochs and questions diagnosed per split in the ``small`` and
#: ``medium`` demos (``medium`` diagnoses it on every question)
CHAT_EPOCHS, CHAT_QUESTIONS = 6, 300
#: the chat VLM's options in every demo: one intra-op thread, so that its weights are the
#: same whether it trains beside the other models (a core of its own) or alone
CHAT_OPTIONS: dict[str, Any] = {"threads": 1}
#: the ``small`` and ``medium`` demos' chat VLM: the question before the image, the
#: tower pre-trained on mirrored and shifted images, batches of 32 (docs/chat-vlm.md,
#: "In the demo": 57.0 on all val questions against the defaults' 50.0)
DEMO_CHAT_OPTIONS: dict[str, Any] = {
    "question_first": True, "pretrain_augment": True, "batch_size": 32,
}  # fmt: skip
#: the ``tiny`` demo's chat VLM (for tests: seconds, not minutes)
TINY_CHAT_OPTIONS: dict[str, Any] = {
    "image_size": 32, "patch_size": 16, "vision_dim": 32, "vision_layers": 1,
    "vision_heads": 2, "text_dim": 32, "text_layers": 1, "text_heads": 2, "vocab_size": 400,
    "pretrain_epochs": 1, "batch_size": 32,
}  # fmt: skip

#: World size, training epochs, questions diagnosed, bootstrap resamples, the ranker of
#: the basic-question dataset (robustness suite), and whether the chat VLM is the sixth
#: model (with its options and questions per split) per size. ``small`` is what `vqadiag
#: demo` runs by default (≲ 10 minutes on 2 CPU cores), so it ranks basic questions by
#: BLEU-1 (seconds) instead of the paper's LASSO (minutes); ``tiny`` is for tests.
SIZES: dict[str, dict[str, Any]] = {
    "tiny": {
        "images": 60,
        "epochs": {
            "question-only": 1,
            "updn": 1,
            "symbolic": None,
            "prior": None,
            "pixel": 1,
            CHAT_VLM: 1,
        },
        "max_questions": 60,
        "chat_vlm": False,
        "chat_vlm_options": TINY_CHAT_OPTIONS,
        "chat_vlm_questions": 20,
        "n_bootstrap": 100,
        "bq_ranker": "bleu1",
    },
    "small": {
        "images": 2000,
        "epochs": {
            "question-only": 6,
            "updn": 10,
            "symbolic": None,
            "prior": None,
            "pixel": 8,
            CHAT_VLM: CHAT_EPOCHS,
        },
        "max_questions": 1000,
        "chat_vlm": True,
        "chat_vlm_options": DEMO_CHAT_OPTIONS,
        "chat_vlm_questions": CHAT_QUESTIONS,
        "n_bootstrap": 1000,
        "bq_ranker": "bleu1",
    },
    "medium": {
        "images": 2000,
        "epochs": {
            "question-only": 6,
            "updn": 12,
            "symbolic": None,
            "prior": None,
            "pixel": 10,
            CHAT_VLM: CHAT_EPOCHS,
        },
        "max_questions": None,
        "chat_vlm": True,
        "chat_vlm_options": DEMO_CHAT_OPTIONS,
        "chat_vlm_questions": None,
        "n_bootstrap": 1000,
        "bq_ranker": "lasso",
    },
}


def demo(
    out: str | Path = "vqadiag-demo",
    *,
    size: str = "small",
    seed: int = 0,
    images: int | None = None,
    epochs: int | None = None,
    max_questions: int | None = None,
    n_bootstrap: int | None = None,
    bq_ranker: str | None = None,
    progress: bool = True,
    chat_vlm: bool | None = None,
    device: str = "cpu",
    second_process: bool = True,
) -> dict[str, Any]:
    """Generate a world, train five models (six with ``chat_vlm``, by default the size's
    ``chat_vlm``: the chat VLM of docs/chat-vlm.md, diagnosed on the size's
    ``chat_vlm_questions`` questions per split, in a second process where two cores are
    usable and ``second_process``), diagnose them and write the report.

    ``size`` picks :data:`SIZES`; ``images``, ``epochs`` (question-only, UpDn and pixel),
    ``max_questions`` (questions diagnosed per split), ``n_bootstrap`` and
    ``bq_ranker`` override it; ``device`` is where the chat VLM trains and answers
    (docs/chat-vlm.md, "On a GPU"; checked before any stage). The basic-question dataset
    of the robustness suite is built once, by the first model's diagnosis, and reused by
    the others. Returns
    ``{out, size, seed, images, bq_ranker, stages: [{stage, status, seconds}],
    models: {name: {run, results, val_accuracy, val_questions}}, report: {html, json},
    seconds}``.
    """
    plan = _plan(size, seed, images, epochs, max_questions, n_bootstrap, bq_ranker, progress)
    if chat_vlm is None:
        chat_vlm = bool(plan.preset["chat_vlm"])
    if chat_vlm:
        _check_chat_libraries()
    plan = replace(plan, device=_chat_device(device, chat_vlm))
    root = _demo_folder(out)
    start = time.perf_counter()
    stages = Stages(root, progress)
    names = (*MODELS, CHAT_VLM) if chat_vlm else MODELS
    stages.total = 2 + 2 * len(names)
    world = root / "world"
    report_dir = root / "report"
    with HeapTrimmer():  # the freed heap goes back to the OS (docs/report.md, "Memory")
        world_fp = _world_stage(stages, plan, world)
        lane = open_lane(chat_vlm and second_process)
        try:
            models, result_dirs = _run_models(stages, plan, root, world, world_fp, lane, chat_vlm)
        except BaseException:
            lane.close(cancel=True)
            raise
        lane.close()
        _report_stage(stages, plan, result_dirs, report_dir)
    html = report_dir / "report.html"
    stages.console.print(f"[bold]report:[/bold] {html.resolve()}")
    return {
        "out": str(root),
        "size": size,
        "seed": seed,
        "images": plan.images,
        "bq_ranker": plan.ranker,
        "stages": stages.log,
        "models": models,
        "report": {"html": str(html), "json": str(report_dir / "report.json")},
        "seconds": time.perf_counter() - start,
    }


def _run_models(
    stages: Stages, plan: _Plan, root: Path, world: Path, world_fp: str | None,
    lane: InlineLane | ProcessLane, chat_vlm: bool,
) -> tuple[dict[str, dict[str, Any]], list[Path]]:  # fmt: skip
    """Train and diagnose the five models here, and the chat VLM (with ``chat_vlm``) in
    ``lane``: its training first, its diagnosis once the first diagnosis has written the
    basic-question dataset it reuses (docs/report.md, "Six models on two cores"); returns
    each model's ``{run, val_accuracy, val_questions, results}`` and the result folders,
    the chat VLM's last."""
    args = (plan, root, world, world_fp, CHAT_VLM)
    chat_train = None
    if chat_vlm:
        title = _train_title(plan, CHAT_VLM)
        chat_train = _submit(stages, lane, _train_stage, args, title)
    models = {name: _train_stage(stages, plan, root, world, world_fp, name) for name in MODELS}
    result_dirs: list[Path] = []
    chat_diagnosis = None
    for name in MODELS:
        res = _diagnose_stage(stages, plan, root, world, world_fp, name, result_dirs)
        models[name]["results"] = str(res)
        result_dirs.append(res)
        if chat_vlm and chat_diagnosis is None:
            title = f"diagnose {CHAT_VLM}{_questions_note(plan, CHAT_VLM)}"
            chat_diagnosis = _submit(stages, lane, _diagnose_stage, (*args, result_dirs[:1]), title)
            lane.last_job_submitted()  # its memory is freed while the others go on
    if chat_train is None or chat_diagnosis is None:
        return models, result_dirs
    where = root / "runs" / CHAT_VLM
    models[CHAT_VLM] = _lane_result(stages, lane, chat_train, "the chat VLM's training", where)
    res = _lane_result(stages, lane, chat_diagnosis, "the chat VLM's diagnosis", where)
    models[CHAT_VLM]["results"] = str(res)
    result_dirs.append(res)
    return models, result_dirs


def _submit(
    stages: Stages, lane: InlineLane | ProcessLane, stage: Callable[..., Any],
    args: tuple[Any, ...], title: str,
) -> Future[Any]:  # fmt: skip
    """Hand one of the chat VLM's stages (``stage(stages, *args)``, ``args`` starting with
    the plan) to ``lane`` (:func:`_chat_stage`). Run here, the stage prints its header and
    progress through ``stages``; in a worker process it shows nothing, and this prints its
    header (``title``, and where it runs)."""
    if not lane.parallel:
        return lane.submit(_chat_stage, stage, args, stages)
    stages.header(f"{title}, in a second process")
    plan = replace(args[0], progress=False)
    return lane.submit(_chat_stage, stage, (plan, *args[1:]), None)


def _lane_result(
    stages: Stages, lane: InlineLane | ProcessLane, future: Future[Any], what: str,
    where: Path,
) -> Any:  # fmt: skip
    """The chat VLM stage's result (waiting for it); from a worker process its stage log
    joins this demo's, with a line saying how it went."""
    if lane.parallel and not future.done():
        stages.console.print(f"  waiting for {what} (second process) …")
    value, log = outcome(future, what, where)
    if lane.parallel:
        stages.log.extend(log)
        for entry in log:
            how = (
                "already done with the same configuration: skipped"
                if entry["status"] == "skipped"
                else f"done in {entry['seconds']:.1f} s"
            )
            stages.console.print(f"  {what} (second process): {how}")
    return value


def _chat_stage(
    stage: Callable[..., Any], args: tuple[Any, ...], stages: Stages | None
) -> tuple[Any, list[dict[str, Any]]]:
    """A chat VLM stage run in a lane (:func:`_run_models`): ``stage(stages, *args)`` and
    the log entries it added; ``stages`` None (a worker process): a silent stage log of
    its own in the demo folder ``args[1]``."""
    own = stages or Stages(args[1], False)
    done = len(own.log)
    return stage(own, *args), own.log[done:]


@dataclass(frozen=True)
class _Plan:
    """The demo's settings once the size's preset and the overrides are merged."""

    preset: Mapping[str, Any]
    seed: int
    images: int
    epochs: int | None
    max_questions: int | None
    n_bootstrap: int
    ranker: str
    progress: bool
    #: where the chat VLM trains and answers (the other models train on the CPU)
    device: str = "cpu"


def _check_chat_libraries() -> None:
    """The chat VLM's libraries are installed, or one line says how to get them, before
    any stage runs."""
    import importlib.util

    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise DataError(
            "--chat-vlm",
            f"the chat VLM needs {' and '.join(missing)}: pip install 'vqadiag[hf]' (after "
            "pip install torch==2.13.0 for the CPU build), or run the demo with --no-chat-vlm",
        )


def _epochs(plan: _Plan, name: str) -> int | None:
    """Training epochs of model ``name``: the size's, or ``--epochs`` (not the chat VLM's;
    None: a model that has none)."""
    model_epochs = plan.preset["epochs"][name]
    if plan.epochs is not None and model_epochs is not None and name != CHAT_VLM:
        model_epochs = int(plan.epochs)
    return model_epochs


def _train_title(plan: _Plan, name: str) -> str:
    """The header of model ``name``'s training stage."""
    epochs = _epochs(plan, name)
    return f"train {name}" + (f" ({epochs} epochs)" if epochs else "")


def _questions_note(plan: _Plan, name: str) -> str:
    """`` (on N questions per split)`` in the header of a diagnosis on fewer questions
    than the plan's, else empty."""
    questions = _questions(plan, name)
    return "" if questions == plan.max_questions else f" (on {questions} questions per split)"


def _questions(plan: _Plan, name: str) -> int | None:
    """Questions diagnosed per split for model ``name`` (None: all): the plan's, or for the
    chat VLM the size's ``chat_vlm_questions`` when that is fewer."""
    max_questions = plan.max_questions
    if name == CHAT_VLM and plan.preset["chat_vlm_questions"] is not None:
        limit = int(plan.preset["chat_vlm_questions"])
        max_questions = limit if max_questions is None else min(limit, int(max_questions))
    return max_questions


def _chat_options(plan: _Plan) -> dict[str, Any]:
    """The chat VLM's training options: :data:`CHAT_OPTIONS`, the size's, and the device
    when it is not the CPU."""
    options = {**CHAT_OPTIONS, **plan.preset["chat_vlm_options"]}
    if plan.device != "cpu":
        options["device"] = plan.device
    return options


def _chat_device(device: str, chat_vlm: bool) -> str:
    """``device`` (``cpu`` for any CPU name), refused in one line when it is not the CPU
    and there is no chat VLM to use it, or when the chat VLM cannot train there."""
    if device == "cpu":
        return device
    if not chat_vlm:
        raise DataError(
            "--device",
            "only the chat VLM uses a device, and this demo has none (--no-chat-vlm or the "
            "tiny size; --chat-vlm adds it); the other models train on the CPU",
        )
    from vqadiag.models.reference.chat_vlm import training_device

    parsed = training_device({"device": device}, "--device")
    return "cpu" if parsed.type == "cpu" else device


def _plan(
    size: str,
    seed: int,
    images: int | None,
    epochs: int | None,
    max_questions: int | None,
    n_bootstrap: int | None,
    bq_ranker: str | None,
    progress: bool,
) -> _Plan:
    """Check ``size`` and ``images`` and merge the overrides into the size's preset."""
    if size not in SIZES:
        raise DataError("--size", f"unknown size {size!r} (sizes: {', '.join(SIZES)})")
    preset = SIZES[size]
    n_images = int(images if images is not None else preset["images"])
    if n_images < 20:
        raise DataError("--images", "a demo world needs at least 20 images")
    n_boot = int(n_bootstrap if n_bootstrap is not None else preset["n_bootstrap"])
    max_q = max_questions if max_questions is not None else preset["max_questions"]
    ranker = bq_ranker or preset["bq_ranker"]
    return _Plan(preset, seed, n_images, epochs, max_q, n_boot, ranker, progress)


def _demo_folder(out: str | Path) -> Path:
    """Create the demo folder ``out`` (an existing file there is an error)."""
    root = Path(out)
    if root.exists() and not root.is_dir():
        raise DataError(root, "is a file, expected the demo folder")
    root.mkdir(parents=True, exist_ok=True)
    return root


def _world_stage(stages: Stages, plan: _Plan, world: Path) -> str | None:
    """Stage 1: generate the synthetic world (unless done); returns its fingerprint."""
    from vqadiag.synth.world import WORLD_VERSION

    world_config = {
        "images": plan.images, "seed": plan.seed, "bias": 0.8, "feature_dim": 64,
        "version": WORLD_VERSION,
    }  # fmt: skip
    world_fp = file_hash(world / "world.json")
    title = f"synthetic world: {plan.images} images, seed {plan.seed} → {world}"
    if stages.done("world", world_config, world_fp):
        stages.skip("world", title)
    else:
        from vqadiag.synth import generate_world

        stages.header(title)
        t0 = time.perf_counter()
        generate_world(world, images=plan.images, seed=plan.seed, progress=plan.progress)
        world_fp = file_hash(world / "world.json")
        stages.finish("world", world_config, world_fp, time.perf_counter() - t0)
    return world_fp


def _train_stage(
    stages: Stages, plan: _Plan, root: Path, world: Path, world_fp: str | None, name: str
) -> dict[str, Any]:
    """Stage 2: train model ``name`` into ``OUT/runs/<name>`` (unless done); returns
    ``{run, val_accuracy, val_questions}`` (the chat VLM scored on the first of the val
    questions, as many as the size diagnoses it on)."""
    run = root / "runs" / name
    model_epochs = _epochs(plan, name)
    config = {
        "model": name,
        "epochs": model_epochs,
        "seed": plan.seed,
        "world": world_fp,
        "defaults": defaults_digest(name),
    }
    options = _chat_options(plan) if name == CHAT_VLM else {}
    config.update(options)  # a run trained with other options or elsewhere is not reused
    # the chat VLM answers slowly: scored after training on as many val questions (the
    # first in file order) as the size diagnoses it on, whatever --max-questions says
    val_questions = plan.preset["chat_vlm_questions"] if name == CHAT_VLM else None
    if val_questions is not None:
        config["val_questions"] = val_questions
    title = _train_title(plan, name)
    fp = run_fingerprint_of(run)
    stage = f"train-{name}"
    if stages.done(stage, config, fp):
        stages.skip(stage, title)
        facts = stages.recorded(stage)  # one read of the record
        val = {key: facts.get(key) for key in ("val_accuracy", "val_questions")}
        if val["val_questions"] is None and val["val_accuracy"] is not None:
            val["val_questions"] = _all_val_questions(world)
    else:
        from vqadiag.workflows.models import train

        stages.header(title)
        t0 = time.perf_counter()
        result = train(
            world,
            name,
            run,
            epochs=model_epochs,
            seed=plan.seed,
            options=options,
            progress=plan.progress,
            n_bootstrap=plan.n_bootstrap,
            val_questions=val_questions,
        )
        scored = result.get("val") or {}
        val = {"val_accuracy": scored.get("accuracy"), "val_questions": scored.get("questions")}
        stages.finish(stage, config, run_fingerprint_of(run), time.perf_counter() - t0, val)
    return {"run": str(run), **val}


def _all_val_questions(world: Path) -> int:
    """How many val questions a training stage whose record predates the count scored:
    all of the world's."""
    from vqadiag.data.model_inputs.gqa_data import GQAData

    return len(GQAData(world).questions("val"))


def _diagnose_stage(
    stages: Stages,
    plan: _Plan,
    root: Path,
    world: Path,
    world_fp: str | None,
    name: str,
    result_dirs: list[Path],
) -> Path:
    """Stage 3: diagnose model ``name`` with every suite into ``OUT/results/<name>``
    (unless done), reusing the basic-question dataset of the first result folder in
    ``result_dirs``; returns the result folder."""
    run = root / "runs" / name
    res = root / "results" / name
    # the first diagnosis builds the basic-question dataset; the others reuse it
    shared = result_dirs[0] / "bqd.json" if result_dirs else None
    bqd = shared if shared is not None and shared.is_file() else None
    max_questions = _questions(plan, name)
    config = {
        "model": name,
        "run": run_fingerprint_of(run),
        "seed": plan.seed,
        "suites": "all",
        "max_questions": max_questions,
        "n_bootstrap": plan.n_bootstrap,
        "world": world_fp,
        "bq_ranker": plan.ranker,
        "bqd": None if bqd is None else file_hash(bqd),
    }
    stage = f"diagnose-{name}"
    title = f"diagnose {name}: every suite → {res}{_questions_note(plan, name)}"
    if stages.done(stage, config, results_hash(res / "results.json")):
        stages.skip(stage, title)
    else:
        from vqadiag.diagnosis.diagnose import diagnose

        stages.header(title)
        t0 = time.perf_counter()
        diagnose(
            world,
            str(run),
            res,
            suites="all",
            seed=plan.seed,
            n_bootstrap=plan.n_bootstrap,
            max_questions=max_questions,
            bqd=bqd,
            bq_ranker=None if bqd else plan.ranker,  # a given BQD was ranked when built
            progress=plan.progress,
        )
        stages.finish(stage, config, results_hash(res / "results.json"), time.perf_counter() - t0)
    return res


def _report_stage(stages: Stages, plan: _Plan, result_dirs: list[Path], report_dir: Path) -> None:
    """Stage 4: write the report comparing the models of ``result_dirs`` (unless done)."""
    config = {
        "results": {str(r): results_hash(r / "results.json") for r in result_dirs},
        "seed": plan.seed,
        "n_bootstrap": plan.n_bootstrap,
    }
    title = f"report comparing {len(result_dirs)} models → {report_dir}"
    if (
        stages.done("report", config, file_hash(report_dir / "report.json"))
        and (report_dir / "report.html").is_file()
    ):
        stages.skip("report", title)
    else:
        from vqadiag.workflows.report import report

        stages.header(title)
        t0 = time.perf_counter()
        report(result_dirs, report_dir, seed=plan.seed, n_bootstrap=plan.n_bootstrap)
        stages.finish(
            "report", config, file_hash(report_dir / "report.json"), time.perf_counter() - t0
        )
