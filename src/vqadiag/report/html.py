"""``report.html``: one self-contained page (inline CSS, plots as base64 PNG, no script,
no external file, font or network request) rendered with Jinja2, autoescape on, so
every string from a dataset (questions, answers, model names) is escaped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vqadiag.report.formatting import fmt, p_text, pfmt, vs_title
from vqadiag.report.overview import shade
from vqadiag.report.template import TEMPLATE


def render_html(
    report: Mapping[str, Any],
    images: Mapping[str, str | None],
    thumbnails: Mapping[str, str] | None = None,
) -> str:
    """The page for ``report`` (the ``report.json`` object), its base64 PNG ``images`` and
    the drill-down rows' base64 JPEG ``thumbnails`` (``"suite|unit"`` → image)."""
    from jinja2 import Environment, StrictUndefined

    env = Environment(autoescape=True, undefined=StrictUndefined, trim_blocks=False)
    env.globals.update(fmt=fmt, pfmt=pfmt, p_text=p_text, vs_title=vs_title, shade=shade)
    return env.from_string(TEMPLATE).render(
        report=report, images=images, thumbnails=thumbnails or {}
    )
