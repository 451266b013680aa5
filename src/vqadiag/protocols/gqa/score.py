"""GQA scoring: the official eval.py metrics (docs/protocols.md §7).

``score_gqa`` mirrors ``vqadiag score gqa``: it reads the files, calls the pure
metrics of :mod:`vqadiag.protocols.gqa.formulas` and returns exactly the dict
the command prints with ``--json``. Every rate is in percent at full precision
and has a ``{"value", "ci_low", "ci_high", "n"}`` twin under ``"ci"`` (95%
percentile bootstrap over questions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.data.formats.predictions import read_scored_answers
from vqadiag.data.io.jsonio import collector_paused_over
from vqadiag.errors import DataError, excerpt, record_label
from vqadiag.metrics.bootstrap import (
    Estimate,
    finite_or_none,
    mean_ci,
    official_rate_ci,
)
from vqadiag.protocols.gqa.formulas import (
    GQAEvaluation,
    bootstrap_distribution,
    evaluate_columns,
    official_rate,
)
from vqadiag.protocols.gqa.grounding import DEFAULT_MAP_SIZE
from vqadiag.protocols.gqa.inputs import GQAInputs, read_gqa_inputs


def _breakdown(
    evaluation: GQAEvaluation, name: str, seed: int, n_bootstrap: int
) -> tuple[dict[str, float], dict[str, Any]]:
    positions = evaluation.breakdowns[name]
    numeric = name in ("perLength", "perSteps")
    keys = sorted(positions, key=(lambda k: int(k)) if numeric else (lambda k: str(k)))
    values: dict[str, float] = {}
    cis: dict[str, Any] = {}
    for key in keys:
        scores = evaluation.correct[positions[key]]
        value, ci = official_rate_ci(scores, official_rate(scores.tolist()), seed, n_bootstrap)
        values[str(key)] = value
        cis[str(key)] = ci
    return values, cis


@dataclass
class GQAScore:
    """GQA's eval.py figures (docs/protocols.md §7) in the order the command prints them:
    ``values`` (rates in percent, breakdowns by type, word count and steps, consistency
    and its detail, distribution) with their intervals in ``ci``; ``units`` the scored
    question ids and their 0/1 accuracy, the values the accuracy is the mean of."""

    values: dict[str, Any]
    ci: dict[str, Any]
    n: int
    balanced_only: bool
    prediction_counts: dict[str, int]
    units: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The dict ``vqadiag score gqa --json`` prints."""
        out = dict(self.values)
        out.update(n=self.n, balanced_only=self.balanced_only, **self.prediction_counts)
        out["ci"] = self.ci
        return out


def score_inputs(
    inputs: GQAInputs,
    answers: Mapping[str, str],
    *,
    all_questions: bool = False,
    seed: int = 0,
    n_bootstrap: int = 1000,
    prediction_counts: Mapping[str, int] | None = None,
    grounding: tuple[float | None, dict[str, Any] | None, int] | None = None,
) -> GQAScore:
    """eval.py's metrics of ``answers`` on ``inputs`` with 95% bootstrap intervals:
    accuracy, binary / open, per structural and semantic type, per word count and steps,
    validity and plausibility (with choices), consistency, distribution; ``grounding``
    the (value, interval, missing) of the grounding score when it was asked for."""
    scored = inputs.columns.question_ids
    ev = evaluate_columns(inputs.columns, answers, inputs.choice_lists)
    values: dict[str, Any] = {}
    ci: dict[str, Any] = {}
    open_mask = ev.is_open
    for key, rates in (
        ("accuracy", ev.correct),
        ("binary", ev.correct[~open_mask]),
        ("open", ev.correct[open_mask]),
    ):
        values[key], ci[key] = official_rate_ci(
            rates, official_rate(rates.tolist()), seed, n_bootstrap
        )
    for key in ("perStructuralType", "perSemanticType", "perLength", "perSteps"):
        values[key], ci[key] = _breakdown(ev, key, seed, n_bootstrap)
    for key, rates in (("validity", ev.valid), ("plausibility", ev.plausible)):
        if rates is None:
            values[key], ci[key] = None, None
        else:
            values[key], ci[key] = official_rate_ci(
                rates, official_rate(rates.tolist()), seed, n_bootstrap
            )
    cons = ev.consistency
    values["consistency"], ci["consistency"] = official_rate_ci(
        np.asarray(cons.scores), cons.value, seed, n_bootstrap
    )
    values["consistency_detail"] = {
        "n_questions": len(cons.scores),
        "n_entailed": int(sum(cons.n_entailed)),
        "entailed_skipped": cons.entailed_skipped,
        "questions_skipped": cons.questions_skipped,
    }
    if grounding is not None:
        values["grounding"], ci["grounding"], values["grounding_missing"] = grounding
    distribution = finite_or_none(ev.distribution)
    values["distribution"] = distribution
    if distribution is None:
        ci["distribution"] = None
    else:
        boot = bootstrap_distribution(ev.distribution_index, n_resamples=n_bootstrap, seed=seed)
        n_grouped = int((ev.distribution_index.gold_pair >= 0).sum())
        ci["distribution"] = Estimate.from_bootstrap(distribution, boot, n_grouped).to_dict()
    units = {"ids": list(scored), "accuracy": np.asarray(ev.correct, np.float64)}
    return GQAScore(
        values, ci, len(scored), not all_questions, dict(prediction_counts or {}), units
    )


