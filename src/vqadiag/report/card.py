"""The report card: one row per model, one cell per summary figure, and the paired
tests that mark significant differences (SPEC.md §8).

Figures are copied from each ``results.json`` ``summary`` (the report computes no
metric). Comparisons align the per-question rows of two results on their unit ids
and call :mod:`vqadiag.metrics.compare`:

* rates (means over units): McNemar's exact test when both models carry a 0/1
  value on exactly the same units, else a paired bootstrap (consistency: main
  questions resampled with their sub-questions);
* Δ (GQA-OOD) and R_score: paired bootstrap of the statistic from the rows'
  indicators (``acc_head`` / ``acc_tail``; ``correct_clean`` / ``correct_noise_1``).

Results on different data fingerprints share no units: they are not compared
(``paired: false`` with the reason).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from vqadiag.metrics.bootstrap import PairedComparison
from vqadiag.metrics.compare import (
    compare_rates,
    compare_statistic,
    ood_delta_columns,
    ood_delta_statistic,
    r_score_statistic,
)
from vqadiag.metrics.robustness import DEFAULT_M, DEFAULT_T
from vqadiag.report.results import SUMMARY_SUITES, ResultSet

ALPHA = 0.05

#: Report-card columns: (summary key, label, unit).
CARD_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("accuracy", "accuracy", "%"),
    ("acc_head", "acc-head", "%"),
    ("acc_tail", "acc-tail", "%"),
    ("delta", "Δ", "%"),
    ("fpvg_plus", "FPVG+", "%"),
    ("fpvg_plus_correct", "FPVG+⊤", "%"),
    ("fpvg_plus_wrong", "FPVG+⊥", "%"),
    ("fpvg_minus_correct", "FPVG−⊤", "%"),
    ("fpvg_minus_wrong", "FPVG−⊥", "%"),
    ("attention_relevant_score", "relevant on top: attention", "%"),
    ("loo_relevant_score", "relevant on top: LOO", "%"),
    ("gradcam_relevant_score", "relevant on top: GradCAM", "%"),
    ("pair_both_correct", "pairs both correct", "%"),
    ("r_score", "R_score", "0–1"),
    ("reasoning_consistency", "reasoning consistency", "%"),
)

NOT_PAIRED_DATA = "different data: results are not paired"


def _rate_units(
    a: ResultSet, b: ResultSet, suite: str, key: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]] | None:
    """Aligned per-unit values (0 where absent) and presence of ``key`` in ``suite``."""
    rows_a = a.rows.get(suite, {})
    rows_b = b.rows.get(suite, {})
    ids = sorted(
        {i for i, r in rows_a.items() if r.values.get(key) is not None}
        | {i for i, r in rows_b.items() if r.values.get(key) is not None}
    )
    if not ids:
        return None

    def column(rows: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        vals = np.zeros(len(ids))
        has = np.zeros(len(ids))
        for j, unit in enumerate(ids):
            row = rows.get(unit)
            v = None if row is None else row.values.get(key)
            if v is not None:
                vals[j], has[j] = v, 1.0
        return vals, has

    va, ha = column(rows_a)
    vb, hb = column(rows_b)
    if ha.sum() == 0 or hb.sum() == 0:
        return None
    return va, ha, vb, hb, ids


def _delta_columns(rs: ResultSet, ids: Sequence[str]) -> np.ndarray:
    rows = rs.rows.get("ood", {})
    nan = float("nan")
    head = np.array([_value(rows.get(i), "acc_head", nan) for i in ids])
    tail = np.array([_value(rows.get(i), "acc_tail", nan) for i in ids])
    return ood_delta_columns(head, tail)


def _value(row: Any, key: str, default: float) -> float:
    if row is None:
        return default
    v = row.values.get(key)
    return default if v is None else float(v)


def units_pairing(a: ResultSet, b: ResultSet, suite: str) -> tuple[str | None, str | None]:
    """Whether the units of ``suite`` in two results are the same units, and how we know.

    ``("fingerprint", None)`` when both results carry the same data fingerprint;
    else ``("units", None)`` when they share at least one unit and every shared
    unit has the same question, image id and ground truth (the data fingerprint
    of ``vqadiag diagnose`` also covers what the model reads, so a blind and a
    visual model on the same data differ there); else ``(None, reason)``.
    """
    fa, fb = a.data_fingerprint, b.data_fingerprint
    if fa is not None and fa == fb:
        return "fingerprint", None
    rows_a, rows_b = a.rows.get(suite, {}), b.rows.get(suite, {})
    shared = sorted(set(rows_a) & set(rows_b))
    if not shared:
        return None, NOT_PAIRED_DATA
    for unit in shared:
        ra, rb = rows_a[unit], rows_b[unit]
        if (ra.question, ra.image_id, ra.truth) != (rb.question, rb.image_id, rb.truth):
            return None, f"{NOT_PAIRED_DATA} (unit {unit!r} differs)"
    return "units", None


def compare_pair(
    a: ResultSet, b: ResultSet, key: str, *, seed: int, n_bootstrap: int
) -> dict[str, Any] | None:
    """The paired test of ``a − b`` on summary figure ``key`` as a JSON object, or None
    when either result lacks the figure. Different data: ``paired: false`` + reason."""
    if a.summary.get(key) is None or b.summary.get(key) is None:
        return None
    base: dict[str, Any] = {"a": a.label, "b": b.label, "metric": key}
    suite = SUMMARY_SUITES[key]
    pairing, why = units_pairing(a, b, suite)
    if pairing is None:
        return base | {
            "paired": False,
            "pairing": None,
            "reason": why,
            "difference": None,
            "p_value": None,
            "test": None,
            "significant": False,
        }
    result: PairedComparison | None
    if key == "delta":
        result = _compare_delta(a, b, seed=seed, n_bootstrap=n_bootstrap)
    elif key == "r_score":
        result = _compare_r_score(a, b, seed=seed, n_bootstrap=n_bootstrap)
    else:
        units = _rate_units(a, b, suite, key)
        if units is None:
            result = None
        else:
            va, ha, vb, hb, ids = units
            clusters = [i.split("|", 1)[0] for i in ids] if suite == "consistency" else None
            result = compare_rates(
                va, vb, has_a=ha, has_b=hb, clusters=clusters, n_resamples=n_bootstrap, seed=seed
            )
    if result is None:
        return base | {
            "paired": False,
            "pairing": None,
            "reason": f"no per-question values for {key!r}",
            "difference": None,
            "p_value": None,
            "test": None,
            "significant": False,
        }
    p = result.p_value
    return base | {
        "paired": True,
        "pairing": pairing,
        "reason": None,
        "difference": result.difference.to_dict(),
        "p_value": p,
        "test": result.test,
        "significant": bool(p == p and p < ALPHA),
    }


def _compare_delta(a: ResultSet, b: ResultSet, *, seed: int, n_bootstrap: int):
    ids = sorted(set(a.rows.get("ood", {})) & set(b.rows.get("ood", {})))
    if not ids:
        return None
    return compare_statistic(
        _delta_columns(a, ids),
        _delta_columns(b, ids),
        ood_delta_statistic,
        n_resamples=n_bootstrap,
        seed=seed,
    )


def _robustness_limits(rs: ResultSet) -> tuple[float, float]:
    suite = rs.suites.get("robustness") or {}
    return float(suite.get("t", DEFAULT_T)), float(suite.get("m", DEFAULT_M))


def _compare_r_score(a: ResultSet, b: ResultSet, *, seed: int, n_bootstrap: int):
    def carries(rs: ResultSet) -> set[str]:
        return {
            i
            for i, r in rs.rows.get("robustness", {}).items()
            if r.values.get("correct_clean") is not None
            and r.values.get("correct_noise_1") is not None
        }

    ids = sorted(carries(a) & carries(b))
    if not ids:
        return None
    t, m = _robustness_limits(a)

    def cols(rs: ResultSet) -> np.ndarray:
        rows = rs.rows["robustness"]
        return np.array(
            [[rows[i].values["correct_clean"], rows[i].values["correct_noise_1"], 1.0] for i in ids]
        )

    return compare_statistic(
        cols(a), cols(b), r_score_statistic(t, m), n_resamples=n_bootstrap, seed=seed
    )


def build_card(
    sets: Sequence[ResultSet], reference: ResultSet, *, seed: int, n_bootstrap: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The report card (cells vs the reference model) and every pairwise comparison.

    Returns ``(card, comparisons)``: ``card = {reference, alpha, columns, rows}``
    with ``rows = [{model, cells: {key: {estimate, vs_reference, not_run}}}]``;
    ``comparisons`` lists ``compare_pair`` objects for every model pair (i < j,
    in the given order) and figure.
    """
    comparisons: list[dict[str, Any]] = []
    by_pair: dict[tuple[str, str, str], dict[str, Any]] = {}
    for i, a in enumerate(sets):
        for b in sets[i + 1 :]:
            for key, _, _ in CARD_COLUMNS:
                cmp = compare_pair(a, b, key, seed=seed, n_bootstrap=n_bootstrap)
                if cmp is not None:
                    comparisons.append(cmp)
                    by_pair[(a.label, b.label, key)] = cmp
    rows = []
    for rs in sets:
        cells: dict[str, Any] = {}
        for key, _, _ in CARD_COLUMNS:
            est = rs.summary.get(key)
            vs = None
            if rs is not reference and est is not None:
                vs = _versus(by_pair, rs.label, reference.label, key)
            cells[key] = {
                "estimate": est,
                "vs_reference": vs,
                "not_run": not_run_reason(rs, key) if est is None else None,
            }
        rows.append({"model": rs.label, "reference": rs is reference, "cells": cells})
    card = {
        "reference": reference.label,
        "alpha": ALPHA,
        "columns": [{"key": k, "label": lab, "unit": u} for k, lab, u in CARD_COLUMNS],
        "rows": rows,
    }
    return card, comparisons


