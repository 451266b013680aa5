"""The grounding runs of docs/protocols.md §5: relevance of the detected boxes, then the
model on every FPVG question with all objects, the relevant ones only and the irrelevant
ones only. The FPVG suite scores them; the importance suite ranks objects on the same
questions. Run once per diagnosis (memoised in the run state).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vqadiag.errors import SuiteSkipped
from vqadiag.probes.conditions import Condition
from vqadiag.suites.sources import needs_visual, plain_run, probe_of
from vqadiag.suites.state import DiagnoseState, write_predictions


@dataclass
class GroundingRuns:
    """Relevance sets and the three runs of the FPVG questions (all objects, relevant only,
    irrelevant only), shared by the FPVG and importance suites."""

    qids: list[str]
    #: the questions FPVG took (its prefix of the diagnosed ones), scored or excluded
    questions: list[str]
    relevant: dict[str, list[int]]
    irrelevant: dict[str, list[int]]
    relevance_file: Path
    #: every question's relevance as read from ``relevance_file`` (kept or not)
    sets: dict[str, tuple[list[int], list[int], str | None]]
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


def grounding_runs(state: DiagnoseState) -> GroundingRuns:
    """Relevance (``vqadiag relevance``), then the all / relevant / irrelevant runs (§5)."""
    if "fpvg" in state.memo:
        return state.memo["fpvg"]
    from vqadiag.data.formats.relevance_files import read_relevance, relevance

    _check_objects(state, "FPVG needs the model under removed objects")
    src, all_run = plain_run(state)
    scenes = state.extra_file(
        "scene_graphs", src.data.gqa_dir / f"{state.options.split}_sceneGraphs.json"
    )
    if not scenes.is_file():
        raise SuiteSkipped(
            f"no scene graphs for split {state.options.split!r} ({scenes.name}; GQA publishes "
            "them for train and val: add them with --scene-graphs FILE)"
        )
    prefix = src.prefix(state.options.questions_for("fpvg"))
    questions_file = src.prefix_file(prefix, state.inputs / "fpvg_questions.json")
    rel_path = state.inputs / "relevance.json"
    summary = relevance(questions_file, scenes, src.data.detections_path, rel_path)
    summary.pop("out", None)  # RESULT_DIR/inputs/relevance.json
    sets = read_relevance(rel_path)
    qids = [q for q in prefix if q in sets and sets[q][2] is None]
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
    fs = GroundingRuns(qids, prefix, rel, irrel, rel_path, sets, summary, answers, files)
    state.memo["fpvg"] = fs
    return fs
