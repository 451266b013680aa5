"""Entry point of the ``vqadiag`` command: collects the command modules."""

import typer

from vqadiag import __version__
from vqadiag.cli import (  # noqa: F401  (importing registers the commands)
    bq,
    conditions,
    consistency,
    diagnose,
    explain,
    finetune,
    fpvg,
    models,
    report,
    robustness,
    score_gqa,
    score_vqa,
    synth,
)
from vqadiag.cli.apps import app


@app.command()
def version() -> None:
    """Print the vqadiag version."""
    typer.echo(__version__)


def main() -> None:
    """Run the command line."""
    app()


if __name__ == "__main__":
    main()
