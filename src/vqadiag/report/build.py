"""Assemble the ``vqadiag.report`` v1 object from loaded result folders (docs/report.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vqadiag.errors import DataError
from vqadiag.report.card import build_card
from vqadiag.report.drilldown import DEFAULT_EXAMPLES, drilldown
from vqadiag.report.findings import findings
from vqadiag.report.overview import overview
from vqadiag.report.plots import plot_data
from vqadiag.report.results import ResultSet

REPORT_KIND = "vqadiag.report"
REPORT_SCHEMA_VERSION = 1


def pick_reference(sets: Sequence[ResultSet], reference: str | None) -> ResultSet:
    """The reference model: the one whose label or name is ``reference``, else the first."""
    if reference is None:
        return sets[0]
    for rs in sets:
        if reference in (rs.label, rs.name):
            return rs
    names = ", ".join(rs.label for rs in sets)
    raise DataError("--reference", f"no model named {reference!r} (models: {names})")


def add_anchors(
    card: dict[str, Any], comparisons: list[dict[str, Any]]
) -> dict[tuple[str, str], str]:
    """Give every report-card cell (``cell-<row>-<column>``) and pairwise comparison
    (``cmp-<i>``) the id of its element on the page; returns ``(model, figure key)`` →
    the cell's id, which the findings link to."""
    anchors: dict[tuple[str, str], str] = {}
    keys = [c["key"] for c in card["columns"]]
    for r, row in enumerate(card["rows"]):
        for c, key in enumerate(keys):
            row["cells"][key]["anchor"] = anchors[(row["model"], key)] = f"cell-{r}-{c}"
    for i, cmp in enumerate(comparisons):
        cmp["anchor"] = f"cmp-{i}"
    return anchors


def model_entry(rs: ResultSet) -> dict[str, Any]:
    """``models[]`` entry: label, name, folder, fingerprints, capabilities, suites run / skipped."""
    model = rs.results.get("model") or {}
    return {
        "label": rs.label,
        "name": rs.name,
        "result_dir": str(rs.path),
        "run": model.get("run"),
        "fingerprint": model.get("fingerprint")
        or (rs.results.get("fingerprints") or {}).get("model"),
        "data_fingerprint": rs.data_fingerprint,
        "capabilities": model.get("capabilities"),
        "suites": sorted(rs.suites),
        "skipped": rs.skipped,
        "created": rs.results.get("created"),
    }


def build_report(
    sets: Sequence[ResultSet],
    *,
    reference: str | None = None,
    seed: int = 0,
    n_bootstrap: int = 1000,
    examples: int = DEFAULT_EXAMPLES,
    created: str = "",
    version: str = "",
) -> dict[str, Any]:
    """The report object: ``{kind, schema_version, vqadiag_version, created, seed,
    n_bootstrap, models, findings, overview, card, comparisons, plots, drilldown,
    not_run}``."""
    ref = pick_reference(sets, reference)
    card, comparisons = build_card(sets, ref, seed=seed, n_bootstrap=n_bootstrap)
    anchors = add_anchors(card, comparisons)
    return {
        "kind": REPORT_KIND,
        "schema_version": REPORT_SCHEMA_VERSION,
        "vqadiag_version": version,
        "created": created,
        "seed": seed,
        "n_bootstrap": n_bootstrap,
        "models": [model_entry(rs) for rs in sets],
        "findings": findings(sets, comparisons, anchors, n_bootstrap=n_bootstrap),
        "overview": overview(card),
        "card": card,
        "comparisons": comparisons,
        "plots": plot_data(sets),
        "drilldown": drilldown(sets, seed=seed, k=examples),
        "not_run": {rs.label: rs.skipped for rs in sets if rs.skipped},
    }
