"""The GQA-OOD acc-tail curve as a PNG (docs/protocols.md §3; paper Figure 2).

acc-tail (%) against the tail size parameter, plotted at x = 1 + α on a log
axis as the official ``plot_tail``; the overall accuracy (acc-all at the
default α) can be drawn as a dashed reference line.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vqadiag.data.io.atomic import write_bytes_atomic


def plot_ood_curve(
    curve: Sequence[Mapping[str, Any]],
    path: str | Path,
    *,
    label: str = "model",
    reference: float | None = None,
    reference_label: str = "acc-all",
) -> Path:
    """Write the acc-tail(α) curve to ``path`` (PNG, matplotlib Agg backend), atomically.

    ``curve`` holds ``{alpha, acc_tail, n_tail}`` points; points whose
    ``acc_tail`` is undefined (empty tail) are left out. x = 1 + α, log scale.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    points = [
        (1.0 + float(p["alpha"]), float(p["acc_tail"]))
        for p in curve
        if p.get("acc_tail") is not None and p["acc_tail"] == p["acc_tail"]
    ]
    out = Path(path)
    fig, ax = plt.subplots(figsize=(6.0, 4.0), dpi=100)
    try:
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker="o", label=label)
        if reference is not None and reference == reference:
            ax.axhline(reference, linestyle="--", color="grey", label=reference_label)
        ax.set_xscale("log")
        ax.set_xticks([0.3, 0.5, 1, 2, 5, 10])
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.set_xlabel("1 + α (tail size)")
        ax.set_ylabel("acc-tail (%)")
        ax.set_title("GQA-OOD: accuracy on the tail")
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    finally:
        plt.close(fig)
    return write_bytes_atomic(out, buf.getvalue())
