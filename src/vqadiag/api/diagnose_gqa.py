"""The GQA suites of ``vqadiag diagnose``: accuracy, ood, fpvg, importance, robustness.

Every suite runs its conditions through the prediction store, writes each
condition's predictions to ``RESULT_DIR/predictions/<suite>/<condition>.json`` and
scores them with the same function as the ``vqadiag score`` command
(:func:`~vqadiag.api.gqa.score_gqa`, :func:`~vqadiag.api.gqa.score_ood`,
:func:`~vqadiag.api.fpvg.relevance` + :func:`~vqadiag.api.fpvg.score_fpvg`,
:func:`~vqadiag.api.robustness.score_robustness`), so a diagnose run and the
scoring commands can never disagree. The questions are the balanced questions
of the split (``--max-questions``: a fixed pseudo-random subset), written to
``RESULT_DIR/inputs/gqa_questions.json`` for the scorers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.api.diagnose_common import (
    FPVG_KEYS,
    IMPORTANCE_METHODS,
    DiagnoseState,
    SuiteOutput,
    SuiteSkipped,
    estimate_of,
    subsample,
    write_predictions,
)
from vqadiag.data.gqa import is_balanced
from vqadiag.data.jsonio import write_json
from vqadiag.errors import DataError, record_label
from vqadiag.metrics.bootstrap import mean_ci
from vqadiag.metrics.importance import ranking_match
from vqadiag.probes.conditions import Condition, Probe, donor_map
from vqadiag.probes.runner import ConditionRun, ProbeContext

N_PARTITIONS = 7


@dataclass
class GQASource:
    """The diagnosed GQA questions: data, ids, records and the subset file."""

    data: Any
    qids: list[str]
    records: dict[str, Mapping[str, Any]]
    questions_file: Path
    ctx: ProbeContext


def gqa_source(state: DiagnoseState) -> GQASource:
    """The GQA questions of the split (balanced, subsampled), made once per run."""
    if "gqa" in state.memo:
        return state.memo["gqa"]
    from vqadiag.models.data import GQAData

    data = GQAData(state.data_root)
    split = state.options.split
    try:
        data.questions_path(split)
    except DataError as err:
        raise SuiteSkipped(f"no GQA questions for split {split!r} ({err.path})") from None
    records = data.questions(split)
    balanced = [q for q, r in records.items() if is_balanced(r)]
    if not balanced:
        raise SuiteSkipped(f"no balanced GQA questions in split {split!r}")
    qids = subsample(balanced, state.options.max_questions)
    path = data.questions_path(split)
    for q in qids:
        for name in ("question", "imageId"):
            if not isinstance(records[q].get(name), (str, int)) or isinstance(
                records[q].get(name), bool
            ):
                raise DataError(path, f"missing or invalid field {name!r}", record_label(q))
    subset = {q: records[q] for q in qids}
    path = write_json(state.inputs / "gqa_questions.json", subset)
    donors = donor_map([str(records[q]["imageId"]) for q in qids])
    ctx = state.context("gqa", data, donors)
    source = GQASource(data, qids, subset, path, ctx)
    state.memo["gqa"] = source
    return source


def probe_of(record: Mapping[str, Any], qid: str, **kw: Any) -> Probe:
    """The plain probe of a GQA-like record (``kw``: keep / remove / ref / question)."""
    question = kw.pop("question", record["question"])
    return Probe(qid, question, str(record["imageId"]), record, **kw)


def plain_run(state: DiagnoseState) -> tuple[GQASource, ConditionRun]:
    """The model on every diagnosed GQA question with all objects (condition ``gqa.all``)."""
    src = gqa_source(state)
    needs_visual(state)
    probes = [probe_of(src.records[q], q) for q in src.qids]
    run = state.run(src.ctx, Condition("gqa.all", "plain"), probes)
    return src, run


def needs_visual(state: DiagnoseState) -> None:
    """Skip when the model needs an input this data cannot give (pixels)."""
    visual = state.model.capabilities.visual
    if visual not in ("objects", "none"):
        raise SuiteSkipped(f"model needs {visual} input; diagnose feeds detector objects")


def _correct(answer: str, record: Mapping[str, Any]) -> int:
    return int(answer == record.get("answer"))


def _row(suite: str, qid: str, record: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "suite": suite,
        "id": qid,
        "qid": qid,
        "image_id": str(record.get("imageId")),
        "question": record.get("question"),
        "truth": record.get("answer"),
        **extra,
    }


# ----------------------------------------------------------------- accuracy
def accuracy_suite(state: DiagnoseState) -> SuiteOutput:
    """GQA's official metrics (``vqadiag score gqa``) of the plain run (SPEC.md §7)."""
    from vqadiag.api.gqa import score_gqa

    src, run = plain_run(state)
    preds = write_predictions(state, "accuracy", "all", src.qids, run.answers)
    choices = src.data.gqa_dir / f"{state.options.split}_choices.json"
    o = state.options
    result = score_gqa(
        src.questions_file,
        preds,
        choices=choices if choices.is_file() else None,
        seed=o.seed,
        n_bootstrap=o.n_bootstrap,
    )
    rows = [
        _row(
            "accuracy",
            q,
            src.records[q],
            answers={"all": a.answer},
            values={"accuracy": _correct(a.answer, src.records[q])},
        )
        for q, a in zip(src.qids, run.answers, strict=True)
    ]
    return SuiteOutput(result, rows, {"accuracy": estimate_of(result["ci"], "accuracy")})


