"""The tiny `vqadiag demo` the demo tests run once per module and then inspect."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def tiny_demo_args(out: Path, *extra: str) -> tuple[Any, ...]:
    """The arguments of a tiny demo run into ``out`` (``extra``: more demo options)."""
    return ("demo", "--out", out, "--size", "tiny", *extra, "--json", "--max-questions", "40",
            "--n-bootstrap", "50")  # fmt: skip


def run_tiny_demo(out: Path, *extra: str) -> Any:
    """Run the tiny demo into ``out`` in-process; the click result."""
    from typer.testing import CliRunner

    from vqadiag.cli.main import app

    args = [str(a) for a in tiny_demo_args(out, *extra)]
    return CliRunner().invoke(app, args, catch_exceptions=False)
