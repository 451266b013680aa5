"""Suite ``importance``: do attention / leave-one-out / GradCAM rank the relevant objects on
top? Ranking match with FPVG's relevance, by FPVG+ and FPVG− (docs/protocols.md §5)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from vqadiag.metrics.bootstrap import mean_ci
from vqadiag.probes.conditions import Condition
from vqadiag.protocols.importance.formulas import FPVG_GROUPS, ranking_match
from vqadiag.protocols.importance.plots import PLOTS
from vqadiag.suites.base import (
    Figure,
    Suite,
    SuiteOutput,
    SuiteSkipped,
    SummaryTable,
    register_suite,
)
from vqadiag.suites.grounding import GroundingRuns, grounding_runs
from vqadiag.suites.sources import GQASource, gqa_source, probe_of, unit_row
from vqadiag.suites.state import DiagnoseState, subsample

#: the feature-importance methods, in display order
IMPORTANCE_METHODS = ("attention", "loo", "gradcam")
_METHOD_LABELS = {"attention": "attention", "loo": "LOO", "gradcam": "GradCAM"}


@register_suite
class ImportanceSuite(Suite):
    """% of relevant objects among the top-N scored objects, per method."""

    name = "importance"
    title = "Feature importance vs relevance"
    datasets = ("gqa", "gqa scene graphs", "gqa detections")
    conditions = ("gqa.all", "gqa.rel", "gqa.irrel", "gqa.loo", "gqa.gradcam")
    requires: ClassVar[Mapping[str, str]] = {
        "reruns": "prediction files answer only the plain condition "
        "(FPVG needs the model under removed objects)"
    }
    display_order = 40
    plots = PLOTS
    figures = tuple(
        Figure(f"{m}_relevant_score", f"relevant on top: {_METHOD_LABELS[m]}", bounded=False)
        for m in IMPORTANCE_METHODS
    )

    def summary_tables(self, result: Mapping[str, Any]) -> list[SummaryTable]:
        """The ranking match of every method on FPVG+ and FPVG− questions (%)."""
        from vqadiag.console.common import fmt_rate

        rows = [
            (method, *(
                fmt_rate(entry[kind][group])[0]
                for kind in ("relevant_score", "irrelevant_score")
                for group in FPVG_GROUPS
            ))
            for method, entry in result["methods"].items()
        ]  # fmt: skip
        columns = ("method", "relevant FPVG+", "relevant FPVG−", "irrelevant FPVG+",
                   "irrelevant FPVG−")  # fmt: skip
        return [SummaryTable("feature importance: ranking match (%)", columns, rows)]

    def run(self, state: DiagnoseState) -> SuiteOutput:
        return importance_suite(state)

    def not_run_reason(self, key: str, skipped: str | None, result: Any) -> str | None:
        """Why the figure ``key`` is missing: the method's own reason (a skipped suite's
        reason lists every method's, ``"attention: why; loo: why; …"``)."""
        method = key.removesuffix("_relevant_score")
        if skipped is not None:
            for part in (p.strip() for p in skipped.split(";")):
                if part.startswith(f"{method}: "):
                    return part.removeprefix(f"{method}: ")
            return skipped
        methods = result.get("skipped_methods") if isinstance(result, dict) else None
        if isinstance(methods, dict) and methods.get(method) is not None:
            return str(methods[method])
        return None


def _sampled(fs: GroundingRuns, limit: int | None) -> GroundingRuns:
    """The grounding runs of the first ``limit`` FPVG questions in the fixed order of
    ``--max-questions`` (``--importance-sample``; all of them without a limit)."""
    if limit is None or limit >= len(fs.qids):
        return fs
    keep = set(subsample(fs.qids, limit))
    at = [i for i, q in enumerate(fs.qids) if q in keep]
    return replace(
        fs, qids=[fs.qids[i] for i in at],
        runs={name: [answers[i] for i in at] for name, answers in fs.runs.items()},
    )  # fmt: skip


def _scores_by_method(
    state: DiagnoseState, src: GQASource, fs: GroundingRuns, skipped: dict[str, str]
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
    if not (caps.object_input or caps.pixel_input):
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
        params = state.removal_params()
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
    """Ranking match of attention / LOO / GradCAM importance with relevance (docs/protocols.md §5).

    Per question: relevant score = |topN ∩ relN| / N, irrelevant score =
    |topM ∩ irrelM| / M (:func:`~vqadiag.protocols.importance.formulas.ranking_match`),
    over the objects in the model input; means in percent over FPVG+, FPVG− and
    all FPVG questions, each with its bootstrap interval (paper Table 1).
    LOO_j = p_â(all) − p_â(all but object j), â = the all-objects answer.
    """
    fs = _sampled(grounding_runs(state), state.options.importance_sample)
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
    if o.importance_sample is not None:
        result["sample"] = {"questions": len(fs.qids), "limit": o.importance_sample,
                            "order": "the --max-questions order"}  # fmt: skip
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
            for group, mask in ((FPVG_GROUPS[0], plus), (FPVG_GROUPS[1], ~plus), ("all", None)):
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
        unit_row("importance", q, src.records[q], fpvg=int(plus[i]), values=per_q[q])
        for i, q in enumerate(fs.qids)
    ]
    summary = {
        f"{m}_relevant_score": result["methods"][m]["relevant_score"]["all"]
        for m in IMPORTANCE_METHODS
        if m in result["methods"]
    }
    return SuiteOutput(result, rows, summary)