# ----------------------------------------------------------------- ood
def ood_suite(state: DiagnoseState) -> SuiteOutput:
    """GQA-OOD head / tail, Δ and the acc-tail curve (``vqadiag score ood --curve``, SPEC §3)."""
    from vqadiag.api.gqa import score_ood
    from vqadiag.metrics.gqa_ood import DEFAULT_ALPHA, ood_groups

    src, run = plain_run(state)
    preds = write_predictions(state, "ood", "all", src.qids, run.answers)
    o = state.options
    result = score_ood(
        src.questions_file, preds, curve=True, seed=o.seed, n_bootstrap=o.n_bootstrap
    )
    split = ood_groups(src.records, balanced_only=True).split(DEFAULT_ALPHA)
    answer_of = {q: a.answer for q, a in zip(src.qids, run.answers, strict=True)}
    rows = []
    for key, ids in (("acc_head", split.head_ids), ("acc_tail", split.tail_ids)):
        for q in ids:
            rec = src.records[q]
            rows.append(
                _row(
                    "ood",
                    q,
                    rec,
                    answers={"all": answer_of[q]},
                    values={key: _correct(answer_of[q], rec)},
                )
            )
    ci = result["ci"]
    summary = {k: estimate_of(ci, k) for k in ("acc_head", "acc_tail", "delta")}
    return SuiteOutput(result, rows, summary)


# ----------------------------------------------------------------- fpvg
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
    if state.model.name == "files":
        raise SuiteSkipped(f"prediction files answer only the plain condition ({what})")
    needs_visual(state)
    if caps.visual == "objects" and state.options.replacement == "drop" and not caps.object_masking:
        raise SuiteSkipped(
            "model does not honour object masks (use --replacement zeros|minus-one|other-images)"
        )


