"""Suite declarations as data: what ``results.json`` says about its own figures.

``diagnose`` writes each suite's declaration beside its results
(``results.json`` ``declarations``, docs/results-schema.md): its title and
display order, every figure's label, unit, direction, decimals and test, its
finding rules, its drill-down rule and the figures it plots. ``report`` and
``export`` register the declared suites that no loaded code provides, so a
plug-in's result folder renders with the plug-in's own labels and bar chart
without the plug-in installed (:func:`register_declared`).

What a declaration cannot carry is code: a figure whose paired test is its suite's own
function (as GQA-OOD's Δ, or a plug-in's) is declared ``"test": "function"``, and when
no loaded code provides the suite the report says the test needs its plug-in; a
drill-down rule other than :func:`~vqadiag.suites.base.is_zero` or
:func:`~vqadiag.suites.base.below_one` is left out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vqadiag.errors import DataError
from vqadiag.suites.base import (
    Drilldown,
    Figure,
    FindingRule,
    Suite,
    below_one,
    is_zero,
    register_suite,
    registered_suites,
)

#: ``Figure.test`` of a declared figure whose paired test is its suite's own function
FUNCTION_TEST = "function"
_FAILURE_RULES = {"is_zero": is_zero, "below_one": below_one}
_FIGURE_FIELDS = {f.name: f for f in dataclasses.fields(Figure)}
_RULE_FIELDS = {f.name for f in dataclasses.fields(FindingRule)}


def figure_declaration(fig: Figure) -> dict[str, Any]:
    """One figure as JSON: every field of :class:`~vqadiag.suites.base.Figure`, a callable
    test as ``"function"``."""
    out = dataclasses.asdict(fig)
    if callable(fig.test):
        out["test"] = FUNCTION_TEST
    return out


def suite_declaration(suite: Suite) -> dict[str, Any]:
    """A suite's declaration (module docstring), JSON-able."""
    drill = suite.drilldown
    rule = getattr(drill.failed, "declared", None) if drill is not None else None
    return {
        "title": suite.title,
        "display_order": suite.display_order,
        "figures": [figure_declaration(f) for f in suite.figures],
        "findings": [dataclasses.asdict(r) for r in suite.findings],
        "drilldown": None
        if drill is None or rule is None
        else {"title": drill.title, "rule": rule[0], "column": rule[1]},
        "plot_figures": list(suite.plot_figures),
    }


def declarations(names: Any) -> dict[str, dict[str, Any]]:
    """``{suite: declaration}`` of the registered suites named in ``names``."""
    registry = registered_suites()
    return {name: suite_declaration(registry[name]) for name in names if name in registry}


def _fail(path: Path, suite: str, problem: str) -> DataError:
    return DataError(path, f"declarations: suite {suite!r}: {problem}")


def _figure(data: Any, path: Path, suite: str) -> Figure:
    if not isinstance(data, Mapping) or not isinstance(data.get("key"), str):
        raise _fail(path, suite, "a figure must be an object with a string 'key'")
    values = {k: v for k, v in data.items() if k in _FIGURE_FIELDS}
    try:
        fig = Figure(**values)
    except TypeError as err:
        raise _fail(path, suite, f"figure {data['key']!r}: {err}") from None
    for name, kind in (("label", str), ("unit", str), ("direction", str), ("test", str)):
        if not isinstance(getattr(fig, name), kind):
            raise _fail(path, suite, f"figure {fig.key!r}: {name!r} must be a string")
    if fig.direction not in ("higher", "lower", "neither"):
        raise _fail(path, suite, f"figure {fig.key!r}: unknown direction {fig.direction!r}")
    if not isinstance(fig.decimals, int) or isinstance(fig.decimals, bool) or fig.decimals < 0:
        raise _fail(path, suite, f"figure {fig.key!r}: 'decimals' must be a whole number ≥ 0")
    return fig


def _finding(data: Any, path: Path, suite: str) -> FindingRule:
    if not isinstance(data, Mapping):
        raise _fail(path, suite, "a finding rule must be an object")
    try:
        return FindingRule(**{k: v for k, v in data.items() if k in _RULE_FIELDS})
    except (TypeError, ValueError) as err:
        raise _fail(path, suite, f"finding rule: {err}") from None


def declared_suite(name: str, data: Any, path: str | Path) -> Suite:
    """The :class:`~vqadiag.suites.base.Suite` a declaration describes (it cannot run:
    it only tells the report how to show the results)."""
    p = Path(path)
    if not isinstance(data, Mapping):
        raise _fail(p, name, "must be an object")
    figures = data.get("figures")
    if not isinstance(figures, list):
        raise _fail(p, name, "'figures' must be a list")
    drill = data.get("drilldown")
    drilldown = None
    if isinstance(drill, Mapping) and drill.get("rule") in _FAILURE_RULES:
        drilldown = Drilldown(
            str(drill.get("title", name)), _FAILURE_RULES[drill["rule"]](str(drill["column"]))
        )
    attributes = {
        "name": name,
        "title": str(data.get("title") or name),
        "display_order": float(data.get("display_order", 100.0)),
        "figures": tuple(_figure(f, p, name) for f in figures),
        "findings": tuple(_finding(r, p, name) for r in data.get("findings") or ()),
        "drilldown": drilldown,
        "plot_figures": tuple(str(k) for k in data.get("plot_figures") or ()),
        "__module__": __name__,
        "__doc__": f"Suite {name!r} as declared in {p.name}.",
    }
    return type(f"Declared_{name}", (Suite,), attributes)()


def register_declared(results: Mapping[str, Any], path: str | Path) -> list[str]:
    """Register every suite that ``results`` (a ``results.json`` object read from
    ``path``) declares and no loaded code provides; returns their names."""
    found = results.get("declarations")
    if found is None:
        return []
    if not isinstance(found, Mapping):
        raise DataError(path, "'declarations' must be an object")
    registry = registered_suites()
    added = []
    for name, data in found.items():
        if name in registry:
            continue
        suite = declared_suite(str(name), data, path)
        try:
            register_suite(type(suite))
        except ValueError as err:
            raise _fail(Path(path), str(name), str(err)) from None
        added.append(str(name))
    return added
