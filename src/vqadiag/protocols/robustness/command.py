"""Command ``vqadiag score robustness`` (protocols.md §4): accuracy under basic-question noise."""

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from vqadiag.console.apps import score_app
from vqadiag.console.common import (
    AllowMissing,
    JsonFlag,
    ResamplesOption,
    SeedOption,
    cli_errors,
    emit,
    existing_file,
    float_option,
    fmt_rate,
    note_missing,
    optional_file,
    rate_table,
    rereadable_paths,
)
from vqadiag.protocols.robustness.formulas import DEFAULT_M, DEFAULT_T, check_limits


def _render(result: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    ci = result["ci"]
    rate_table(
        f"Robustness to basic-question noise ({result['metric']})",
        [("clean accuracy", ci["clean"], result["n"])],
    )

    table = Table(title="Noise partitions (1 = least noisy)", title_justify="left")
    for name in ("partition", "accuracy", "95% CI", "Acc_diff", "R_score"):
        table.add_column(name, justify="right")
    for row, crow in zip(result["partitions"], ci["partitions"], strict=True):
        value, interval = fmt_rate(crow["accuracy"])
        table.add_row(
            str(row["partition"]),
            value,
            interval,
            f"{row['acc_diff']:.2f}",
            f"{row['r_score']:.3f}",
        )
    Console().print(table)
    types = list(result.get("perAnswerType", {}))
    if types:
        by_type = Table(title="Accuracy per answer type", title_justify="left")
        for name in ("partition", *types):
            by_type.add_column(name, justify="right")
        by_type.add_row("clean", *(f"{result['perAnswerType'][t]:.2f}" for t in types))
        for row in result["partitions"]:
            by_type.add_row(
                str(row["partition"]), *(f"{row['perAnswerType'][t]:.2f}" for t in types)
            )
        Console().print(by_type)
    r = ci["r_score"]
    monotonic = {True: "yes", False: "no", None: "-"}[result["monotonic"]]
    typer.echo(
        f"R_score (partition 1, t={result['t']:g}, m={result['m']:g}): {result['r_score']:.3f} "
        f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]   Acc_diff: {result['acc_diff']:.2f}   "
        f"monotonic fall: {monotonic}"
    )


@score_app.command("robustness")
@cli_errors
def robustness(
    truth: Annotated[
        Path, existing_file("VQA v2 annotations or GQA questions (detected from the file).")
    ],
    clean: Annotated[Path, existing_file("Predictions on the clean main questions.")],
    noisy: Annotated[
        list[Path],
        existing_file(
            "Predictions on the noisy questions of partitions 1..7, in order "
            "(several paths after one --noisy, or --noisy repeated)."
        ),
    ],
    t: Annotated[float, float_option("--t", help="R_score tolerance t (0 ≤ t < m).")] = DEFAULT_T,
    m: Annotated[float, float_option("--m", help="R_score limit m (t < m ≤ 100).")] = DEFAULT_M,
    questions: Annotated[
        Path | None,
        optional_file("Only these questions (id list, VQA or GQA questions file)."),
    ] = None,
    all_questions: Annotated[
        bool, typer.Option("--all-questions", help="GQA: also unbalanced questions.")
    ] = False,
    lenient: Annotated[
        bool, typer.Option("--lenient", help="VQA: always normalize answers.")
    ] = False,
    allow_missing: AllowMissing = False,
    seed: SeedOption = 0,
    n_bootstrap: ResamplesOption = 1000,
    as_json: JsonFlag = False,
    more_noisy: Annotated[
        list[Path] | None,
        typer.Argument(
            hidden=True, help="Further noisy files after --noisy P1.", callback=rereadable_paths
        ),
    ] = None,
) -> None:
    """Accuracy clean vs with basic questions appended, Acc_diff and R_score per partition.

    Give the noisy predictions of partitions 1..7 in order: --noisy P1 P2 ... P7.
    Overall acc_diff and r_score are partition 1's (as in the paper's Table 1).
    """
    from vqadiag.protocols.robustness.score import MAX_PARTITIONS, score_robustness

    partitions = [*noisy, *(more_noisy or [])]
    try:
        check_limits(t, m)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--t/--m") from None
    if len(partitions) > MAX_PARTITIONS:
        raise typer.BadParameter(
            f"at most {MAX_PARTITIONS} noisy partitions, got {len(partitions)}",
            param_hint="--noisy",
        )
    result = score_robustness(
        truth,
        clean,
        partitions,
        t=t,
        m=m,
        questions=questions,
        all_questions=all_questions,
        lenient=lenient,
        allow_missing=allow_missing,
        seed=seed,
        n_bootstrap=n_bootstrap,
    )
    note_missing(result["missing_predictions"])
    emit(result, as_json, _render)