def fpvg_state(state: DiagnoseState) -> FPVGState:
    """Relevance (``vqadiag relevance``) and the all / relevant / irrelevant runs (SPEC §5)."""
    if "fpvg" in state.memo:
        return state.memo["fpvg"]
    from vqadiag.api.fpvg import relevance
    from vqadiag.data.relevance_files import read_relevance

    _check_objects(state, "FPVG needs the model under removed objects")
    src, all_run = plain_run(state)
    scenes = src.data.gqa_dir / f"{state.options.split}_sceneGraphs.json"
    if not scenes.is_file():
        raise SuiteSkipped(f"no scene graphs for split {state.options.split!r} ({scenes.name})")
    rel_path = state.inputs / "relevance.json"
    summary = relevance(src.questions_file, scenes, src.data._detections_path, rel_path)
    summary.pop("out", None)  # RESULT_DIR/inputs/relevance.json
    sets = read_relevance(rel_path)
    qids = [q for q in src.qids if q in sets and sets[q][2] is None]
    if not qids:
        raise SuiteSkipped("no question has both relevant and irrelevant detected boxes")
    rel = {q: list(sets[q][0]) for q in qids}
    irrel = {q: list(sets[q][1]) for q in qids}
    answer_of = dict(zip(src.qids, all_run.answers, strict=True))
    params = {"replacement": state.options.replacement}
    answers: dict[str, list[Any]] = {"all": [answer_of[q] for q in qids]}
    for name, sets_of in (("rel", rel), ("irrel", irrel)):
        probes = [
            probe_of(src.records[q], q, keep=tuple(sets_of[q]), ref=answer_of[q].answer)
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
    from vqadiag.api.fpvg import score_fpvg

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
    rows = []
    for i, q in enumerate(fs.qids):
        rec = src.records[q]
        a_all, a_rel, a_irrel = (fs.runs[k][i] for k in ("all", "rel", "irrel"))
        plus = int(a_all.answer == a_rel.answer and a_all.answer != a_irrel.answer)
        ok = _correct(a_all.answer, rec)
        values: dict[str, Any] = {
            "fpvg_plus": plus,
            "fpvg_plus_correct": plus * ok,
            "fpvg_plus_wrong": plus * (1 - ok),
            "fpvg_minus_correct": (1 - plus) * ok,
            "fpvg_minus_wrong": (1 - plus) * (1 - ok),
            "acc_all": ok,
            "acc_rel": _correct(a_rel.answer, rec),
            "acc_irrel": _correct(a_irrel.answer, rec),
        }
        if a_all.p_answer is not None and a_rel.p_ref is not None and a_irrel.p_ref is not None:
            values["suff"] = a_all.p_answer - a_rel.p_ref
            values["comp"] = a_all.p_answer - a_irrel.p_ref
        rows.append(
            _row(
                "fpvg",
                q,
                rec,
                answers={"all": a_all.answer, "rel": a_rel.answer, "irrel": a_irrel.answer},
                values=values,
                relevant=fs.relevant[q],
                irrelevant=fs.irrelevant[q],
            )
        )
    ci = result["ci"]
    return SuiteOutput(result, rows, {k: estimate_of(ci, k) for k in FPVG_KEYS})


# ----------------------------------------------------------------- importance
def _scores_by_method(
    state: DiagnoseState, src: GQASource, fs: FPVGState, skipped: dict[str, str]
) -> dict[str, list[np.ndarray]]:
    caps = state.model.capabilities
    ctx = src.ctx
    out: dict[str, list[np.ndarray]] = {}
    all_answers = fs.runs["all"]
    if not caps.attention:
        skipped["attention"] = "model has no attention"
    else:
        vectors = [a.vector for a in all_answers]
        if any(v is None for v in vectors):
            skipped["attention"] = "model returned no attention"
        else:
            out["attention"] = [np.asarray(v, np.float64) for v in vectors]
    if caps.visual != "objects":
        skipped["loo"] = "model does not see objects"
    elif not caps.probabilities:
        skipped["loo"] = "model has no probabilities"
    else:
        probes, owner = [], []
        for i, q in enumerate(fs.qids):
            rec = src.records[q]
            for j in range(ctx.n_objects(str(rec["imageId"]))):
                probes.append(probe_of(rec, q, remove=(j,), ref=all_answers[i].answer))
                owner.append(i)
        params = {"replacement": state.options.replacement}
        run = state.run(ctx, Condition("gqa.loo", "objects", params), probes)
        scores: list[list[float]] = [[] for _ in fs.qids]
        for i, a in zip(owner, run.answers, strict=True):
            scores[i].append(float(all_answers[i].p_answer or 0.0) - float(a.p_ref or 0.0))
        out["loo"] = [np.asarray(s, np.float64) for s in scores]
    if not caps.gradients or not hasattr(state.model, "object_gradients"):
        skipped["gradcam"] = "model has no gradients"
    else:
        probes = [
            probe_of(src.records[q], q, ref=all_answers[i].answer) for i, q in enumerate(fs.qids)
        ]
        run = state.run(ctx, Condition("gqa.gradcam", "gradcam"), probes)
        out["gradcam"] = [np.asarray(a.vector, np.float64) for a in run.answers]
    return out


def importance_suite(state: DiagnoseState) -> SuiteOutput:
    """Ranking match of attention / LOO / GradCAM importance with relevance (SPEC.md §5).

    Per question: relevant score = |topN ∩ relN| / N, irrelevant score =
    |topM ∩ irrelM| / M (:func:`~vqadiag.metrics.importance.ranking_match`),
    over the objects in the model input; means in percent over FPVG+, FPVG− and
    all FPVG questions, each with its bootstrap interval (paper Table 1).
    LOO_j = p_â(all) − p_â(all but object j), â = the all-objects answer.
    """
    fs = fpvg_state(state)
    src = gqa_source(state)
    skipped: dict[str, str] = {}
    methods = _scores_by_method(state, src, fs, skipped)
    if not methods:
        raise SuiteSkipped("; ".join(f"{m}: {r}" for m, r in skipped.items()))
    plus = np.array(
        [
            a.answer == r.answer and a.answer != i.answer
            for a, r, i in zip(fs.runs["all"], fs.runs["rel"], fs.runs["irrel"], strict=True)
        ],
        dtype=bool,
    )
    o = state.options
    result: dict[str, Any] = {"methods": {}, "n": len(fs.qids), "skipped_methods": skipped}
    per_q: dict[str, dict[str, float]] = {q: {} for q in fs.qids}
    for method, scores in methods.items():
        match = np.full((len(fs.qids), 2), np.nan)
        for i, q in enumerate(fs.qids):
            s = scores[i]
            n = s.shape[0]
            rel = [j for j in fs.relevant[q] if j < n]
            irrel = [j for j in fs.irrelevant[q] if j < n]
            match[i] = ranking_match(s, rel, irrel) if n else (np.nan, np.nan)
        entry: dict[str, Any] = {}
        for col, key in enumerate(("relevant_score", "irrelevant_score")):
            entry[key] = {}
            for group, mask in (("fpvg_plus", plus), ("fpvg_minus", ~plus), ("all", None)):
                vals = match[:, col] if mask is None else match[mask, col]
                vals = vals[np.isfinite(vals)]
                est = mean_ci(vals, n_resamples=o.n_bootstrap, seed=o.seed)
                entry[key][group] = est.to_dict()
            for i, q in enumerate(fs.qids):
                if np.isfinite(match[i, col]):
                    per_q[q][f"{method}_{key}"] = float(match[i, col])
        result["methods"][method] = entry
    result["replacement"] = o.replacement
    rows = [
        _row("importance", q, src.records[q], fpvg=int(plus[i]), values=per_q[q])
        for i, q in enumerate(fs.qids)
    ]
    summary = {
        f"{m}_relevant_score": result["methods"][m]["relevant_score"]["all"]
        for m in IMPORTANCE_METHODS
        if m in result["methods"]
    }
    return SuiteOutput(result, rows, summary)


# ----------------------------------------------------------------- robustness
def _bqd_records(state: DiagnoseState, src: GQASource) -> tuple[list[dict[str, Any]], dict]:
    """The basic-question dataset: ``--bqd`` or a General BQD built (and cached) here."""
    o = state.options
    if o.bqd is not None:
        try:
            from vqadiag.data.bqd import read_bqd
        except ImportError:
            raise SuiteSkipped("basic-question datasets need vqadiag.data.bqd") from None
        return read_bqd(o.bqd), {"path": str(o.bqd), "built": False}
    try:
        from vqadiag.api.bq import build_bqd
        from vqadiag.data.bqd import read_bqd
    except ImportError:
        raise SuiteSkipped("no --bqd and basic-question ranking is not available") from None
    try:
        pool = src.data.questions_path("train")
    except DataError:
        raise SuiteSkipped(
            "no --bqd and no GQA train questions for the basic-question pool"
        ) from None
    from vqadiag.probes.fingerprints import stable_hash

    out = state.out / "bqd.json"
    stat = pool.stat()
    key = stable_hash(
        {
            "pool": [str(pool), stat.st_size, stat.st_mtime_ns],
            "main": src.qids,
            "ranker": o.bq_ranker,
            "seed": o.seed,
        }
    )
    meta_path = state.out / "bqd.meta.json"
    meta = {"key": key, "pool": str(pool), "ranker": o.bq_ranker, "embedder": "lsa"}
    cached = False
    if out.is_file() and meta_path.is_file():
        from vqadiag.data.jsonio import read_json

        cached = read_json(meta_path).get("key") == key
    if not cached:
        build_bqd(
            [pool], src.questions_file, out, ranker=o.bq_ranker, seed=o.seed, progress=o.progress
        )
        write_json(meta_path, meta)
    return read_bqd(out), {"path": out.name, "built": True, "cached": cached, **meta}


def robustness_suite(state: DiagnoseState) -> SuiteOutput:
    """Accuracy under the 7 basic-question noise partitions, Acc_diff, R_score (SPEC.md §4).

    Noisy condition k: same image and objects, question text = the main question
    followed by the 3 basic questions of partition k (``noise_partitions``).
    """
    from vqadiag.api.robustness import score_robustness

    if state.model.name == "files":
        raise SuiteSkipped("prediction files answer only the plain condition (noisy questions)")
    src, clean = plain_run(state)
    records, bqd_info = _bqd_records(state, src)
    from vqadiag.questions.noise import noise_partitions

    partitions = noise_partitions(records, partitions=N_PARTITIONS)
    qids = [q for q in src.qids if all(q in part for part in partitions)]
    if not qids:
        raise SuiteSkipped("the basic-question dataset covers none of the diagnosed questions")
    clean_of = dict(zip(src.qids, clean.answers, strict=True))
    answers = {"clean": [clean_of[q] for q in qids]}
    for k, part in enumerate(partitions, start=1):
        probes = [probe_of(src.records[q], q, question=part[q]) for q in qids]
        run = state.run(src.ctx, Condition(f"gqa.noise_{k}", "text", {"partition": k}), probes)
        answers[f"noise_{k}"] = run.answers
    files = {k: write_predictions(state, "robustness", k, qids, v) for k, v in answers.items()}
    ids_file = write_json(state.inputs / "robustness_questions.json", qids)
    o = state.options
    result = score_robustness(
        src.questions_file,
        files["clean"],
        [files[f"noise_{k}"] for k in range(1, len(partitions) + 1)],
        questions=ids_file,
        seed=o.seed,
        n_bootstrap=o.n_bootstrap,
    )
    result["bqd"] = bqd_info
    rows = []
    for i, q in enumerate(qids):
        rec = src.records[q]
        ans = {k: v[i].answer for k, v in answers.items()}
        values = {f"correct_{k}": _correct(a, rec) for k, a in ans.items()}
        rows.append(_row("robustness", q, rec, answers=ans, values=values))
    ci = result["ci"]
    summary = {
        "r_score": estimate_of(ci, "r_score"),
        "noise_accuracy": [dict(p["accuracy"]) for p in ci["partitions"]],
    }
    return SuiteOutput(result, rows, summary)
