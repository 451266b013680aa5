"""FPVG's figures: its four categories, c2i and sufficiency / comprehensiveness
(docs/protocols.md §5)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vqadiag.protocols.fpvg.formulas import FPVG_MINUS, FPVG_PLUS
from vqadiag.report.plots import (
    bars_and_errors,
    dig,
    finite_estimate,
    grouped_bars,
    n_label,
    new_figure,
    per_model,
    png_base64,
    suite_group,
    summary_group,
)
from vqadiag.report.results import ResultSet
from vqadiag.suites.base import Plot

FPVG_CATEGORIES = (
    ("fpvg_plus_correct", "FPVG+⊤"),
    ("fpvg_plus_wrong", "FPVG+⊥"),
    ("fpvg_minus_correct", "FPVG−⊤"),
    ("fpvg_minus_wrong", "FPVG−⊥"),
)

SUFF_COMP_CATEGORIES = (
    ("suff_good", "suff good"),
    ("suff_other", "suff other"),
    ("comp_bad", "comp bad"),
    ("comp_medium", "comp medium"),
    ("comp_best", "comp best"),
)


def fpvg_categories_data(sets: Sequence[ResultSet]) -> dict[str, Any]:
    """The four FPVG categories (sum 100) per model (docs/protocols.md §5)."""
    return {
        "title": "FPVG categories",
        "labels": dict(FPVG_CATEGORIES),
        **per_model(sets, "fpvg", summary_group(FPVG_CATEGORIES)),
    }


def c2i_data(sets: Sequence[ResultSet]) -> dict[str, Any]:
    """Correct-to-incorrect ratios of FPVG+ and FPVG− questions (docs/protocols.md §5)."""
    keys = ((FPVG_PLUS, "FPVG+"), (FPVG_MINUS, "FPVG−"))
    return {
        "title": "Correct-to-incorrect ratio (c2i) by FPVG",
        "labels": dict(keys),
        **per_model(sets, "fpvg", suite_group("fpvg", ("c2i", "all"), keys)),
    }


def suff_comp_data(sets: Sequence[ResultSet]) -> dict[str, Any]:
    """Mean sufficiency / comprehensiveness and answer-flip rate per category (protocols.md §5)."""

    def extract(rs: ResultSet) -> dict[str, Any] | None:
        base = dig(rs.suites, "fpvg", "ci", "suff_comp")
        if not isinstance(base, Mapping):
            return None
        means = {k: finite_estimate(base.get(k)) for k in ("suff", "comp")}
        flips = {
            k: finite_estimate(dig(base, "categories", k, "flip")) for k, _ in SUFF_COMP_CATEGORIES
        }
        shares = {
            k: finite_estimate(dig(base, "categories", k, "share")) for k, _ in SUFF_COMP_CATEGORIES
        }
        return {"means": means, "flip": flips, "share": shares}

    return {
        "title": "Sufficiency / comprehensiveness",
        "labels": dict(SUFF_COMP_CATEGORIES),
        **per_model(sets, "fpvg", extract),
    }


def draw_fpvg_categories(data: Mapping[str, Any]) -> str:
    """Stacked bars of the four FPVG categories per model, 95% error bars at each segment."""
    import numpy as np

    fig = new_figure()
    ax = fig.add_subplot()
    models = data["models"]
    x = np.arange(len(models))
    bottom = np.zeros(len(models))
    for key, label in data["labels"].items():
        ests = [m["values"].get(key) for m in models]
        vals, err = bars_and_errors(ests)
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
    ax.set_xticks(x, [n_label(m["model"], list(m["values"].values())) for m in models])
    ax.set_ylabel("% of scored questions")
    ax.set_ylim(0, 105)
    ax.set_title("FPVG categories (⊤ right, ⊥ wrong answer; bars: 95% CI)", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return png_base64(fig)


def draw_c2i(data: Mapping[str, Any]) -> str:
    """c2i = #correct / #incorrect for FPVG+ and FPVG− questions, 95% error bars;
    symmetric-log y axis (ratios span orders of magnitude)."""
    return grouped_bars(
        data,
        "values",
        "correct / incorrect (symlog)",
        "c2i ratio by FPVG category (bars: 95% CI)",
        symlog=True,
    )


def draw_suff_comp(data: Mapping[str, Any]) -> str:
    """Left: mean suff / comp (percentage points); right: flip % per category; 95% bars."""
    import numpy as np

    fig = new_figure(9.0, 4.2)
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    models = data["models"]
    n_models = max(1, len(models))
    width = 0.8 / n_models
    keys = list(data["labels"])
    for i, m in enumerate(models):
        off = (i - (n_models - 1) / 2) * width
        means = [m["means"].get("suff"), m["means"].get("comp")]
        vals, err = bars_and_errors(means)
        left.bar(
            np.arange(2) + off, vals, width, yerr=err, capsize=2, label=n_label(m["model"], means)
        )
        flips = [m["flip"].get(k) for k in keys]
        vals, err = bars_and_errors(flips)
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
    return png_base64(fig)


#: the figures of the report this protocol draws
PLOTS = (
    Plot("fpvg_categories", fpvg_categories_data, draw_fpvg_categories),
    Plot("c2i", c2i_data, draw_c2i),
    Plot("suff_comp", suff_comp_data, draw_suff_comp),
)