def not_run_reason(rs: ResultSet, key: str) -> str | None:
    """Why ``rs`` has no figure ``key``: its suite was skipped, or (importance) the method was.

    A skipped importance suite's reason lists every method's (``"attention: why;
    loo: why; gradcam: why"``, as ``vqadiag diagnose`` writes it); the cell of a
    method shows its own part.
    """
    suite = SUMMARY_SUITES[key]
    if suite != "importance":
        return rs.skipped.get(suite)
    method = key.removesuffix("_relevant_score")
    if suite in rs.skipped:
        reason = rs.skipped[suite]
        for part in (p.strip() for p in reason.split(";")):
            if part.startswith(f"{method}: "):
                return part.removeprefix(f"{method}: ")
        return reason
    result = rs.suites.get("importance")
    skipped_methods = result.get("skipped_methods") if isinstance(result, Mapping) else None
    if isinstance(skipped_methods, Mapping) and skipped_methods.get(method) is not None:
        return str(skipped_methods[method])
    return None


def _versus(
    by_pair: dict[tuple[str, str, str], dict[str, Any]], model: str, ref: str, key: str
) -> dict[str, Any] | None:
    """The comparison ``model − reference`` (sign flipped when stored as ref − model)."""
    cmp = by_pair.get((model, ref, key))
    if cmp is not None:
        return _mark(cmp, 1.0)
    cmp = by_pair.get((ref, model, key))
    return None if cmp is None else _mark(cmp, -1.0)


def _mark(cmp: dict[str, Any], sign: float) -> dict[str, Any]:
    out = {k: cmp[k] for k in ("paired", "pairing", "reason", "p_value", "test", "significant")}
    diff = cmp.get("difference")
    if diff is not None and sign < 0:
        diff = {
            "value": -diff["value"],
            "ci_low": None if diff["ci_high"] is None else -diff["ci_high"],
            "ci_high": None if diff["ci_low"] is None else -diff["ci_low"],
            "n": diff["n"],
        }
    out["difference"] = diff
    direction = None
    if out["significant"] and diff is not None:
        direction = "higher" if diff["value"] > 0 else "lower"
    out["direction"] = direction
    return out
