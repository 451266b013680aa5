"""Suite ``accuracy``: GQA's official metrics of the plain run (docs/protocols.md §7)."""

from __future__ import annotations

from vqadiag.data.formats.predictions import in_memory_counts
from vqadiag.suites.base import (
    Drilldown,
    Figure,
    FindingRule,
    Suite,
    SuiteOutput,
    below_one,
    register_suite,
)
from vqadiag.suites.sources import plain_run, raw_texts, unit_row
from vqadiag.suites.state import DiagnoseState, estimate_of, write_predictions


@register_suite
class AccuracySuite(Suite):
    """GQA accuracy, validity, plausibility, consistency, distribution (``vqadiag score gqa``)."""

    name = "accuracy"
    title = "GQA accuracy (official eval.py)"
    datasets = ("gqa",)
    conditions = ("gqa.all",)
    display_order = 10
    figures = (Figure("accuracy", "GQA accuracy"),)
    findings = (
        FindingRule(
            "accuracy", "blind", "above", "uses the image",
            "accuracy {value} vs {other_value} for blind {other} ({diff}; {test}, {p})",
            tone="good", superseded_by="gain_gqa",  # its own no-image run decides
        ),
        FindingRule(
            "accuracy", "blind", "not_above", "relies on language priors",
            "accuracy {value} not above {other_value} for blind {other} ({test}, {p})",
            tone="bad",
        ),
    )  # fmt: skip
    drilldown = Drilldown("Wrong answers", below_one("accuracy"))

    def run(self, state: DiagnoseState) -> SuiteOutput:
        return accuracy_suite(state)


def accuracy_suite(state: DiagnoseState) -> SuiteOutput:
    """GQA's official metrics (``vqadiag score gqa``) of the plain run (docs/protocols.md §7),
    scored from its answers in memory; the prediction file is written for ``vqadiag score
    gqa`` to re-score."""
    from vqadiag.protocols.gqa.inputs import gqa_inputs_of
    from vqadiag.protocols.gqa.score import missing_eval_field, score_accuracy_only, score_inputs

    src, run = plain_run(state)
    write_predictions(state, "accuracy", "all", src.qids, run.answers)
    choices = state.extra_file("choices", src.data.gqa_dir / f"{state.options.split}_choices.json")
    o = state.options
    answer_of = {q: a.answer for q, a in zip(src.qids, run.answers, strict=True)}
    if missing_eval_field(src.records) is not None:  # question and answer only (a TSV)
        score = score_accuracy_only(
            src.records, answer_of, seed=o.seed, n_bootstrap=o.n_bootstrap,
            prediction_counts=in_memory_counts(),
        )  # fmt: skip
    else:
        inputs = gqa_inputs_of(
            src.records, src.questions_file, choices if choices.is_file() else None
        )
        score = score_inputs(
            inputs, answer_of, seed=o.seed, n_bootstrap=o.n_bootstrap,
            prediction_counts=in_memory_counts(),
        )  # fmt: skip
    units = score.units
    accuracy_of = dict(zip(units["ids"], units["accuracy"].tolist(), strict=True))
    rows = [
        unit_row(
            "accuracy",
            q,
            src.records[q],
            answers={"all": a.answer},
            values={"accuracy": int(accuracy_of[q])},
            **raw_texts({"all": a}),
        )
        for q, a in zip(src.qids, run.answers, strict=True)
    ]
    result = score.to_dict()
    return SuiteOutput(result, rows, {"accuracy": estimate_of(result["ci"], "accuracy")})
