"""Commands: ``vqadiag explain train | eval | show`` (counter-example explanations,
Goyal et al. 2017 §5; docs/protocols.md §2)."""

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from vqadiag.console.apps import app
from vqadiag.console.common import (
    JsonFlag,
    QuietFlag,
    ResamplesOption,
    SeedOption,
    TrainingSeedOption,
    cli_errors,
    emit,
    float_option,
    fmt_rate,
    optional_file,
    output_dir,
    rate_table,
)

explain_app = typer.Typer(
    help="Counter-example explanations: train the two-headed model, evaluate Recall@k "
    "against the Random / Distance / VQA-model baselines, show one question's counter-examples.",
    no_args_is_help=True,
)
app.add_typer(explain_app, name="explain")

DataOption = Annotated[
    Path, typer.Option("--data", help="VQA v2-format data folder (a synthetic world).")
]
RunOption = Annotated[
    Path, typer.Option("--model", help="Run folder written by `vqadiag explain train`.")
]
CandidatesOption = Annotated[
    Path | None,
    optional_file(
        "Candidates file {qid: {image_id, candidates, complement_image_id}} "
        "(default: vqa2/synth_<split>2014_pair_candidates.json).",
        "--candidates",
    ),
]

METHOD_LABELS = {
    "model": "explainer",
    "random": "random (seeded)",
    "distance": "distance (order)",
    "distance_features": "distance (features)",
    "vqa_model": "VQA model",
}


def _render_train(result: Mapping[str, Any]) -> None:
    typer.echo(
        f"trained the counter-example model on {result['train_questions']} {result['split']} "
        f"questions ({result['explained_questions']} with candidates) in "
        f"{result['seconds']:.1f} s → {result['run']} (fingerprint {result['fingerprint']})"
    )
    if result["val"] is not None:
        ci = result["val"]["recall@5"]
        rate_table(f"explainer on {result['val']['split']}", [("Recall@5", ci, ci["n"])])


def _p_value(p: float, n_bootstrap: int) -> str:
    return f"< {1 / n_bootstrap:.2g}" if p < 1 / n_bootstrap else f"= {p:.3g}"


def _render_eval(result: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"counter-example Recall@k (%) on {result['split']}: "
        f"{result['questions']} questions, K = {result['k_candidates']}",
        title_justify="left",
    )
    for col in ("method", "R@5", "95% CI", "R@1", "R@10", "mean rank", "paper R@5"):
        table.add_column(col, justify="left" if col == "method" else "right")
    paper = result["paper_recall@5"]
    for name, block in result["methods"].items():
        value, interval = fmt_rate(block["recall@5"])
        table.add_row(
            METHOD_LABELS.get(name, name),
            value,
            interval,
            fmt_rate(block["recall@1"])[0],
            fmt_rate(block["recall@10"])[0],
            f"{block['mean_rank']:.2f}",
            f"{paper[name]:.2f}" if name in paper else "",
        )
    expected = result["random_expected"]
    table.add_row(
        "random (expected)",
        f"{expected['recall@5']:.2f}",
        "",
        f"{expected['recall@1']:.2f}",
        f"{expected['recall@10']:.2f}",
        f"{(result['k_candidates'] + 1) / 2:.2f}",
        "",
    )
    console = Console()
    console.print(table)
    vqa = result["vqa_model"]
    console.print(
        f"VQA-model baseline: {vqa['source']}; answers outside its vocabulary: "
        f"{vqa['answers_not_in_vocabulary']} (P = 0, random tie-break)"
    )
    acc_value, acc_ci = fmt_rate(result["answer_accuracy"])
    console.print(f"answering head accuracy on these questions: {acc_value}% {acc_ci}")
    cmp = result["comparison"]
    diff, interval = fmt_rate(cmp["difference"])
    n_boot = result["n_bootstrap"]
    console.print(
        f"explainer − {cmp['baseline']} at Recall@{cmp['k']}: {diff} points {interval} "
        f"(paired bootstrap p {_p_value(cmp['p_value'], n_boot)}, "
        f"McNemar p = {cmp['mcnemar_p_value']:.3g})"
    )


