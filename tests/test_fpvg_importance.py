"""Ranking match of object importance with relevance sets (FPVG paper §3.3, App. D.2)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vqadiag.protocols.importance.formulas import ranking_match, ranking_match_by_fpvg, top_k


def test_top_k_breaks_ties_by_lower_index():
    assert top_k(np.array([0.4, 0.9, 0.4, 0.1]), 3).tolist() == [1, 0, 2]
    assert top_k(np.array([1.0]), 0).tolist() == []


def test_ranking_match_hand_worked():
    scores = np.array([0.1, 0.5, 0.3, 0.9, 0.2])
    # N = 2 relevant {1, 4}: top2 = {3, 1} → 1/2; M = 2 irrelevant {0, 2}: top2 ∩ = ∅ → 0
    assert ranking_match(scores, [1, 4], [0, 2]) == (0.5, 0.0)
    # ties: top1 of [0.4, 0.4, 0.1] is object 0 → relevant {1} scores 0; top2 {0,1} ∩ {0,2} → 1/2
    assert ranking_match(np.array([0.4, 0.4, 0.1]), [1], [0, 2]) == (0.0, 0.5)


def test_ranking_match_edge_cases():
    rel, irrel = ranking_match(np.array([1.0, 2.0]), [], [0])
    assert math.isnan(rel) and irrel == 0.0  # top1 = {1}
    with pytest.raises(ValueError, match="outside"):
        ranking_match(np.array([1.0]), [3], [0])
    with pytest.raises(ValueError, match="finite"):
        ranking_match(np.array([np.nan, 1.0]), [0], [1])


def test_ranking_match_by_fpvg_averages_per_category():
    scores = [np.array([0.1, 0.5, 0.3, 0.9, 0.2]), np.array([0.4, 0.4, 0.1]), np.array([1, 2, 3])]
    relevant = [[1, 4], [1], [2]]
    irrelevant = [[0, 2], [0, 2], [0]]
    fpvg = np.array([True, False, True])
    out = ranking_match_by_fpvg(scores, relevant, irrelevant, fpvg)
    # FPVG+: q0 (0.5, 0), q2 (top1 = {2} → 1, top1 ∩ {0} → 0) → relevant 75 %, irrelevant 0 %
    # FPVG−: q1 (0, 0.5) → relevant 0 %, irrelevant 50 %
    assert out["relevant"] == {"fpvg_plus": 75.0, "fpvg_minus": 0.0}
    assert out["irrelevant"] == {"fpvg_plus": 0.0, "fpvg_minus": 50.0}
    assert out["n"] == {"fpvg_plus": 2, "fpvg_minus": 1}
    with pytest.raises(ValueError, match="differ in length"):
        ranking_match_by_fpvg(scores, relevant, irrelevant, np.array([True]))


def test_the_importance_suite_adds_its_table_to_the_diagnose_summary(capsys):
    from vqadiag.cli.diagnose import _render
    from vqadiag.suites.base import registered_suites

    def est(v: float) -> dict:
        return {"value": v, "ci_low": v - 1, "ci_high": v + 1, "n": 4}

    entry = {
        kind: {"fpvg_plus": est(base), "fpvg_minus": est(base + 10), "all": est(base + 5)}
        for kind, base in (("relevant_score", 50.0), ("irrelevant_score", 20.0))
    }
    result = {"methods": {"loo": entry}}
    (table,) = registered_suites()["importance"].summary_tables(result)
    assert table.columns[0] == "method" and len(table.rows) == 1
    assert table.rows[0][0] == "loo" and [c.split()[0] for c in table.rows[0][1:]] == [
        "50.00", "60.00", "20.00", "30.00",
    ]  # fmt: skip
    diagnosed = {
        "model": {"name": "m", "fingerprint": "f"},
        "summary": {},
        "suites": {"importance": result},
        "conditions": {},
        "skipped": {},
    }
    _render(diagnosed)
    out = capsys.readouterr().out
    assert "feature importance: ranking match (%)" in out and "loo" in out
