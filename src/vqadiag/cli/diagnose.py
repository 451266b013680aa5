"""Command: ``vqadiag diagnose`` — a model under every diagnostic condition (docs/diagnose.md)."""

from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from vqadiag.console.apps import app
from vqadiag.console.common import (
    DeviceOption,
    DiagnoseSeedOption,
    DtypeOption,
    JsonFlag,
    ModelArgsOption,
    PluginOption,
    QuietFlag,
    ResamplesOption,
    cli_errors,
    emit,
    model_settings,
    optional_file,
)
from vqadiag.errors import DataError
from vqadiag.protocols.robustness.bq_command import known_ranker


class Replacement(str, Enum):
    """How removed objects are replaced (FPVG and Leave-One-Out)."""

    drop = "drop"
    zeros = "zeros"
    minus_one = "minus-one"
    other_images = "other-images"


class PixelFill(str, Enum):
    """How a pixel model's replaced pixels are filled."""

    mean = "mean"
    blur = "blur"
    noise = "noise"


#: the options of ``vqadiag diagnose`` (beyond the shared ones of ``console.common``)
_DataOption = Annotated[
    Path,
    typer.Option(
        ...,
        help="The data: a synthetic world or the official gqa/ (+ vqa2/, introspect/) "
        "folders; a Hugging Face copy (its folder, a .parquet/.arrow file, or its name, "
        "e.g. lmms-lab/GQA, from the local cache); or a VLMEvalKit .tsv.",
    ),
]


class DataFormat(str, Enum):
    """How ``--data`` is read (docs/data-sources.md)."""

    auto = "auto"
    official = "official"
    huggingface = "huggingface"
    vlmevalkit = "vlmevalkit"


