"""Commands ``vqadiag bq build`` and ``vqadiag bq noise`` (protocols.md §4)."""

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from vqadiag.console.apps import app
from vqadiag.console.common import (
    JsonFlag,
    QuietFlag,
    cli_errors,
    emit,
    existing_file,
    fail,
    float_option,
    output_dir,
    output_file,
)
from vqadiag.data.io.outputs import outputs_apart


def known_ranker(param: typer.CallbackParam, value: str | None) -> str | None:
    """Option callback: a ranker option names a basic-question ranker, or one line naming
    the option says which ones there are, when the command line is read (before any
    work)."""
    from vqadiag.errors import DataError
    from vqadiag.protocols.robustness.basic_questions.rankers import check_ranker

    if value is None:
        return None
    try:
        return check_ranker(value, param.opts[0])  # an option always has its flag
    except DataError as err:  # while the options are parsed: no cli_errors around yet
        fail(err)


bq_app = typer.Typer(
    help="Basic-question datasets (General / Yes/No BQD) and noisy question files.",
    no_args_is_help=True,
)
app.add_typer(bq_app, name="bq")


def _render_build(result: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Basic-question dataset ({result['ranker']})", title_justify="left")
    table.add_column("field")
    table.add_column("value", justify="right")
    keys = [
        "out",
        "records",
        "top",
        "yes_no",
        "pool_questions",
        "duplicates_removed",
        "pool_size",
        "mains",
        "mains_in_pool",
        "embedder",
        "dim",
        "lambda",
        "exact",
        "not_exact",
        "filled",
        "rounds_mean",
        "meteor",
        "backend",
        "seconds",
    ]
    for key in keys:
        if key in result and result[key] is not None:
            value = result[key]
            text = f"{value:.3g}" if isinstance(value, float) else str(value)
            table.add_row(key, text)
    Console().print(table)


def _render_noise(result: Mapping[str, Any]) -> None:
    typer.echo(
        f"{result['partitions']} partitions of {result['size']} basic questions, "
        f"{result['mains']} main questions ({result['format']}), max words {result['max_words']}"
    )
    for k, (path, cut) in enumerate(zip(result["files"], result["truncated"], strict=True), 1):
        typer.echo(f"  partition {k}: {path}  ({cut} cut to the word limit)")


@bq_app.command("build")
@cli_errors
def build(
    pool: Annotated[
        list[Path],
        existing_file("Pool question files (GQA or VQA v2 questions); repeatable."),
    ],
    main: Annotated[Path, existing_file("Main questions (GQA or VQA v2 questions file).")],
    out: Annotated[Path | None, typer.Option(help="Write the BQD JSON here.")] = None,
    ranker: Annotated[
        str,
        typer.Option(help="lasso | bleu1..bleu4 | rouge | cider | meteor.", callback=known_ranker),
    ] = "lasso",
    embedder: Annotated[
        str | None,
        typer.Option(help="lsa | minilm | sbert:<dir> (LASSO ranker only; default lsa)."),
    ] = None,
    dim: Annotated[
        int | None, typer.Option(min=2, help="LSA dimension, at most (LASSO only; default 384).")
    ] = None,
    top: Annotated[int, typer.Option(min=1, help="Basic questions kept per main.")] = 21,
    yes_no: Annotated[
        bool, typer.Option("--yes-no", help="Yes/No BQD: pool restricted to yes/no questions.")
    ] = False,
    lam: Annotated[
        float | None, float_option("--lambda", help="LASSO λ (default: the paper's 1e-6).", low=0)
    ] = None,
    backend: Annotated[str, typer.Option(help="local | ray.")] = "local",
    address: Annotated[
        str | None, typer.Option(help="Ray cluster address (default: start a local Ray).")
    ] = None,
    workers: Annotated[
        int | None, typer.Option(min=1, help="CPUs of a local Ray (default: all).")
    ] = None,
    max_main: Annotated[
        int | None, typer.Option(min=1, help="Only the first N main questions.")
    ] = None,
    meteor_jar: Annotated[
        Path | None,
        typer.Option(help="Java METEOR 1.5 jar (METEOR ranker only; used when java exists)."),
    ] = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the LSA embedder.")] = 0,
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Rank a pool of basic questions for every main question (General or Yes/No BQD)."""
    from vqadiag.protocols.robustness.basic_questions.bqd_build import build_bqd

    outputs_apart({"--out": out}, {"--pool": pool, "--main": main, "--meteor-jar": meteor_jar})
    result = build_bqd(
        pool,
        main,
        output_file(out),
        ranker=ranker,
        embedder=embedder,
        top=top,
        yes_no=yes_no,
        lam=lam,
        backend=backend,
        address=address,
        seed=seed,
        progress=not quiet,
        max_main=max_main,
        dim=dim,
        workers=workers,
        meteor_jar=meteor_jar,
    )
    emit(result, as_json, _render_build)


@bq_app.command("noise")
@cli_errors
def noise(
    bqd: Annotated[Path, existing_file("A BQD file written by `vqadiag bq build`.")],
    questions: Annotated[Path, existing_file("The main questions file (GQA or VQA v2).")],
    out: Annotated[Path, typer.Option(..., help="Output folder (partition_<k>/ + manifest).")],
    partitions: Annotated[int, typer.Option(min=1, help="Number of partitions.")] = 7,
    size: Annotated[int, typer.Option(min=1, help="Basic questions per partition.")] = 3,
    max_words: Annotated[
        int, typer.Option(min=0, help="Word limit of a noisy question (0 = none).")
    ] = 26,
    as_json: JsonFlag = False,
) -> None:
    """Write one noisy copy of the main questions per partition, in the input's format."""
    from vqadiag.protocols.robustness.basic_questions.bqd_build import make_noise

    folder = output_dir(out, ("manifest.json", "partition_1"))
    outputs_apart({}, {"--bqd": bqd, "--questions": questions}, write_whole={"--out": out})
    result = make_noise(
        bqd,
        questions,
        folder,
        partitions=partitions,
        size=size,
        max_words=max_words or None,
    )
    emit(result, as_json, _render_noise)
