"""Glue of ``vqadiag demo``: from nothing to a report comparing five models.

Stages (each prints a header on stderr, then its own progress bars):

1. ``OUT/world``: a synthetic world (:func:`vqadiag.synth.generate_world`);
2. ``OUT/runs/<model>``: train prior, question-only, UpDn, symbolic and the pixel model
   (:func:`vqadiag.workflows.models.train`);
3. ``OUT/results/<model>``: diagnose each with every suite
   (:func:`vqadiag.diagnosis.diagnose.diagnose`, resumable from its prediction store);
4. ``OUT/report``: ``report.json`` + ``report.html`` (:func:`vqadiag.workflows.report.report`).

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

import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vqadiag.errors import DataError

MODELS = ("prior", "question-only", "updn", "symbolic", "pixel")
#: the sixth model, trained and diagnosed with ``chat_vlm`` (``vqadiag demo --chat-vlm``;
#: docs/chat-vlm.md, "In the demo")
CHAT_VLM = "chat-vlm"

#: the chat VLM's training epochs and questions diagnosed per split in the ``small`` demo
CHAT_EPOCHS, CHAT_QUESTIONS = 3, 300

#: World size, training epochs, questions diagnosed, bootstrap resamples and the ranker of
#: the basic-question dataset (robustness suite) per size. ``small`` is what `vqadiag demo`
#: runs by default (≲ 10 minutes on 2 CPU cores), so it ranks basic questions by BLEU-1
#: (seconds) instead of the paper's LASSO (minutes); ``tiny`` is for tests.
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
            CHAT_VLM: None,
        },
        "max_questions": None,
        "chat_vlm_questions": None,
        "n_bootstrap": 1000,
        "bq_ranker": "lasso",
    },
}


def _file_hash(path: Path) -> str | None:
    """SHA-256 (16 hex) of a file's bytes, None when it does not exist."""
    if not path.is_file():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


#: ``results.json`` keys that say how a run went, not what it found: the time and the
#: per-condition computed / cached counts (a resumed diagnosis reads answers from its store).
_RUN_KEYS = ("created", "conditions")


def _results_hash(path: Path) -> str | None:
    """Hash of ``results.json`` without the keys of :data:`_RUN_KEYS`."""
    from vqadiag.data.io.jsonio import read_json
    from vqadiag.probes.fingerprints import stable_hash

    if not path.is_file():
        return None
    try:
        data = read_json(path)
    except DataError:
        return None
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k not in _RUN_KEYS}
    return stable_hash(data)


