"""Command ``vqadiag score gqa``: the official GQA eval.py metrics (docs/protocols.md §7)."""

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
    existing_file,
    note_prediction_counts,
    optional_file,
    rate_table,
)

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
            help="Attention is a list of \\[x0, y0, x1, y1, weight] object boxes (0-1 coords).",
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
    from vqadiag.protocols.gqa.score import score_gqa

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
    note_prediction_counts(result, "the questions file")
    emit(result, as_json, _render_gqa)
