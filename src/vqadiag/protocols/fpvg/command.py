"""Commands: ``vqadiag relevance`` and ``vqadiag score fpvg`` (docs/protocols.md §5)."""

from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from vqadiag.console.apps import app, score_app
from vqadiag.console.common import (
    AllowMissing,
    JsonFlag,
    QuietFlag,
    ResamplesOption,
    SeedOption,
    cli_errors,
    emit,
    existing_file,
    note_missing,
    optional_file,
    output_file,
    rate_table,
)
from vqadiag.data.io.outputs import outputs_apart
from vqadiag.protocols.fpvg.formulas import CATEGORIES, FPVG_MINUS, FPVG_PLUS


class Denominator(str, Enum):
    """Which box's area divides the overlap that excludes a box from the irrelevant set."""

    detected = "detected"
    annotated = "annotated"


@app.command("relevance")
@cli_errors
def relevance_command(
    questions: Annotated[Path, existing_file("GQA question file (with annotations).")],
    scenes: Annotated[Path, existing_file("GQA scene graphs of the same images.")],
    detections: Annotated[
        Path,
        typer.Option(
            ...,
            help="Detected boxes: a GQA or Detectron / VinVL '<prefix>_info.json' (next to its "
            "h5 files) or its folder, LXMERT's *_obj36.tsv, or a JSON / npz "
            "{imageId: [\\[x1, y1, x2, y2], ...]}.",
        ),
    ],
    out: Annotated[Path, typer.Option(..., help="Where to write R.json.")],
    overlap_denominator: Annotated[
        Denominator,
        typer.Option(
            help="Exclude a box from 'irrelevant' when the overlap / area of the DETECTED box "
            "(official code) or of the ANNOTATED object (paper) exceeds 0.25."
        ),
    ] = Denominator.detected,
    exact_geometry: Annotated[
        bool,
        typer.Option(
            "--exact-geometry",
            help="Use float coordinates and areas instead of the official int() truncation.",
        ),
    ] = False,
    as_json: JsonFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Find each question's relevant and irrelevant detected boxes (FPVG, docs/protocols.md §5)."""
    from vqadiag.data.formats.relevance_files import relevance

    outputs_apart(
        {"--out": out},
        {"--questions": questions, "--scenes": scenes, "--detections": detections},
    )
    result = relevance(
        questions,
        scenes,
        detections,
        output_file(out),
        overlap_denominator=overlap_denominator.value,  # type: ignore[arg-type]
        official=not exact_geometry,
        progress=not quiet,
    )
    emit(result, as_json, _render_relevance)


def _render_relevance(result: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(
        f"wrote {result['out']}: {result['n_kept']} of {result['n_questions']} questions "
        "have relevant and irrelevant boxes",
        soft_wrap=True,
    )
    table = Table(title="Left out", title_justify="left")
    table.add_column("reason")
    table.add_column("questions", justify="right")
    for reason, count in result["excluded"].items():
        table.add_row(reason, str(count))
    console.print(table)
    det = result["detector"]
    stats = Table(title="Boxes per kept question", title_justify="left")
    stats.add_column("")
    for name in ("all", "rel", "irrel"):
        stats.add_column(name, justify="right")
    stats.add_row("max", *(str(det["max_boxes"][k]) for k in ("all", "rel", "irrel")))
    stats.add_row("avg", *(f"{det['avg_boxes'][k]:.1f}" for k in ("all", "rel", "irrel")))
    console.print(stats)


@score_app.command("fpvg")
@cli_errors
def score_fpvg_command(
    questions: Annotated[Path, existing_file("GQA question file (gold answers).")],
    all_predictions: Annotated[Path, optional_file("Predictions with all boxes.", "--all")],
    rel_predictions: Annotated[
        Path,
        optional_file("Predictions with only relevant boxes.", "--rel"),
    ],
    irrel_predictions: Annotated[
        Path,
        optional_file("Predictions with only irrelevant boxes.", "--irrel"),
    ],
    relevance: Annotated[
        Path | None,
        optional_file("R.json written by `vqadiag relevance` (or give FPVG's two object pickles)."),
    ] = None,
    relevant_objects: Annotated[
        Path | None,
        optional_file(
            "FPVG's relevant-object pickle {imageId: {qid: \\[box indices]}}, with "
            "--irrelevant-objects (read without running code)."
        ),
    ] = None,
    irrelevant_objects: Annotated[
        Path | None,
        optional_file("FPVG's irrelevant-object pickle, with --relevant-objects."),
    ] = None,
    split_ids: Annotated[
        tuple[Path, Path] | None,
        optional_file(
            "Two files ID.json OOD.json (id lists or question dicts): c2i per split.", "--split-ids"
        ),
    ] = None,
    allow_missing: AllowMissing = False,
    seed: SeedOption = 0,
    n_bootstrap: ResamplesOption = 1000,
    as_json: JsonFlag = False,
) -> None:
    """Faithful & Plausible Visual Grounding of three prediction runs (docs/protocols.md §5)."""
    from vqadiag.errors import DataError
    from vqadiag.protocols.fpvg.score import score_fpvg

    pickles = (relevant_objects, irrelevant_objects)
    if relevance is not None and any(p is not None for p in pickles):
        raise DataError("--relevance", "give R.json or the two object pickles, not both")
    if relevance is None and (relevant_objects is None or irrelevant_objects is None):
        raise DataError(
            "--relevance", "give R.json, or both --relevant-objects and --irrelevant-objects"
        )
    result = score_fpvg(
        questions,
        relevance if relevance is not None else (relevant_objects, irrelevant_objects),
        all_predictions,
        rel_predictions,
        irrel_predictions,
        split_ids=split_ids,
        allow_missing=allow_missing,
        seed=seed,
        n_bootstrap=n_bootstrap,
    )
    note_missing(result["missing_predictions"])
    if "suff_comp_left_out" in result:
        typer.echo(f"note: suff_comp left out: {result['suff_comp_left_out']}", err=True)
    emit(result, as_json, _render_fpvg)


_LABELS = {
    FPVG_PLUS: "FPVG+",
    FPVG_MINUS: "FPVG-",
    "fpvg_plus_correct": "FPVG+ correct",
    "fpvg_plus_wrong": "FPVG+ wrong",
    "fpvg_minus_correct": "FPVG- correct",
    "fpvg_minus_wrong": "FPVG- wrong",
    "mod_fpvg_plus": "mod-FPVG+",
    "acc_all": "Acc all",
    "acc_rel": "Acc rel",
    "acc_irrel": "Acc irrel",
}


def _num(value: Any) -> str:
    if value is None or value != value:
        return "-"
    return f"{value:.2f}"


def _render_fpvg(result: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    ci = result["ci"]
    rate_table(
        f"FPVG ({result['n']} questions)",
        [(label, ci[key], result["n"]) for key, label in _LABELS.items()],
    )
    console = Console()
    left_out = ", ".join(f"{k} {v}" for k, v in result["excluded"].items() if v)
    console.print(f"left out: {left_out or 'none'}", soft_wrap=True)
    c2i = result["c2i"]
    groups = [g for g in ("all", "id", "ood") if g in c2i]
    table = Table(title="c2i (#correct / #incorrect)", title_justify="left")
    table.add_column("category")
    for group in groups:
        table.add_column(group, justify="right")
    if "drop_id_to_ood" in c2i:
        table.add_column("drop ID→OOD %", justify="right")
    for cat in CATEGORIES:
        row = [_num(c2i[g][cat]) for g in groups]
        if "drop_id_to_ood" in c2i:
            row.append(_num(c2i["drop_id_to_ood"][cat]))
        table.add_row(cat, *row)
    table.add_row("drop FPVG+→FPVG- %", *(_num(c2i["drop_plus_to_minus"][g]) for g in groups))
    console.print(table)
    if "suff_comp" in result:
        sc, sci = result["suff_comp"], ci["suff_comp"]
        rows = [("suff (pp)", sci["suff"], sc["n"]), ("comp (pp)", sci["comp"], sc["n"])]
        for name, cat in sc["categories"].items():
            rows.append((f"{name} share", sci["categories"][name]["share"], cat["n"]))
            if "flip" in cat:
                rows.append((f"{name} flipped", sci["categories"][name]["flip"], cat["n"]))
        rate_table("Sufficiency / comprehensiveness", rows)
