"""The report's findings: verdicts about each model that its figures support
(docs/report.md, "Findings").

Each suite declares its rules next to its figures (:class:`vqadiag.suites.base.FindingRule`).
A rule reads one summary figure of one model and one test:

* against the blind baseline (``compare="blind"``): the report's paired test of the
  model's figure against the same figure of the strongest blind model in the report
  (``capabilities.visual == "none"`` of a model vqadiag ran, not a prediction file;
  highest accuracy); the p-value and the test
  (McNemar's exact test, or a paired bootstrap) are the pairwise table's;
* against the model's own run (``compare="own"``): a figure that is a difference within
  the model (the multi-modal gain: accuracy with its image − without it) is tested by the
  paired test its suite recorded in ``results.json`` ``suites[suite].tests[key]``
  (McNemar's exact test of correct(all) vs correct(no image) on the same questions, or a
  paired bootstrap; docs/protocols.md §9), so one model alone gets the verdict;
* against a threshold (``compare=<number>``): the figure's 95% bootstrap interval,
  read as a normal one: ``se = (hi − lo) / (2 · 1.959964)``, ``z = (value − threshold) /
  se``, two-sided ``p = 2 · (1 − Φ(|z|))``. An interval of width 0 gives p = 1: the
  bootstrap found no spread to test against (one unit, or every unit the same), which
  is no evidence that the figure is off the threshold (a consistency of 0 from the
  one main question of a tiny run fired "significantly below 50" at p = 0).

Every test behind some rule is one member of a family whose p-values are adjusted
together with Holm's step-down method (:func:`holm`). A rule then fires when its
test says so: ``"above"`` — significantly above the baseline or threshold (adjusted
p < α and the difference positive); ``"below"`` — significantly below; ``"not_above"``
— an absence claim (e.g. accuracy not above the blind baseline): the test exists and
even *unadjusted* it does not show the figure above, so neither the correction nor a
larger report can create one. Between the two (unadjusted p < α, adjusted not) the
rules on that figure say nothing. Optional ``min_value`` / ``max_value`` bound
the figure's value. A rule whose figure, baseline or pairing is missing says nothing, and
so does one whose ``superseded_by`` figure the model has (the blind comparison's "uses the
image" gives way to the model's own no-image run).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from scipy.stats import norm

from vqadiag.report.formatting import fmt, p_text
from vqadiag.report.results import ResultSet, estimate_value
from vqadiag.suites.base import FindingRule, figure, finding_rules

ALPHA = 0.05
Z95 = 1.959963984540054


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order.

    With the m p-values sorted ascending ``p(1) ≤ … ≤ p(m)``:
    ``adj(i) = max_{j ≤ i} min(1, (m − j + 1) · p(j))``. Rejecting where ``adj < α``
    controls the family-wise error rate at α.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def interval_p(value: float, ci_low: float, ci_high: float, threshold: float) -> float:
    """Two-sided p of ``value = threshold`` from a 95% interval read as a normal one
    (module docstring)."""
    se = (ci_high - ci_low) / (2 * Z95)
    if se <= 0:  # no spread to test against: no evidence either way
        return 1.0
    z = (value - threshold) / se
    return float(2 * norm.sf(abs(z)))


#: how the tests are named in the sentences
TEST_NAMES = {
    "mcnemar_exact": "McNemar exact test",
    "paired_bootstrap": "paired bootstrap",
    "interval": "95% interval vs threshold",
}

#: ``against`` of a test of the model's own run (``compare="own"``) in the family
OWN = "no image"


def is_blind(rs: ResultSet) -> bool:
    """The model reads no image (``capabilities.visual`` is ``"none"``) and vqadiag ran it:
    a prediction file (``reruns`` false) holds the answers of a model vqadiag never saw,
    so it is not taken for blind (the symbolic model's predictions, which read the
    image, became the blind baseline)."""
    caps = (rs.results.get("model") or {}).get("capabilities") or {}
    return caps.get("visual") == "none" and caps.get("reruns", True) is not False


def blind_baseline(sets: Sequence[ResultSet]) -> ResultSet | None:
    """The strongest blind model: the highest ``accuracy`` among blind ones (the first
    blind one when none has it); None without a blind model."""
    blind = [rs for rs in sets if is_blind(rs)]
    if not blind:
        return None

    def accuracy(rs: ResultSet) -> float:
        est = rs.summary.get("accuracy") or {}
        value = est.get("value")
        return -math.inf if value is None or value != value else float(value)

    return max(blind, key=accuracy)


def _comparison(
    comparisons: Sequence[Mapping[str, Any]], model: str, other: str, key: str
) -> tuple[int, float, float, str] | None:
    """``(index in comparisons, model − other, p, test)`` of a paired comparison."""
    for i, cmp in enumerate(comparisons):
        p = cmp["p_value"]
        if cmp["metric"] != key or not cmp["paired"] or p is None or not math.isfinite(p):
            continue
        if (cmp["a"], cmp["b"]) == (model, other):
            sign = 1.0
        elif (cmp["a"], cmp["b"]) == (other, model):
            sign = -1.0
        else:
            continue
        return i, sign * cmp["difference"]["value"], float(cmp["p_value"]), cmp["test"]
    return None


def _blind_test(
    rs: ResultSet, baseline: ResultSet, key: str, comparisons: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """The paired test of ``rs`` against the blind baseline on figure ``key`` (None when
    the baseline lacks the figure or the two are not paired)."""
    other = baseline.summary.get(key)
    found = _comparison(comparisons, rs.label, baseline.label, key)
    if found is None or estimate_value(other) is None:
        return None
    index, diff, p, test = found
    compared = comparisons[index]["difference"].get("n")
    own = [(e or {}).get("n") for e in (rs.summary.get(key), other)]
    restricted = compared is not None and any(n is not None and compared < n for n in own)
    values = comparisons[index].get("values")
    if isinstance(values, Mapping) and comparisons[index]["a"] != rs.label:
        values = {"a": values.get("b"), "b": values.get("a")}  # the pair is the other way
    return {
        "p": p,
        "difference": diff,
        "test": test,
        "evidence": comparisons[index]["anchor"],
        "other": baseline.label,
        "other_value": other["value"],
        # the two were diagnosed on different questions: the test (and the difference)
        # are on the ones they share, which the sentence says, with both figures there
        # (docs/report.md)
        "shared_units": compared if restricted else None,
        "shared_values": values if restricted and isinstance(values, Mapping) else None,
    }


def _own_test(rs: ResultSet, suite: str, key: str, anchor: str | None) -> dict[str, Any] | None:
    """The test of figure ``key`` = 0 that its suite recorded (``suites[suite].tests[key]``:
    ``p_value``, ``test``, ``accuracy_noimage``, ``n_bootstrap``); None without a finite p."""
    result = rs.suites.get(suite)
    tests = result.get("tests") if isinstance(result, Mapping) else None
    recorded = tests.get(key) if isinstance(tests, Mapping) else None
    if not isinstance(recorded, Mapping):
        return None
    p = recorded.get("p_value")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p):
        return None
    resamples = recorded.get("n_bootstrap")
    return {
        "p": float(p),
        "difference": rs.summary[key]["value"],
        "test": str(recorded.get("test")),
        "evidence": anchor,
        "other": None,
        "other_value": recorded.get("accuracy_noimage"),
        "resamples": resamples if isinstance(resamples, int) else None,
    }


def _threshold_test(
    est: Mapping[str, Any], threshold: float, anchor: str | None
) -> dict[str, Any] | None:
    """The interval test of one estimate against ``threshold`` (None without an
    interval)."""
    lo, hi = est.get("ci_low"), est.get("ci_high")
    if lo is None or hi is None or lo != lo or hi != hi:
        return None
    return {
        "p": interval_p(est["value"], lo, hi, threshold),
        "difference": est["value"] - threshold,
        "test": "interval",
        "evidence": anchor,
        "other": None,
        "other_value": threshold,
    }


def findings(
    sets: Sequence[ResultSet],
    comparisons: Sequence[Mapping[str, Any]],
    anchors: Mapping[tuple[str, str], str],
    *,
    n_bootstrap: int,
    alpha: float = ALPHA,
) -> dict[str, Any]:
    """The report's ``findings`` object (docs/report.md, "Findings"): ``{alpha,
    correction, tests, family, baseline, models, notes}``; ``family`` lists every test
    (model, figure, ``"blind"`` or the threshold, difference, p, Holm-adjusted p).

    ``comparisons``: the report's pairwise comparisons (their ``anchor`` links the
    evidence); ``anchors``: ``(model, figure key)`` → the anchor of its report-card cell.
    """
    baseline = blind_baseline(sets)
    tests, planned = _plan_tests(sets, baseline, comparisons, anchors)
    ids = list(tests)
    for test_id, adj in zip(ids, holm([tests[t]["p"] for t in ids]), strict=True):
        tests[test_id]["p_adjusted"] = adj
    by_model = _verdicts(sets, planned, tests, alpha, n_bootstrap)
    notes = []
    if baseline is None:
        notes.append(
            "No blind model among the results: the verdicts that compare a model with a "
            "blind baseline (language priors, grounding) need one, e.g. a question-only run "
            "(vqadiag train --model question-only, then diagnose it on the same data). "
            "Whether a model uses the image is decided by its own run without the image "
            "(the gain suite)."
        )
    return {
        "alpha": alpha,
        "correction": "holm",
        "tests": len(tests),
        "family": _family(tests),
        "baseline": None if baseline is None else baseline.label,
        "models": [
            {"model": rs.label, "blind": is_blind(rs), "items": by_model[rs.label]} for rs in sets
        ],
        "notes": notes,
    }


#: a test's id: ``(model, figure key, "blind" or the threshold)``
_TestId = tuple[str, str, Any]
#: a rule to judge: ``(model's results, suite, rule, id of its test)``
_Planned = tuple[ResultSet, Any, FindingRule, _TestId]


def _plan_tests(
    sets: Sequence[ResultSet],
    baseline: ResultSet | None,
    comparisons: Sequence[Mapping[str, Any]],
    anchors: Mapping[tuple[str, str], str],
) -> tuple[dict[_TestId, dict[str, Any]], list[_Planned]]:
    """Step 1: every test some rule needs, once (by id, in rule order), and the rules that
    have a test to judge them by."""
    tests: dict[_TestId, dict[str, Any]] = {}
    planned: list[_Planned] = []
    for rs in sets:
        for suite, rule in finding_rules():
            est = rs.summary.get(rule.key)
            if estimate_value(est) is None:
                continue
            superseded = rule.superseded_by and rs.summary.get(rule.superseded_by)
            if superseded and estimate_value(superseded) is not None:
                continue
            if rule.compare == "own":
                test_id, test = (
                    (rs.label, rule.key, OWN),
                    _own_test(rs, suite.name, rule.key, anchors.get((rs.label, rule.key))),
                )
            elif rule.compare == "blind":
                if baseline is None or is_blind(rs):
                    continue
                test_id, test = (
                    (rs.label, rule.key, "blind"),
                    _blind_test(rs, baseline, rule.key, comparisons),
                )
            else:
                test_id, test = (
                    (rs.label, rule.key, float(rule.compare)),
                    _threshold_test(est, float(rule.compare), anchors.get((rs.label, rule.key))),
                )
            if test is None:
                continue
            tests[test_id] = test
            planned.append((rs, suite, rule, test_id))
    return tests, planned


def _fires(rule: FindingRule, rs: ResultSet, test: Mapping[str, Any], alpha: float) -> bool:
    """Whether ``rule`` fires on the figure of ``rs`` given its (Holm-adjusted) test."""
    significant = test["p_adjusted"] < alpha
    fires = {
        "above": significant and test["difference"] > 0,
        "below": significant and test["difference"] < 0,
        # an absence claim needs the *unadjusted* test to fail: the correction (or a
        # larger report) never turns "not shown above" into a verdict
        "not_above": not (test["p"] < alpha and test["difference"] > 0),
    }[rule.fires]
    value = rs.summary[rule.key]["value"]
    if rule.min_value is not None and not value >= rule.min_value:
        fires = False
    if rule.max_value is not None and not value < rule.max_value:
        fires = False
    return fires


def _verdicts(
    sets: Sequence[ResultSet],
    planned: Sequence[_Planned],
    tests: Mapping[_TestId, Mapping[str, Any]],
    alpha: float,
    n_bootstrap: int,
) -> dict[str, list[dict[str, Any]]]:
    """Step 2: the items of the rules that fire, by model label."""
    by_model: dict[str, list[dict[str, Any]]] = {rs.label: [] for rs in sets}
    for rs, suite, rule, test_id in planned:
        t = tests[test_id]
        if not _fires(rule, rs, t, alpha):
            continue
        by_model[rs.label].append(
            {
                "suite": suite.name,
                "key": rule.key,
                "verdict": rule.verdict,
                "tone": rule.tone,
                "sentence": _sentence(rule, rs, t, n_bootstrap),
                "test": t["test"],
                "p_value": t["p"],
                "p_adjusted": t["p_adjusted"],
                "baseline": t["other"],
                "evidence": t["evidence"],
            }
        )
    return by_model


def _family(tests: Mapping[_TestId, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The findings' ``family``: every test with its difference, p and adjusted p."""
    return [
        {
            "model": model,
            "key": key,
            "against": against,
            "test": tests[(model, key, against)]["test"],
            "difference": tests[(model, key, against)]["difference"],
            "p_value": tests[(model, key, against)]["p"],
            "p_adjusted": tests[(model, key, against)]["p_adjusted"],
        }
        for model, key, against in tests
    ]