class _Stages:
    """Stage records in ``OUT/stages``: skip a stage whose config and output match."""

    def __init__(self, out: Path, progress: bool) -> None:
        from rich.console import Console

        self.folder = out / "stages"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.console = Console(stderr=True, quiet=not progress)
        self.log: list[dict[str, Any]] = []
        self.count = 0
        self.total = 0

    def _path(self, name: str) -> Path:
        return self.folder / f"{name.replace('/', '_')}.json"

    def done(self, name: str, config: Mapping[str, Any], fingerprint: str | None) -> bool:
        """Whether stage ``name`` finished with this ``config`` and its output still has
        ``fingerprint`` (the output's current fingerprint; None = output missing)."""
        from vqadiag.data.io.jsonio import read_json

        path = self._path(name)
        if fingerprint is None or not path.is_file():
            return False
        try:
            record = read_json(path)
        except DataError:
            return False
        return record.get("config") == dict(config) and record.get("fingerprint") == fingerprint

    def header(self, title: str) -> None:
        self.count += 1
        self.console.rule(f"[bold]vqadiag demo [{self.count}/{self.total}] {title}", align="left")

    def skip(self, name: str, title: str) -> None:
        self.header(title)
        self.console.print(f"  already done with the same configuration: skipped ({name})")
        self.log.append({"stage": name, "status": "skipped", "seconds": 0.0})

    def finish(
        self, name: str, config: Mapping[str, Any], fingerprint: str | None, seconds: float
    ) -> None:
        from vqadiag.data.io.jsonio import write_json

        write_json(self._path(name), {"config": dict(config), "fingerprint": fingerprint})
        self.console.print(f"  done in {seconds:.1f} s")
        self.log.append({"stage": name, "status": "done", "seconds": seconds})


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
    chat_vlm: bool = False,
    device: str = "cpu",
) -> dict[str, Any]:
    """Generate a world, train five models (six with ``chat_vlm``: the chat VLM of
    docs/chat-vlm.md, diagnosed on the size's ``chat_vlm_questions`` questions per split),
    diagnose them and write the report.

    ``size`` picks :data:`SIZES`; ``images``, ``epochs`` (question-only, UpDn and pixel),
    ``max_questions`` (questions diagnosed per split), ``n_bootstrap`` and
    ``bq_ranker`` override it; ``device`` is where the chat VLM trains and answers
    (docs/chat-vlm.md, "On a GPU"; checked before any stage). The basic-question dataset
    of the robustness suite is built once, by the first model's diagnosis, and reused by
    the others. Returns
    ``{out, size, seed, images, bq_ranker, stages: [{stage, status, seconds}],
    models: {name: {run, results, val_accuracy}}, report: {html, json}, seconds}``.
    """
    plan = _plan(size, seed, images, epochs, max_questions, n_bootstrap, bq_ranker, progress)
    plan = replace(plan, device=_chat_device(device, chat_vlm))
    root = _demo_folder(out)
    start = time.perf_counter()
    stages = _Stages(root, progress)
    names = (*MODELS, CHAT_VLM) if chat_vlm else MODELS
    stages.total = 2 + 2 * len(names)
    world = root / "world"
    world_fp = _world_stage(stages, plan, world)
    models = {name: _train_stage(stages, plan, root, world, world_fp, name) for name in names}
    result_dirs: list[Path] = []
    for name in names:
        res = _diagnose_stage(stages, plan, root, world, world_fp, name, result_dirs)
        models[name]["results"] = str(res)
        result_dirs.append(res)
    report_dir = root / "report"
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


def _chat_device(device: str, chat_vlm: bool) -> str:
    """``device`` (``cpu`` for any CPU name), refused in one line when it is not the CPU
    and there is no chat VLM to use it, or when the chat VLM cannot train there."""
    if device == "cpu":
        return device
    if not chat_vlm:
        raise DataError(
            "--device",
            "only the chat VLM (--chat-vlm) uses a device; the other models train on the CPU",
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


def _world_stage(stages: _Stages, plan: _Plan, world: Path) -> str | None:
    """Stage 1: generate the synthetic world (unless done); returns its fingerprint."""
    from vqadiag.synth.world import WORLD_VERSION

    world_config = {
        "images": plan.images, "seed": plan.seed, "bias": 0.8, "feature_dim": 64,
        "version": WORLD_VERSION,
    }  # fmt: skip
    world_fp = _file_hash(world / "world.json")
    title = f"synthetic world: {plan.images} images, seed {plan.seed} → {world}"
    if stages.done("world", world_config, world_fp):
        stages.skip("world", title)
    else:
        from vqadiag.synth import generate_world

        stages.header(title)
        t0 = time.perf_counter()
        generate_world(world, images=plan.images, seed=plan.seed, progress=plan.progress)
        world_fp = _file_hash(world / "world.json")
        stages.finish("world", world_config, world_fp, time.perf_counter() - t0)
    return world_fp


def _train_stage(
    stages: _Stages, plan: _Plan, root: Path, world: Path, world_fp: str | None, name: str
) -> dict[str, Any]:
    """Stage 2: train model ``name`` into ``OUT/runs/<name>`` (unless done); returns
    ``{run, val_accuracy}``."""
    run = root / "runs" / name
    model_epochs = plan.preset["epochs"][name]
    if plan.epochs is not None and model_epochs is not None and name != CHAT_VLM:
        model_epochs = int(plan.epochs)
    config = {
        "model": name,
        "epochs": model_epochs,
        "seed": plan.seed,
        "world": world_fp,
        "defaults": _defaults_digest(name),
    }
    options = {"device": plan.device} if name == CHAT_VLM and plan.device != "cpu" else {}
    config.update(options)  # a run trained elsewhere is not reused
    title = f"train {name}" + (f" ({model_epochs} epochs)" if model_epochs else "")
    fp = _run_fingerprint(run)
    stage = f"train-{name}"
    if stages.done(stage, config, fp):
        stages.skip(stage, title)
        val = _recorded(stages, stage)
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
        )
        val = (result.get("val") or {}).get("accuracy")
        stages.finish(stage, config, _run_fingerprint(run), time.perf_counter() - t0)
        _record(stages, stage, val)
    return {"run": str(run), "val_accuracy": val}


