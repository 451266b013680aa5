"""Faithful & Plausible Visual Grounding (Reich et al. 2023; docs/protocols.md §5). Pure functions.

Per question j, with answers â_all, â_rel, â_irrel of the three runs and gold a:

* FPVG_j = [â_all = â_rel] ∧ [â_all ≠ â_irrel]                        (paper Eq. 4)
* FPVG+ = mean_j FPVG_j, FPVG− = 1 − FPVG+                              (Eq. 5, 6)
* FPVG+⊤ = mean FPVG_j·[â_all = a], FPVG+⊥ = mean FPVG_j·[â_all ≠ a],
  FPVG−⊤, FPVG−⊥ likewise with 1 − FPVG_j; the four sum to 1         (App. B, Eq. 9–12)
* mod-FPVG_j = [â_all = â_rel]                                          (App. C)
* Acc_all / Acc_rel / Acc_irrel: exact match of each run with a.
* c2i of a subset = #correct / #incorrect (correctness of â_all)        (§4.4, Fig. 5)
* relative c2i drop from A to B = (c2i_A − c2i_B) / c2i_A, in %         (Fig. 6)
* suff = p_â(all) − p_â(rel), comp = p_â(all) − p_â(irrel), â = â_all   (§3.4, Eq. 7, 8)

A missing answer (``None``) equals nothing, not even another missing answer,
and is wrong. Rates are percentages with 95% bootstrap intervals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from vqadiag.metrics.bootstrap import Estimate, resampled_sums

SUFF_GOOD = 0.01
"""'Good' sufficiency: p_â drops by less than 1% absolute from all to relevant objects."""
COMP_BAD = 0.20
"""'Bad' comprehensiveness: p_â drops by less than 20% absolute from all to irrelevant objects."""
COMP_BEST = 0.40
"""'Best' comprehensiveness: p_â drops by at least 40% absolute."""

CATEGORIES = ("fpvg_plus", "fpvg_minus", "mod_fpvg_plus", "mod_fpvg_minus")
#: the summary keys of FPVG+ and FPVG− (every FPVG module names them through these)
FPVG_PLUS, FPVG_MINUS = CATEGORIES[:2]

Answers = Sequence[str | None]


def answers_equal(a: Answers, b: Answers) -> np.ndarray:
    """Element-wise ``[a_j = b_j]``; a missing answer (``None``) equals nothing."""
    if len(a) != len(b):
        raise ValueError("answer lists differ in length")
    return np.fromiter(
        (x is not None and x == y for x, y in zip(a, b, strict=True)), dtype=bool, count=len(a)
    )


def fpvg_indicators(ans_all: Answers, ans_rel: Answers, ans_irrel: Answers) -> np.ndarray:
    """FPVG_j = [â_all = â_rel] ∧ [â_all ≠ â_irrel] per question (paper Eq. 4).

    Missing ``â_all`` gives FPVG_j = 0 (it equals no ``â_rel``).
    """
    same_rel = answers_equal(ans_all, ans_rel)
    same_irrel = answers_equal(ans_all, ans_irrel)
    return same_rel & ~same_irrel


def mod_fpvg_indicators(ans_all: Answers, ans_rel: Answers) -> np.ndarray:
    """mod-FPVG_j = [â_all = â_rel] (paper App. C: the irrelevant test dropped)."""
    return answers_equal(ans_all, ans_rel)


def c2i_ratio(correct: np.ndarray) -> float:
    """#correct / #incorrect of a subset (paper §4.4); ∞ with no incorrect, NaN if empty."""
    c = np.asarray(correct, dtype=bool)
    right, wrong = int(c.sum()), int((~c).sum())
    if wrong == 0:
        return float("nan") if right == 0 else float("inf")
    return right / wrong


def relative_drop(before: float, after: float) -> float:
    """Relative drop in percent, 100 · (before − after) / before (paper Fig. 6)."""
    if before == 0 or not np.isfinite(before) or not np.isfinite(after):
        return float("nan")
    return 100.0 * (before - after) / before


