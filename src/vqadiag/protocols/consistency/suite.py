"""Suite ``consistency``: reasoning / perception consistency on VQA-introspect
(``vqadiag score consistency``, docs/protocols.md §6).

The model on the VQA-introspect main (Reasoning) questions and their
deduplicated sub-questions, whose ids are
:func:`vqadiag.data.formats.introspect.sub_question_id` (``"<main>_<k>"``); with
attention, also the Pearson correlation of main and sub attention over the
image's objects (:func:`vqadiag.protocols.consistency.formulas.attention_correlation`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.data.formats.introspect import (
    Introspect,
    SubQuestion,
    introspect_path,
    parse_introspect,
)
from vqadiag.data.io.jsonio import read_json, write_json
from vqadiag.errors import DataError, record_label
from vqadiag.metrics.bootstrap import mean_ci
from vqadiag.probes.conditions import Condition
from vqadiag.probes.store import Answer
from vqadiag.protocols.consistency.plots import PLOTS
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
    needs_visual,
    raw_texts,
    vqa_context,
    vqa_data,
    vqa_probe,
)
from vqadiag.suites.state import DiagnoseState, estimate_of, hash_order, write_predictions


@register_suite
class ConsistencySuite(Suite):
    """M✓S✓ / (M✓S✓ + M✓S✗): sub-questions right when the main question is right."""

    name = "consistency"
    title = "Reasoning / perception consistency (VQA-introspect)"
    datasets = ("vqa2", "introspect")
    conditions = ("introspect.main", "introspect.sub")
    display_order = 70
    own_prefix = True
    plots = PLOTS
    figures = (Figure("reasoning_consistency", "reasoning consistency", clusters=True),)
    findings = (
        FindingRule(
            "reasoning_consistency", 50.0, "below", "reasoning not backed by perception",
            "reasoning consistency {value} [{ci}] below 50: right reasoning answers, "
            "wrong perception sub-answers",
            tone="bad",
        ),
    )  # fmt: skip
    drilldown = Drilldown(
        "Inconsistent: main question right, sub-question wrong",
        is_zero("reasoning_consistency"),
    )

    def run(self, state: DiagnoseState) -> SuiteOutput:
        return consistency_suite(state)


def _mains_annotated(
    vqa: Mapping[str, Mapping[str, Any]],
    main_ids: Sequence[str],
    path: Path,
    annotations: Path | None,
) -> bool:
    """Whether every main question has its VQA v2 annotation (its answers are then scored
    with VQA accuracy), or none has (no annotations: a normalized match). Some without
    is one line naming the first: scoring them all by the match instead would change the
    rule for every main without a word, as ``score consistency`` refuses too."""
    missing = [q for q in main_ids if q not in vqa or "answers" not in vqa[q]]
    if missing and len(missing) < len(main_ids):
        where = getattr(annotations, "name", "the VQA v2 annotations")
        raise DataError(
            path, f"main question has no annotation in {where} ({len(missing)} of "
            f"{len(main_ids)} diagnosed mains have none)", record_label(missing[0]),
        )  # fmt: skip
    return not missing


def consistency_suite(state: DiagnoseState) -> SuiteOutput:
    """Reasoning / perception consistency on VQA-introspect (``vqadiag score consistency``).

    Mains (``--max-questions``: a fixed pseudo-random subset) are scored with
    their VQA v2 annotations (VQA accuracy ≥ 1) when every main has one, by normalized
    match with ``reasoning_answer_most_common`` when none has (some without is refused);
    sub-questions by normalized match. Rows: ``id = "main|sub"``; ``values.reasoning_consistency``
    (the sub's correctness) only on rows whose main is correct, so its mean is
    the consistency M✓S✓ / (M✓S✓ + M✓S✗). Scored from the runs' answers in memory;
    the prediction files (and the diagnosed subset of the introspect file) are written
    for ``vqadiag score consistency`` to re-score.
    """
    from vqadiag.protocols.consistency.score import ConsistencyInputs, score_answers

    split = state.options.split
    path = introspect_path(state.data_root, split)
    if not path.is_file():
        raise SuiteSkipped(f"no introspect data ({path.name})")
    data = vqa_data(state)
    needs_visual(state, data)
    intro, record_of = _diagnosed_introspect(state, data, path)
    main_ids = list(intro.mains)
    subs = list(intro.subs.values())
    main_probes = [
        vqa_probe(q, record_of(q, m.question, m.image_id), m.question)
        for q, m in intro.mains.items()
    ]
    sub_probes = [
        vqa_probe(
            s.sub_id,
            record_of(s.sub_id, s.question, intro.mains[s.main_id].image_id, s.semantic),
            s.question,
        )
        for s in subs
    ]
    vqa = data.questions(split)
    annotated = _mains_annotated(vqa, main_ids, path, data.annotations_path(split))
    ctx = vqa_context(state, data)
    main_run = state.run(ctx, Condition("introspect.main", "plain"), main_probes)
    sub_run = state.run(ctx, Condition("introspect.sub", "plain"), sub_probes)
    write_predictions(state, "consistency", "main", main_ids, main_run.answers)
    write_predictions(state, "consistency", "sub", [s.sub_id for s in subs], sub_run.answers)
    o = state.options
    # the mains' annotator answers, as the VQA v2 records hold them: the annotations file
    # is not read a second time, whole, for the mains alone
    inputs = ConsistencyInputs(
        intro,
        {q: {"answer_list": vqa[q]["answers"]} for q in main_ids} if annotated else None,
        data.annotations_path(split) if annotated else None,
    )
    score = score_answers(
        inputs,
        [a.answer for a in main_run.answers],
        [a.answer for a in sub_run.answers],
        seed=o.seed,
        n_bootstrap=o.n_bootstrap,
    )
    result = score.to_dict()
    main_answer = dict(zip(main_ids, main_run.answers, strict=True))
    corr = _attention_correlations(state, subs, main_answer, sub_run.answers, result)
    rows = _rows(intro, subs, main_answer, sub_run.answers, score.units, corr)
    summary = {"reasoning_consistency": estimate_of(result["ci"], "consistency")}
    return SuiteOutput(result, rows, summary)


def _diagnosed_introspect(
    state: DiagnoseState, data: Any, path: Path
) -> tuple[Introspect, Callable[..., dict[str, Any]]]:
    """The introspect questions diagnosed (``--max-questions``' subset of the mains whose
    images exist; the subset is written to ``inputs/introspect.json``) and the probe
    record of a question id (its VQA v2 record, or one made from the introspect file,
    with the sub-question's program as ``semantic`` when the file gives one)."""
    split = state.options.split
    raw = read_json(path)
    intro = parse_introspect(raw, path)
    main_ids = list(intro.mains)
    vqa = data.questions(split)

    def record_of(qid: str, question: str, image: Any, program: Any = None) -> dict[str, Any]:
        if qid in vqa:
            return vqa[qid]
        feature_id = data.feature_image_id(str(image), path, qid)  # the image the file names
        record = {"question": question, "imageId": feature_id, "image_id": str(image)}
        if program:
            record["semantic"] = list(program)
        return record

    limit = state.options.questions_for("consistency")
    chosen = set(main_ids)
    if limit is not None:
        chosen = set(hash_order(main_ids)[: max(1, limit // 4)])
    image_of = {
        q: str(record_of(q, intro.mains[q].question, intro.mains[q].image_id)["imageId"])
        for q in main_ids
        if q in chosen
    }
    chosen = set(state.drop_missing_images(list(image_of), image_of, data))
    if len(chosen) < len(main_ids):
        subset = {q: raw[q] for q in raw if str(q).strip() in chosen}
        intro = parse_introspect(subset, write_json(state.inputs / "introspect.json", subset))
    return intro, record_of


def _attention_correlations(
    state: DiagnoseState,
    subs: Sequence[SubQuestion],
    main_answer: Mapping[str, Answer],
    sub_answers: Sequence[Answer],
    result: dict[str, Any],
) -> np.ndarray | None:
    """Per pair, the correlation of the main's and the sub's attention (models with
    attention); adds its mean and interval to ``result``."""
    if not state.model.capabilities.attention:
        return None
    from vqadiag.protocols.consistency.formulas import attention_correlation

    corr = np.array(
        [
            _pair_correlation(main_answer[s.main_id].vector, a.vector, attention_correlation)
            for s, a in zip(subs, sub_answers, strict=True)
        ]
    )
    o = state.options
    finite = corr[np.isfinite(corr)]
    est = mean_ci(finite, scale=1.0, n_resamples=o.n_bootstrap, seed=o.seed).to_dict()
    result["attention_correlation"] = est["value"]
    result["ci"]["attention_correlation"] = est
    return corr


def _rows(
    intro: Introspect,
    subs: Sequence[SubQuestion],
    main_answer: Mapping[str, Answer],
    sub_answers: Sequence[Answer],
    units: Mapping[str, Any],
    corr: np.ndarray | None,
) -> list[dict[str, Any]]:
    """One per-question row per (main, sub) pair (module docstring of the suite)."""
    main_ok = units["main_correct"]
    sub_ok_of = dict(zip(units["pairs"], units["sub_correct"].tolist(), strict=True))
    rows = []
    for i, (s, a) in enumerate(zip(subs, sub_answers, strict=True)):
        m_ok = int(main_ok[s.main_id])
        s_ok = int(sub_ok_of[(s.main_id, s.sub_id)])
        values: dict[str, Any] = {"main_correct": m_ok, "sub_correct": s_ok}
        if m_ok:
            values["reasoning_consistency"] = s_ok
        if corr is not None and np.isfinite(corr[i]):
            values["attention_correlation"] = float(corr[i])
        main = intro.mains[s.main_id]
        rows.append(
            {
                "suite": "consistency",
                "id": f"{s.main_id}|{s.sub_id}",
                "qid": s.main_id,
                "sub_id": s.sub_id,
                "image_id": str(main.image_id),
                "question": main.question,
                "sub_question": s.question,
                "truth": main.answer,
                "sub_truth": s.answer,
                "answers": {"main": main_answer[s.main_id].answer, "sub": a.answer},
                "values": values,
                **raw_texts({"main": main_answer[s.main_id], "sub": a}),
            }
        )
    return rows


def _pair_correlation(main: Any, sub: Any, fn: Any) -> float:
    if main is None or sub is None or len(main) != len(sub) or len(main) < 2:
        return float("nan")
    return float(fn(np.asarray(main), np.asarray(sub))[0])
