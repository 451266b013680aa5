"""Drill-down tables: example failures per suite, from ``per_question.jsonl``.

A unit is a failure of a model when its per-unit value of the suite's key is 0
(below 1 for soft values such as VQA accuracy):

| suite | failure |
|---|---|
| accuracy | ``accuracy`` < 1 (wrong answer) |
| ood | ``acc_tail`` < 1 (a wrong tail question) |
| fpvg | ``fpvg_plus`` = 0 (FPVG−) |
| pairs | ``pair_both_correct`` < 1 |
| robustness | ``correct_clean`` = 1 and some ``correct_noise_k`` < 1 (a noise flip) |
| consistency | ``reasoning_consistency`` = 0 (main right, sub-question wrong) |

Selection: the units where at least one model fails, sorted by id, sampled
without replacement with ``numpy.random.default_rng([seed, crc32(suite)])``,
shown in id order; each row lists every model's answers under each condition
and whether it failed. The same seed gives the same examples.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from vqadiag.report.results import ResultSet, Row

DEFAULT_EXAMPLES = 8


def _below_one(key: str) -> Callable[[Row], bool | None]:
    def failed(row: Row) -> bool | None:
        v = row.values.get(key)
        return None if v is None else v < 1.0

    return failed


def _noise_flip(row: Row) -> bool | None:
    clean = row.values.get("correct_clean")
    if clean is None:
        return None
    noisy = [v for k, v in row.values.items() if k.startswith("correct_noise_") and v is not None]
    return clean >= 1.0 and any(v < 1.0 for v in noisy)


def _is_zero(key: str) -> Callable[[Row], bool | None]:
    def failed(row: Row) -> bool | None:
        v = row.values.get(key)
        return None if v is None else v == 0.0

    return failed


#: suite → (title, failure rule)
SUITES: dict[str, tuple[str, Callable[[Row], bool | None]]] = {
    "accuracy": ("Wrong answers", _below_one("accuracy")),
    "ood": ("Wrong answers on GQA-OOD tail questions", _below_one("acc_tail")),
    "fpvg": ("FPVG− questions (grounding not faithful and plausible)", _is_zero("fpvg_plus")),
    "pairs": ("Complementary pairs not both answered right", _below_one("pair_both_correct")),
    "robustness": (
        "Noise flips: right on the clean question, wrong with basic questions added",
        _noise_flip,
    ),
    "consistency": (
        "Inconsistent: main question right, sub-question wrong",
        _is_zero("reasoning_consistency"),
    ),
}


def select_examples(
    sets: Sequence[ResultSet], suite: str, *, seed: int, k: int = DEFAULT_EXAMPLES
) -> dict[str, Any] | None:
    """Up to ``k`` example failures of ``suite`` across models (None when no model has rows)."""
    title, failed = SUITES[suite]
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
                    "failed": None if row is None else failed(row),
                }
            )
        rows.append(
            {
                "id": uid,
                "question": first.question,
                "image_id": first.image_id,
                "truth": first.truth,
                "models": per_model,
            }
        )
    return {"title": title, "n_failing": len(failing), "rows": rows}


def drilldown(sets: Sequence[ResultSet], *, seed: int, k: int = DEFAULT_EXAMPLES) -> dict:
    """Example failures of every suite that some model ran (``report.json`` ``drilldown``)."""
    out = {}
    for suite in SUITES:
        table = select_examples(sets, suite, seed=seed, k=k)
        if table is not None:
            out[suite] = table
    return out