def _diagnose_stage(
    stages: _Stages,
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
    max_questions = plan.max_questions
    if name == CHAT_VLM and plan.preset["chat_vlm_questions"] is not None:
        limit = int(plan.preset["chat_vlm_questions"])
        max_questions = limit if max_questions is None else min(limit, int(max_questions))
    config = {
        "model": name,
        "run": _run_fingerprint(run),
        "seed": plan.seed,
        "suites": "all",
        "max_questions": max_questions,
        "n_bootstrap": plan.n_bootstrap,
        "world": world_fp,
        "bq_ranker": plan.ranker,
        "bqd": None if bqd is None else _file_hash(bqd),
    }
    stage = f"diagnose-{name}"
    title = f"diagnose {name}: every suite → {res}"
    if max_questions != plan.max_questions:
        title += f" (on {max_questions} questions per split)"
    if stages.done(stage, config, _results_hash(res / "results.json")):
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
            bq_ranker=plan.ranker,
            progress=plan.progress,
        )
        stages.finish(stage, config, _results_hash(res / "results.json"), time.perf_counter() - t0)
    return res


def _report_stage(stages: _Stages, plan: _Plan, result_dirs: list[Path], report_dir: Path) -> None:
    """Stage 4: write the report comparing the models of ``result_dirs`` (unless done)."""
    config = {
        "results": {str(r): _results_hash(r / "results.json") for r in result_dirs},
        "seed": plan.seed,
        "n_bootstrap": plan.n_bootstrap,
    }
    title = f"report comparing {len(result_dirs)} models → {report_dir}"
    if (
        stages.done("report", config, _file_hash(report_dir / "report.json"))
        and (report_dir / "report.html").is_file()
    ):
        stages.skip("report", title)
    else:
        from vqadiag.workflows.report import report

        stages.header(title)
        t0 = time.perf_counter()
        report(result_dirs, report_dir, seed=plan.seed, n_bootstrap=plan.n_bootstrap)
        stages.finish(
            "report", config, _file_hash(report_dir / "report.json"), time.perf_counter() - t0
        )


def _defaults_digest(name: str) -> str | None:
    """SHA-256 (16 hex) of a trainable model's default options (None when it has none), so
    that a demo folder trained before the defaults changed trains that model again."""
    import orjson

    from vqadiag.models.registry import model_class

    defaults = getattr(model_class(name), "defaults", None)
    if not defaults:
        return None
    # the chat VLM's device is not a default that changes its weights on the CPU; a stage
    # on another device is keyed by it (_train_stage)
    defaults = {k: v for k, v in defaults.items() if k != "device"}
    return hashlib.sha256(orjson.dumps(defaults, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def _run_fingerprint(run: Path) -> str | None:
    from vqadiag.models.checkpoint import run_fingerprint

    return run_fingerprint(run) if (run / "config.json").is_file() else None


def _record(stages: _Stages, name: str, val: float | None) -> None:
    from vqadiag.data.io.jsonio import read_json, write_json

    path = stages._path(name)
    data = read_json(path)
    data["val_accuracy"] = val
    write_json(path, data)


def _recorded(stages: _Stages, name: str) -> float | None:
    from vqadiag.data.io.jsonio import read_json

    return read_json(stages._path(name)).get("val_accuracy")
