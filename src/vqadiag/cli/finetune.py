"""Command: ``vqadiag finetune`` (sub-question fine-tuning and SQuINT, docs/protocols.md §6)."""

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from vqadiag.console.apps import app
from vqadiag.console.common import (
    JsonFlag,
    QuietFlag,
    ResamplesOption,
    TrainingSeedOption,
    cli_errors,
    emit,
    float_option,
    fmt_rate,
    output_dir,
)


def _render(result: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    typer.echo(
        f"{result['method']}: fine-tuned {result['model']} on {result['pairs']} introspect "
        f"pairs in {result['seconds']:.1f} s → {result['out']} (fingerprint "
        f"{result['fingerprint']})"
    )
    if result["pairs_left_out"]:
        typer.echo(
            f"note: {result['pairs_left_out']} pairs left out: neither of their answers is in "
            "the model's answer vocabulary (was it trained on VQA v2?)",
            err=True,
        )
    if result["before"] is None:
        return
    table = Table(title="introspect val, before → after", title_justify="left")
    for column in ("metric", "before", "95% CI", "after", "95% CI"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    rows = [
        ("consistency", "consistency"),
        ("consistency (balanced)", "consistency_balanced"),
        ("reasoning accuracy", "reasoning_accuracy"),
        ("sub-question accuracy", "sub_accuracy"),
        ("all subs wrong", "all_subs_wrong"),
        ("attention correlation", "attention_correlation"),
        ("VQA accuracy (val)", "vqa_accuracy"),
    ]
    for quadrant in result["before"]["quadrants"]:
        rows.append((quadrant, quadrant))
    for label, key in rows:
        cells = []
        for side in ("before", "after"):
            ci = result["ci"][side]
            est = ci["quadrants"].get(key) if key not in ci else ci[key]
            cells.extend(fmt_rate(est))
        table.add_row(label, *cells)
    Console().print(table)


@app.command("finetune")
@cli_errors
def finetune_command(
    method: Annotated[str, typer.Option("--method", help="squint or subq.")],
    model: Annotated[Path, typer.Option("--model", help="UpDn run trained on VQA v2.")],
    data: Annotated[Path, typer.Option("--data", help="Data folder (vqa2/ + introspect/).")],
    out: Annotated[Path, typer.Option("--out", help="Run folder to write.")],
    epochs: Annotated[int | None, typer.Option("--epochs", min=1, help="Epochs (3).")] = None,
    lr: Annotated[float | None, float_option("--lr", help="Learning rate (0.01, SGD).")] = None,
    seed: TrainingSeedOption = 0,
    introspect: Annotated[
        Path | None,
        typer.Option("--introspect", help="Folder of VQAIntrospect_{train,val}v1.0.json."),
    ] = None,
    option: Annotated[
        list[str] | None,
        typer.Option("--option", "-o", help="KEY=VALUE: lambda1, lambda2, mix, batch_size …"),
    ] = None,
    no_eval: Annotated[
        bool, typer.Option("--no-eval", help="Skip the before/after evaluation.")
    ] = False,
    n_bootstrap: ResamplesOption = 1000,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Fine-tune an UpDn run on VQA-introspect sub-questions (subq) or with SQuINT."""
    from vqadiag.cli.models import flags_or_options, parse_options
    from vqadiag.models.checkpoint import RUN_FOLDER
    from vqadiag.workflows.finetune import finetune

    options = parse_options(option or [])
    flags_or_options(options, epochs=epochs, lr=lr)

    result = finetune(
        model,
        data,
        output_dir(out, RUN_FOLDER),
        method=method,
        epochs=epochs,
        lr=lr,
        seed=seed,
        introspect=introspect,
        options=options,
        evaluate=not no_eval,
        progress=not quiet,
        n_bootstrap=n_bootstrap,
    )
    emit(result, as_json, _render)
