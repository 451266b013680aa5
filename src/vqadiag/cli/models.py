"""Commands: ``vqadiag train`` and ``vqadiag predict`` (built-in reference models)."""

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from vqadiag.console.apps import app
from vqadiag.console.common import (
    DeviceOption,
    DtypeOption,
    JsonFlag,
    ModelArgsOption,
    PluginOption,
    QuietFlag,
    ResamplesOption,
    SeedOption,
    TrainingSeedOption,
    cli_errors,
    emit,
    model_settings,
    rate_table,
)
from vqadiag.errors import DataError, excerpt

DataOption = Annotated[Path, typer.Option("--data", help="Data folder (GQA or VQA v2 layout).")]
DatasetOption = Annotated[
    str,
    typer.Option("--dataset", help="gqa (GQA files) or vqa2 (VQA v2 question/annotation files)."),
]
ImagesOption = Annotated[
    Path | None,
    typer.Option(
        "--images",
        help="Folder of the image files (default: images/ of the data folder, or COCO "
        "{split}2014/ folders); pixel models read them.",
    ),
]


#: settings a training command passes itself, each with its own option: ``-o`` may not
#: set them (``-o epochs=1`` would reach the model twice)
TRAIN_OWN_OPTIONS = {
    "data": "--data",
    "epochs": "--epochs",
    "seed": "--seed",
    "split": "--split",
    "progress": "--quiet",
}


def parse_options(items: list[str], own: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``["hidden_dim=512", "lr=1e-3"]`` → ``{"hidden_dim": 512, "lr": 0.001}`` (values JSON,
    else strings). A key in ``own`` (setting → its option, e.g. :data:`TRAIN_OWN_OPTIONS`)
    is one line naming that option."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise DataError("--option", f"expected KEY=VALUE, got {excerpt(item)}")
        if own and key in own:
            raise DataError("--option", f"{excerpt(key)} has its own option: use {own[key]}")
        if key in out:
            raise DataError("--option", f"{excerpt(key)} is given twice: give it once")
        try:
            out[key] = orjson.loads(raw)
        except orjson.JSONDecodeError:
            out[key] = raw
    return out


def flags_or_options(options: Mapping[str, Any], **flags: Any) -> None:
    """One line when a setting is given both by its flag and by ``-o`` (``finetune
    --lr 0.05 -o lr=0.001``: the flag won silently): ``flags`` maps each setting to the
    flag's value (None: not given)."""
    for key, value in flags.items():
        if value is not None and key in options:
            raise DataError("--option", f"{key} is also given by --{key}: give it once")


def _render_train(result: Mapping[str, Any]) -> None:
    typer.echo(
        f"trained {result['model']} on {result['train_questions']} {result['split']} questions "
        f"in {result['seconds']:.1f} s → {result['run']} (fingerprint {result['fingerprint']})"
    )
    if result["val"] is not None:
        ci = result["ci"]["val"]["accuracy"]
        rate_table(f"{result['model']} on {result['val']['split']}", [("accuracy", ci, ci["n"])])


def _render_predict(result: Mapping[str, Any]) -> None:
    typer.echo(
        f"{result['model']}: {result['questions']} {result['split']} answers → {result['out']} "
        f"({result['questions_per_second']:.0f} questions/s)"
    )
    if result["ci"]["accuracy"] is not None:
        ci = result["ci"]["accuracy"]
        rate_table(f"{result['model']} on {result['split']}", [("accuracy", ci, ci["n"])])


@app.command("train")
@cli_errors
def train_command(
    data: DataOption,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="prior, question-only, updn, symbolic, pixel or chat-vlm (docs/chat-vlm.md).",
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Run folder to write.")],
    epochs: Annotated[int | None, typer.Option("--epochs", min=1, help="Training epochs.")] = None,
    seed: TrainingSeedOption = 0,
    split: Annotated[str, typer.Option("--split", help="Training split.")] = "train",
    mode: Annotated[
        str | None, typer.Option("--mode", help="Prior only: global, group or type.")
    ] = None,
    option: Annotated[
        list[str] | None,
        typer.Option("--option", "-o", help="Model option KEY=VALUE (repeatable)."),
    ] = None,
    n_bootstrap: ResamplesOption = 1000,
    dataset: DatasetOption = "gqa",
    images: ImagesOption = None,
    val_questions: Annotated[
        int | None,
        typer.Option(
            "--val-questions",
            min=1,
            help="Score only the first N val questions after training (default: all).",
        ),
    ] = None,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Train a reference model on GQA (or VQA v2) data and save its run folder."""
    from vqadiag.workflows.models import train

    options = parse_options(option or [], TRAIN_OWN_OPTIONS)
    if mode is not None:
        if model != "prior":
            raise DataError("--mode", "only the prior model has a mode")
        from vqadiag.models.reference.prior import MODES

        if mode not in MODES:
            raise DataError(
                "--mode", f"must be {', '.join(MODES[:-1])} or {MODES[-1]}, not {mode!r}"
            )
        options["mode"] = mode
    result = train(
        data,
        model,
        out,
        epochs=epochs,
        seed=seed,
        split=split,
        options=options,
        progress=not quiet,
        n_bootstrap=n_bootstrap,
        dataset=dataset,
        images=images,
        val_questions=val_questions,
    )
    emit(result, as_json, _render_train)


@app.command("predict")
@cli_errors
def predict_command(
    model: Annotated[
        str,  # not Path: a Path would fold the '//' of openai:http://…
        typer.Option(
            "--model",
            help="Run folder written by train, or an adapter: hf:MODEL_DIR, openai:URL, KIND:SPEC.",
        ),
    ],
    data: DataOption,
    out: Annotated[Path, typer.Option("--out", help="Prediction file to write (JSON).")],
    split: Annotated[str, typer.Option("--split", help="Split to answer.")] = "val",
    batch_size: Annotated[int, typer.Option("--batch-size", min=1)] = 256,
    probs: Annotated[
        int, typer.Option("--probs", min=0, help="Store the top-K answer probabilities.")
    ] = 0,
    seed: SeedOption = 0,
    n_bootstrap: ResamplesOption = 1000,
    dataset: DatasetOption = "gqa",
    images: ImagesOption = None,
    model_args: ModelArgsOption = None,
    device: DeviceOption = None,
    dtype: DtypeOption = None,
    quiet: QuietFlag = False,
    plugin: PluginOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Answer a split with a trained model and write a prediction file `vqadiag score` reads."""
    from vqadiag.plugins import load_plugins
    from vqadiag.workflows.models import predict

    load_plugins(plugin or ())
    result = predict(
        model,
        data,
        out,
        split=split,
        batch_size=batch_size,
        probs_k=probs,
        progress=not quiet,
        seed=seed,
        n_bootstrap=n_bootstrap,
        dataset=dataset,
        images=images,
        model_args=model_settings(model_args, device, dtype),
    )
    emit(result, as_json, _render_predict)
