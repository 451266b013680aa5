"""Command ``vqadiag score ood``: the GQA-OOD head / tail split and its accuracies
(docs/protocols.md §3)."""

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from vqadiag.console.apps import score_app
from vqadiag.console.common import (
    AllowMissing,
    AllQuestions,
    JsonFlag,
    ResamplesOption,
    SeedOption,
    cli_errors,
    emit,
    float_option,
    fmt_rate,
    note_prediction_counts,
    optional_file,
    output_dir,
    output_file,
    rate_table,
)
from vqadiag.data.io.outputs import outputs_apart


def _render_ood(result: Mapping[str, Any]) -> None:
    ci = result["ci"]
    split = result["split"]
    counts = f"{result['n_all']} questions: {result['n_head']} head, {result['n_tail']} tail"
    if split["source"] == "released":
        typer.echo(f"GQA-OOD released split {split['head']} + {split['tail']}: {counts}")
    else:
        typer.echo(
            f"GQA-OOD split at alpha = {result['alpha']:g}: {split['n_groups_kept']} of "
            f"{split['n_groups']} local groups kept (entropy <= "
            f"{split['entropy_threshold']:.4f}), {counts}"
        )
    if result["acc_all"] is not None:
        rate_table(
            "GQA-OOD accuracy (%)",
            [
                ("acc-all", ci["acc_all"], result["n_all"]),
                ("acc-head", ci["acc_head"], result["n_head"]),
                ("acc-tail", ci["acc_tail"], result["n_tail"]),
                ("delta = (head - tail) / tail x 100", ci["delta"], result["n_all"]),
            ],
        )
    if "curve" in result:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="acc-tail over alpha", title_justify="left")
        for column in ("alpha", "1 + alpha", "acc-tail", "95% CI", "n tail"):
            table.add_column(column, justify="right")
        for point, ci_point in zip(result["curve"], ci["curve"], strict=True):
            value, interval = fmt_rate(ci_point["acc_tail"], point["acc_tail"])
            a = point["alpha"]
            table.add_row(f"{a:g}", f"{1 + a:g}", value, interval, str(point["n_tail"]))
        Console().print(table)
    if "plot" in result:
        typer.echo(f"wrote {result['plot']}")
    for path in result.get("split_files", {}).values():
        typer.echo(f"wrote {path}")


@score_app.command("ood")
@cli_errors
def score_ood_command(
    questions: Annotated[
        Path | None,
        optional_file(
            "GQA question file the split is built from (e.g. testdev balanced); with "
            "--head / --tail, optionally the released all file (checked = head ∪ tail)."
        ),
    ] = None,
    predictions: Annotated[
        Path | None,
        optional_file("Predictions; without them only the split is built."),
    ] = None,
    head: Annotated[
        Path | None,
        optional_file(
            "A released GQA-OOD head file (ood_testdev_head.json): score this split as "
            "it is, with --tail."
        ),
    ] = None,
    tail: Annotated[
        Path | None,
        optional_file("The released tail file (ood_testdev_tail.json), with --head."),
    ] = None,
    alpha: Annotated[
        float | None,
        float_option(
            "--alpha",
            help="Tail size of a built split: tail answers have p < (1 + alpha) / K (default 0.2).",
            low=-1,
            low_open=True,
        ),
    ] = None,
    curve: Annotated[
        bool, typer.Option("--curve", help="acc-tail over the official alpha grid.")
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option(help="Write the acc-tail curve as a PNG (implies --curve)."),
    ] = None,
    write_split: Annotated[
        Path | None,
        typer.Option(
            help="Write ood_all.json, ood_head.json, ood_tail.json into this folder.",
        ),
    ] = None,
    all_questions: AllQuestions = False,
    allow_missing: AllowMissing = False,
    seed: SeedOption = 0,
    n_bootstrap: ResamplesOption = 1000,
    as_json: JsonFlag = False,
) -> None:
    """GQA-OOD: build the official head/tail split (entropy <= mean - std, tail p < (1+alpha)/K),
    or take the released --head / --tail files, and report acc-all, acc-head, acc-tail and
    delta."""
    from vqadiag.protocols.ood.score import score_ood

    outputs_apart(
        {"--plot": plot},
        {"--questions": questions, "--predictions": predictions, "--head": head, "--tail": tail},
        write_whole={"--write-split": write_split},
    )
    result = score_ood(
        questions,
        predictions,
        head=head,
        tail=tail,
        alpha=alpha,
        curve=curve,
        plot=output_file(plot),
        write_split=output_dir(write_split),
        all_questions=all_questions,
        allow_missing=allow_missing,
        seed=seed,
        n_bootstrap=n_bootstrap,
    )
    note_prediction_counts(result, "the split")
    emit(result, as_json, _render_ood)
