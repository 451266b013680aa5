"""Commands: ``vqadiag synth`` (generate a synthetic world) and ``vqadiag stats DIR``."""

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from vqadiag.console.apps import app, stats_app
from vqadiag.console.common import (
    MAX_SEED,
    JsonFlag,
    QuietFlag,
    ResamplesOption,
    SeedOption,
    cli_errors,
    emit,
    float_option,
    rate_table,
)


def _render_summary(result: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"synthetic world in {result['out']}", title_justify="left")
    for col in ("dataset", "split", "images", "questions", "notes"):
        table.add_column(col, justify="left" if col in ("dataset", "split", "notes") else "right")
    splits = result["splits"]
    for split, s in splits["gqa"].items():
        table.add_row(
            "gqa",
            split,
            str(s["images"]),
            str(s["questions"]),
            f"{s['balanced']} balanced, {s['objects']} objects",
        )
    for split, s in splits["vqa2"].items():
        table.add_row(
            "vqa2",
            split,
            str(s["images"]),
            str(s["questions"]),
            f"{s['pairs']} pairs, not possible {s['not_possible_rate']:.2f}%",
        )
    for split, s in splits["introspect"].items():
        table.add_row(
            "introspect", split, "", str(s["questions"]), f"{s['sub_questions']} sub-questions"
        )
    d = splits["detections"]
    table.add_row("detections", "all", str(d["images"]), "", f"{d['boxes']} boxes")
    if "images" in splits:
        im = splits["images"]
        table.add_row("images", "all", str(im["images"]), "", f"PNG in {im['folder']}/")
    console = Console()
    console.print(table)
    console.print(
        f"{result['questions']} questions in {result['seconds']:.1f} s "
        f"({result['questions_per_second']:.0f} questions/s), seed {result['seed']}, "
        f"bias {result['bias']}, feature dim {result['feature_dim']}, "
        f"{'-'.join(map(str, result['objects_per_image']))} objects per image"
    )


@app.command("synth")
@cli_errors
def synth(
    out: Annotated[Path, typer.Option("--out", help="Output folder (created).")],
    images: Annotated[int, typer.Option("--images", min=3, help="Number of images.")] = 2000,
    seed: Annotated[
        int, typer.Option("--seed", min=0, max=MAX_SEED, help="Seed: same seed, same bytes.")
    ] = 0,
    bias: Annotated[
        float,
        float_option("--bias", help="Skew of class-conditional attribute priors.", low=0, high=1),
    ] = 0.8,
    feature_dim: Annotated[
        int, typer.Option("--feature-dim", min=1, help="Detector feature dimension.")
    ] = 64,
    no_images: Annotated[
        bool,
        typer.Option("--no-images", help="Skip rendering gqa/images/*.png (files only)."),
    ] = False,
    objects: Annotated[
        str,
        typer.Option(
            "--objects",
            metavar="MIN-MAX",
            help="Objects per image, a range from 2 to 40 (e.g. 3-6 for sparse scenes).",
        ),
    ] = "5-40",
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Generate a synthetic world in the GQA, VQA v2 and VQA-introspect file formats,
    with one rendered PNG per image (docs/synth.md)."""
    from vqadiag.synth import generate_world

    result = generate_world(
        out,
        images=images,
        seed=seed,
        bias=bias,
        feature_dim=feature_dim,
        progress=not (as_json or quiet),
        render=not no_images,
        objects=_object_range(objects),
    )
    emit(result, as_json, _render_summary)


def _object_range(text: str) -> tuple[int, int]:
    """``"3-6"`` → ``(3, 6)``; anything else, or a range outside 2 to 40, one line."""
    from vqadiag.errors import DataError
    from vqadiag.synth.scenes import check_object_range

    lo, sep, hi = text.partition("-")
    if not (sep and all(v.isascii() and v.isdigit() for v in (lo, hi))):
        raise DataError("--objects", f"{text!r}: expected MIN-MAX, e.g. 3-6")
    try:
        return check_object_range((int(lo), int(hi)))
    except ValueError as err:
        raise DataError("--objects", f"{text!r}: {err}") from None


def _render_stats(result: Mapping[str, Any]) -> None:
    from rich.console import Console

    w = result["world"]
    Console().print(
        f"world: {w['images']} images, seed {w['seed']}, bias {w['bias']}, "
        f"feature dim {w['feature_dim']}"
    )
    ci = result["ci"]
    labelled = []
    for split in result["gqa"]:
        labelled.append((f"gqa {split}: balanced %", ci["gqa"][split]["balanced_rate"]))
        labelled.append((f"gqa {split}: yes % (balanced yes/no)", ci["gqa"][split]["yes_rate"]))
    labelled.append(("detector recall @ IoU>0.5 %", ci["detections"]["recall_iou50"]))
    labelled.append(("detected boxes unmatched %", ci["detections"]["unmatched_rate"]))
    for split in result["vqa2"]:
        labelled.append((f"vqa2 {split}: unanimous answers %", ci["vqa2"][split]["unanimous_rate"]))
        labelled.append((f"vqa2 {split}: pair possible %", ci["vqa2"][split]["pair_possible_rate"]))
    for split in result["introspect"]:
        labelled.append(
            (f"introspect {split}: perception %", ci["introspect"][split]["perception_rate"])
        )
    rows = [(label, c, c["n"]) for label, c in labelled]
    rate_table("synthetic world", rows)
    console = Console()
    for split, s in result["gqa"].items():
        o = s["ood"]
        console.print(
            f"gqa {split}: {s['objects_per_image']['mean']:.1f} objects/image, "
            f"GQA-OOD {o['n_groups_kept']}/{o['n_groups']} groups kept, "
            f"head {o['n_head']}, tail {o['n_tail']}"
        )


@stats_app.command("world")
@cli_errors
def world(
    directory: Annotated[Path, typer.Argument(help="Folder written by `vqadiag synth`.")],
    seed: SeedOption = 0,
    n_bootstrap: ResamplesOption = 1000,
    as_json: JsonFlag = False,
) -> None:
    """Describe a synthetic world: sizes, balance, detector quality, pairs (`vqadiag stats DIR`)."""
    from vqadiag.workflows.world_stats import world_stats

    emit(world_stats(directory, seed=seed, n_bootstrap=n_bootstrap), as_json, _render_stats)
