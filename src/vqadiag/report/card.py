"""The report card: one row per model, one cell per summary figure, and the paired
tests that mark significant differences (docs/protocols.md §8).

Figures are copied from each ``results.json`` ``summary`` (the report computes no
metric). Comparisons align the per-question rows of two results on their unit ids
and call :mod:`vqadiag.metrics.compare`:

* rates (means over units): McNemar's exact test when both models carry a 0/1
  value on exactly the same units, else a paired bootstrap (consistency: main
  questions resampled with their sub-questions);
* figures whose suite declares its own paired test (Δ of GQA-OOD, R_score): that
  test, a paired bootstrap of the statistic from the rows' indicators.

The columns, their labels, units and tests are the figures of the suite registry
(:func:`vqadiag.suites.base.figures`, ``card=True``).

Results on different data fingerprints share no units: they are not compared
(``paired: false`` with the reason).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vqadiag.metrics.bootstrap import PairedComparison
from vqadiag.metrics.compare import compare_rates
from vqadiag.report.results import ResultSet
from vqadiag.suites.base import Figure, Suite, figure, figures
from vqadiag.suites.declared import FUNCTION_TEST

ALPHA = 0.05


def card_columns() -> list[tuple[Suite, Figure]]:
    """The report card's columns: every registered figure shown on the card, in order."""
    return [(s, f) for s, f in figures() if f.card and not f.many]


NOT_PAIRED_DATA = "different data: results are not paired"


def _rate_units(
    a: ResultSet, b: ResultSet, suite: str, key: str, both: set[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]] | None:
    """Aligned per-unit values (0 where absent) and presence of ``key`` in ``suite``, on
    the units ``both`` results were diagnosed on (:func:`shared_units`)."""
    rows_a = a.rows.get(suite, {})
    rows_b = b.rows.get(suite, {})
    ids = sorted(
        i
        for i in both
        if rows_a[i].values.get(key) is not None or rows_b[i].values.get(key) is not None
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


def shared_units(a: ResultSet, b: ResultSet, suite: str) -> set[str]:
    """The units of ``suite`` both results have a row for: the questions (pairs,
    main/sub pairs) both were diagnosed on. A figure is compared there alone, so two
    runs on different question subsets (``--max-questions``) are compared on the
    questions they share, not one model's mean on its questions against the other's on
    others (a figure defined on a model-dependent subset, such as consistency, keeps its
    rows on every diagnosed unit, its value absent where undefined)."""
    return set(a.rows.get(suite, {})) & set(b.rows.get(suite, {}))


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
    found = figure(key)
    if found is None:
        return None
    owner, fig = found
    base: dict[str, Any] = {"a": a.label, "b": b.label, "metric": key}
    suite = owner.name
    pairing, why = units_pairing(a, b, suite)
    if pairing is None:
        return base | _unpaired(None, why)
    if fig.test == FUNCTION_TEST:
        return base | _unpaired(
            pairing,
            f"the paired test of {key!r} is the plug-in's own code: "
            "load it with --plugin to run the test",
        )
    both = shared_units(a, b, suite)
    if not both:
        return base | _unpaired(None, f"no {suite} unit was diagnosed in both results")
    result: PairedComparison | None
    shared_values: dict[str, float] | None = None
    if callable(fig.test):
        result = fig.test(
            _units(a, suite, both),
            _units(b, suite, both),
            a.suites.get(suite),
            seed=seed,
            n_bootstrap=n_bootstrap,
        )
    else:
        units = _rate_units(a, b, suite, fig.values_column, both)
        if units is None:
            result = None
        else:
            va, ha, vb, hb, ids = units
            clusters = [i.split("|", 1)[0] for i in ids] if fig.clusters else None
            result = compare_rates(
                va, vb, has_a=ha, has_b=hb, clusters=clusters, n_resamples=n_bootstrap, seed=seed
            )
            # each model's rate on the units compared (its card cell is on all of its own)
            shared_values = {"a": 100 * va.sum() / ha.sum(), "b": 100 * vb.sum() / hb.sum()}
    if result is None:
        return base | _unpaired(None, f"no per-question values for {key!r}")
    p = result.p_value
    return base | {
        "paired": True,
        "pairing": pairing,
        "reason": None,
        "difference": result.difference.to_dict(),
        "p_value": p,
        "test": result.test,
        "significant": bool(p == p and p < ALPHA),
        **({"values": shared_values} if shared_values is not None else {}),
    }


def _unpaired(pairing: str | None, reason: str | None) -> dict[str, Any]:
    """A comparison's fields when no test ran, with the reason."""
    return {
        "paired": False,
        "pairing": pairing,
        "reason": reason,
        "difference": None,
        "p_value": None,
        "test": None,
        "significant": False,
    }


def _units(rs: ResultSet, suite: str, among: set[str]) -> dict[str, dict[str, Any]]:
    """``{unit id: values}`` of one result's rows of ``suite`` whose unit is in ``among``."""
    return {uid: row.values for uid, row in rs.rows.get(suite, {}).items() if uid in among}


def build_card(
    sets: Sequence[ResultSet], reference: ResultSet, *, seed: int, n_bootstrap: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The report card (cells vs the reference model) and every pairwise comparison.

    Returns ``(card, comparisons)``: ``card = {reference, alpha, columns, rows}``
    with ``rows = [{model, cells: {key: {estimate, vs_reference, not_run}}}]``;
    ``comparisons`` lists ``compare_pair`` objects for every model pair (i < j,
    in the given order) and figure.
    """
    columns = card_columns()
    comparisons: list[dict[str, Any]] = []
    by_pair: dict[tuple[str, str, str], dict[str, Any]] = {}
    for i, a in enumerate(sets):
        for b in sets[i + 1 :]:
            for _, fig in columns:
                key = fig.key
                cmp = compare_pair(a, b, key, seed=seed, n_bootstrap=n_bootstrap)
                if cmp is not None:
                    comparisons.append(cmp)
                    by_pair[(a.label, b.label, key)] = cmp
    rows = []
    for rs in sets:
        cells: dict[str, Any] = {}
        for _, fig in columns:
            key = fig.key
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
        "columns": [
            {
                "key": f.key,
                "label": f.label,
                "unit": f.unit,
                "direction": f.direction,
                "decimals": f.decimals,
                "suite": s.name,
            }
            for s, f in columns
        ],
        "rows": rows,
    }
    return card, comparisons


def not_run_reason(rs: ResultSet, key: str) -> str | None:
    """Why ``rs`` has no figure ``key``: its suite was skipped, or the suite says why
    (``Suite.not_run_reason``: the importance suite gives each method's own reason)."""
    found = figure(key)
    if found is None:
        return None
    suite = found[0]
    return suite.not_run_reason(key, rs.skipped.get(suite.name), rs.suites.get(suite.name))


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
