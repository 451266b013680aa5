"""The report's figures: plot data taken from the results, drawn as PNG (matplotlib, Agg).

Each figure has a data function (``*_data``: JSON-able, stored in ``report.json``
under ``plots``) and one renderer that draws it. Every figure shows its 95%
intervals (error bars or bands) and states n (in the legend or tick labels).
Figures are drawn with ``matplotlib.figure.Figure`` (no global pyplot state) and
saved without the software metadata, so the same data give the same bytes.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vqadiag.report.results import ResultSet
from vqadiag.suites.base import Suite, registered_suites

FPVG_CATEGORIES = (
    ("fpvg_plus_correct", "FPVG+⊤"),
    ("fpvg_plus_wrong", "FPVG+⊥"),
    ("fpvg_minus_correct", "FPVG−⊤"),
    ("fpvg_minus_wrong", "FPVG−⊥"),
)
QUADRANTS = (
    ("main_correct_sub_correct", "M✓S✓"),
    ("main_correct_sub_wrong", "M✓S✗"),
    ("main_wrong_sub_correct", "M✗S✓"),
    ("main_wrong_sub_wrong", "M✗S✗"),
)
IMPORTANCE_METHODS = (("attention", "attention"), ("loo", "LOO"), ("gradcam", "GradCAM"))
FPVG_GROUPS = (("fpvg_plus", "FPVG+"), ("fpvg_minus", "FPVG−"))
SUFF_COMP_CATEGORIES = (
    ("suff_good", "suff good"),
    ("suff_other", "suff other"),
    ("comp_bad", "comp bad"),
    ("comp_medium", "comp medium"),
    ("comp_best", "comp best"),
)


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _estimate(obj: Any) -> dict[str, Any] | None:
    """An Estimate object with a finite value, else None."""
    if not isinstance(obj, Mapping):
        return None
    v = obj.get("value")
    if v is None or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return {
        "value": float(v),
        "ci_low": _finite(obj.get("ci_low")),
        "ci_high": _finite(obj.get("ci_high")),
        "n": obj.get("n"),
    }


def _finite(v: Any) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def _per_model(
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


def ood_curve_data(sets: Sequence[ResultSet]) -> dict[str, Any]:
    """acc-tail against 1 + α per model (protocols.md §3) with each point's interval and n_tail."""

    def extract(rs: ResultSet) -> dict[str, Any] | None:
        curve = _get(rs.suites, "ood", "curve")
        if not isinstance(curve, list) or not curve:
            return None
        cis = {
            float(c["alpha"]): c.get("acc_tail")
            for c in (_get(rs.suites, "ood", "ci", "curve") or [])
            if isinstance(c, Mapping) and "alpha" in c
        }
        points = []
        for p in curve:
            acc = _finite(p.get("acc_tail")) if isinstance(p, Mapping) else None
            if acc is None:
                continue
            alpha = float(p["alpha"])
            ci = _estimate(cis.get(alpha)) or {}
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

    return {"title": "GQA-OOD: acc-tail against tail size", **_per_model(sets, "ood", extract)}


def noise_data(sets: Sequence[ResultSet]) -> dict[str, Any]:
    """Accuracy on the clean questions and per noise partition 1..7 (docs/protocols.md §4)."""

    def extract(rs: ResultSet) -> dict[str, Any] | None:
        parts = rs.summary.get("noise_accuracy")
        if not parts:
            return None
        clean = _estimate(_get(rs.suites, "robustness", "ci", "clean"))
        return {"clean": clean, "partitions": [_estimate(p) for p in parts]}

    return {
        "title": "Accuracy per basic-question noise partition",
        **_per_model(sets, "robustness", extract),
    }


def _summary_group(keys: Sequence[tuple[str, str]]) -> Callable[[ResultSet], dict | None]:
    def extract(rs: ResultSet) -> dict[str, Any] | None:
        ests = {k: _estimate(rs.summary.get(k)) for k, _ in keys}
        return None if all(e is None for e in ests.values()) else {"values": ests}

    return extract


