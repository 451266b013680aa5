"""Commands: ``score vqa``, ``score pairs``, ``stats balance`` (docs/protocols.md §1, §2)."""

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from vqadiag.console.apps import score_app, stats_app
from vqadiag.console.common import (
    AllowMissing,
    JsonFlag,
    ResamplesOption,
    SeedOption,
    cli_errors,
    emit,
    existing_file,
    float_option,
    note_prediction_counts,
    optional_file,
    output_file,
    rate_table,
)
from vqadiag.data.io.outputs import outputs_apart

Lenient = Annotated[
    bool,
    typer.Option(
        "--lenient", help="Always normalize answers (official: only when the 10 answers disagree)."
    ),
]
Annotations = Annotated[Path, existing_file("VQA v2 annotations JSON.")]


def _render_vqa(result: Mapping[str, Any]) -> None:
    ci = result["ci"]
    title = "VQA v2 accuracy" + (" (lenient)" if result["lenient"] else "")
    if result["n_missing"]:
        title += f" — {result['n_missing']} missing predictions counted wrong"
    rows: list[tuple[str, Any, Any]] = [("overall", ci["overall"], result["n"])]
    rows += [(f"  {t}", c, c["n"]) for t, c in ci["perAnswerType"].items()]
    rate_table(title, rows)
    rate_table(
        "Per question type",
        [(t, c, c["n"]) for t, c in ci["perQuestionType"].items()],
    )


@score_app.command("vqa")
@cli_errors
def score_vqa_command(
    questions: Annotated[Path, existing_file("VQA v2 questions JSON.")],
    annotations: Annotations,
    predictions: Annotated[Path, existing_file("Predictions (VQA results or any shape).")],
    lenient: Lenient = False,
    allow_missing: AllowMissing = False,
    per_question: Annotated[
        Path | None,
        typer.Option(help="Write JSON Lines {question_id, accuracy} (accuracy in [0, 1])."),
    ] = None,
    as_json: JsonFlag = False,
    seed: SeedOption = 0,
    n_bootstrap: ResamplesOption = 1000,
) -> None:
    """Official VQA v2 accuracy: overall, per answer type, per question type."""
    from vqadiag.protocols.vqa.score import score_vqa

    outputs_apart(
        {"--per-question": per_question},
        {"--questions": questions, "--annotations": annotations, "--predictions": predictions},
    )
    result = score_vqa(
        questions,
        annotations,
        predictions,
        lenient=lenient,
        allow_missing=allow_missing,
        per_question=output_file(per_question),
        seed=seed,
        n_bootstrap=n_bootstrap,
    )
    note_prediction_counts(result, annotations.name)
    emit(result, as_json, _render_vqa)


def _render_pairs(result: Mapping[str, Any]) -> None:
    ci = result["ci"]
    n = result["n_pairs"]
    title = f"Complementary pairs (correct = VQA acc ≥ {result['pair_threshold']:g})"
    rate_table(
        title,
        [
            ("both correct", ci["both_correct"], n),
            ("identical predictions", ci["identical"], n),
            ("different predictions", ci["different"], n),
        ],
    )


@score_app.command("pairs")
@cli_errors
def score_pairs_command(
    annotations: Annotations,
    pairs: Annotated[
        Path, existing_file("Complementary pairs: JSON list of \\[qid_a, qid_b] pairs.")
    ],
    predictions: Annotated[Path, existing_file("Predictions (VQA results or any shape).")],
    pair_threshold: Annotated[
        float,
        float_option(
            "--pair-threshold", help="A question is correct when its VQA acc ≥ this.", low=0, high=1
        ),
    ] = 1.0,
    lenient: Lenient = False,
    allow_missing: AllowMissing = False,
    as_json: JsonFlag = False,
    seed: SeedOption = 0,
    n_bootstrap: ResamplesOption = 1000,
) -> None:
    """Complementary pairs: % both correct, % identical, % different predictions."""
    from vqadiag.protocols.vqa.score import score_pairs

    result = score_pairs(
        annotations,
        pairs,
        predictions,
        pair_threshold=pair_threshold,
        lenient=lenient,
        allow_missing=allow_missing,
        seed=seed,
        n_bootstrap=n_bootstrap,
    )
    emit(result, as_json, _render_pairs)


def _render_balance(result: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    head = f"{result['n']} questions, {result['n_question_types']} question types"
    if "n_images" in result:
        head += f", {result['n_images']} images"
    console.print(head)
    console.print(
        f"answer entropy (bits): weighted mean over types {result['mean_entropy']:.4f}, "
        f"whole split {result['overall_entropy']:.4f}"
    )
    table = Table(title="Answers per question type", title_justify="left")
    for name, justify in (("question type", "left"), ("n", "right"), ("entropy", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    table.add_column("distinct", justify="right")
    table.add_column("top answers")
    for t, row in result["perQuestionType"].items():
        top = ", ".join(f"{a['answer']} {a['percent']:.1f}%" for a in row["top"])
        table.add_row(t, str(row["n"]), f"{row['entropy']:.3f}", str(row["n_answers"]), top)
    console.print(table)
    ci = result["ci"]
    source = "train file" if result["prior_source"] == "train" else "this split (in-sample)"
    rate_table(
        f"Prior baselines (from {source})",
        [
            (f"prior ({result['prior']['answer']!r})", ci["prior"]["accuracy"], result["n"]),
            ("per-question-type prior", ci["per_type_prior"]["accuracy"], result["n"]),
        ],
    )


@stats_app.command("balance")
@cli_errors
def balance_command(
    annotations: Annotations,
    questions: Annotated[
        Path | None,
        optional_file("VQA v2 questions JSON (checked; adds n_images)."),
    ] = None,
    prior_from: Annotated[
        Path | None,
        optional_file("Train annotations to take the prior baselines from (default: self)."),
    ] = None,
    top: Annotated[int, typer.Option(min=1, help="Top answers listed per question type.")] = 5,
    as_json: JsonFlag = False,
    seed: SeedOption = 0,
    n_bootstrap: ResamplesOption = 1000,
) -> None:
    """Answer entropy per question type, top answers, prior baselines."""
    from vqadiag.protocols.vqa.score import balance_stats

    result = balance_stats(
        annotations,
        questions=questions,
        prior_from=prior_from,
        top=top,
        seed=seed,
        n_bootstrap=n_bootstrap,
    )
    emit(result, as_json, _render_balance)
