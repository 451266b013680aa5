"""docs/protocols.md §6 commands: score consistency, introspect-questions, classify-questions."""

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from vqadiag.console.apps import app, score_app
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
    output_dir,
    output_file,
    print_json,
    rate_table,
)
from vqadiag.data.io.outputs import outputs_apart

_LABELS = {
    "main_correct_sub_correct": "M✓ S✓  main right, sub right",
    "main_correct_sub_wrong": "M✓ S✗  main right, sub wrong",
    "main_wrong_sub_correct": "M✗ S✓  main wrong, sub right",
    "main_wrong_sub_wrong": "M✗ S✗  main wrong, sub wrong",
}

SubTypes = Annotated[
    str,
    typer.Option(
        "--sub-types",
        help="Comma-separated pred_q_type values whose sub-questions are kept "
        "(reasoning, perception, invalid).",
    ),
]


def _types(text: str) -> tuple[str, ...]:
    from vqadiag.data.formats.introspect import Q_TYPES

    kinds = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [t for t in kinds if t not in Q_TYPES]
    if not kinds or bad:
        raise typer.BadParameter(
            f"expected a comma-separated subset of {', '.join(Q_TYPES)}, got {text!r}",
            param_hint="--sub-types",
        )
    return kinds


def _render(result: Mapping[str, Any]) -> None:
    ci = result["ci"]
    n_pairs, n_main = result["n_pairs"], result["n_main"]
    rate_table(
        "Quadrants (% of main/sub pairs)",
        [(_LABELS[k], ci["quadrants"][k], n_pairs) for k in _LABELS],
    )
    rows = [
        ("consistency  M✓S✓ / (M✓S✓ + M✓S✗)", ci["consistency"], n_pairs),
        ("consistency (balanced yes/no subs)", ci["consistency_balanced"], n_pairs),
        ("correct mains with all subs wrong", ci["all_subs_wrong"], result["n_main_correct"]),
        ("reasoning accuracy (mains once)", ci["reasoning_accuracy"], n_main),
    ]
    if "reasoning_vqa_accuracy" in ci:
        rows.append(("reasoning VQA accuracy", ci["reasoning_vqa_accuracy"], n_main))
    rows.append(("sub-question accuracy", ci["sub_accuracy"], n_pairs))
    if "overall_accuracy" in ci:
        rows.append(("overall VQA accuracy", ci["overall_accuracy"], result["n_overall"]))
    rate_table(
        f"Consistency (main: {result['main_correctness']}; sub: {result['sub_correctness']})",
        rows,
    )
    if result["n_main_without_subs"]:
        typer.echo(f"{result['n_main_without_subs']} main questions have no sub-question.")


@score_app.command("consistency")
@cli_errors
def consistency(
    introspect: Annotated[Path, existing_file("VQA-introspect file (main + sub-questions).")],
    main: Annotated[Path, existing_file("Predictions on the main (Reasoning) questions.")],
    sub: Annotated[
        Path,
        existing_file(
            "Predictions on the sub-questions (ids <main_qid>_<k>; may be --main's file)."
        ),
    ],
    annotations: Annotated[
        Path | None,
        optional_file("VQA v2 annotations: score mains by VQA accuracy."),
    ] = None,
    overall: Annotated[
        Path | None,
        optional_file("Predictions on every question of --annotations (adds overall accuracy)."),
    ] = None,
    threshold: Annotated[
        float,
        float_option(
            "--threshold",
            help="VQA accuracy at which a main counts as correct.",
            low=0,
            high=1,
            low_open=True,
        ),
    ] = 1.0,
    lenient: Annotated[
        bool, typer.Option("--lenient", help="VQA: always normalize answers.")
    ] = False,
    sub_types: SubTypes = "reasoning,perception",
    allow_missing: AllowMissing = False,
    seed: SeedOption = 0,
    n_bootstrap: ResamplesOption = 1000,
    as_json: JsonFlag = False,
) -> None:
    """Do right answers to Reasoning questions come with right answers to their sub-questions?"""
    from vqadiag.protocols.consistency.score import score_consistency

    if overall is not None and annotations is None:
        raise typer.BadParameter("needs --annotations", param_hint="--overall")
    result = score_consistency(
        introspect,
        main,
        sub,
        annotations=annotations,
        overall=overall,
        threshold=threshold,
        lenient=lenient,
        include_types=_types(sub_types),
        allow_missing=allow_missing,
        seed=seed,
        n_bootstrap=n_bootstrap,
    )
    note_prediction_counts(result, "the introspect file's main and sub-questions")
    emit(result, as_json, _render)


@app.command("introspect-questions")
@cli_errors
def introspect_questions(
    introspect: Annotated[Path, existing_file("VQA-introspect file.")],
    out: Annotated[Path, typer.Option(help="Folder for the VQA v2-style files.")],
    sub_types: SubTypes = "reasoning,perception",
    as_json: JsonFlag = False,
) -> None:
    """Write main and sub-questions as VQA v2 question/annotation files to run a model on.

    Sub-question ids are <main_qid>_<k> (k from 0, duplicates removed, file order).
    """
    from vqadiag.protocols.consistency.score import introspect_questions as run

    outputs_apart({}, {"--introspect": introspect}, write_whole={"--out": out})
    result = run(introspect, output_dir(out), _types(sub_types))
    if as_json:
        print_json(result)
        return
    typer.echo(f"{result['n_main']} main and {result['n_sub']} sub-questions written:")
    for path in result["files"].values():
        typer.echo(f"  {path}")


@app.command("classify-questions")
@cli_errors
def classify_questions(
    questions: Annotated[
        Path, existing_file("VQA v2 questions, GQA questions or VQA-introspect file.")
    ],
    out: Annotated[
        Path | None,
        typer.Option(help="Write {qid: {label, rules}} here."),
    ] = None,
    seed: SeedOption = 0,
    n_bootstrap: ResamplesOption = 1000,
    as_json: JsonFlag = False,
) -> None:
    """Label questions Perception or Reasoning with the SQuINT paper's Table 2 rules."""
    from vqadiag.protocols.consistency.score import classify_questions as run

    outputs_apart({"--out": out}, {"--questions": questions})
    result = run(questions, output_file(out), seed=seed, n_bootstrap=n_bootstrap)
    if as_json:
        print_json(result)
        return
    ci = result["ci"]["reasoning_percent"]
    rate_table(
        f"Reasoning split ({result['format']} questions)",
        [("reasoning (no perception rule fires)", ci, result["n"])],
    )
    fired = [r for r in sorted(result["by_rule"], key=lambda r: -r["n"]) if r["n"]][:10]
    typer.echo("most frequent perception rules:")
    for rule in fired:
        parts = [
            f"starts '{rule['starts']}'" if rule["starts"] else "",
            f"contains '{rule['contains']}'" if rule["contains"] else "",
            f"not {rule['not_contains']}" if rule["not_contains"] else "",
            f"{rule['length']} words" if rule["length"] else "",
        ]
        typer.echo(f"  rule {rule['rule']:>2}: {rule['n']:>8}  {' '.join(p for p in parts if p)}")
    if out is not None:
        typer.echo(f"labels written to {out}")
