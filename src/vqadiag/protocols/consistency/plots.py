"""Consistency's figure: the (main, sub) quadrants (docs/protocols.md §6)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vqadiag.report.plots import (
    grouped_bars,
    per_model,
    suite_group,
)
from vqadiag.report.results import ResultSet
from vqadiag.suites.base import Plot

QUADRANTS = (
    ("main_correct_sub_correct", "M✓S✓"),
    ("main_correct_sub_wrong", "M✓S✗"),
    ("main_wrong_sub_correct", "M✗S✓"),
    ("main_wrong_sub_wrong", "M✗S✗"),
)


def consistency_data(sets: Sequence[ResultSet]) -> dict[str, Any]:
    """The (main, sub) quadrants of reasoning consistency (docs/protocols.md §6)."""
    return {
        "title": "Reasoning consistency quadrants",
        "labels": dict(QUADRANTS),
        **per_model(sets, "consistency", suite_group("consistency", ("quadrants",), QUADRANTS)),
    }


def draw_consistency(data: Mapping[str, Any]) -> str:
    """The four (main, sub) quadrants (% of pairs) per model, 95% error bars."""
    return grouped_bars(
        data,
        "values",
        "% of (main, sub) pairs",
        "Consistency quadrants (M main, S sub; bars: 95% CI)",
    )


#: the figures of the report this protocol draws
PLOTS = (Plot("consistency_quadrants", consistency_data, draw_consistency),)
