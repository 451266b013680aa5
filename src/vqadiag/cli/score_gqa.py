"""Commands ``vqadiag score gqa`` (official GQA eval.py metrics) and ``vqadiag score ood``
(GQA-OOD head / tail split and accuracies); docs/protocols.md §3, §7."""

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from vqadiag.cli.apps import score_app
from vqadiag.cli.common import (
    AllowMissing,
    JsonFlag,
    ResamplesOption,
    SeedOption,
    cli_errors,
    emit,
    existing_file,
    fmt_rate,
    optional_file,
    output_dir,
    output_file,
    rate_table,
)

AllQuestions = Annotated[
    bool,
    typer.Option(
        "--all-questions", help="Use every question, not only those with isBalanced true."
    ),
]

_SEMANTIC_NAMES = {
    "attr": "attribute",
    "cat": "category",
    "global": "scene",
    "obj": "object",
    "rel": "relation",
}


def _breakdown_table(title: str, values: Mapping[str, Any], cis: Mapping[str, Any]) -> None:
    rows = [(str(k), cis.get(k), (cis.get(k) or {}).get("n")) for k in values]
    rate_table(title, rows)


def _render_gqa(result: Mapping[str, Any]) -> None:
    ci = result["ci"]
    scope = "balanced questions" if result["balanced_only"] else "all questions"
    detail = result["consistency_detail"]
    rows = [(key, ci[key], (ci[key] or {}).get("n")) for key in ("accuracy", "binary", "open")]
    rows += [
        ("validity", ci["validity"], (ci["validity"] or {}).get("n")),
        ("plausibility", ci["plausibility"], (ci["plausibility"] or {}).get("n")),
        ("consistency", ci["consistency"], detail["n_questions"]),
        ("distribution (lower is better)", ci["distribution"], None),
    ]
    if ci.get("grounding") is not None:
        rows.append(("grounding", ci["grounding"], ci["grounding"]["n"]))
    rate_table(f"GQA ({scope}, n = {result['n']})", rows)
    if result["validity"] is None:
        typer.echo("validity / plausibility: pass --choices to compute them")
    if detail["entailed_skipped"]:
        typer.echo(
            f"consistency: skipped {detail['entailed_skipped']} entailed questions without a "
            f"prediction ({detail['questions_skipped']} correct questions left with none)"
        )
    _breakdown_table(
        "Accuracy / structural type", result["perStructuralType"], ci["perStructuralType"]
    )
    semantic = {_SEMANTIC_NAMES.get(k, k): v for k, v in result["perSemanticType"].items()}
    semantic_ci = {_SEMANTIC_NAMES.get(k, k): v for k, v in ci["perSemanticType"].items()}
    _breakdown_table("Accuracy / semantic type", semantic, semantic_ci)
    _breakdown_table("Accuracy / steps number", result["perSteps"], ci["perSteps"])
    _breakdown_table("Accuracy / words number", result["perLength"], ci["perLength"])


@score_app.command("gqa")
@cli_errors
def score_gqa_command(
    questions: Annotated[Path, existing_file("GQA question file ({qid: record}).")],
    predictions: Annotated[Path, existing_file("Predictions (any supported shape).")],
    choices: Annotated[
        Path | None,
        optional_file("GQA choices file, for validity and plausibility."),
    ] = None,
    attentions: Annotated[
        Path | None,
        optional_file(
            "Attention maps [{questionId, attention}] for the grounding score "
            "(eval.py --grounding; needs --scene-graphs)."
        ),
    ] = None,
    scene_graphs: Annotated[
        Path | None,
        optional_file("GQA scene graphs of the images (grounding)."),
    ] = None,
    map_size: Annotated[
        int, typer.Option(min=1, help="Side of the spatial attention grid (grounding).")
    ] = 7,
    object_attention: Annotated[
        bool,
        typer.Option(
            "--object-attention",
            help="Attention is a list of [x0, y0, x1, y1, weight] object boxes (0-1 coords).",
        ),
    ] = False,
    all_questions: AllQuestions = False,
    allow_missing: AllowMissing = False,
    seed: SeedOption = 0,
    n_bootstrap: ResamplesOption = 1000,
    as_json: JsonFlag = False,
) -> None:
    """GQA's official metrics: accuracy (by type, length, steps), validity, plausibility,
    consistency and distribution, over the balanced questions."""
    from vqadiag.scoring.gqa import score_gqa

    result = score_gqa(
        questions,
        predictions,
        choices=choices,
        attentions=attentions,
        scene_graphs=scene_graphs,
        map_size=map_size,
        object_attention=object_attention,
        all_questions=all_questions,
        allow_missing=allow_missing,
        seed=seed,
        n_bootstrap=n_bootstrap,
    )
    _note_extra(result, "the questions file")
    emit(result, as_json, _render_gqa)


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
        float, typer.Option(help="Tail size: tail answers have p < (1 + alpha) / K.")
    ] = 0.2,
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
    from vqadiag.scoring.gqa import score_ood

    if alpha <= -1:
        raise typer.BadParameter("alpha must be greater than -1", param_hint="--alpha")
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
    _note_extra(result, "the split")
    emit(result, as_json, _render_ood)


def _note_extra(result: Mapping[str, Any], where: str) -> None:
    """Say on stderr how many predictions were ignored, converted or null."""
    notes = {
        "extra_predictions": f"predictions for questions outside {where} were ignored "
        "(as the official script ignores them)",
        "converted_predictions": "predictions were JSON booleans or numbers, read as "
        "yes / no / digits (the official script compares raw values: they would be wrong)",
        "null_predictions": "predictions were null, scored wrong (as officially)",
    }
    for key, text in notes.items():
        if result.get(key):
            typer.echo(f"note: {result[key]} {text}", err=True)
