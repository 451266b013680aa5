"""Model names → classes (imported lazily), and loading a run folder by its config.

``MODELS`` maps each name a run's ``config.json`` may carry under ``"model"`` to a
dotted path ``module:Class``; nothing (in particular not torch) is imported until a
model is asked for. ``TRAINABLE`` are the names ``vqadiag train`` offers.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from vqadiag.data.jsonio import read_json
from vqadiag.errors import DataError
from vqadiag.models.checkpoint import CONFIG

MODELS: dict[str, str] = {
    "prior": "vqadiag.models.prior:PriorModel",
    "question-only": "vqadiag.models.question_only:QuestionOnlyModel",
    "updn": "vqadiag.models.updn:UpDnModel",
    "symbolic": "vqadiag.models.symbolic:SymbolicModel",
    "hf": "vqadiag.models.hf_adapter:HFModel",
    "files": "vqadiag.models.file_adapter:PredictionFileModel",
    "counterexample": "vqadiag.models.counterexample:CounterExampleModel",
}
TRAINABLE: tuple[str, ...] = ("prior", "question-only", "updn", "symbolic")


def model_class(name: str, source: str | Path | None = "--model") -> type[Any]:
    """The class registered under ``name``; an unknown name raises ``DataError`` naming
    ``source`` (the option or file it came from) and the known names."""
    target = MODELS.get(name)
    if target is None:
        known = ", ".join(MODELS)
        raise DataError(source, f"unknown model {name!r} (known: {known})")
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def load_model(run_dir: str | Path) -> Any:
    """Rebuild the model of a run folder from ``config.json``'s ``"model"`` (never unpickles)."""
    folder = Path(run_dir)
    if not folder.is_dir():
        raise DataError(folder, "run folder not found")
    path = folder / CONFIG
    config = read_json(path)
    if not isinstance(config, dict) or not isinstance(config.get("model"), str):
        raise DataError(path, "expected a JSON object naming its model under 'model'")
    return model_class(config["model"], path).load(folder)
