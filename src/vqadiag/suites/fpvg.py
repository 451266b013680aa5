"""Suite ``fpvg``: Faithful & Plausible Visual Grounding (docs/protocols.md §5).

Relevance of the detected boxes (``vqadiag relevance``), then the model on every
FPVG question with all objects, the relevant ones only and the irrelevant ones
only; scored by ``vqadiag score fpvg``. The per-question values come from the
same metric functions (:func:`~vqadiag.metrics.fpvg.fpvg_units`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from vqadiag.metrics.fpvg import fpvg_units
from vqadiag.probes.conditions import Condition
from vqadiag.suites.base import (
    Drilldown,
    Figure,
    FindingRule,
    Suite,
    SuiteOutput,
    SuiteSkipped,
    is_zero,
    register_suite,
)
from vqadiag.suites.sources import (
    gqa_source,
    needs_visual,
    plain_run,
    probe_of,
    raw_texts,
    unit_row,
)
from vqadiag.suites.state import DiagnoseState, estimate_of, write_predictions

#: the FPVG figures of the summary (docs/results-schema.md ``summary``)
FPVG_KEYS = (
    "fpvg_plus",
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
    figures = (
        Figure("fpvg_plus", "FPVG+"),
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
            "fpvg_plus", "blind", "above", "grounded",
            "FPVG+ {value} [{ci}] vs {other_value} for blind {other} ({test}, {p})",
            tone="good", min_value=GROUNDED_FPVG_PLUS,
        ),
        FindingRule(
            "fpvg_plus", "blind", "above", "weakly grounded",
            "FPVG+ {value} [{ci}] above {other_value} for blind {other} ({test}, {p}) "
            "but under 20",
            tone="neutral", max_value=GROUNDED_FPVG_PLUS,
        ),
        FindingRule(
            "fpvg_plus", "blind", "not_above", "not grounded",
            "FPVG+ {value} [{ci}] not above {other_value} for blind {other} ({test}, {p})",
            tone="bad",
        ),
    )  # fmt: skip
    drilldown = Drilldown(
        "FPVG− questions (grounding not faithful and plausible)", is_zero("fpvg_plus")
    )

    def run(self, state: DiagnoseState) -> SuiteOutput:
        return fpvg_suite(state)


@dataclass
class FPVGState:
    """Relevance sets and the three runs of the FPVG questions."""

    qids: list[str]
    relevant: dict[str, list[int]]
    irrelevant: dict[str, list[int]]
    relevance_file: Path
    relevance_summary: dict[str, Any]
    runs: dict[str, list[Any]]  # "all" | "rel" | "irrel" → answers in qids order
    files: dict[str, Path]


def _check_objects(state: DiagnoseState, what: str) -> None:
    caps = state.model.capabilities
    if not caps.reruns:
        raise SuiteSkipped(f"prediction files answer only the plain condition ({what})")
    needs_visual(state)
    if caps.object_input and state.options.replacement == "drop" and not caps.object_masking:
        raise SuiteSkipped(
            "model does not honour object masks (use --replacement zeros|minus-one|other-images)"
        )


def fpvg_state(state: DiagnoseState) -> FPVGState:
    """Relevance (``vqadiag relevance``), then the all / relevant / irrelevant runs (§5)."""
    if "fpvg" in state.memo:
        return state.memo["fpvg"]
    from vqadiag.data.relevance_files import read_relevance
    from vqadiag.scoring.fpvg import relevance

    _check_objects(state, "FPVG needs the model under removed objects")
    src, all_run = plain_run(state)
    scenes = src.data.gqa_dir / f"{state.options.split}_sceneGraphs.json"
    if not scenes.is_file():
        raise SuiteSkipped(f"no scene graphs for split {state.options.split!r} ({scenes.name})")
    rel_path = state.inputs / "relevance.json"
    summary = relevance(src.questions_file, scenes, src.data.detections_path, rel_path)
    summary.pop("out", None)  # RESULT_DIR/inputs/relevance.json
    sets = read_relevance(rel_path)
    qids = [q for q in src.qids if q in sets and sets[q][2] is None]
    if not qids:
        raise SuiteSkipped("no question has both relevant and irrelevant detected boxes")
    rel = {q: list(sets[q][0]) for q in qids}
    irrel = {q: list(sets[q][1]) for q in qids}
    answer_of = dict(zip(src.qids, all_run.answers, strict=True))
    params = state.removal_params()
    answers: dict[str, list[Any]] = {"all": [answer_of[q] for q in qids]}
    pixels = state.model.capabilities.pixel_input
    for name, sets_of in (("rel", rel), ("irrel", irrel)):
        # objects: keep only the set; pixels: relevant-only keeps the relevant boxes'
        # pixels, irrelevant-only replaces them (docs/diagnose.md, "Images")
        replace_relevant = pixels and name == "irrel"
        probes = [
            probe_of(
                src.records[q],
                q,
                keep=None if replace_relevant else tuple(sets_of[q]),
                remove=tuple(rel[q]) if replace_relevant else None,
                ref=answer_of[q].answer,
            )
            for q in qids
        ]
        run = state.run(src.ctx, Condition(f"gqa.{name}", "objects", params), probes)
        answers[name] = run.answers
    files = {
        name: write_predictions(state, "fpvg", name, qids, answers[name])
        for name in ("all", "rel", "irrel")
    }
    fs = FPVGState(qids, rel, irrel, rel_path, summary, answers, files)
    state.memo["fpvg"] = fs
    return fs


def fpvg_suite(state: DiagnoseState) -> SuiteOutput:
    """FPVG, its four categories, Acc_all/rel/irrel, c2i, suff/comp (``vqadiag score fpvg``)."""
    from vqadiag.scoring.fpvg import score_fpvg

    fs = fpvg_state(state)
    src = gqa_source(state)
    o = state.options
    result = score_fpvg(
        src.questions_file,
        fs.relevance_file,
        fs.files["all"],
        fs.files["rel"],
        fs.files["irrel"],
        seed=o.seed,
        n_bootstrap=o.n_bootstrap,
    )
    result["replacement"] = o.replacement
    result["relevance"] = fs.relevance_summary
    answers = {k: [a.answer for a in fs.runs[k]] for k in ("all", "rel", "irrel")}
    units = fpvg_units(
        answers["all"],
        answers["rel"],
        answers["irrel"],
        [src.records[q].get("answer") for q in fs.qids],
    )
    rows = []
    for i, q in enumerate(fs.qids):
        a_all, a_rel, a_irrel = (fs.runs[k][i] for k in ("all", "rel", "irrel"))
        values: dict[str, Any] = {k: int(units[k][i]) for k in FPVG_KEYS}
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
