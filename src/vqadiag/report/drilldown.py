"""Drill-down tables: example failures per suite, from ``per_question.jsonl``.

Each suite of the registry declares its failure rule (``Suite.drilldown``): the
accuracy suite a wrong answer, ood a wrong tail question, fpvg an FPVG− question,
pairs a pair not both right, robustness a noise flip (right on the clean
question, wrong on a noisy one), consistency a main question right with its
sub-question wrong.

Selection: the units where at least one model fails, sorted by id, sampled
without replacement with ``numpy.random.default_rng([seed, crc32(suite)])``,
shown in id order; each row lists every model's answers under each condition
(with a generative model's raw text where it differs from the extracted answer)
and whether it failed. The same seed gives the same examples.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from vqadiag.report.results import ResultSet, Row
from vqadiag.suites.base import registered_suites

DEFAULT_EXAMPLES = 8


def select_examples(
    sets: Sequence[ResultSet], suite: str, *, seed: int, k: int = DEFAULT_EXAMPLES
) -> dict[str, Any] | None:
    """Up to ``k`` example failures of ``suite`` across models (None when no model has rows)."""
    declared = registered_suites()[suite].drilldown
    if declared is None:
        return None
    title = declared.title

    def failed(row: Row) -> bool | None:
        return declared.failed(row.values)

    if not any(rs.rows.get(suite) for rs in sets):
        return None
    failing = sorted(
        {uid for rs in sets for uid, row in rs.rows.get(suite, {}).items() if failed(row)}
    )
    rng = np.random.default_rng([seed, zlib.crc32(suite.encode())])
    if len(failing) > k:
        picked = sorted(failing[i] for i in rng.choice(len(failing), size=k, replace=False))
    else:
        picked = failing
    rows = []
    for uid in picked:
        first = next(rs.rows[suite][uid] for rs in sets if uid in rs.rows.get(suite, {}))
        per_model = []
        for rs in sets:
            row = rs.rows.get(suite, {}).get(uid)
            per_model.append(
                {
                    "model": rs.label,
                    "answers": None if row is None else row.answers,
                    "raw": None if row is None else _differing_raw(row),
                    "failed": None if row is None else failed(row),
                }
            )
        row: dict[str, Any] = {
            "id": uid,
            "question": first.question,
            "image_id": first.image_id,
            "truth": first.truth,
            "models": per_model,
        }
        if first.relevant is not None:
            row["relevant"] = list(first.relevant)
            row["irrelevant"] = list(first.irrelevant or ())
        rows.append(row)
    return {"title": title, "n_failing": len(failing), "rows": rows}


#: longest raw text shown in a drill-down cell (characters)
RAW_SHOWN = 120


def _differing_raw(row: Row) -> dict[str, str]:
    """A generative model's raw texts where they differ from the extracted answer
    (shortened to :data:`RAW_SHOWN` characters)."""
    out = {}
    for cond, text in (row.raw or {}).items():
        if text is None or text == row.answers.get(cond):
            continue
        out[cond] = text if len(text) <= RAW_SHOWN else text[: RAW_SHOWN - 1] + "…"
    return out


def drilldown(sets: Sequence[ResultSet], *, seed: int, k: int = DEFAULT_EXAMPLES) -> dict:
    """Example failures of every suite that some model ran (``report.json`` ``drilldown``)."""
    out = {}
    registry = registered_suites()
    for suite in sorted(registry, key=lambda name: registry[name].display_order):
        table = select_examples(sets, suite, seed=seed, k=k)
        if table is not None:
            out[suite] = table
    return out