def _suite_group(suite: str, path: Sequence[str], keys: Sequence[tuple[str, str]]):
    def extract(rs: ResultSet) -> dict[str, Any] | None:
        base = _get(rs.suites, suite, "ci", *path)
        ests = {k: _estimate(_get(base, k)) for k, _ in keys}
        return None if all(e is None for e in ests.values()) else {"values": ests}

    return extract


def fpvg_categories_data(sets: Sequence[ResultSet]) -> dict[str, Any]:
    """The four FPVG categories (sum 100) per model (docs/protocols.md §5)."""
    return {
        "title": "FPVG categories",
        "labels": dict(FPVG_CATEGORIES),
        **_per_model(sets, "fpvg", _summary_group(FPVG_CATEGORIES)),
    }


def c2i_data(sets: Sequence[ResultSet]) -> dict[str, Any]:
    """Correct-to-incorrect ratios of FPVG+ and FPVG− questions (docs/protocols.md §5)."""
    keys = (("fpvg_plus", "FPVG+"), ("fpvg_minus", "FPVG−"))
    return {
        "title": "Correct-to-incorrect ratio (c2i) by FPVG",
        "labels": dict(keys),
        **_per_model(sets, "fpvg", _suite_group("fpvg", ("c2i", "all"), keys)),
    }


def consistency_data(sets: Sequence[ResultSet]) -> dict[str, Any]:
    """The (main, sub) quadrants of reasoning consistency (docs/protocols.md §6)."""
    return {
        "title": "Reasoning consistency quadrants",
        "labels": dict(QUADRANTS),
        **_per_model(sets, "consistency", _suite_group("consistency", ("quadrants",), QUADRANTS)),
    }


def suff_comp_data(sets: Sequence[ResultSet]) -> dict[str, Any]:
    """Mean sufficiency / comprehensiveness and answer-flip rate per category (protocols.md §5)."""

    def extract(rs: ResultSet) -> dict[str, Any] | None:
        base = _get(rs.suites, "fpvg", "ci", "suff_comp")
        if not isinstance(base, Mapping):
            return None
        means = {k: _estimate(base.get(k)) for k in ("suff", "comp")}
        flips = {k: _estimate(_get(base, "categories", k, "flip")) for k, _ in SUFF_COMP_CATEGORIES}
        shares = {
            k: _estimate(_get(base, "categories", k, "share")) for k, _ in SUFF_COMP_CATEGORIES
        }
        return {"means": means, "flip": flips, "share": shares}

    return {
        "title": "Sufficiency / comprehensiveness",
        "labels": dict(SUFF_COMP_CATEGORIES),
        **_per_model(sets, "fpvg", extract),
    }


def importance_data(sets: Sequence[ResultSet]) -> dict[str, Any]:
    """Relevant score (% of the N relevant objects among the N top-scored) per importance
    method on FPVG+ and FPVG− questions (docs/protocols.md §5; Reich et al. Table 1). Methods no
    model ran are left out."""

    def extract(rs: ResultSet) -> dict[str, Any] | None:
        ests = {
            f"{method}|{group}": _estimate(
                _get(rs.suites, "importance", "methods", method, "relevant_score", group)
            )
            for method, _ in IMPORTANCE_METHODS
            for group, _ in FPVG_GROUPS
        }
        return None if all(e is None for e in ests.values()) else {"values": ests}

    data = _per_model(sets, "importance", extract)
    ran = {k.split("|")[0] for m in data["models"] for k, e in m["values"].items() if e is not None}
    labels = {
        f"{method}|{group}": f"{name}\n{label}"
        for method, name in IMPORTANCE_METHODS
        if method in ran
        for group, label in FPVG_GROUPS
    }
    for m in data["models"]:
        m["values"] = {k: v for k, v in m["values"].items() if k in labels}
    return {
        "title": "Feature importance: relevant objects ranked on top, by FPVG",
        "labels": labels,
        **data,
    }


#: The suite each built-in plot belongs to.
PLOT_SUITES = {
    "ood_curve": "ood",
    "noise": "robustness",
    "fpvg_categories": "fpvg",
    "c2i": "fpvg",
    "consistency_quadrants": "consistency",
    "suff_comp": "fpvg",
    "importance": "importance",
}
#: Plot ids (also the HTML anchors) in display order, with their data functions.
PLOTS: dict[str, Callable[[Sequence[ResultSet]], dict[str, Any]]] = {
    "ood_curve": ood_curve_data,
    "noise": noise_data,
    "fpvg_categories": fpvg_categories_data,
    "c2i": c2i_data,
    "consistency_quadrants": consistency_data,
    "suff_comp": suff_comp_data,
    "importance": importance_data,
}