_DataFormatOption = Annotated[
    DataFormat, typer.Option(help="How --data is read (auto: detected from what it is).")
]
_SceneGraphsOption = Annotated[
    Path | None, optional_file("Scene graphs of the split (FPVG, importance), beside any --data.")
]
_PairsOption = Annotated[
    Path | None,
    optional_file("VQA v2 complementary pairs of the split (pairs suite), beside any --data."),
]
_OODSplitOption = Annotated[
    Path | None,
    typer.Option(
        help="Folder of GQA-OOD's released ood_{split}_head.json / _tail.json (ood suite).",
    ),
]
_PlanFlag = Annotated[
    bool,
    typer.Option(
        "--plan",
        help="Call no model and write nothing: per suite and condition, the calls a run "
        "would send, their images and the answers already stored in --out.",
    ),
]
_RateOption = Annotated[
    float | None,
    typer.Option(min=0.0, help="With --plan: the model's questions per second, to estimate time."),
]
_NoReuseFlag = Annotated[
    bool,
    typer.Option(
        "--no-reuse",
        help="Ask the model for every probe, even one whose input another probe had "
        "(for a model whose answers vary from call to call).",
    ),
]
_PrecisionOption = Annotated[
    float | None,
    typer.Option(
        help="Take questions (in the --max-questions order), suite by suite, until every "
        "rate's 95% half-width is at most this many points.",
    ),
]
_MaxCallsOption = Annotated[
    int | None, typer.Option(min=1, help="With --precision: stop before passing this many calls.")
]
_ImportanceSampleOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Importance (leave-one-out, GradCAM) on the first N FPVG questions only "
        "(with --precision: 500).",
    ),
]
_RayActorsOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Run the in-process model as N Ray actors (one per GPU on a cluster); "
        "the driver keeps the store.",
    ),
]
_RayGpusOption = Annotated[
    float, typer.Option(min=0.0, help="GPUs each Ray actor takes (--ray-actors).")
]
_RayAddressOption = Annotated[
    str | None, typer.Option(help="A Ray cluster to join (default: a local Ray).")
]
_ChoicesOption = Annotated[
    Path | None, optional_file("GQA choices file of the split (plausibility), beside any --data.")
]
_ModelOption = Annotated[
    str,
    typer.Option(
        ...,
        help="A run folder (vqadiag train) or an adapter: files:PREDICTIONS.json "
        "(plain-prediction suites only), hf:MODEL_DIR (a local transformers chat VLM, "
        "ViLT or BLIP), openai:URL (an OpenAI-compatible server), or a plug-in's KIND:SPEC.",
    ),
]
_OutOption = Annotated[Path, typer.Option(..., help="Result folder (results.json, store.sqlite).")]
_SuiteOption = Annotated[
    str,
    typer.Option(
        help="all, or a comma list of accuracy,pairs,gain,ood,fpvg,importance,robustness,"
        "consistency (and plug-in suites; vqadiag suites lists them)."
    ),
]
_SplitOption = Annotated[
    str | None,
    typer.Option(
        help="Split to diagnose (default: val, or the split a VLMEvalKit TSV's file name names)."
    ),
]
_BatchSizeOption = Annotated[int, typer.Option(min=1, help="Questions per forward pass.")]
_WorkersOption = Annotated[
    int, typer.Option(min=0, help="Threads that prepare object inputs ahead (0: none).")
]
_ReplacementOption = Annotated[
    Replacement,
    typer.Option(help="Removed objects: masked out (drop), zeros, −1, or other images' objects."),
]
_BqdOption = Annotated[
    Path | None,
    optional_file(
        "Basic-question dataset for robustness (default: build a General BQD "
        "from the GQA train questions, cached in OUT)."
    ),
]
_BqRankerOption = Annotated[
    str | None,
    typer.Option(
        help="Ranker of the BQD built when --bqd is absent: lasso (paper; the default), "
        "bleu1..bleu4, rouge, cider, meteor (text similarity: much faster).",
        callback=known_ranker,
    ),
]
_MaxQuestionsOption = Annotated[
    int | None,
    typer.Option(min=1, help="Diagnose a fixed pseudo-random subset of this many questions."),
]
_MaxObjectsOption = Annotated[int, typer.Option(min=1, help="Objects per image at most.")]
_ImagesOption = Annotated[
    Path | None,
    typer.Option(
        help="Folder of the image files (default: images/ of the data folder, or COCO "
        "{split}2014/ folders); pixel models read them.",
    ),
]
_PixelFillOption = Annotated[
    PixelFill,
    typer.Option(help="Replaced pixels (pixel models): the image mean, a blur, or noise."),
]
_AllowMissingFlag = Annotated[
    bool,
    typer.Option("--allow-missing", help="Leave out (and count) questions whose image is missing."),
]


