"""The report's figures: laid out from the suites' plots, drawn as PNG (matplotlib, Agg).

A suite declares its plots (``Suite.plots``, each a :class:`~vqadiag.suites.base.Plot`
beside its protocol: ``vqadiag.protocols.<name>.plots``): a data function over every
model's results (JSON-able, stored in ``report.json`` under ``plots``) and a renderer.
A suite that names ``plot_figures`` also gets a grouped bar chart of those figures
(id ``suite_<name>``), drawn from its declaration alone, so a plug-in's results show
it without the plug-in. This module holds what every plot shares: reading estimates out
of results, and the figure, bar and PNG helpers. Every figure shows its 95% intervals
(error bars or bands) and states n (in the legend or tick labels). Figures are drawn
with ``matplotlib.figure.Figure`` (no global pyplot state) and saved without the
software metadata, so the same data give the same bytes.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vqadiag.report.results import ResultSet
from vqadiag.suites.base import Plot, Suite, registered_suites


def dig(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def finite_estimate(obj: Any) -> dict[str, Any] | None:
    """An Estimate object with a finite value, else None."""
    if not isinstance(obj, Mapping):
        return None
    v = obj.get("value")
    if v is None or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return {
        "value": float(v),
        "ci_low": finite_number(obj.get("ci_low")),
        "ci_high": finite_number(obj.get("ci_high")),
        "n": obj.get("n"),
    }


def finite_number(v: Any) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def per_model(
    sets: Sequence[ResultSet], suite: str, extract: Callable[[ResultSet], dict[str, Any] | None]
) -> dict[str, Any]:
    models, not_run = [], {}
    for rs in sets:
        item = extract(rs)
        if item is None:
            not_run[rs.label] = rs.skipped.get(suite, f"no {suite} results")
        else:
            models.append({"model": rs.label, **item})
    return {"models": models, "not_run": not_run}


def summary_group(keys: Sequence[tuple[str, str]]) -> Callable[[ResultSet], dict | None]:
    def extract(rs: ResultSet) -> dict[str, Any] | None:
        ests = {k: finite_estimate(rs.summary.get(k)) for k, _ in keys}
        return None if all(e is None for e in ests.values()) else {"values": ests}

    return extract


def suite_group(suite: str, path: Sequence[str], keys: Sequence[tuple[str, str]]):
    def extract(rs: ResultSet) -> dict[str, Any] | None:
        base = dig(rs.suites, suite, "ci", *path)
        ests = {k: finite_estimate(dig(base, k)) for k, _ in keys}
        return None if all(e is None for e in ests.values()) else {"values": ests}

    return extract


# --------------------------------------------------------------------------- drawing


def new_figure(width: float = 7.0, height: float = 4.2):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def png_base64(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def bars_and_errors(ests: Sequence[dict[str, Any] | None]) -> tuple[list[float], list[list[float]]]:
    """Bar heights and asymmetric error bars (0 where an interval is missing)."""
    vals, lo, hi = [], [], []
    for e in ests:
        v = 0.0 if e is None else e["value"]
        vals.append(v)
        low = None if e is None else e.get("ci_low")
        high = None if e is None else e.get("ci_high")
        lo.append(0.0 if low is None else max(0.0, v - low))
        hi.append(0.0 if high is None else max(0.0, high - v))
    return vals, [lo, hi]


def n_label(model: str, ests: Sequence[dict[str, Any] | None]) -> str:
    ns = sorted({e["n"] for e in ests if e is not None and e.get("n") is not None})
    return f"{model} (n={ns[0]})" if len(ns) == 1 else model


def grouped_bars(
    data: Mapping[str, Any], field: str, ylabel: str, title: str, *, symlog: bool = False
) -> str:
    import numpy as np

    labels = data["labels"]
    keys = list(labels)
    fig = new_figure()
    ax = fig.add_subplot()
    n_models = max(1, len(data["models"]))
    width = 0.8 / n_models
    x = np.arange(len(keys))
    for i, m in enumerate(data["models"]):
        ests = [m[field].get(k) for k in keys]
        vals, err = bars_and_errors(ests)
        vals = [math.nan if e is None else v for e, v in zip(ests, vals, strict=True)]  # no bar
        ax.bar(
            x + (i - (n_models - 1) / 2) * width,
            vals,
            width,
            yerr=err,
            capsize=2,
            label=n_label(m["model"], ests),
        )
    ax.set_xticks(x, [labels[k] for k in keys])
    if symlog:
        ax.set_yscale("symlog", linthresh=1.0)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return png_base64(fig)


def draw_suite_figures(data: Mapping[str, Any]) -> str:
    """Grouped bars of a suite's declared figures per model, 95% error bars."""
    return grouped_bars(data, "values", str(data.get("unit") or ""), str(data["title"]))


def suite_figures_data(sets: Sequence[ResultSet], suite: Suite) -> dict[str, Any]:
    """The figures a suite names in ``plot_figures``, per model (a grouped bar chart)."""
    labels = {f.key: f.label for f in suite.figures if f.key in suite.plot_figures}
    return {
        "title": suite.title or suite.name,
        "labels": labels,
        "unit": suite.figures[0].unit if suite.figures else "",
        **per_model(sets, suite.name, summary_group(tuple(labels.items()))),
    }


def registered_plots() -> dict[str, Plot]:
    """Every plot of the registered suites by id, in display order (suite
    ``display_order``, then declaration order), the ``suite_<name>`` charts included."""
    out: dict[str, Plot] = {}
    for suite in sorted(registered_suites().values(), key=lambda s: s.display_order):
        for plot in suite.plots:
            out[plot.id] = plot
        if suite.plot_figures:
            out[f"suite_{suite.name}"] = Plot(
                f"suite_{suite.name}",
                lambda sets, suite=suite: suite_figures_data(sets, suite),
                draw_suite_figures,
            )
    return out


def plot_data(sets: Sequence[ResultSet]) -> dict[str, dict[str, Any]]:
    """Every figure's data (``report.json`` ``plots``), in :func:`registered_plots` order."""
    return {name: plot.data(sets) for name, plot in registered_plots().items()}


def draw_all(plots: Mapping[str, Mapping[str, Any]]) -> dict[str, str | None]:
    """Base64 PNG of every figure that has data (None where no model ran the suite, or
    no registered suite draws it)."""
    import matplotlib

    matplotlib.use("Agg")
    draw = {name: plot.draw for name, plot in registered_plots().items()}
    # model names and dataset strings are shown literally: "$x$" is not mathtext here
    with matplotlib.rc_context({"svg.hashsalt": "vqadiag", "text.parse_math": False}):
        return {
            name: (draw[name](data) if data["models"] and name in draw else None)
            for name, data in plots.items()
        }