def _render_show(result: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(
        f"[bold]{result['question']}[/bold]  (question {result['question_id']}, "
        f"image {result['image_id']})"
    )
    gold = result["answer"]
    console.print(
        f"model answer: {result['predicted_answer']} (p = {result['probability']:.3f})"
        + (f"; annotated answer: {gold}" if gold is not None else "")
    )
    table = Table(
        title=f"counter-examples to '{result['explained_answer']}' "
        f"(top {len(result['counter_examples'])} of {result['k_candidates']})",
        title_justify="left",
    )
    for col in ("rank", "image", "score", "nearest-neighbour rank", "P(answer)", "complement"):
        table.add_column(col, justify="right" if col != "image" else "left")
    for row in result["counter_examples"]:
        table.add_row(
            str(row["rank"]),
            str(row["image_id"]),
            f"{row['score']:.3f}",
            str(row["distance_rank"]),
            f"{row['p_explained_answer']:.3f}",
            "yes" if row["is_complement"] else "",
        )
    console.print(table)
    console.print(
        f"the annotated complementary image {result['complement_image_id']} ranks "
        f"{result['complement_rank']} of {result['k_candidates']}"
    )


@explain_app.command("train")
@cli_errors
def train_command(
    data: DataOption,
    out: Annotated[Path, typer.Option("--out", help="Run folder to write.")],
    epochs: Annotated[int | None, typer.Option("--epochs", min=1, help="Training epochs.")] = None,
    seed: TrainingSeedOption = 0,
    lambda_: Annotated[
        float | None,
        float_option("--lambda", help="Weight λ of the hinge ranking loss (default 1).", low=0),
    ] = None,
    margin: Annotated[
        float | None, float_option("--margin", help="Hinge margin M (default 1).", low=0)
    ] = None,
    split: Annotated[str, typer.Option("--split", help="Training split.")] = "train",
    candidates: CandidatesOption = None,
    val_candidates: Annotated[
        Path | None,
        optional_file("Candidates file of the validation split.", "--val-candidates"),
    ] = None,
    option: Annotated[
        list[str] | None,
        typer.Option("--option", "-o", help="Model option KEY=VALUE (repeatable)."),
    ] = None,
    n_bootstrap: ResamplesOption = 1000,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Train the two-headed counter-example model (answering + explaining head)."""
    from vqadiag.cli.models import TRAIN_OWN_OPTIONS, flags_or_options, parse_options
    from vqadiag.models.checkpoint import RUN_FOLDER
    from vqadiag.workflows.explain import train

    options = parse_options(option or [], TRAIN_OWN_OPTIONS)
    flags_or_options(options, **{"lambda": lambda_, "margin": margin})

    result = train(
        data,
        output_dir(out, RUN_FOLDER),
        epochs=epochs,
        seed=seed,
        lambda_=lambda_,
        margin=margin,
        split=split,
        candidates=candidates,
        val_candidates=val_candidates,
        options=options,
        progress=not quiet,
        n_bootstrap=n_bootstrap,
    )
    emit(result, as_json, _render_train)


@explain_app.command("eval")
@cli_errors
def eval_command(
    model: RunOption,
    data: DataOption,
    split: Annotated[str, typer.Option("--split", help="Split to evaluate.")] = "val",
    candidates: CandidatesOption = None,
    vqa_model: Annotated[
        Path | None,
        typer.Option(
            "--vqa-model",
            help="Run folder of the VQA model of the VQA-model baseline "
            "(default: the explainer's own answering head).",
        ),
    ] = None,
    seed: SeedOption = 0,
    n_bootstrap: ResamplesOption = 1000,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Recall@1/5/10 of the explainer and the Random, Distance and VQA-model baselines."""
    from vqadiag.workflows.explain import evaluate

    result = evaluate(
        model,
        data,
        split=split,
        candidates=candidates,
        vqa_model=vqa_model,
        seed=seed,
        n_bootstrap=n_bootstrap,
        progress=not quiet,
    )
    emit(result, as_json, _render_eval)


@explain_app.command("show")
@cli_errors
def show_command(
    model: RunOption,
    data: DataOption,
    question: Annotated[str, typer.Option("--question", help="Question id.")],
    split: Annotated[str, typer.Option("--split", help="Split of the question.")] = "val",
    candidates: CandidatesOption = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Counter-examples to list.")] = 5,
    gold: Annotated[
        bool,
        typer.Option("--gold", help="Explain the annotated answer instead of the model's."),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Answer one question and list its top counter-example images."""
    from vqadiag.workflows.explain import show

    result = show(model, data, question, split=split, candidates=candidates, top=top, gold=gold)
    emit(result, as_json, _render_show)