@app.command("diagnose")
@cli_errors
def diagnose_command(
    data: _DataOption,
    model: _ModelOption,
    out: _OutOption,
    suite: _SuiteOption = "all",
    split: _SplitOption = None,
    batch_size: _BatchSizeOption = 256,
    workers: _WorkersOption = 1,
    replacement: _ReplacementOption = Replacement.drop,
    bqd: _BqdOption = None,
    bq_ranker: _BqRankerOption = None,
    max_questions: _MaxQuestionsOption = None,
    max_objects: _MaxObjectsOption = 100,
    images: _ImagesOption = None,
    pixel_fill: _PixelFillOption = PixelFill.mean,
    allow_missing: _AllowMissingFlag = False,
    data_format: _DataFormatOption = DataFormat.auto,
    scene_graphs: _SceneGraphsOption = None,
    pairs: _PairsOption = None,
    ood_split: _OODSplitOption = None,
    choices: _ChoicesOption = None,
    plan: _PlanFlag = False,
    rate: _RateOption = None,
    no_reuse: _NoReuseFlag = False,
    precision: _PrecisionOption = None,
    max_calls: _MaxCallsOption = None,
    importance_sample: _ImportanceSampleOption = None,
    ray_actors: _RayActorsOption = None,
    ray_gpus_per_actor: _RayGpusOption = 0.0,
    ray_address: _RayAddressOption = None,
    seed: DiagnoseSeedOption = 0,
    n_bootstrap: ResamplesOption = 1000,
    model_args: ModelArgsOption = None,
    device: DeviceOption = None,
    dtype: DtypeOption = None,
    plugin: PluginOption = None,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Run a model under every diagnostic condition (cached, resumable) and score it all."""
    if max_calls is not None and precision is None:
        raise DataError("--max-calls", "goes with --precision")
    if ray_actors is None and (ray_gpus_per_actor or ray_address is not None):
        given = "--ray-gpus-per-actor" if ray_gpus_per_actor else "--ray-address"
        raise DataError(given, "goes with --ray-actors")
    if precision is not None and plan:
        raise DataError(
            "--plan", "plans one diagnosis: give --max-questions instead of --precision"
        )
    result = _run_diagnose(
        data, model, out, suite=suite, split=split, batch_size=batch_size, workers=workers,
        replacement=replacement, bqd=bqd, bq_ranker=bq_ranker, max_questions=max_questions,
        max_objects=max_objects, images=images, pixel_fill=pixel_fill,
        allow_missing=allow_missing, seed=seed, n_bootstrap=n_bootstrap,
        model_args=model_args, device=device, dtype=dtype, plugin=plugin,
        extras={"data_format": data_format.value, "scene_graphs": scene_graphs, "pairs": pairs,
                "ood_split": ood_split, "choices": choices, "plan": plan, "rate": rate,
                "reuse_inputs": not no_reuse, "importance_sample": importance_sample,
                "ray": None if ray_actors is None else {
                    "actors": ray_actors, "gpus_per_actor": ray_gpus_per_actor,
                    "address": ray_address}},
        precision=precision, max_calls=max_calls, progress=not quiet,
    )  # fmt: skip
    emit(result, as_json, _render_plan if plan else _render)
    if not result["suites"] and result["skipped"]:
        typer.echo(
            f"error: every suite asked for was skipped ({', '.join(result['skipped'])}): "
            "nothing was diagnosed", err=True,
        )  # fmt: skip
        raise typer.Exit(1)


def _run_diagnose(
    data: Path,
    model: str,
    out: Path,
    *,
    suite: str,
    split: str | None,
    batch_size: int,
    workers: int,
    replacement: Replacement,
    bqd: Path | None,
    bq_ranker: str | None,
    max_questions: int | None,
    max_objects: int,
    images: Path | None,
    pixel_fill: PixelFill,
    allow_missing: bool,
    seed: int,
    n_bootstrap: int,
    model_args: str | None,
    device: str | None,
    dtype: str | None,
    plugin: list[str] | None,
    extras: Mapping[str, Any] | None = None,
    precision: float | None = None,
    max_calls: int | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Check the adapter settings (``--model-args``, ``--device``, ``--dtype``) and run
    :func:`vqadiag.diagnosis.diagnose.diagnose` with the command's options, progress
    shown unless ``progress`` is False; returns its results."""
    from vqadiag.diagnosis.diagnose import diagnose

    settings = model_settings(model_args, device, dtype)
    run: Any = diagnose
    if precision is not None:
        from functools import partial

        from vqadiag.diagnosis.precision import diagnose_to_precision

        run = partial(diagnose_to_precision, precision=precision, max_calls=max_calls)
    return run(
        data,
        model,
        out,
        suites=suite,
        split=split,
        batch_size=batch_size,
        workers=workers,
        seed=seed,
        n_bootstrap=n_bootstrap,
        replacement=replacement.value,
        bqd=bqd,
        bq_ranker=bq_ranker,
        max_questions=max_questions,
        max_objects=max_objects,
        progress=progress,
        plugins=plugin or (),
        images=images,
        pixel_fill=pixel_fill.value,
        allow_missing_images=allow_missing,
        model_args=settings,
        **(extras or {}),
    )


def _render(result: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from vqadiag.console.common import fmt_estimate
    from vqadiag.suites.base import figures, registered_suites

    console = Console()
    model = result["model"]
    table = Table(
        title=f"vqadiag diagnose: {model['name']} ({model['fingerprint']})", title_justify="left"
    )
    for col, justify in (
        ("metric", "left"),
        ("value", "right"),
        ("95% CI", "right"),
        ("n", "right"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    summary = result["summary"]
    for _suite, fig in figures():
        est = summary.get(fig.key)
        if est is None:
            continue
        for k, one in enumerate(est if fig.many else [est], start=1):
            value, interval = fmt_estimate(one, fig.decimals)
            label = f"{fig.label} {k}" if fig.many else fig.label
            table.add_row(label, value, interval, str(one.get("n", "")))
    console.print(table)
    registry = registered_suites()
    for name, suite_result in result["suites"].items():
        suite = registry.get(name)
        for extra in suite.summary_tables(suite_result) if suite is not None else ():
            t2 = Table(title=extra.title, title_justify="left")
            for i, col in enumerate(extra.columns):
                t2.add_column(col, justify="left" if i == 0 else "right")
            for row in extra.rows:
                t2.add_row(*row)
            console.print(t2)
    cond = Table(title="conditions", title_justify="left")
    counts = ("questions", "computed", "cached", "reused")
    cond.add_column("condition", justify="left")
    for col in counts:
        cond.add_column(col, justify="right")
    for name, c in result["conditions"].items():
        cond.add_row(name, *(str(c.get(k, 0)) for k in counts))
    console.print(cond)
    for suite, reason in result["skipped"].items():
        console.print(f"[yellow]skipped {suite}[/yellow]: {reason}")


def _render_plan(plan: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    model = plan["model"]
    table = Table(
        title=f"vqadiag diagnose --plan: {model['name']} ({model['fingerprint']})",
        title_justify="left",
    )
    for col in ("condition", "suite", "probes", "cached", "calls", "images"):
        table.add_column(col, justify="left" if col in ("condition", "suite") else "right")
    for name, c in plan["conditions"].items():
        table.add_row(
            name, c["suite"], *(f"{c[k]:,}" for k in ("probes", "cached", "calls", "images"))
        )
    total = plan["total"]
    table.add_row(
        "total", "", *(f"{total[k]:,}" for k in ("probes", "cached", "calls", "images")),
        style="bold",
    )  # fmt: skip
    console.print(table)
    if plan["estimated_seconds"] is not None:
        hours = plan["estimated_seconds"] / 3600
        console.print(
            f"estimated: {plan['estimated_seconds']:,.0f} s ({hours:,.2f} h) at "
            f"{plan['rate']:g} questions/s"
        )
    for suite, reason in plan["skipped"].items():
        console.print(f"[yellow]skipped {suite}[/yellow]: {reason}")


@app.command("suites")
@cli_errors
def suites_command(plugin: PluginOption = None, as_json: JsonFlag = False) -> None:
    """List the registered diagnostic suites: data, model needs, conditions and figures."""
    from vqadiag.plugins import load_plugins
    from vqadiag.suites.base import registered_suites

    load_plugins(plugin or ())
    listing = {
        name: {
            "title": s.title,
            "datasets": list(s.datasets),
            "requires": dict(s.requires),
            "conditions": list(s.conditions),
            "figures": [
                {"key": f.key, "label": f.label, "unit": f.unit, "direction": f.direction}
                for f in s.figures
            ],
            "module": type(s).__module__,
        }
        for name, s in registered_suites().items()
    }
    emit({"suites": listing}, as_json, _render_suites)


def _render_suites(result: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="vqadiag suites", title_justify="left")
    for col in ("suite", "title", "datasets", "needs", "figures"):
        table.add_column(col)
    for name, s in result["suites"].items():
        needs = ", ".join(s["requires"]) or "-"
        figs = ", ".join(f["key"] for f in s["figures"])
        table.add_row(name, s["title"], ", ".join(s["datasets"]), needs, figs)
    Console().print(table)
