"""Command: ``vqadiag conditions export`` — a diagnose run's inputs for a harness to answer
(docs/harnesses.md)."""

from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from vqadiag.cli.diagnose import PixelFill
from vqadiag.console.apps import app
from vqadiag.console.common import (
    DiagnoseSeedOption,
    JsonFlag,
    PluginOption,
    QuietFlag,
    cli_errors,
    emit,
    optional_file,
)
from vqadiag.protocols.robustness.bq_command import known_ranker

conditions_app = typer.Typer(
    help="Export every diagnostic condition's inputs for lmms-eval, VLMEvalKit or your "
    "own loop; score the answers with `diagnose --model files:ANSWERS "
    "--model-args conditions=DIR`.",
    no_args_is_help=True,
)
app.add_typer(conditions_app, name="conditions")


class ExportFormat(str, Enum):
    """What the export folder is laid out for."""

    jsonl = "jsonl"
    vlmevalkit = "vlmevalkit"
    lmms_eval = "lmms-eval"


@conditions_app.command("export")
@cli_errors
def export_command(
    data: Annotated[Path, typer.Option(..., help="Data folder, as for diagnose.")],
    out: Annotated[Path, typer.Option(..., help="Export folder to write.")],
    format: Annotated[
        ExportFormat,
        typer.Option(
            "--format",
            help="jsonl (LLaVA question file), vlmevalkit (a custom VQA TSV) or lmms-eval "
            "(a task folder for --include_path).",
        ),
    ] = ExportFormat.jsonl,
    suite: Annotated[str, typer.Option(help="Suites, as for diagnose.")] = "all",
    split: Annotated[str | None, typer.Option(help="Split, as for diagnose.")] = None,
    max_questions: Annotated[
        int | None, typer.Option(min=1, help="A fixed subset of this many questions.")
    ] = None,
    max_objects: Annotated[int, typer.Option(min=1, help="Objects per image at most.")] = 100,
    images: Annotated[
        Path | None, typer.Option(help="Folder of the image files (as for diagnose).")
    ] = None,
    pixel_fill: Annotated[PixelFill, typer.Option(help="Replaced pixels.")] = PixelFill.mean,
    allow_missing: Annotated[
        bool, typer.Option("--allow-missing", help="Leave out questions whose image is missing.")
    ] = False,
    bqd: Annotated[Path | None, optional_file("Basic-question dataset for robustness.")] = None,
    bq_ranker: Annotated[
        str | None,
        typer.Option(help="Ranker of the BQD built without --bqd (lasso).", callback=known_ranker),
    ] = None,
    prompt: Annotated[
        str | None,
        typer.Option(help="Prompt with {question} (default: the short-answer instruction)."),
    ] = None,
    max_new_tokens: Annotated[
        int, typer.Option(min=1, help="Generation length the lmms-eval task asks for.")
    ] = 16,
    seed: DiagnoseSeedOption = 0,
    plugin: PluginOption = None,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Write every condition's inputs (images and prompts) for a harness to answer."""
    from vqadiag.workflows.conditions import export_conditions

    result = export_conditions(
        data, out, fmt=format.value, suites=suite, split=split, max_questions=max_questions,
        max_objects=max_objects, images=images, pixel_fill=pixel_fill.value,
        allow_missing_images=allow_missing, bqd=bqd, bq_ranker=bq_ranker, seed=seed,
        prompt=prompt, max_new_tokens=max_new_tokens, progress=not (as_json or quiet),
        plugins=plugin or (),
    )  # fmt: skip
    emit(result, as_json, _render)


def _render(result: Mapping[str, Any]) -> None:
    from rich.console import Console

    console = Console()
    console.print(
        f"{result['items']} inputs ({result['images']} images) in {result['out']} "
        f"[{result['format']}]"
    )
    for name, n in result["conditions"].items():
        console.print(f"  {name}: {n} questions")
    for suite, reason in result["skipped"].items():
        console.print(f"[yellow]skipped {suite}[/yellow]: {reason}")