# --------------------------------------------------------------------------- drawing


def _figure(width: float = 7.0, height: float = 4.2):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _yerr(ests: Sequence[dict[str, Any] | None]) -> tuple[list[float], list[list[float]]]:
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


def _n_label(model: str, ests: Sequence[dict[str, Any] | None]) -> str:
    ns = sorted({e["n"] for e in ests if e is not None and e.get("n") is not None})
    return f"{model} (n={ns[0]})" if len(ns) == 1 else model


def draw_ood_curve(data: Mapping[str, Any]) -> str:
    """acc-tail (%) against 1 + α on a log axis, one curve per model, 95% bands."""
    import matplotlib.ticker

    fig = _figure()
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
    return _png(fig)


def draw_noise(data: Mapping[str, Any]) -> str:
    """Accuracy per noise partition 1..7 with 95% error bars; clean accuracy dashed."""
    fig = _figure()
    ax = fig.add_subplot()
    for i, m in enumerate(data["models"]):
        parts = m["partitions"]
        xs = [k + 1 + (i - (len(data["models"]) - 1) / 2) * 0.06 for k in range(len(parts))]
        vals, err = _yerr(parts)
        line = ax.errorbar(
            xs, vals, yerr=err, marker="o", ms=3, capsize=2, label=_n_label(m["model"], parts)
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
    return _png(fig)


def _grouped_bars(
    data: Mapping[str, Any], field: str, ylabel: str, title: str, *, symlog: bool = False
) -> str:
    import numpy as np

    labels = data["labels"]
    keys = list(labels)
    fig = _figure()
    ax = fig.add_subplot()
    n_models = max(1, len(data["models"]))
    width = 0.8 / n_models
    x = np.arange(len(keys))
    for i, m in enumerate(data["models"]):
        ests = [m[field].get(k) for k in keys]
        vals, err = _yerr(ests)
        vals = [math.nan if e is None else v for e, v in zip(ests, vals, strict=True)]  # no bar
        ax.bar(
            x + (i - (n_models - 1) / 2) * width,
            vals,
            width,
            yerr=err,
            capsize=2,
            label=_n_label(m["model"], ests),
        )
    ax.set_xticks(x, [labels[k] for k in keys])
    if symlog:
        ax.set_yscale("symlog", linthresh=1.0)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return _png(fig)


def draw_fpvg_categories(data: Mapping[str, Any]) -> str:
    """Stacked bars of the four FPVG categories per model, 95% error bars at each segment."""
    import numpy as np

    fig = _figure()
    ax = fig.add_subplot()
    models = data["models"]
    x = np.arange(len(models))
    bottom = np.zeros(len(models))
    for key, label in data["labels"].items():
        ests = [m["values"].get(key) for m in models]
        vals, err = _yerr(ests)
        ax.bar(x, vals, 0.6, bottom=bottom, label=label)
        ax.errorbar(
            x,
            bottom + np.array(vals),
            yerr=err,
            fmt="none",
            ecolor="black",
            capsize=2,
            linewidth=0.8,
        )
        bottom += np.array(vals)
    ax.set_xticks(x, [_n_label(m["model"], list(m["values"].values())) for m in models])
    ax.set_ylabel("% of scored questions")
    ax.set_ylim(0, 105)
    ax.set_title("FPVG categories (⊤ right, ⊥ wrong answer; bars: 95% CI)", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return _png(fig)


def draw_c2i(data: Mapping[str, Any]) -> str:
    """c2i = #correct / #incorrect for FPVG+ and FPVG− questions, 95% error bars;
    symmetric-log y axis (ratios span orders of magnitude)."""
    return _grouped_bars(
        data,
        "values",
        "correct / incorrect (symlog)",
        "c2i ratio by FPVG category (bars: 95% CI)",
        symlog=True,
    )


def draw_consistency(data: Mapping[str, Any]) -> str:
    """The four (main, sub) quadrants (% of pairs) per model, 95% error bars."""
    return _grouped_bars(
        data,
        "values",
        "% of (main, sub) pairs",
        "Consistency quadrants (M main, S sub; bars: 95% CI)",
    )


def draw_suff_comp(data: Mapping[str, Any]) -> str:
    """Left: mean suff / comp (percentage points); right: flip % per category; 95% bars."""
    import numpy as np

    fig = _figure(9.0, 4.2)
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    models = data["models"]
    n_models = max(1, len(models))
    width = 0.8 / n_models
    keys = list(data["labels"])
    for i, m in enumerate(models):
        off = (i - (n_models - 1) / 2) * width
        means = [m["means"].get("suff"), m["means"].get("comp")]
        vals, err = _yerr(means)
        left.bar(
            np.arange(2) + off, vals, width, yerr=err, capsize=2, label=_n_label(m["model"], means)
        )
        flips = [m["flip"].get(k) for k in keys]
        vals, err = _yerr(flips)
        right.bar(np.arange(len(keys)) + off, vals, width, yerr=err, capsize=2)
    left.set_xticks(range(2), ["suff", "comp"])
    left.set_ylabel("mean probability drop (points)")
    left.set_title("suff / comp (bars: 95% CI)", fontsize=10)
    left.legend(loc="best", fontsize=8)
    right.set_xticks(range(len(keys)), [data["labels"][k] for k in keys], rotation=20)
    right.set_ylabel("% answers flipped")
    right.set_title("answer flips per category", fontsize=10)
    for ax in (left, right):
        ax.grid(True, axis="y", alpha=0.3)
    return _png(fig)


def draw_importance(data: Mapping[str, Any]) -> str:
    """Relevant score per importance method and FPVG group, one bar per model, 95% bars."""
    return _grouped_bars(
        data,
        "values",
        "% relevant objects among the top N",
        "Importance ranks relevant objects first (N = #relevant; bars: 95% CI)",
    )


def draw_suite_figures(data: Mapping[str, Any]) -> str:
    """Grouped bars of a suite's declared figures per model, 95% error bars."""
    return _grouped_bars(data, "values", str(data.get("unit") or ""), str(data["title"]))


DRAW: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "ood_curve": draw_ood_curve,
    "noise": draw_noise,
    "fpvg_categories": draw_fpvg_categories,
    "c2i": draw_c2i,
    "consistency_quadrants": draw_consistency,
    "suff_comp": draw_suff_comp,
    "importance": draw_importance,
}


def suite_figures_data(sets: Sequence[ResultSet], suite: Suite) -> dict[str, Any]:
    """The figures a suite names in ``plot_figures``, per model (a grouped bar chart)."""
    labels = {f.key: f.label for f in suite.figures if f.key in suite.plot_figures}
    return {
        "title": suite.title or suite.name,
        "labels": labels,
        "unit": suite.figures[0].unit if suite.figures else "",
        **_per_model(sets, suite.name, _summary_group(tuple(labels.items()))),
    }


def plot_data(sets: Sequence[ResultSet]) -> dict[str, dict[str, Any]]:
    """Every figure's data (``report.json`` ``plots``): the built-in suites' plots, then
    one bar chart per registered suite that declares ``plot_figures`` (id ``suite_<name>``).
    A built-in plot is drawn only while its suite is registered."""
    registry = registered_suites()
    out = {name: fn(sets) for name, fn in PLOTS.items() if PLOT_SUITES[name] in registry}
    for suite in sorted(registry.values(), key=lambda s: s.display_order):
        if suite.plot_figures:
            out[f"suite_{suite.name}"] = suite_figures_data(sets, suite)
    return out


def draw_all(plots: Mapping[str, Mapping[str, Any]]) -> dict[str, str | None]:
    """Base64 PNG of every figure that has data (None where no model ran the suite)."""
    import matplotlib

    matplotlib.use("Agg")
    # model names and dataset strings are shown literally: "$x$" is not mathtext here
    with matplotlib.rc_context({"svg.hashsalt": "vqadiag", "text.parse_math": False}):
        return {
            name: (DRAW.get(name, draw_suite_figures)(data) if data["models"] else None)
            for name, data in plots.items()
        }
