"""Shared test helpers: run the CLI in-process and write small input files."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from typer.testing import CliRunner

from vqadiag.cli.main import app
from vqadiag.data.io.user_cache import CACHE_ENV


def pytest_configure(config: pytest.Config) -> None:
    """No test reads or fills the user's shared cache (docs/reliability.md, "The shared
    cache"): it is off unless a test turns it on in a folder of its own."""
    import os

    os.environ[CACHE_ENV] = "off"


class CliResult:
    """Exit code, stdout, stderr and parsed JSON of one CLI call."""

    def __init__(self, exit_code: int, stdout: str, stderr: str) -> None:
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr

    def json(self) -> Any:
        return json.loads(self.stdout)


@pytest.fixture
def experiment() -> Callable[[str], ModuleType]:
    """A loader of ``experiments/NAME.py`` (a folder of scripts, not a package) as a module."""

    def load(name: str) -> ModuleType:
        script = Path(__file__).resolve().parents[1] / "experiments" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, script)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def run_cli() -> Callable[..., CliResult]:
    """Invoke ``vqadiag ARGS`` in-process; returns a :class:`CliResult`."""
    runner = CliRunner()

    def invoke(*args: str | Path) -> CliResult:
        result = runner.invoke(app, [str(a) for a in args], catch_exceptions=False)
        return CliResult(result.exit_code, result.stdout, result.stderr)

    return invoke


@pytest.fixture
def write_json(tmp_path: Path) -> Callable[[str, Any], Path]:
    """Write an object as JSON under ``tmp_path`` and return its path."""

    def write(name: str, obj: Any) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(obj))
        return path

    return write


@pytest.fixture(scope="session")
def rendered_world_60(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 60-image rendered synthetic world (seed 2), generated once per session; tests
    read it and write elsewhere."""
    from vqadiag.synth import generate_world

    root = tmp_path_factory.mktemp("rendered-world-60") / "w"
    generate_world(root, images=60, seed=2)
    return root


@pytest.fixture
def schedulers_made(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, str, int, Any]]:
    """``(optimizer, schedule, steps, scheduler)`` of every step-size schedule ``fit``
    makes while the test runs (``vqadiag.models.training.lr_scheduler``, still doing its
    job); ``scheduler.last_epoch`` counts the steps it was stepped."""
    from vqadiag.models import training

    made: list[tuple[Any, str, int, Any]] = []
    real = training.lr_scheduler

    def spy(optimizer: Any, schedule: str, steps: int) -> Any:
        scheduler = real(optimizer, schedule, steps)
        made.append((optimizer, schedule, steps, scheduler))
        return scheduler

    monkeypatch.setattr(training, "lr_scheduler", spy)
    return made