class _Figures(dict):
    """A model's formatted figures for ``{summary[KEY]}``; a missing one reads ``-``."""

    def __missing__(self, key: str) -> str:
        return "-"


def _sentence(rule: FindingRule, rs: ResultSet, test: Mapping[str, Any], n_bootstrap: int) -> str:
    """The rule's sentence with the figures filled in at their declared decimals."""
    est = rs.summary[rule.key]
    key = rule.key
    summary = _Figures(
        {k: fmt((v or {}).get("value"), k) for k, v in rs.summary.items() if isinstance(v, dict)}
    )
    found = figure(key)
    label = found[1].label if found else key
    resamples = None
    if test["test"] == "paired_bootstrap":
        resamples = test.get("resamples") or n_bootstrap
    shared = test.get("shared_units")
    scope = "" if shared is None else f"; tested on the {shared} units both were diagnosed on"
    there = test.get("shared_values")
    if shared is not None and there is not None:
        scope += f": {fmt(there['a'], key)} vs {fmt(there['b'], key)} there"
    return (
        rule.sentence.format(
            label=label,
            value=fmt(est["value"], key),
            ci=f"{fmt(est.get('ci_low'), key)}, {fmt(est.get('ci_high'), key)}",
            other=test["other"] or "",
            other_value=fmt(test["other_value"], key),
            diff=f"{'+' if test['difference'] >= 0 else '−'}{fmt(abs(test['difference']), key)}",
            p=p_text(test["p"], resamples),
            test=TEST_NAMES.get(test["test"], test["test"]),
            threshold=fmt(test["other_value"], key),
            summary=summary,
        )
        + scope
    )
