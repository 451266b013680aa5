"""GQA-OOD's figure: acc-tail against the tail size (docs/protocols.md §3)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vqadiag.report.plots import (
    dig,
    finite_estimate,
    finite_number,
    new_figure,
    per_model,
    png_base64,
)
from vqadiag.report.results import ResultSet
from vqadiag.suites.base import Plot


def ood_curve_data(sets: Sequence[ResultSet]) -> dict[str, Any]:
    """acc-tail against 1 + α per model (protocols.md §3) with each point's interval and n_tail."""

    def extract(rs: ResultSet) -> dict[str, Any] | None:
        curve = dig(rs.suites, "ood", "curve")
        if not isinstance(curve, list) or not curve:
            return None
        cis = {
            float(c["alpha"]): c.get("acc_tail")
            for c in (dig(rs.suites, "ood", "ci", "curve") or [])
            if isinstance(c, Mapping) and "alpha" in c
        }
        points = []
        for p in curve:
            acc = finite_number(p.get("acc_tail")) if isinstance(p, Mapping) else None
            if acc is None:
                continue
            alpha = float(p["alpha"])
            ci = finite_estimate(cis.get(alpha)) or {}
            points.append(
                {
                    "alpha": alpha,
                    "x": 1.0 + alpha,
                    "acc_tail": acc,
                    "ci_low": ci.get("ci_low"),
                    "ci_high": ci.get("ci_high"),
                    "n_tail": p.get("n_tail"),
                }
            )
        return {"points": points} if points else None

    return {"title": "GQA-OOD: acc-tail against tail size", **per_model(sets, "ood", extract)}


def draw_ood_curve(data: Mapping[str, Any]) -> str:
    """acc-tail (%) against 1 + α on a log axis, one curve per model, 95% bands."""
    import matplotlib.ticker

    fig = new_figure()
    ax = fig.add_subplot()
    for m in data["models"]:
        pts = m["points"]
        xs = [p["x"] for p in pts]
        ax.plot(xs, [p["acc_tail"] for p in pts], marker="o", ms=3, label=m["model"])
        band = [(p["x"], p["ci_low"], p["ci_high"]) for p in pts if p["ci_low"] is not None]
        if band:
            bx, bl, bh = zip(*band, strict=True)
            ax.fill_between(bx, bl, bh, alpha=0.15)
    ns = [p["n_tail"] for m in data["models"] for p in m["points"] if p.get("n_tail")]
    ax.set_xscale("log")
    ax.set_xticks([0.3, 0.5, 1, 2, 5, 10])
    ax.get_xaxis().set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.set_xlabel("1 + α (tail size, log scale)")
    ax.set_ylabel("acc-tail (%)")
    note = f"; tail n = {min(ns)}–{max(ns)} questions" if ns else ""
    ax.set_title(f"acc-tail vs tail size (bands: 95% CI{note})", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return png_base64(fig)


#: the figures of the report this protocol draws
PLOTS = (Plot("ood_curve", ood_curve_data, draw_ood_curve),)
