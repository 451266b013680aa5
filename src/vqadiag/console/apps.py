"""The Typer applications that command modules attach their commands to."""

from __future__ import annotations

import typer
from typer.core import TyperGroup


class _DirFallbackGroup(TyperGroup):
    """A group whose unknown first argument is handed to its ``world`` command.

    ``vqadiag stats DIR`` describes a generated world while ``vqadiag stats
    balance ...`` stays a subcommand.
    """

    def parse_args(self, ctx, args):  # type: ignore[override]
        first = args[0] if args else ""
        if first and first not in self.commands and not first.startswith("-"):
            args = ["world", *args] if "world" in self.commands else args
        return super().parse_args(ctx, args)


app = typer.Typer(
    name="vqadiag",
    help="What accuracy hides about your VQA model.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
score_app = typer.Typer(help="Score prediction files on each protocol.", no_args_is_help=True)
stats_app = typer.Typer(
    help="Dataset statistics (answer balance; `vqadiag stats DIR` for a synthetic world).",
    no_args_is_help=True,
    cls=_DirFallbackGroup,
)
app.add_typer(score_app, name="score")
app.add_typer(stats_app, name="stats")
