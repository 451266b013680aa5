"""Suite ``fpvg``: Faithful & Plausible Visual Grounding (docs/protocols.md §5).

Relevance of the detected boxes (``vqadiag relevance``), then the model on every
FPVG question with all objects, the relevant ones only and the irrelevant ones
only; scored by ``vqadiag score fpvg``. The per-question values come from the
same metric functions (:func:`~vqadiag.protocols.fpvg.formulas.fpvg_units`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from vqadiag.protocols.fpvg.formulas import FPVG_PLUS
from vqadiag.protocols.fpvg.plots import PLOTS
from vqadiag.suites.base import (
    Drilldown,
    Figure,
    FindingRule,
    Suite,
    SuiteOutput,
    is_zero,
    register_suite,
)
from vqadiag.suites.grounding import grounding_runs
from vqadiag.suites.sources import (
    gqa_source,
    raw_texts,
    unit_row,
)
from vqadiag.suites.state import DiagnoseState, estimate_of

#: the FPVG figures of the summary (docs/results-schema.md ``summary``)
FPVG_KEYS = (
    FPVG_PLUS,
    "fpvg_plus_correct",
    "fpvg_plus_wrong",
    "fpvg_minus_correct",
    "fpvg_minus_wrong",
    "acc_all",
    "acc_rel",
    "acc_irrel",
)


#: FPVG+ from which a model significantly above the blind baseline is called grounded
GROUNDED_FPVG_PLUS = 20.0


@register_suite
class FPVGSuite(Suite):
    """FPVG+, its four categories, Acc_all / rel / irrel, c2i, suff / comp."""

    name = "fpvg"
    title = "FPVG: faithful and plausible grounding"
    datasets = ("gqa", "gqa scene graphs", "gqa detections")
    conditions = ("gqa.all", "gqa.rel", "gqa.irrel")
    requires: ClassVar[Mapping[str, str]] = {
        "reruns": "prediction files answer only the plain condition "
        "(FPVG needs the model under removed objects)"
    }
    display_order = 30
    own_prefix = True
    plots = PLOTS
    figures = (
        Figure(FPVG_PLUS, "FPVG+"),
        Figure("fpvg_plus_correct", "FPVG+ correct"),
        Figure("fpvg_plus_wrong", "FPVG+ wrong", direction="lower"),
        Figure("fpvg_minus_correct", "FPVG− correct", direction="lower"),
        Figure("fpvg_minus_wrong", "FPVG− wrong", direction="lower"),
        Figure("acc_all", "acc all objects", card=False),
        Figure("acc_rel", "acc relevant only", card=False),
        Figure("acc_irrel", "acc irrelevant only", direction="lower", card=False),
    )
    findings = (
        FindingRule(
            FPVG_PLUS, "blind", "above", "grounded",
            "FPVG+ {value} [{ci}] vs {other_value} for blind {other} ({test}, {p})",
            tone="good", min_value=GROUNDED_FPVG_PLUS,
        ),
        FindingRule(
            FPVG_PLUS, "blind", "above", "weakly grounded",
            "FPVG+ {value} [{ci}] above {other_value} for blind {other} ({test}, {p}) "
            "but under 20",
            tone="neutral", max_value=GROUNDED_FPVG_PLUS,
        ),
        FindingRule(
            FPVG_PLUS, "blind", "not_above", "not grounded",
            "FPVG+ {value} [{ci}] not above {other_value} for blind {other} ({test}, {p})",
            tone="bad",
        ),
    )  # fmt: skip
    drilldown = Drilldown(
        "FPVG− questions (grounding not faithful and plausible)", is_zero(FPVG_PLUS)
    )

    def run(self, state: DiagnoseState) -> SuiteOutput:
        return fpvg_suite(state)


def fpvg_suite(state: DiagnoseState) -> SuiteOutput:
    """FPVG, its four categories, Acc_all/rel/irrel, c2i, suff/comp (``vqadiag score fpvg``),
    scored from the three runs' answers in memory (their prediction files are written for
    ``vqadiag score fpvg`` to re-score)."""
    from vqadiag.protocols.fpvg.score import fpvg_inputs_of, score_runs

    fs = grounding_runs(state)
    src = gqa_source(state)
    o = state.options
    records = {q: src.records[q] for q in fs.questions}
    inputs = fpvg_inputs_of(records, fs.sets, fs.relevance_file)
    assert inputs.scored == fs.qids  # the grounding runs' questions, in the same order
    runs = [fs.runs[k] for k in ("all", "rel", "irrel")]
    answers = [[a.answer for a in run] for run in runs]
    probs = [
        {q: p for q, a in zip(fs.qids, run, strict=True) if (p := a.probs()) is not None}
        for run in runs
    ]
    score = score_runs(inputs, answers, probs, seed=o.seed, n_bootstrap=o.n_bootstrap)
    result = score.to_dict()
    result["replacement"] = o.replacement
    result["relevance"] = fs.relevance_summary
    rows = []
    for i, q in enumerate(fs.qids):
        a_all, a_rel, a_irrel = (run[i] for run in runs)
        values: dict[str, Any] = {k: int(score.units[k][i]) for k in FPVG_KEYS}
        if a_all.p_answer is not None and a_rel.p_ref is not None and a_irrel.p_ref is not None:
            values["suff"] = a_all.p_answer - a_rel.p_ref
            values["comp"] = a_all.p_answer - a_irrel.p_ref
        rows.append(
            unit_row(
                "fpvg",
                q,
                src.records[q],
                answers={"all": a_all.answer, "rel": a_rel.answer, "irrel": a_irrel.answer},
                values=values,
                relevant=fs.relevant[q],
                irrelevant=fs.irrelevant[q],
                **raw_texts({"all": a_all, "rel": a_rel, "irrel": a_irrel}),
            )
        )
    ci = result["ci"]
    return SuiteOutput(result, rows, {k: estimate_of(ci, k) for k in FPVG_KEYS})
