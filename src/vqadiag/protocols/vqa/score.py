"""VQA v2 scoring, complementary pairs and answer balance (docs/protocols.md §1, §2).

Each function mirrors a command and returns exactly the dict that the command
prints with ``--json``:

* :func:`score_vqa`     — ``vqadiag score vqa``
* :func:`score_pairs`   — ``vqadiag score pairs``
* :func:`balance_stats` — ``vqadiag stats balance``
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from vqadiag.data.formats.predictions import align_predictions, answers_of, read_predictions
from vqadiag.data.formats.vqa2 import (
    check_questions,
    read_pairs,
    read_vqa_annotations,
    read_vqa_questions,
)
from vqadiag.data.io.atomic import atomic_write
from vqadiag.data.io.jsonio import collector_paused_over
from vqadiag.errors import DataError
from vqadiag.metrics.vqa_accuracy import (
    discrete_mean_ci,
    group_indices,
    vqa_accuracies,
    vqa_accuracies_flat,
)
from vqadiag.metrics.vqa_normalize import normalize_answer
from vqadiag.protocols.vqa.balance import (
    answer_counts_by_type,
    entropy_bits,
    entropy_by_type,
    per_type_prior,
    prior_answer,
    prior_predictions,
    weighted_mean_entropy,
)
from vqadiag.protocols.vqa.inputs import read_vqa_inputs
from vqadiag.protocols.vqa.pairs import DEFAULT_PAIR_THRESHOLD, pair_both_correct, pair_identical


def _rate(values: np.ndarray, seed: int, n_bootstrap: int) -> tuple[float, dict[str, Any]]:
    """``100 × mean`` (official summation order) and its bootstrap interval object."""
    ci = discrete_mean_ci(values, n_resamples=n_bootstrap, seed=seed).to_dict()
    return ci["value"], ci


def _grouped_rates(
    acc: np.ndarray, labels: Sequence[str], seed: int, n_bootstrap: int
) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    values: dict[str, float] = {}
    cis: dict[str, dict[str, Any]] = {}
    groups = group_indices(labels)
    for label in sorted(groups):
        values[label], cis[label] = _rate(acc[groups[label]], seed, n_bootstrap)
    return values, cis


def _write_per_question(path: str | Path, qids: Sequence[str], acc: np.ndarray) -> None:
    with atomic_write(path) as fh:
        for qid, value in zip(qids, acc.tolist(), strict=True):
            fh.write(orjson.dumps({"question_id": qid, "accuracy": value}) + b"\n")


def accuracy_report(
    acc: np.ndarray,
    answer_types: Sequence[str],
    question_types: Sequence[str],
    *,
    seed: int = 0,
    n_bootstrap: int = 1000,
) -> dict[str, Any]:
    """``overall``, ``perAnswerType``, ``perQuestionType`` (100 × mean, protocols.md §1 step 4),
    ``n`` and the mirrored ``ci`` objects, from per-question accuracies in [0, 1]."""
    overall, overall_ci = _rate(acc, seed, n_bootstrap)
    per_answer, per_answer_ci = _grouped_rates(acc, answer_types, seed, n_bootstrap)
    per_question, per_question_ci = _grouped_rates(acc, question_types, seed, n_bootstrap)
    return {
        "overall": overall,
        "perAnswerType": per_answer,
        "perQuestionType": per_question,
        "n": int(acc.shape[0]),
        "ci": {
            "overall": overall_ci,
            "perAnswerType": per_answer_ci,
            "perQuestionType": per_question_ci,
        },
    }


@collector_paused_over("questions", "annotations", "predictions")
def score_vqa(
    questions: str | Path,
    annotations: str | Path,
    predictions: str | Path,
    *,
    lenient: bool = False,
    allow_missing: bool = False,
    per_question: str | Path | None = None,
    seed: int = 0,
    n_bootstrap: int = 1000,
) -> dict[str, Any]:
    """Official VQA v2 accuracy of a prediction file (docs/protocols.md §1).

    Scores every annotated question: acc = mean_i min(1, #{j ≠ i: gt_j = pred}/3),
    reported as 100 × mean overall, per answer type and per question type.
    Prediction ids that are not annotated are an error; annotated questions
    without a prediction are an error unless ``allow_missing`` (then 0).
    ``per_question`` writes JSON Lines ``{"question_id", "accuracy"}`` (accuracy
    in [0, 1], annotation-file order). Keys: ``overall``, ``perAnswerType``,
    ``perQuestionType``, ``n``, ``n_missing``, ``converted_predictions`` (JSON booleans
    or numbers read as yes / no / digits, where the official script fails on them),
    ``lenient``, ``ci``.
    """
    inputs = read_vqa_inputs(questions, annotations, predictions, allow_missing=allow_missing)
    acc = vqa_accuracies_flat(
        inputs.predictions, inputs.answers, inputs.answer_counts, lenient=lenient
    )
    if per_question is not None:
        _write_per_question(per_question, inputs.question_ids, acc)
    report = accuracy_report(
        acc, inputs.answer_types, inputs.question_types, seed=seed, n_bootstrap=n_bootstrap
    )
    ci = report.pop("ci")
    report["n_missing"] = inputs.predictions.count(None)
    report["converted_predictions"] = inputs.converted
    report["lenient"] = lenient
    report["ci"] = ci
    return report


@dataclass
class PairsInputs:
    """Complementary pairs ready to score (docs/protocols.md §2): the VQA v2 annotations,
    the pairs, and the paired question ids in first-seen order."""

    annotations: Mapping[str, Mapping[str, Any]]
    pairs: list[tuple[str, str]]

    @property
    def paired(self) -> list[str]:
        """Every question of a pair, each once, in first-seen order."""
        return list(dict.fromkeys(q for pair in self.pairs for q in pair))


@dataclass
class PairsScore:
    """The pair figures in the order ``score pairs`` prints them, their intervals, and
    ``units``: the pairs, each pair's both-correct and identical 0/1 and each question's
    VQA accuracy, the values the figures are the means of."""

    values: dict[str, Any]
    ci: dict[str, Any]
    units: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The dict ``vqadiag score pairs --json`` prints."""
        return {**self.values, "ci": self.ci}


def score_pair_answers(
    inputs: PairsInputs,
    answers: Sequence[str | None],
    *,
    pair_threshold: float = DEFAULT_PAIR_THRESHOLD,
    lenient: bool = False,
    seed: int = 0,
    n_bootstrap: int = 1000,
) -> PairsScore:
    """Both-correct, identical and different of the answers to ``inputs.paired`` (in that
    order; None is wrong and never identical), with bootstrap intervals over pairs."""
    paired, records = inputs.paired, inputs.annotations
    acc = vqa_accuracies(answers, [records[q]["answer_list"] for q in paired], lenient=lenient)
    acc_of = dict(zip(paired, acc.tolist(), strict=True))
    answer_of = {
        q: None if a is None else normalize_answer(a) for q, a in zip(paired, answers, strict=True)
    }
    side_a = [a for a, _ in inputs.pairs]
    side_b = [b for _, b in inputs.pairs]
    both = pair_both_correct(
        np.array([acc_of[q] for q in side_a]), np.array([acc_of[q] for q in side_b]), pair_threshold
    )
    same = pair_identical([answer_of[q] for q in side_a], [answer_of[q] for q in side_b])
    both_value, both_ci = _rate(both, seed, n_bootstrap)
    same_value, same_ci = _rate(same, seed, n_bootstrap)
    diff_value, diff_ci = _rate(1.0 - same, seed, n_bootstrap)
    values = {
        "both_correct": both_value,
        "identical": same_value,
        "different": diff_value,
        "n_pairs": len(inputs.pairs),
        "n_missing": sum(a is None for a in answers),
        "pair_threshold": pair_threshold,
    }
    ci = {"both_correct": both_ci, "identical": same_ci, "different": diff_ci}
    units = {"pairs": list(inputs.pairs), "both_correct": both, "identical": same}
    return PairsScore(values, ci, units | {"accuracy": acc_of})


@collector_paused_over("annotations", "pairs", "predictions")
def score_pairs(
    annotations: str | Path,
    pairs: str | Path,
    predictions: str | Path,
    *,
    pair_threshold: float = DEFAULT_PAIR_THRESHOLD,
    lenient: bool = False,
    allow_missing: bool = False,
    seed: int = 0,
    n_bootstrap: int = 1000,
) -> dict[str, Any]:
    """Complementary-pair figures of Goyal et al. (docs/protocols.md §2).

    ``both_correct`` = % pairs whose two VQA accuracies are ≥ ``pair_threshold``;
    ``identical`` = % pairs whose two predictions are the same answer after the
    official normalization (:func:`normalize_answer`, so ``"Yes"`` = ``"yes"``);
    ``different`` = 100 − ``identical``; ``n_pairs``; ``ci`` (bootstrap over pairs).
    Predictions must cover every paired question (unless ``allow_missing``:
    then wrong and never identical); prediction ids outside the annotations are
    an error; annotated questions outside the pairs need no prediction.
    :class:`PairsInputs` and :func:`score_pair_answers` are the same steps in memory.
    """
    if not (math.isfinite(pair_threshold) and 0 <= pair_threshold <= 1):
        raise DataError("--pair-threshold", f"must be from 0 to 1, got {pair_threshold}")
    annotation_records = read_vqa_annotations(annotations)
    inputs = PairsInputs(annotation_records, read_pairs(pairs, annotation_records))
    preds = read_predictions(predictions)
    align_predictions(preds, list(annotation_records), predictions, allow_missing=True)
    answers = answers_of(
        align_predictions(
            preds, inputs.paired, predictions, allow_missing=allow_missing, allow_extra=True
        )
    )
    score = score_pair_answers(
        inputs, answers, pair_threshold=pair_threshold, lenient=lenient, seed=seed,
        n_bootstrap=n_bootstrap,
    )  # fmt: skip
    return score.to_dict()


def _top_answers(counter: Mapping[str, int], top: int) -> list[dict[str, Any]]:
    total = sum(counter.values())
    ranked = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return [{"answer": a, "count": c, "percent": 100.0 * c / total} for a, c in ranked]


def balance_stats(
    annotations: str | Path,
    *,
    questions: str | Path | None = None,
    prior_from: str | Path | None = None,
    top: int = 5,
    seed: int = 0,
    n_bootstrap: int = 1000,
) -> dict[str, Any]:
    """Answer balance of a VQA v2 split and its prior baselines (docs/protocols.md §2).

    The answer of a question is its ``multiple_choice_answer`` (the most common
    of the 10). Per question type t: H_t = −Σ p log2 p (bits), the number of
    distinct answers and the ``top`` answers. ``mean_entropy`` = Σ_t (n_t/n) H_t.
    Baselines, scored with the official VQA accuracy on this split: ``prior``
    (the most common answer for every question) and ``per_type_prior`` (the most
    common answer of the question's type), taken from ``prior_from`` (a train
    annotations file) when given, else from this split itself (an optimistic,
    in-sample prior). ``questions``, when given, is checked against the
    annotations and adds ``n_images``.
    """
    records = read_vqa_annotations(annotations)
    result: dict[str, Any] = {"n": len(records)}
    if questions is not None:
        question_records = read_vqa_questions(questions)
        check_questions(question_records, records, annotations)
        result["n_images"] = len({question_records[q]["image_id"] for q in records})
    types = [r["question_type"] for r in records.values()]
    answers = [r["multiple_choice_answer"] for r in records.values()]
    counts = answer_counts_by_type(types, answers)
    entropies = entropy_by_type(counts)
    result["mean_entropy"] = weighted_mean_entropy(counts)
    result["overall_entropy"] = entropy_bits(list(Counter(answers).values()))
    result["n_question_types"] = len(counts)
    result["perQuestionType"] = {
        t: {
            "n": sum(counts[t].values()),
            "entropy": entropies[t],
            "n_answers": len(counts[t]),
            "top": _top_answers(counts[t], top),
        }
        for t in sorted(counts)
    }

    if prior_from is not None:
        source = read_vqa_annotations(prior_from)
        src_types = [r["question_type"] for r in source.values()]
        src_answers = [r["multiple_choice_answer"] for r in source.values()]
    else:
        src_types, src_answers = types, answers
    prior = prior_answer(src_answers)
    type_priors = per_type_prior(src_types, src_answers)
    gt = [r["answer_list"] for r in records.values()]
    prior_acc = vqa_accuracies([prior] * len(gt), gt)
    type_acc = vqa_accuracies(prior_predictions(types, type_priors, prior), gt)
    prior_value, prior_ci = _rate(prior_acc, seed, n_bootstrap)
    type_value, type_ci = _rate(type_acc, seed, n_bootstrap)
    result["prior"] = {"answer": prior, "accuracy": prior_value}
    result["per_type_prior"] = {"accuracy": type_value}
    result["prior_source"] = "train" if prior_from is not None else "self"
    result["ci"] = {
        "prior": {"accuracy": prior_ci},
        "per_type_prior": {"accuracy": type_ci},
    }
    return result