#: the record fields eval.py's metrics beyond accuracy read
EVAL_FIELDS = ("types", "groups", "semantic")


def missing_eval_field(records: Mapping[str, Mapping[str, Any]]) -> tuple[str, str] | None:
    """``(question id, field)`` of the first record without one of :data:`EVAL_FIELDS`
    (questions from a copy that keeps only question and answer), else None."""
    for qid, record in records.items():
        for name in EVAL_FIELDS:
            if name not in record:
                return qid, name
    return None


def score_accuracy_only(
    records: Mapping[str, Mapping[str, Any]],
    answers: Mapping[str, str],
    *,
    seed: int = 0,
    n_bootstrap: int = 1000,
    prediction_counts: Mapping[str, int] | None = None,
) -> GQAScore:
    """eval.py's accuracy alone, 100 · mean [answer = gold] over the balanced questions
    (docs/protocols.md §7), for questions that carry no types, groups or programs (a
    VLMEvalKit TSV): the other metrics are None, never guessed."""
    from vqadiag.data.formats.gqa import is_balanced

    scored = [q for q, r in records.items() if is_balanced(r)]
    correct = np.array(
        [answers.get(q) is not None and answers.get(q) == records[q]["answer"] for q in scored],
        dtype=np.float64,
    )
    value, interval = official_rate_ci(correct, official_rate(correct.tolist()), seed, n_bootstrap)
    values = {"accuracy": value, "metrics": "accuracy only (the questions carry no "
              "types, groups or programs)"}  # fmt: skip
    units = {"ids": scored, "accuracy": correct}
    return GQAScore(
        values, {"accuracy": interval}, len(scored), True, dict(prediction_counts or {}), units
    )


@collector_paused_over("questions", "predictions", "choices", "attentions", "scene_graphs")
def score_gqa(
    questions: str | Path,
    predictions: str | Path,
    *,
    choices: str | Path | None = None,
    attentions: str | Path | None = None,
    scene_graphs: str | Path | None = None,
    map_size: int = DEFAULT_MAP_SIZE,
    object_attention: bool = False,
    all_questions: bool = False,
    allow_missing: bool = False,
    seed: int = 0,
    n_bootstrap: int = 1000,
) -> dict[str, Any]:
    """GQA's official eval.py metrics with 95% bootstrap intervals (docs/protocols.md §7).

    With ``attentions`` (and the ``scene_graphs`` of the questions' images): the
    grounding score of ``eval.py --grounding`` (:mod:`vqadiag.protocols.gqa.grounding`;
    a ``map_size`` grid, or object boxes with ``object_attention``).

    Scores the ``isBalanced`` questions (all with ``all_questions``): accuracy,
    binary / open, per structural and semantic type, per word count and steps,
    validity and plausibility (with ``choices``), consistency and distribution.
    Predictions may cover only the scored questions; consistency then uses the
    entailed questions that have predictions and reports the rest as skipped.
    Predictions for questions the file does not hold are ignored and counted
    (``extra_predictions``), as the official script ignores them.
    :func:`~vqadiag.protocols.gqa.inputs.gqa_inputs_of` and :func:`score_inputs` are
    the same steps in memory.
    """
    _check_grounding_options(attentions, scene_graphs, map_size, object_attention)
    inputs = read_gqa_inputs(
        questions, choices, all_questions=all_questions, need_records=attentions is not None
    )
    scored = inputs.columns.question_ids
    answers, counts = read_scored_answers(
        predictions, inputs.columns.answer_of, scored, allow_missing
    )
    grounding = None
    if attentions is not None:
        assert inputs.records is not None  # read whole for the grounding score
        grounding = _grounding(
            inputs.records, scored, attentions, scene_graphs, map_size, object_attention,
            allow_missing, seed, n_bootstrap,
        )  # fmt: skip
    score = score_inputs(
        inputs, answers, all_questions=all_questions, seed=seed, n_bootstrap=n_bootstrap,
        prediction_counts=counts, grounding=grounding,
    )  # fmt: skip
    return score.to_dict()


