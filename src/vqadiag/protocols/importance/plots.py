"""Importance's figure: relevant objects ranked on top, per method and FPVG group
(docs/protocols.md §5)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vqadiag.protocols.importance.formulas import FPVG_GROUPS
from vqadiag.report.plots import (
    dig,
    finite_estimate,
    grouped_bars,
    per_model,
)
from vqadiag.report.results import ResultSet
from vqadiag.suites.base import Plot

IMPORTANCE_METHODS = (("attention", "attention"), ("loo", "LOO"), ("gradcam", "GradCAM"))
GROUP_LABELS = tuple(zip(FPVG_GROUPS, ("FPVG+", "FPVG−"), strict=True))


def importance_data(sets: Sequence[ResultSet]) -> dict[str, Any]:
    """Relevant score (% of the N relevant objects among the N top-scored) per importance
    method on FPVG+ and FPVG− questions (docs/protocols.md §5; Reich et al. Table 1). Methods no
    model ran are left out."""

    def extract(rs: ResultSet) -> dict[str, Any] | None:
        ests = {
            f"{method}|{group}": finite_estimate(
                dig(rs.suites, "importance", "methods", method, "relevant_score", group)
            )
            for method, _ in IMPORTANCE_METHODS
            for group, _ in GROUP_LABELS
        }
        return None if all(e is None for e in ests.values()) else {"values": ests}

    data = per_model(sets, "importance", extract)
    ran = {k.split("|")[0] for m in data["models"] for k, e in m["values"].items() if e is not None}
    labels = {
        f"{method}|{group}": f"{name}\n{label}"
        for method, name in IMPORTANCE_METHODS
        if method in ran
        for group, label in GROUP_LABELS
    }
    for m in data["models"]:
        m["values"] = {k: v for k, v in m["values"].items() if k in labels}
    return {
        "title": "Feature importance: relevant objects ranked on top, by FPVG",
        "labels": labels,
        **data,
    }


def draw_importance(data: Mapping[str, Any]) -> str:
    """Relevant score per importance method and FPVG group, one bar per model, 95% bars."""
    return grouped_bars(
        data,
        "values",
        "% relevant objects among the top N",
        "Importance ranks relevant objects first (N = #relevant; bars: 95% CI)",
    )


#: the figures of the report this protocol draws
PLOTS = (Plot("importance", importance_data, draw_importance),)
