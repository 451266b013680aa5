"""FPVG from files: box relevance (``vqadiag relevance``) and scoring (``vqadiag score fpvg``).

docs/protocols.md §5. Each function returns exactly the dict the command prints with ``--json``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.data.gqa import read_gqa_questions
from vqadiag.data.gqa_typed import answer_questions
from vqadiag.data.jsonio import collector_paused_over
from vqadiag.data.predictions import check_coverage, read_answers_and_probs
from vqadiag.data.relevance import (
    EXCLUSION_REASONS,
)
from vqadiag.data.relevance_files import read_object_pickles, read_relevance, read_split_ids
from vqadiag.errors import DataError, record_label
from vqadiag.protocols.fpvg.formulas import (
    c2i_report,
    fpvg_indicators,
    fpvg_rates,
    mod_fpvg_indicators,
    suff_comp_report,
)

NOT_IN_RELEVANCE = "not_in_relevance"


def _suff_comp(
    answers: Sequence[Sequence[str | None]],
    probs: Sequence[Mapping[str, Mapping[str, float]]],
    question_ids: Sequence[str],
    n_resamples: int,
    seed: int,
) -> tuple[dict[str, object], dict[str, object]] | None:
    """suff/comp over the questions with all three predictions (``answers``: the three
    runs aligned with ``question_ids``), if all of those carry probabilities (``probs``:
    ``{qid: probs}`` per run; a probability outside a top-k list counts 0)."""
    rows = [
        (qid, trio)
        for qid, trio in zip(question_ids, zip(*answers, strict=True), strict=True)
        if None not in trio
    ]
    if not rows or any(qid not in run for qid, _ in rows for run in probs):
        return None
    all_probs, rel_probs, irrel_probs = probs
    p_all, p_rel, p_irrel, flip_rel, flip_irrel = [], [], [], [], []
    for qid, (hat, rel, irrel) in rows:
        p_all.append(float(all_probs[qid].get(hat, 0.0)))
        p_rel.append(float(rel_probs[qid].get(hat, 0.0)))
        p_irrel.append(float(irrel_probs[qid].get(hat, 0.0)))
        flip_rel.append(rel != hat)
        flip_irrel.append(irrel != hat)
    return suff_comp_report(
        np.array(p_all),
        np.array(p_rel),
        np.array(p_irrel),
        np.array(flip_rel),
        np.array(flip_irrel),
        n_resamples=n_resamples,
        seed=seed,
    )


@collector_paused_over(
    "questions", "relevance", "all_predictions", "rel_predictions", "irrel_predictions"
)
def score_fpvg(
    questions: str | Path,
    relevance: str | Path | tuple[str | Path, str | Path],
    all_predictions: str | Path,
    rel_predictions: str | Path,
    irrel_predictions: str | Path,
    *,
    split_ids: tuple[str | Path, str | Path] | None = None,
    allow_missing: bool = False,
    seed: int = 0,
    n_bootstrap: int = 1000,
) -> dict[str, Any]:
    """FPVG of three prediction runs (all / relevant-only / irrelevant-only boxes), protocols.md §5.

    Scored questions: those of ``relevance`` (an ``R.json``, or FPVG's pair of relevant /
    irrelevant object pickles) with relevant and irrelevant boxes (paper App. A);
    correctness is exact match with the GQA ``answer``.
    Prediction ids outside ``questions`` are an error; scored questions without
    a prediction are an error unless ``allow_missing`` (then wrong, and unequal
    to every answer). ``split_ids = (ID, OOD)`` adds c2i per split and the
    relative c2i drops. ``suff_comp`` appears when every prediction carries
    ``probs``.
    """
    qpath = Path(questions)
    qs = answer_questions(qpath) or read_gqa_questions(qpath, require=("answer",))
    if isinstance(relevance, tuple):  # FPVG's relevant / irrelevant object pickles
        rpath = Path(relevance[0])
        rel_file = read_object_pickles(*relevance)
    else:
        rpath = Path(relevance)
        rel_file = read_relevance(rpath)
    for qid in rel_file:
        if qid not in qs:
            raise DataError(rpath, "question id is not among the questions", record_label(qid))
    excluded = dict.fromkeys((*EXCLUSION_REASONS, NOT_IN_RELEVANCE), 0)
    scored: list[str] = []
    for qid in qs:
        entry = rel_file.get(qid)
        if entry is None:
            excluded[NOT_IN_RELEVANCE] += 1
        elif entry[2] is not None:
            excluded[entry[2]] += 1
        else:
            scored.append(qid)
    if not scored:
        raise DataError(rpath, "no question has both relevant and irrelevant boxes")
    answers: list[list[str | None]] = []
    probs: list[dict[str, Mapping[str, float]]] = []
    for path in (all_predictions, rel_predictions, irrel_predictions):
        p = Path(path)
        run_answers, run_probs = read_answers_and_probs(p)
        if run_answers.keys() != qs.keys():  # else every id is a question, none is missing
            check_coverage(run_answers, qs, p, allow_missing=True)  # every id a question
            check_coverage(run_answers, scored, p, allow_missing=allow_missing, allow_extra=True)
        answers.append([run_answers.get(qid) for qid in scored])
        probs.append(run_probs)
    gold = [qs[qid]["answer"] for qid in scored]
    rates = fpvg_rates(*answers, gold, n_resamples=n_bootstrap, seed=seed)
    fpvg = fpvg_indicators(*answers)
    mod = mod_fpvg_indicators(answers[0], answers[1])
    correct = np.array([a is not None and a == g for a, g in zip(answers[0], gold, strict=True)])
    categories = {
        "fpvg_plus": fpvg,
        "fpvg_minus": ~fpvg,
        "mod_fpvg_plus": mod,
        "mod_fpvg_minus": ~mod,
    }
    masks = None
    split_summary: dict[str, Any] = {}
    split_ci: dict[str, Any] = {}
    if split_ids is not None:
        masks = _split_masks(split_ids, scored, qs)
        for name, mask in masks.items():
            sub = [[run[i] for i in np.flatnonzero(mask)] for run in answers]
            sub_gold = [gold[i] for i in np.flatnonzero(mask)]
            if not sub_gold:
                split_summary[name] = {"n": 0}
                continue
            r = fpvg_rates(*sub, sub_gold, n_resamples=n_bootstrap, seed=seed)
            keys = ("acc_all", "fpvg_plus", "mod_fpvg_plus")
            split_summary[name] = {k: r[k].value for k in keys} | {"n": len(sub_gold)}
            split_ci[name] = {k: r[k].to_dict() for k in keys}
    c2i_values, c2i_ci = c2i_report(correct, categories, masks, n_resamples=n_bootstrap, seed=seed)
    result: dict[str, Any] = {key: est.value for key, est in rates.items()}
    result["n"] = len(scored)
    result["excluded"] = excluded
    result["c2i"] = c2i_values
    ci: dict[str, Any] = {key: est.to_dict() for key, est in rates.items()}
    ci["c2i"] = c2i_ci
    if split_ids is not None:
        result["splits"] = split_summary
        ci["splits"] = split_ci
    sc = _suff_comp(answers, probs, scored, n_bootstrap, seed)
    if sc is not None:
        result["suff_comp"], ci["suff_comp"] = sc
    result["ci"] = ci
    return result


def _split_masks(
    paths: tuple[str | Path, str | Path], scored: Sequence[str], qs: Mapping[str, Any]
) -> dict[str, np.ndarray]:
    masks: dict[str, np.ndarray] = {}
    seen: dict[str, str] = {}
    for name, path in zip(("id", "ood"), paths, strict=True):
        p = Path(path)
        ids = read_split_ids(p)
        for qid in ids:
            if qid not in qs:
                raise DataError(p, "question id is not among the questions", record_label(qid))
            if seen.get(qid, name) != name:
                raise DataError(
                    p, "question id is in both the ID and the OOD split", record_label(qid)
                )
            seen[qid] = name
        wanted = set(ids)
        masks[name] = np.array([qid in wanted for qid in scored], dtype=bool)
    return masks