def _check_grounding_options(
    attentions: Any, scene_graphs: Any, map_size: Any, object_attention: bool
) -> None:
    """The grounding score's options go with ``attentions`` (one line, not accepted and
    ignored), and its grid has a side of 1 or more."""
    if isinstance(map_size, bool) or not isinstance(map_size, int) or map_size < 1:
        raise DataError("--map-size", f"must be a whole number of 1 or more, got {map_size!r}")
    if attentions is None:
        given = [
            name
            for name, on in (
                ("--scene-graphs", scene_graphs is not None),
                ("--object-attention", object_attention),
                ("--map-size", map_size != DEFAULT_MAP_SIZE),
            )
            if on
        ]
        if given:
            raise DataError(given[0], "goes with --attentions (the grounding score)")


def _grounding(
    records: Mapping[str, Any],
    scored: Sequence[str],
    attentions: str | Path,
    scene_graphs: str | Path | None,
    map_size: int,
    object_attention: bool,
    allow_missing: bool,
    seed: int,
    n_bootstrap: int,
) -> tuple[float | None, dict[str, Any] | None, int]:
    """``eval.py --grounding``: 100 · mean grounding score over the scored questions with
    an attention map (every one unless ``allow_missing``; the others are counted)."""
    from vqadiag.data.formats.gqa import read_attentions, read_scene_graphs
    from vqadiag.protocols.gqa.grounding import grounding_score

    a_path = Path(attentions)
    if scene_graphs is None:
        raise DataError(a_path, "the grounding score needs --scene-graphs (the objects' boxes)")
    if map_size < 1:
        raise DataError("--map-size", f"must be at least 1, got {map_size}")
    maps = read_attentions(a_path, map_size=map_size, object_boxes=object_attention)
    s_path = Path(scene_graphs)
    scenes = read_scene_graphs(s_path)
    values, missing = [], 0
    for qid in scored:
        if qid not in maps:
            if not allow_missing:
                raise DataError(
                    a_path, "no attention map for this scored question (use --allow-missing "
                    "to leave such questions out of grounding)", record_label(qid),
                )  # fmt: skip
            missing += 1
            continue
        record = records[qid]
        scene = scenes.get(str(record.get("imageId")))
        if scene is None or "width" not in scene or "height" not in scene:
            raise DataError(
                s_path, "no scene graph with width and height for image "
                f"{excerpt(record.get('imageId'))}",
                record_label(qid),
            )  # fmt: skip
        try:
            values.append(
                grounding_score(
                    record, scene, maps[qid], map_size=map_size, object_boxes=object_attention
                )
            )
        except KeyError as err:
            raise DataError(
                s_path, "the question's annotations name object "
                f"{excerpt(err.args[0])}, which is not "
                f"in image {excerpt(record.get('imageId'))}", record_label(qid),
            ) from None  # fmt: skip
    if not values:
        return None, None, missing
    array = 100.0 * np.asarray(values, dtype=np.float64)
    est = mean_ci(array, n_resamples=n_bootstrap, seed=seed).to_dict()
    return float(array.mean()), est, missing
