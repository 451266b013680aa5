"""The one progress bar every long-running command shows (on stderr, so ``--json`` stays clean)."""

from __future__ import annotations

from typing import Any

#: The metrics column of training bars (tasks carry ``loss`` and ``acc`` fields).
LOSS_ACC = "loss {task.fields[loss]:.3f}  acc {task.fields[acc]:.1f}%"


def progress_bar(
    enabled: bool = True, *, metrics: str | None = None, transient: bool = False
) -> Any:
    """A rich ``Progress``: description, bar, done/total, elapsed, ETA, on stderr.

    ``metrics`` is an extra column format over task fields, e.g.
    ``"loss {task.fields[loss]:.3f}  acc {task.fields[acc]:.1f}%"``; ``enabled=False``
    gives a disabled bar with the same interface. A ``transient`` bar (one that leaves
    nothing behind) is disabled too where stderr is neither a terminal nor a notebook:
    there it could show nothing, and would leave one empty line in the log each time it
    stops.
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns: list[Any] = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn()]
    if metrics:
        columns.append(TextColumn(metrics))
    columns += [TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn()]
    console = Console(stderr=True)
    shown = console.is_terminal or console.is_jupyter
    disable = not enabled or (transient and not shown)
    return Progress(*columns, console=console, disable=disable, transient=transient)
