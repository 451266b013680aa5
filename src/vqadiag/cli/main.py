"""Entry point of the ``vqadiag`` command: collects the command modules."""

import importlib

import typer

from vqadiag import __version__
from vqadiag.console.apps import app
from vqadiag.console.common import JsonFlag, emit

#: the modules that declare commands, in the order of ``vqadiag --help``: each protocol's
#: command beside its scorer (``vqadiag.protocols.<name>.command``), the rest here
COMMAND_MODULES = (
    "vqadiag.protocols.robustness.bq_command",
    "vqadiag.cli.conditions",
    "vqadiag.protocols.consistency.command",
    "vqadiag.cli.diagnose",
    "vqadiag.cli.explain",
    "vqadiag.cli.finetune",
    "vqadiag.protocols.fpvg.command",
    "vqadiag.cli.models",
    "vqadiag.cli.report",
    "vqadiag.protocols.robustness.command",
    "vqadiag.protocols.gqa.command",
    "vqadiag.protocols.ood.command",
    "vqadiag.protocols.vqa.command",
    "vqadiag.cli.synth",
)
for _module in COMMAND_MODULES:
    importlib.import_module(_module)  # importing a command module registers its commands


@app.command()
def version(as_json: JsonFlag = False) -> None:
    """Print the vqadiag version."""
    emit({"version": __version__}, as_json, lambda result: typer.echo(result["version"]))


def main() -> None:
    """Run the command line."""
    app()


if __name__ == "__main__":
    main()
