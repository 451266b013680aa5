"""FPVG from files: box relevance (``vqadiag relevance``) and scoring (``vqadiag score fpvg``).

docs/protocols.md §5. Each function returns exactly the dict the command prints with ``--json``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.data.formats.gqa_typed import read_questions_with_answers
from vqadiag.data.formats.predictions import check_coverage, read_answers_and_probs
from vqadiag.data.formats.relevance import (
    EXCLUSION_REASONS,
)
from vqadiag.data.formats.relevance_files import read_object_pickles, read_relevance, read_split_ids
from vqadiag.data.io.jsonio import collector_paused_over
from vqadiag.errors import DataError, record_label
from vqadiag.protocols.fpvg.formulas import (
    CATEGORIES,
    FPVG_PLUS,
    c2i_report,
    fpvg_rates,
    fpvg_units,
    suff_comp_report,
)

NOT_IN_RELEVANCE = "not_in_relevance"
#: the three runs of FPVG, in the order their prediction files are given
RUN_NAMES = ("all", "relevant", "irrelevant")


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


RelevanceSets = Mapping[str, tuple[Sequence[int], Sequence[int], str | None]]


@dataclass
class FPVGInputs:
    """The FPVG questions (docs/protocols.md §5): those with relevant and irrelevant boxes,
    in question-file order, with their gold answers; ``excluded`` counts the others by
    reason; ``split_masks`` the ID / OOD questions when splits were given."""

    questions: Mapping[str, Any]
    scored: list[str]
    gold: list[str]
    excluded: dict[str, int]
    split_masks: dict[str, np.ndarray] | None = None


def fpvg_inputs_of(
    questions: Mapping[str, Any],
    sets: RelevanceSets,
    relevance_path: Path,
    split_ids: tuple[str | Path, str | Path] | None = None,
) -> FPVGInputs:
    """The inputs from question records and relevance sets already read (``sets``:
    ``{qid: (relevant, irrelevant, excluded reason or None)}`` of ``relevance_path``)."""
    for qid in sets:
        if qid not in questions:
            raise DataError(
                relevance_path, "question id is not among the questions", record_label(qid)
            )
    excluded = dict.fromkeys((*EXCLUSION_REASONS, NOT_IN_RELEVANCE), 0)
    scored: list[str] = []
    for qid in questions:
        entry = sets.get(qid)
        if entry is None:
            excluded[NOT_IN_RELEVANCE] += 1
        elif entry[2] is not None:
            excluded[entry[2]] += 1
        else:
            scored.append(qid)
    if not scored:
        raise DataError(relevance_path, "no question has both relevant and irrelevant boxes")
    gold = [questions[qid]["answer"] for qid in scored]
    masks = None if split_ids is None else _split_masks(split_ids, scored, questions)
    return FPVGInputs(questions, scored, gold, excluded, masks)


def load_fpvg(
    questions: str | Path,
    relevance: str | Path | tuple[str | Path, str | Path],
    split_ids: tuple[str | Path, str | Path] | None = None,
) -> FPVGInputs:
    """The inputs of ``score fpvg``: the GQA questions and the box relevance (an
    ``R.json``, or FPVG's pair of relevant / irrelevant object pickles)."""
    qpath = Path(questions)
    qs = read_questions_with_answers(qpath)
    if isinstance(relevance, tuple):  # FPVG's relevant / irrelevant object pickles
        return fpvg_inputs_of(qs, read_object_pickles(*relevance), Path(relevance[0]), split_ids)
    return fpvg_inputs_of(qs, read_relevance(relevance), Path(relevance), split_ids)


Runs = tuple[list[list[str | None]], list[dict[str, Mapping[str, float]]]]


def read_runs(inputs: FPVGInputs, paths: Sequence[str | Path], allow_missing: bool = False) -> Runs:
    """The all / relevant-only / irrelevant-only prediction files: each run's answers on
    the scored questions (None where missing, with ``allow_missing``) and its ``{qid:
    probs}``. Prediction ids outside the questions are an error."""
    answers: list[list[str | None]] = []
    probs: list[dict[str, Mapping[str, float]]] = []
    qs = inputs.questions
    for path in paths:
        p = Path(path)
        run_answers, run_probs = read_answers_and_probs(p)
        if run_answers.keys() != qs.keys():  # else every id is a question, none is missing
            check_coverage(run_answers, qs, p, allow_missing=True)  # every id a question
            check_coverage(
                run_answers, inputs.scored, p, allow_missing=allow_missing, allow_extra=True
            )
        answers.append([run_answers.get(qid) for qid in inputs.scored])
        probs.append(run_probs)
    return answers, probs


@dataclass
class FPVGScore:
    """FPVG's figures (docs/protocols.md §5): ``values`` FPVG+, its categories and the
    accuracies, with intervals in ``ci``; c2i, per-split figures and suff / comp when
    their inputs are there; ``units`` the per-question indicators the rates are the means
    of (:func:`~vqadiag.protocols.fpvg.formulas.fpvg_units`), in ``scored`` order."""

    values: dict[str, Any]
    ci: dict[str, Any]
    units: dict[str, np.ndarray] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The dict ``vqadiag score fpvg --json`` prints."""
        return {**self.values, "ci": self.ci}


def score_runs(
    inputs: FPVGInputs,
    answers: Sequence[Sequence[str | None]],
    probs: Sequence[Mapping[str, Mapping[str, float]]],
    *,
    seed: int = 0,
    n_bootstrap: int = 1000,
) -> FPVGScore:
    """FPVG of the three runs' answers on ``inputs.scored``; correctness is exact match
    with the GQA ``answer``; ``suff_comp`` when every answer carries probabilities;
    ``missing_predictions`` counts each run's None (no prediction, scored wrong)."""
    gold = inputs.gold
    rates = fpvg_rates(*answers, gold, n_resamples=n_bootstrap, seed=seed)
    units = fpvg_units(*answers, gold)
    categories = {k: units[k] for k in CATEGORIES}
    correct = np.array([a is not None and a == g for a, g in zip(answers[0], gold, strict=True)])
    masks = inputs.split_masks
    c2i_values, c2i_ci = c2i_report(correct, categories, masks, n_resamples=n_bootstrap, seed=seed)
    values: dict[str, Any] = {key: est.value for key, est in rates.items()}
    values.update(n=len(inputs.scored), excluded=inputs.excluded, c2i=c2i_values)
    values["missing_predictions"] = {
        run: sum(a is None for a in run_answers)
        for run, run_answers in zip(RUN_NAMES, answers, strict=True)
    }
    ci: dict[str, Any] = {key: est.to_dict() for key, est in rates.items()}
    ci["c2i"] = c2i_ci
    if masks is not None:
        values["splits"], ci["splits"] = _split_figures(answers, gold, masks, seed, n_bootstrap)
    sc = _suff_comp(answers, probs, inputs.scored, n_bootstrap, seed)
    if sc is not None:
        values["suff_comp"], ci["suff_comp"] = sc
    return FPVGScore(values, ci, units)


def _split_figures(
    answers: Sequence[Sequence[str | None]],
    gold: Sequence[str],
    masks: Mapping[str, np.ndarray],
    seed: int,
    n_bootstrap: int,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """acc_all, FPVG+ and mod FPVG+ on the ID and OOD questions (paper §4.2)."""
    summary: dict[str, Any] = {}
    cis: dict[str, Any] = {}
    for name, mask in masks.items():
        sub = [[run[i] for i in np.flatnonzero(mask)] for run in answers]
        sub_gold = [gold[i] for i in np.flatnonzero(mask)]
        if not sub_gold:
            summary[name] = {"n": 0}
            continue
        r = fpvg_rates(*sub, sub_gold, n_resamples=n_bootstrap, seed=seed)
        keys = ("acc_all", FPVG_PLUS, "mod_fpvg_plus")
        summary[name] = {k: r[k].value for k in keys} | {"n": len(sub_gold)}
        cis[name] = {k: r[k].to_dict() for k in keys}
    return summary, cis


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
    ``probs``. :func:`fpvg_inputs_of` and :func:`score_runs` are the same steps in memory.
    """
    inputs = load_fpvg(questions, relevance, split_ids)
    paths = (all_predictions, rel_predictions, irrel_predictions)
    answers, probs = read_runs(inputs, paths, allow_missing)
    result = score_runs(inputs, answers, probs, seed=seed, n_bootstrap=n_bootstrap).to_dict()
    if "suff_comp" not in result and any(probs):
        result["suff_comp_left_out"] = _probs_gap(paths, answers, probs, inputs.scored)
    return result


def _probs_gap(
    paths: Sequence[str | Path],
    answers: Sequence[Sequence[str | None]],
    probs: Sequence[Mapping[str, Mapping[str, float]]],
    scored: Sequence[str],
) -> str:
    """Why ``suff_comp`` is left out although some predictions carry ``probs``: the
    first file and question, among those with all three answers, without them."""
    for qid, trio in zip(scored, zip(*answers, strict=True), strict=True):
        if None in trio:
            continue
        for path, run_probs in zip(paths, probs, strict=True):
            if qid not in run_probs:
                return f"{path}: {record_label(qid)} carries no probs"
    return "no scored question has all three predictions"


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
