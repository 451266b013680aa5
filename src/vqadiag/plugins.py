"""The public plug-in API: add a diagnostic suite or a model adapter without changing vqadiag.

A plug-in is a Python module (or a ``.py`` file) that, when imported, registers

* suites — subclasses of :class:`Suite` decorated with :func:`register_suite`
  (figures declared with :class:`Figure`, failures with :class:`Drilldown`, the
  report's verdicts with :class:`FindingRule`);
* model adapters — :func:`register_adapter` ``("kind", loader)`` makes
  ``--model kind:SPEC`` load ``loader("SPEC")``; models declare
  :class:`Capabilities`;

(docs/contributing.md has a worked example of each). vqadiag imports plug-ins
from three places, each once per process: the ``vqadiag.plugins`` entry points
of installed packages, the comma-separated ``VQADIAG_PLUGINS`` environment
variable, and ``--plugin MODULE_OR_FILE`` of ``diagnose``, ``predict``,
``report`` and ``export``. Names below are imported lazily, so ``import
vqadiag.plugins`` stays light.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from vqadiag.arguments import one_or_many
from vqadiag.errors import DataError

ENTRY_POINT_GROUP = "vqadiag.plugins"
PLUGINS_ENV = "VQADIAG_PLUGINS"

_PUBLIC = {
    "Suite": "vqadiag.suites.base",
    "SuiteOutput": "vqadiag.suites.base",
    "SuiteSkipped": "vqadiag.errors",
    "Figure": "vqadiag.suites.base",
    "FindingRule": "vqadiag.suites.base",
    "Drilldown": "vqadiag.suites.base",
    "Plot": "vqadiag.suites.base",
    "SummaryTable": "vqadiag.suites.base",
    "below_one": "vqadiag.suites.base",
    "is_zero": "vqadiag.suites.base",
    "register_suite": "vqadiag.suites.base",
    "unregister_suite": "vqadiag.suites.base",
    "registered_suites": "vqadiag.suites.base",
    "figures": "vqadiag.suites.base",
    "DiagnoseState": "vqadiag.suites.state",
    "estimate_of": "vqadiag.suites.state",
    "write_predictions": "vqadiag.suites.state",
    "gqa_source": "vqadiag.suites.sources",
    "plain_run": "vqadiag.suites.sources",
    "probe_of": "vqadiag.suites.sources",
    "unit_row": "vqadiag.suites.sources",
    "Condition": "vqadiag.probes.conditions",
    "Probe": "vqadiag.probes.conditions",
    "Capabilities": "vqadiag.models.base",
    "ModelOutput": "vqadiag.models.base",
    "QuestionBatch": "vqadiag.data.model_inputs.inputs",
    "ObjectInput": "vqadiag.data.model_inputs.inputs",
    "PixelInput": "vqadiag.data.model_inputs.inputs",
    "register_adapter": "vqadiag.models.registry",
    "register_model": "vqadiag.models.registry",
    "unregister_adapter": "vqadiag.models.registry",
    "mean_ci": "vqadiag.metrics.bootstrap",
}
_LOADED: set[str] = set()

__all__ = ["ENTRY_POINT_GROUP", "PLUGINS_ENV", "load_plugins", *_PUBLIC]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'vqadiag.plugins' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


def load_plugins(specs: Iterable[str]) -> list[str]:
    """Import plug-in modules that register suites or model adapters.

    Sources: the ``vqadiag.plugins`` entry points of installed packages, the
    comma-separated ``VQADIAG_PLUGINS`` environment variable and ``specs`` (each a
    module name or a ``.py`` file). Each is imported once; returns what was loaded now.
    """
    wanted: list[str] = []
    try:
        entry_points = metadata.entry_points(group=ENTRY_POINT_GROUP)
    except Exception:  # broken metadata of an unrelated package must not stop vqadiag
        entry_points = ()
    by_spec = {f"entry-point:{ep.name}={ep.value}": ep for ep in entry_points}
    wanted += list(by_spec)
    wanted += [s.strip() for s in os.environ.get(PLUGINS_ENV, "").split(",") if s.strip()]
    wanted += [str(s) for s in one_or_many(specs)]
    loaded = []
    for spec in wanted:
        if spec in _LOADED:
            continue
        _LOADED.add(spec)  # before importing: a plug-in may call load_plugins itself
        try:
            if spec in by_spec:
                _load_entry_point(by_spec[spec])
            else:
                _import_plugin(spec)
        except BaseException:
            _LOADED.discard(spec)
            raise
        loaded.append(spec)
    return loaded


def _load_entry_point(ep: Any) -> None:
    """Import an entry point's module; call its attribute when it names a callable."""
    try:
        target = ep.load()
        if callable(target) and ":" in ep.value:
            target()
    except Exception as err:
        why = f"{type(err).__name__}: {err}"
        raise DataError(f"entry point {ep.name}", f"plug-in failed to load: {why}") from None


def _import_plugin(spec: str) -> None:
    path = Path(spec)
    if spec.endswith(".py"):
        if not path.is_file():
            raise DataError(path, "plug-in file not found")
        resolved = str(path.resolve())
        digest = hashlib.sha1(resolved.encode()).hexdigest()[:12]
        name = f"vqadiag_plugin_{path.stem}_{digest}"
        if name in sys.modules:
            return
        loader = importlib.util.spec_from_file_location(name, path)
        if loader is None or loader.loader is None:
            raise DataError(path, "cannot import this plug-in file")
        module = importlib.util.module_from_spec(loader)
        sys.modules[name] = module
        try:
            loader.loader.exec_module(module)
        except Exception as err:
            del sys.modules[name]
            why = f"{type(err).__name__}: {err}"
            raise DataError(path, f"plug-in failed to import: {why}") from None
        return
    try:
        importlib.import_module(spec)
    except Exception as err:
        why = f"{type(err).__name__}: {err}"
        raise DataError("--plugin", f"cannot import plug-in module {spec!r}: {why}") from None
