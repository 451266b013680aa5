"""The VQA v2 suites of ``vqadiag diagnose``: complementary pairs and consistency.

* ``pairs`` — the model on both questions of every complementary pair of the
  split (``vqadiag score pairs``, SPEC.md §2);
* ``consistency`` — the model on the VQA-introspect main (Reasoning) questions
  and their deduplicated sub-questions, whose ids are
  :func:`vqadiag.data.introspect.sub_question_id` (``"<main>_<k>"``), scored by
  ``vqadiag score consistency`` (SPEC.md §6); with attention, also the Pearson
  correlation of main and sub attention over the image's objects
  (:func:`vqadiag.metrics.consistency.attention_correlation`, the paper's
  "Attention Correlation"; Pearson as in that function).

Questions become GQA-like records through :class:`~vqadiag.models.vqa2_data.VQA2Data`
(feature image ids via the world's image map).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from vqadiag.api.diagnose_common import (
    DiagnoseState,
    SuiteOutput,
    SuiteSkipped,
    estimate_of,
    hash_order,
    write_predictions,
)
from vqadiag.api.diagnose_gqa import needs_visual
from vqadiag.data.jsonio import read_json, write_json
from vqadiag.errors import DataError
from vqadiag.metrics.bootstrap import mean_ci
from vqadiag.probes.conditions import Condition, Probe
from vqadiag.probes.runner import ProbeContext


def _vqa_data(state: DiagnoseState) -> Any:
    """The VQA v2 data of the split with annotations, made once (skips when absent)."""
    if "vqa2" in state.memo:
        return state.memo["vqa2"]
    from vqadiag.models.vqa2_data import VQA2Data

    data = VQA2Data(state.data_root)
    split = state.options.split
    try:
        data.questions_path(split)
    except DataError:
        raise SuiteSkipped(f"no VQA v2 questions for split {split!r}") from None
    if data.annotations_path(split) is None:
        raise SuiteSkipped(f"no VQA v2 annotations for split {split!r}")
    state.memo["vqa2"] = data
    return data


def _ctx(state: DiagnoseState, data: Any) -> ProbeContext:
    return state.context("vqa2", data)


def _probe(qid: str, record: Mapping[str, Any], question: str | None = None) -> Probe:
    return Probe(qid, question or record["question"], str(record["imageId"]), record)


# ----------------------------------------------------------------- pairs
def pairs_suite(state: DiagnoseState) -> SuiteOutput:
    """Complementary-pair figures (``vqadiag score pairs``): both correct, identical, different.

    ``--max-questions`` keeps pairs in a fixed pseudo-random order until their
    questions reach the limit. Per-question rows: one per pair, ``id = "qa|qb"``,
    ``values.pair_both_correct`` = [acc(qa) ≥ τ ∧ acc(qb) ≥ τ], ``pair_identical`` and
    ``pair_both_exact`` (both answers equal the canonical ``multiple_choice_answer``).
    """
    from vqadiag.api.vqa import score_pairs
    from vqadiag.data.vqa2 import read_pairs
    from vqadiag.metrics.pairs import DEFAULT_PAIR_THRESHOLD
    from vqadiag.metrics.vqa_accuracy import vqa_accuracies
    from vqadiag.metrics.vqa_normalize import normalize_answer

    needs_visual(state)
    data = _vqa_data(state)
    split = state.options.split
    name = data.questions_path(split).name.replace("v2_OpenEnded_mscoco_", "v2_mscoco_")
    pairs_path = data.vqa_dir / name.replace("_questions.json", "_complementary_pairs.json")
    if not pairs_path.is_file():
        raise SuiteSkipped(f"no complementary pairs file ({pairs_path.name})")
    records = data.questions(split)
    pairs = read_pairs(pairs_path, records)
    limit = state.options.max_questions
    if limit is not None:
        by_key = {f"{a}|{b}": (a, b) for a, b in pairs}
        chosen = set(hash_order(by_key)[: max(1, limit // 2)])
        pairs = [p for p in pairs if f"{p[0]}|{p[1]}" in chosen]
    if not pairs:
        raise SuiteSkipped("no complementary pairs")
    pairs_file = write_json(state.inputs / "vqa2_pairs.json", [list(p) for p in pairs])
    qids = list(dict.fromkeys(q for p in pairs for q in p))
    probes = [_probe(q, records[q]) for q in qids]
    run = state.run(_ctx(state, data), Condition("vqa2.all", "plain"), probes)
    preds = write_predictions(state, "pairs", "all", qids, run.answers)
    o = state.options
    result = score_pairs(
        data.annotations_path(split), pairs_file, preds, seed=o.seed, n_bootstrap=o.n_bootstrap
    )
    answer_of = {q: a.answer for q, a in zip(qids, run.answers, strict=True)}
    acc = vqa_accuracies([answer_of[q] for q in qids], [records[q]["answers"] for q in qids])
    acc_of = dict(zip(qids, acc.tolist(), strict=True))
    rows = []
    for a, b in pairs:
        both = acc_of[a] >= DEFAULT_PAIR_THRESHOLD and acc_of[b] >= DEFAULT_PAIR_THRESHOLD
        same = normalize_answer(answer_of[a]) == normalize_answer(answer_of[b])
        rows.append(
            {
                "suite": "pairs",
                "id": f"{a}|{b}",
                "qid": [a, b],
                "image_id": [records[a]["image_id"], records[b]["image_id"]],
                "question": records[a]["question"],
                "truth": [records[a].get("answer"), records[b].get("answer")],
                "answers": {"a": answer_of[a], "b": answer_of[b]},
                "values": {
                    "pair_both_correct": int(both),
                    "pair_identical": int(same),
                    "pair_both_exact": int(
                        answer_of[a] == records[a].get("answer")
                        and answer_of[b] == records[b].get("answer")
                    ),
                    "vqa_accuracy_a": acc_of[a],
                    "vqa_accuracy_b": acc_of[b],
                },
            }
        )
    return SuiteOutput(
        result, rows, {"pair_both_correct": estimate_of(result["ci"], "both_correct")}
    )


# ----------------------------------------------------------------- consistency
def consistency_suite(state: DiagnoseState) -> SuiteOutput:
    """Reasoning / perception consistency on VQA-introspect (``vqadiag score consistency``).

    Mains (``--max-questions``: a fixed pseudo-random subset) are scored with
    their VQA v2 annotations (VQA accuracy ≥ 1) when every main has one, else by
    normalized match with ``reasoning_answer_most_common``; sub-questions by
    normalized match. Rows: ``id = "main|sub"``; ``values.reasoning_consistency``
    (the sub's correctness) only on rows whose main is correct, so its mean is
    the consistency M✓S✓ / (M✓S✓ + M✓S✗).
    """
    from vqadiag.api.consistency import normalized_match, score_consistency
    from vqadiag.data.introspect import read_introspect
    from vqadiag.metrics.consistency import attention_correlation
    from vqadiag.metrics.vqa_accuracy import vqa_accuracies

    needs_visual(state)
    split = state.options.split
    path = state.data_root / "introspect" / f"VQAIntrospect_{split}v1.0.json"
    if not path.is_file():
        raise SuiteSkipped(f"no introspect data ({path.name})")
    data = _vqa_data(state)
    raw = read_json(path)
    intro = read_introspect(path)
    main_ids = list(intro.mains)
    limit = state.options.max_questions
    if limit is not None:
        chosen = set(hash_order(main_ids)[: max(1, limit // 4)])
        main_ids = [q for q in main_ids if q in chosen]
        subset = {q: raw[q] for q in raw if str(q).strip() in chosen}
        path = write_json(state.inputs / "introspect.json", subset)
        intro = read_introspect(path)
    vqa = data.questions(split)
    vqa_path = data.questions_path(split)

    def record_of(qid: str, question: str, image: Any) -> dict[str, Any]:
        if qid in vqa:
            return vqa[qid]
        feature_id = data.feature_image_id(str(image), vqa_path, qid)
        return {"question": question, "imageId": feature_id, "image_id": str(image)}

    mains = [intro.mains[q] for q in main_ids]
    subs = [s for m in mains for s in m.subs]
    main_probes = [
        _probe(m.main_id, record_of(m.main_id, m.question, m.image_id), m.question) for m in mains
    ]
    sub_probes = [
        _probe(
            s.sub_id, record_of(s.sub_id, s.question, intro.mains[s.main_id].image_id), s.question
        )
        for s in subs
    ]
    ctx = _ctx(state, data)
    main_run = state.run(ctx, Condition("introspect.main", "plain"), main_probes)
    sub_run = state.run(ctx, Condition("introspect.sub", "plain"), sub_probes)
    main_file = write_predictions(state, "consistency", "main", main_ids, main_run.answers)
    sub_file = write_predictions(
        state, "consistency", "sub", [s.sub_id for s in subs], sub_run.answers
    )
    annotated = all(q in vqa and "answers" in vqa[q] for q in main_ids)
    o = state.options
    result = score_consistency(
        path,
        main_file,
        sub_file,
        annotations=data.annotations_path(split) if annotated else None,
        seed=o.seed,
        n_bootstrap=o.n_bootstrap,
    )
    main_answer = {q: a for q, a in zip(main_ids, main_run.answers, strict=True)}
    if annotated:
        scores = vqa_accuracies(
            [main_answer[q].answer for q in main_ids], [vqa[q]["answers"] for q in main_ids]
        )
        main_ok = dict(zip(main_ids, (scores >= 1.0 - 1e-9).tolist(), strict=True))
    else:
        ok = normalized_match([main_answer[q].answer for q in main_ids], [m.answer for m in mains])
        main_ok = dict(zip(main_ids, ok.tolist(), strict=True))
    sub_ok = normalized_match([a.answer for a in sub_run.answers], [s.answer for s in subs])
    corr = None
    if state.model.capabilities.attention:
        corr = np.array(
            [
                _pair_correlation(main_answer[s.main_id].vector, a.vector, attention_correlation)
                for s, a in zip(subs, sub_run.answers, strict=True)
            ]
        )
        finite = corr[np.isfinite(corr)]
        est = mean_ci(finite, scale=1.0, n_resamples=o.n_bootstrap, seed=o.seed).to_dict()
        result["attention_correlation"] = est["value"]
        result["ci"]["attention_correlation"] = est
    rows = []
    for i, (s, a) in enumerate(zip(subs, sub_run.answers, strict=True)):
        m_ok = int(main_ok[s.main_id])
        values: dict[str, Any] = {"main_correct": m_ok, "sub_correct": int(sub_ok[i])}
        if m_ok:
            values["reasoning_consistency"] = int(sub_ok[i])
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
            }
        )
    summary = {"reasoning_consistency": estimate_of(result["ci"], "consistency")}
    return SuiteOutput(result, rows, summary)


def _pair_correlation(main: Any, sub: Any, fn: Any) -> float:
    if main is None or sub is None or len(main) != len(sub) or len(main) < 2:
        return float("nan")
    return float(fn(np.asarray(main), np.asarray(sub))[0])
