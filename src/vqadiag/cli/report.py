"""Commands: ``vqadiag report`` (result folders → report.json + report.html) and
``vqadiag demo`` (synthetic world → five models → diagnose → report)."""

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from vqadiag.console.apps import app
from vqadiag.console.common import (
    JsonFlag,
    PluginOption,
    QuietFlag,
    ResamplesOption,
    SeedOption,
    cli_errors,
    emit,
    output_dir,
)
from vqadiag.protocols.robustness.bq_command import known_ranker


@app.command("report")
@cli_errors
def report_command(
    result_dirs: Annotated[
        list[Path], typer.Argument(help="Result folders written by `vqadiag diagnose`.")
    ],
    out: Annotated[Path, typer.Option(..., help="Folder for report.json and report.html.")],
    reference: Annotated[
        str | None,
        typer.Option(
            help="Model the report card marks significant differences against "
            "(default: the first folder's)."
        ),
    ] = None,
    examples: Annotated[
        int, typer.Option(min=0, help="Example failures per suite in the drill-down tables.")
    ] = 8,
    seed: SeedOption = 0,
    n_bootstrap: ResamplesOption = 1000,
    plugin: PluginOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Compare diagnosed models: report card with paired tests, plots, example failures."""
    from vqadiag.plugins import load_plugins
    from vqadiag.workflows.report import REPORT_FOLDER, report

    load_plugins(plugin or ())
    output_dir(out, REPORT_FOLDER)  # a file in its place or a user's folder: said first
    result = report(
        result_dirs,
        out,
        reference=reference,
        seed=seed,
        n_bootstrap=n_bootstrap,
        examples=examples,
    )
    emit(result, as_json, _render_report)


def _render_report(result: Mapping[str, Any]) -> None:
    from rich.console import Console

    console = Console()
    console.print(_card_table(result["card"]))
    findings = result.get("findings") or {}
    if findings.get("models"):
        console.print(f"findings (Holm-corrected over {findings['tests']} tests):")
        for model in findings["models"]:
            for item in model["items"]:
                console.print(
                    f"  {model['model']}: {item['verdict']}: {item['sentence']}",
                    markup=False,
                    highlight=False,
                )
    console.print(f"report: {result['files']['html']}")
    console.print(f"data:   {result['files']['json']}")


def _card_table(card: Mapping[str, Any]) -> Any:
    """The report card as a rich table: one column per model, one row per figure."""
    from rich.table import Table

    from vqadiag.report.formatting import fmt

    rows = card["rows"]
    table = Table(
        title=f"Report card (reference: {card['reference']}; ▲▼ p < 0.05 vs reference, "
        "† not paired)",
        title_justify="left",
    )
    table.add_column("figure")
    for row in rows:
        table.add_column(row["model"] + (" (ref)" if row["reference"] else ""), justify="right")
    for c in card["columns"]:
        if all(r["cells"][c["key"]]["estimate"] is None for r in rows):
            continue
        table.add_row(c["label"], *(_cell(r["cells"][c["key"]], c["key"], fmt) for r in rows))
    return table


def _cell(cell: Mapping[str, Any], key: str, fmt: Any) -> str:
    est = cell["estimate"]
    if est is None:
        return "not run"
    vs = cell["vs_reference"] or {}
    mark = {"higher": " ▲", "lower": " ▼"}.get(vs.get("direction") or "", "")
    if vs and not vs.get("paired"):
        mark = " †"
    return f"{fmt(est['value'], key)}{mark} [{fmt(est['ci_low'], key)}, {fmt(est['ci_high'], key)}]"


@app.command("export")
@cli_errors
def export_command(
    result_dirs: Annotated[
        list[Path], typer.Argument(help="Result folders written by `vqadiag diagnose`.")
    ],
    out: Annotated[Path, typer.Option(..., help="Table file: .csv, .jsonl or .parquet.")],
    table: Annotated[
        str,
        typer.Option(
            help="per-question (one row per unit and model, answers and values) or summary "
            "(the report-card figures: model, figure, value, ci_low, ci_high, n)."
        ),
    ] = "per-question",
    plugin: PluginOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Export diagnosis results as one table (pandas-ready CSV, JSON Lines or Parquet)."""
    from vqadiag.plugins import load_plugins
    from vqadiag.workflows.report import export

    load_plugins(plugin or ())
    emit(export(result_dirs, out, table=table), as_json, _render_export)


def _render_export(result: Mapping[str, Any]) -> None:
    typer.echo(
        f"{result['table']} table: {result['rows']} rows × {len(result['columns'])} columns "
        f"({', '.join(result['models'])}) → {result['out']} ({result['format']})"
    )


_DemoSizeOption = Annotated[
    str,
    typer.Option(
        help="tiny (60 images, seconds: a smoke test), small (2,000 images, ≲ 10 min "
        "on 2 CPU cores) or medium (the same 2,000 images, all questions, LASSO ranking).",
    ),
]
_DemoRankerOption = Annotated[
    str | None,
    typer.Option(
        help="Basic-question ranker of the robustness suite (lasso as in the "
        "paper, bleu1..bleu4, rouge, cider, meteor); default: bleu1, medium: lasso.",
        callback=known_ranker,
    ),
]


@app.command("demo")
@cli_errors
def demo_command(
    out: Annotated[
        Path, typer.Option(help="Folder for the world, runs, results and report.")
    ] = Path("vqadiag-demo"),
    size: _DemoSizeOption = "small",
    images: Annotated[
        int | None, typer.Option(min=20, help="Override the world's number of images.")
    ] = None,
    epochs: Annotated[
        int | None,
        typer.Option(min=1, help="Override question-only / UpDn / pixel training epochs."),
    ] = None,
    max_questions: Annotated[
        int | None, typer.Option(min=1, help="Override the questions diagnosed per split.")
    ] = None,
    n_bootstrap: Annotated[
        int | None, typer.Option("--n-bootstrap", min=10, help="Bootstrap resamples.")
    ] = None,
    bq_ranker: _DemoRankerOption = None,
    chat_vlm: Annotated[
        bool | None,
        typer.Option(
            "--chat-vlm/--no-chat-vlm",
            help="Train and diagnose the sixth model, the chat VLM (docs/chat-vlm.md; "
            "diagnosed on fewer questions, in a second process where two cores are usable); "
            "default: on, off in the tiny size.",
        ),
    ] = None,
    device: Annotated[
        str,
        typer.Option(
            "--device",
            help="Where the chat VLM trains and answers (cpu, cuda, cuda:1 …; not with "
            "--no-chat-vlm).",
        ),
    ] = "cpu",
    second_process: Annotated[
        bool,
        typer.Option(
            "--second-process/--one-process",
            help="Train and diagnose the chat VLM in a second process, beside the other "
            "models, where two cores are usable (default), or in this one.",
        ),
    ] = True,
    seed: SeedOption = 0,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """From nothing to a report: synthetic world → train prior, question-only, UpDn,
    symbolic, the pixel model and the chat VLM (not with --no-chat-vlm) → diagnose each
    with every suite → report. Interrupted, it resumes."""
    from vqadiag.workflows.demo import demo

    result = demo(
        out,
        size=size,
        seed=seed,
        images=images,
        epochs=epochs,
        max_questions=max_questions,
        n_bootstrap=n_bootstrap,
        bq_ranker=bq_ranker,
        progress=not quiet,
        chat_vlm=chat_vlm,
        device=device,
        second_process=second_process,
    )
    emit(result, as_json, _render_demo)


def _render_demo(result: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"vqadiag demo ({result['size']}, {result['images']} images, "
        f"{result['seconds']:.0f} s)",
        title_justify="left",
    )
    for col in ("stage", "status", "seconds"):
        table.add_column(col, justify="right" if col == "seconds" else "left")
    for stage in result["stages"]:
        table.add_row(stage["stage"], stage["status"], f"{stage['seconds']:.1f}")
    console = Console()
    console.print(table)
    from vqadiag.data.io.jsonio import read_json

    console.print(_card_table(read_json(result["report"]["json"])["card"]))
    console.print(f"report: {result['report']['html']}")
