"""How the report writes numbers: figures at their declared decimals, p-values, the
report card's hover text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vqadiag.suites.base import Figure, figure


def fmt(value: Any, key: str = "") -> str:
    """A figure at its declared decimals (the suite registry's figure ``key``; 2 when
    unknown); ``-`` for missing or NaN."""
    found = figure(key) if key else None
    return (found[1] if found else Figure(key or "value", "")).format(value)


def pfmt(p: Any, resamples: int | None = None) -> str:
    """A p-value at 4 significant digits; a bootstrap p of 0 is ``< 1/B`` (B resamples)."""
    if p is None or p != p:
        return "-"
    if p == 0 and resamples:
        return f"< {1 / resamples:.2g}"
    return "< 1e-4" if p < 1e-4 else f"{p:.4g}"


def p_text(p: Any, resamples: int | None = None) -> str:
    """``p = 0.0386`` or ``p < 1e-4`` (:func:`pfmt` with its relation)."""
    text = pfmt(p, resamples)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def vs_title(vs: Mapping[str, Any]) -> str:
    """The hover text of a report-card cell: difference to the reference and the test."""
    if not vs["paired"]:
        return str(vs["reason"])
    diff = vs["difference"]
    return f"vs reference: {diff['value']:+.4g}, {vs['test']}, p = {pfmt(vs['p_value'])}"