Statistic = Callable[[np.ndarray], np.ndarray]


class _Batch:
    """Several statistics of per-question column sums, all from ONE set of resamples.

    Equivalent to one ``sums_statistic_ci`` / ``mean_ci`` call per statistic
    with the same seed (the resample weights depend only on n and the seed),
    but the resampling is paid once.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.columns: list[np.ndarray] = []
        self.statistics: dict[Any, Statistic] = {}

    def column(self, values: np.ndarray) -> int:
        """Register a per-question column; returns its index in the sums."""
        self.columns.append(np.asarray(values, dtype=np.float64).reshape(self.n))
        return len(self.columns) - 1

    def mean(self, key: Any, values: np.ndarray, scale: float = 100.0) -> None:
        """``scale · mean(values)`` (a rate in percent by default)."""
        j, n = self.column(values), self.n
        self.statistics[key] = lambda s: scale * s[:, j] / n

    def ratio(self, key: Any, num: np.ndarray, den: np.ndarray, scale: float = 100.0) -> None:
        """``scale · Σ num / Σ den``."""
        i, j = self.column(num), self.column(den)
        self.statistics[key] = lambda s: scale * s[:, i] / s[:, j]

    def add(self, key: Any, statistic: Statistic) -> None:
        """Any statistic of the column sums (B × k → B)."""
        self.statistics[key] = statistic

    def estimates(self, n_resamples: int, seed: int) -> dict[Any, Estimate]:
        """Point estimate and 95% percentile interval of every statistic."""
        nan = float("nan")
        if self.n == 0 or not self.columns:
            return {key: Estimate(nan, nan, nan, self.n) for key in self.statistics}
        x = np.column_stack(self.columns)
        full = x.sum(axis=0)[None, :]
        boot = resampled_sums(x, n_resamples, seed)
        out = {}
        with np.errstate(divide="ignore", invalid="ignore"):
            for key, statistic in self.statistics.items():
                out[key] = Estimate.from_bootstrap(statistic(full)[0], statistic(boot), self.n)
        return out


def fpvg_units(
    ans_all: Answers, ans_rel: Answers, ans_irrel: Answers, gold: Sequence[str | None]
) -> dict[str, np.ndarray]:
    """Per-question indicators (bool arrays) whose means are the rates of :func:`fpvg_rates`.

    Keys: ``fpvg_plus`` (FPVG_j, Eq. 4), ``fpvg_minus``, ``fpvg_plus_correct``
    (FPVG_j·[â_all = a]), ``fpvg_plus_wrong``, ``fpvg_minus_correct``,
    ``fpvg_minus_wrong`` (App. B), ``mod_fpvg_plus``, ``mod_fpvg_minus`` (App. C),
    ``acc_all``, ``acc_rel``, ``acc_irrel`` (docs/protocols.md §5).
    """
    fpvg = fpvg_indicators(ans_all, ans_rel, ans_irrel)
    mod = mod_fpvg_indicators(ans_all, ans_rel)
    correct = answers_equal(ans_all, gold)
    return {
        FPVG_PLUS: fpvg,
        FPVG_MINUS: ~fpvg,
        "fpvg_plus_correct": fpvg & correct,
        "fpvg_plus_wrong": fpvg & ~correct,
        "fpvg_minus_correct": ~fpvg & correct,
        "fpvg_minus_wrong": ~fpvg & ~correct,
        "mod_fpvg_plus": mod,
        "mod_fpvg_minus": ~mod,
        "acc_all": correct,
        "acc_rel": answers_equal(ans_rel, gold),
        "acc_irrel": answers_equal(ans_irrel, gold),
    }


def fpvg_rates(
    ans_all: Answers,
    ans_rel: Answers,
    ans_irrel: Answers,
    gold: Sequence[str],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Estimate]:
    """FPVG± and its four sub-categories, mod-FPVG± and Acc_{all,rel,irrel}, in % (§3.1, App. B/C):
    the means of :func:`fpvg_units` with their bootstrap intervals."""
    columns = fpvg_units(ans_all, ans_rel, ans_irrel, gold)
    batch = _Batch(len(columns[FPVG_PLUS]))
    for key, col in columns.items():
        batch.mean(key, col)
    return batch.estimates(n_resamples, seed)


def _c2i_stat(sums: np.ndarray) -> np.ndarray:
    return sums[:, 0] / sums[:, 1]


def _drop_stat(sums: np.ndarray) -> np.ndarray:
    before = sums[:, 0] / sums[:, 1]
    after = sums[:, 2] / sums[:, 3]
    return 100.0 * (before - after) / before


def c2i_report(
    correct: np.ndarray,
    categories: Mapping[str, np.ndarray],
    splits: Mapping[str, np.ndarray] | None = None,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
) -> tuple[dict[str, object], dict[str, object]]:
    """c2i ratios per category and split, and the relative drops (paper §4.4, Fig. 5–8).

    ``correct``: correctness of â_all per question; ``categories``: boolean
    masks (e.g. ``fpvg_plus``, ``fpvg_minus``); ``splits``: optional masks
    ``{"id": ..., "ood": ...}``. Returns ``(values, ci)`` with

    * ``values["all" | split][category]`` = c2i of the questions in both;
    * ``values["drop_id_to_ood"][category]`` = relative drop from ID to OOD
      (only when splits named ``id`` and ``ood`` are given);
    * ``values["drop_plus_to_minus"][split]`` = relative drop from FPVG+ to
      FPVG− (and ``mod_drop_plus_to_minus`` for mod-FPVG when given).

    Intervals resample questions; ``ci`` mirrors ``values`` with estimate dicts.
    """
    c = np.asarray(correct, dtype=bool)
    groups: dict[str, np.ndarray] = {"all": np.ones(c.shape[0], dtype=bool)}
    for name, mask in (splits or {}).items():
        groups[name] = np.asarray(mask, dtype=bool)
    cats = {name: np.asarray(mask, dtype=bool) for name, mask in categories.items()}
    batch = _Batch(c.shape[0])

    def counts(mask: np.ndarray) -> tuple[int, int]:
        return batch.column(mask & c), batch.column(mask & ~c)

    def c2i(cols: tuple[int, int]) -> Statistic:
        return lambda s: s[:, cols[0]] / s[:, cols[1]]

    def drop(before: tuple[int, int], after: tuple[int, int]) -> Statistic:
        def statistic(s: np.ndarray) -> np.ndarray:
            b, a = s[:, before[0]] / s[:, before[1]], s[:, after[0]] / s[:, after[1]]
            return 100.0 * (b - a) / b

        return statistic

    cells = {
        (g, cat): counts(gmask & cmask)
        for g, gmask in groups.items()
        for cat, cmask in cats.items()
    }
    layout: dict[str, list[Any]] = {}
    for (group, cat), cols in cells.items():
        batch.add((group, cat), c2i(cols))
        layout.setdefault(group, []).append(cat)
    if "id" in groups and "ood" in groups:
        for cat in cats:
            batch.add(("drop_id_to_ood", cat), drop(cells[("id", cat)], cells[("ood", cat)]))
            layout.setdefault("drop_id_to_ood", []).append(cat)
    for prefix in ("", "mod_"):
        plus, minus = f"{prefix}{FPVG_PLUS}", f"{prefix}{FPVG_MINUS}"
        if plus not in cats or minus not in cats:
            continue
        for group in groups:
            key = f"{prefix}drop_plus_to_minus"
            batch.add((key, group), drop(cells[(group, plus)], cells[(group, minus)]))
            layout.setdefault(key, []).append(group)
    est = batch.estimates(n_resamples, seed)
    values: dict[str, object] = {}
    ci: dict[str, object] = {}
    for outer, inners in layout.items():
        values[outer] = {inner: est[(outer, inner)].value for inner in inners}
        ci[outer] = {inner: est[(outer, inner)].to_dict() for inner in inners}
    return values, ci


def suff_comp_report(
    p_all: np.ndarray,
    p_rel: np.ndarray,
    p_irrel: np.ndarray,
    flip_rel: np.ndarray,
    flip_irrel: np.ndarray,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
) -> tuple[dict[str, object], dict[str, object]]:
    """Sufficiency / comprehensiveness and their categories (paper §3.4, Fig. 3–4).

    ``p_*`` are the probabilities each run gives â = â_all; ``flip_rel`` /
    ``flip_irrel`` mark â_rel ≠ â_all / â_irrel ≠ â_all. suff = p_all − p_rel,
    comp = p_all − p_irrel; ``suff`` and ``comp`` are their means in percentage
    points. Categories (thresholds in probability): suff ``good`` < 0.01 vs
    ``other``; comp ``bad`` < 0.20, ``medium`` in [0.20, 0.40), ``best`` ≥ 0.40;
    and the crossings of suff good/other with comp bad/best (Fig. 3 left).
    Each category reports ``share`` (% of questions) and, for the single
    categories, ``flip`` (% whose answer flipped in that run; Fig. 4 left).
    """
    p_all = np.asarray(p_all, dtype=np.float64)
    suff = p_all - np.asarray(p_rel, dtype=np.float64)
    comp = p_all - np.asarray(p_irrel, dtype=np.float64)
    flip_rel = np.asarray(flip_rel, dtype=bool)
    flip_irrel = np.asarray(flip_irrel, dtype=bool)
    suff_good = suff < SUFF_GOOD
    comp_bad = comp < COMP_BAD
    comp_best = comp >= COMP_BEST
    comp_medium = ~comp_bad & ~comp_best
    n = p_all.shape[0]
    batch = _Batch(n)
    batch.mean("suff", suff)
    batch.mean("comp", comp)
    single = {
        "suff_good": (suff_good, flip_rel),
        "suff_other": (~suff_good, flip_rel),
        "comp_bad": (comp_bad, flip_irrel),
        "comp_medium": (comp_medium, flip_irrel),
        "comp_best": (comp_best, flip_irrel),
    }
    crossed = {
        "suff_good_comp_bad": suff_good & comp_bad,
        "suff_good_comp_best": suff_good & comp_best,
        "suff_other_comp_bad": ~suff_good & comp_bad,
        "suff_other_comp_best": ~suff_good & comp_best,
    }
    for name, (mask, flips) in single.items():
        batch.mean((name, "share"), mask)
        batch.ratio((name, "flip"), mask & flips, mask)
    for name, mask in crossed.items():
        batch.mean((name, "share"), mask)
    est = batch.estimates(n_resamples, seed)
    values: dict[str, object] = {"suff": est["suff"].value, "comp": est["comp"].value, "n": n}
    ci: dict[str, object] = {"suff": est["suff"].to_dict(), "comp": est["comp"].to_dict()}
    cats_v: dict[str, dict[str, float]] = {}
    cats_ci: dict[str, dict[str, object]] = {}
    for name, mask in {**{k: v[0] for k, v in single.items()}, **crossed}.items():
        parts = ("share", "flip") if name in single else ("share",)
        cats_v[name] = {p: est[(name, p)].value for p in parts} | {"n": int(mask.sum())}
        cats_ci[name] = {p: est[(name, p)].to_dict() for p in parts}
    values["categories"] = cats_v
    ci["categories"] = cats_ci
    values["thresholds"] = {"suff_good": SUFF_GOOD, "comp_bad": COMP_BAD, "comp_best": COMP_BEST}
    return values, ci
