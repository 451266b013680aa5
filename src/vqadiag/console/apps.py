"""The Typer applications that command modules attach their commands to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from vqadiag.errors import one_line


class _DirFallbackGroup(TyperGroup):
    """A group whose unknown first argument is handed to its ``world`` command.

    ``vqadiag stats DIR`` describes a generated world while ``vqadiag stats
    balance ...`` stays a subcommand. A folder named like a subcommand, when no other
    argument names a folder (``vqadiag stats world`` after ``vqadiag synth --out
    world``), is the folder.
    """

    def parse_args(self, ctx, args):  # type: ignore[override]
        first = args[0] if args else ""
        alone = (
            first in self.commands
            and Path(first).is_dir()
            and not any(Path(a).is_dir() for a in args[1:] if not a.startswith("-"))
        )  # the folder, not the command: no other argument names a folder
        if first and (first not in self.commands or alone) and not first.startswith("-"):
            args = ["world", *args] if "world" in self.commands else args
        return super().parse_args(ctx, args)


#: what an interrupted command says (Ctrl-C): every artefact is committed last, so none
#: is left looking finished, and a diagnosis keeps the answers it stored
INTERRUPTED = (
    "interrupted: nothing half-written is left as finished; run the command again (a "
    "diagnosis resumes from the answers it stored)"
)


class _OneLineErrors(TyperGroup):
    """The root group: a bad option value (``--alpha nan``, ``--n-bootstrap 3``) is one
    line on stderr and exit code 2, not click's usage box; a missing option or an unknown
    one keeps the box, which shows the usage. Ctrl-C is one line and exit code 130."""

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # Typer would exit 130 without a word
            typer.echo(f"error: {INTERRUPTED}", err=True)
            raise typer.Exit(130) from None
        except typer.BadParameter as err:
            if type(err).__name__ == "MissingParameter":  # the usage box shows what is needed
                raise
            typer.echo(f"error: {_bad_value_line(err)}", err=True)
            raise typer.Exit(2) from None


def _bad_value_line(err: typer.BadParameter) -> str:
    """``--alpha: nan is not a finite number``: the option's flags, then the problem."""
    hint = err.param_hint
    if hint is None and err.param is not None:
        hint = "/".join(err.param.opts) or err.param.name
    if isinstance(hint, (list, tuple)):
        hint = "/".join(hint)
    return one_line(f"{hint}: {err.message}" if hint else err.message)


app = typer.Typer(
    name="vqadiag",
    cls=_OneLineErrors,
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
