"""Robustness's figure: accuracy per basic-question noise partition (docs/protocols.md §4)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vqadiag.report.plots import (
    bars_and_errors,
    dig,
    finite_estimate,
    n_label,
    new_figure,
    per_model,
    png_base64,
)
from vqadiag.report.results import ResultSet
from vqadiag.suites.base import Plot


def noise_data(sets: Sequence[ResultSet]) -> dict[str, Any]:
    """Accuracy on the clean questions and per noise partition 1..7 (docs/protocols.md §4)."""

    def extract(rs: ResultSet) -> dict[str, Any] | None:
        parts = rs.summary.get("noise_accuracy")
        if not parts:
            return None
        clean = finite_estimate(dig(rs.suites, "robustness", "ci", "clean"))
        return {"clean": clean, "partitions": [finite_estimate(p) for p in parts]}

    return {
        "title": "Accuracy per basic-question noise partition",
        **per_model(sets, "robustness", extract),
    }


def draw_noise(data: Mapping[str, Any]) -> str:
    """Accuracy per noise partition 1..7 with 95% error bars; clean accuracy dashed."""
    fig = new_figure()
    ax = fig.add_subplot()
    for i, m in enumerate(data["models"]):
        parts = m["partitions"]
        xs = [k + 1 + (i - (len(data["models"]) - 1) / 2) * 0.06 for k in range(len(parts))]
        vals, err = bars_and_errors(parts)
        line = ax.errorbar(
            xs, vals, yerr=err, marker="o", ms=3, capsize=2, label=n_label(m["model"], parts)
        )
        if m.get("clean") is not None:
            ax.axhline(
                m["clean"]["value"], linestyle="--", linewidth=0.8, color=line[0].get_color()
            )
    ax.set_xticks(range(1, 8))
    ax.set_xlabel("noise partition (1 = most similar basic questions)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title("Accuracy under basic-question noise (dashed: clean; bars: 95% CI)", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return png_base64(fig)


#: the figures of the report this protocol draws
PLOTS = (Plot("noise", noise_data, draw_noise),)
