"""The report's picture of every model: one row per model, one column per report-card
figure, each cell shaded by where its value sits in that column's range across the
models (docs/report.md, "Every model at a glance").

For a column with values ``v_1 … v_k`` (the models that have it), ``lo = min v``,
``hi = max v`` and a cell's position is ``s = (v − lo) / (hi − lo)`` (0.5 when all are
equal). Its shade is the *goodness* ``g = s`` for a figure where higher is better,
``1 − s`` where lower is better, and none for a figure without a better direction.
The value is printed in the cell; a figure a model lacks is a grey "–".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vqadiag.report.formatting import fmt
from vqadiag.report.results import estimate_value


def goodness(value: float, lo: float, hi: float, direction: str) -> float | None:
    """``g`` of the module docstring (None for direction "neither")."""
    s = 0.5 if hi == lo else (value - lo) / (hi - lo)
    if direction == "higher":
        return s
    if direction == "lower":
        return 1.0 - s
    return None


def overview(card: Mapping[str, Any]) -> dict[str, Any]:
    """``{columns: [{key, label, unit, direction, lo, hi}], rows: [{model, cells: [{value,
    text, goodness, anchor}]}]}`` from the report card (columns no model has are left
    out)."""
    columns = []
    for col in card["columns"]:
        found = (estimate_value(row["cells"][col["key"]].get("estimate")) for row in card["rows"])
        values = [v for v in found if v is not None]
        if values:
            columns.append({**_column_info(col), "lo": min(values), "hi": max(values)})
    rows = []
    for row in card["rows"]:
        cells = []
        for col in columns:
            cell = row["cells"][col["key"]]
            value = estimate_value(cell.get("estimate"))
            g = None if value is None else goodness(value, col["lo"], col["hi"], col["direction"])
            cells.append(
                {
                    "key": col["key"],
                    "value": value,
                    "text": fmt(value, col["key"]),
                    "goodness": g,
                    "anchor": cell.get("anchor"),
                }
            )
        rows.append({"model": row["model"], "reference": row["reference"], "cells": cells})
    return {"columns": columns, "rows": rows}


def _column_info(col: Mapping[str, Any]) -> dict[str, Any]:
    return {k: col[k] for k in ("key", "label", "unit", "direction", "suite")}


def shade(g: float | None) -> str:
    """The cell's CSS colours for goodness ``g``: a blue whose lightness falls from 96%
    (worst in the column) to 42% (best); white text on the darker half; neutral grey
    without a direction."""
    if g is None:
        return "background:#f1f1f3;color:#1d1d1f"
    lightness = 96 - 54 * g
    text = "#fff" if lightness < 62 else "#1d1d1f"
    return f"background:hsl(212,62%,{lightness:.0f}%);color:{text}"
