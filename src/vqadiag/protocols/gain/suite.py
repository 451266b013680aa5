"""Suite ``gain``: the model asked the same questions without its image, on GQA and on
VQA v2 (docs/diagnose.md, "The model without its image"; formulas: docs/protocols.md §9).

The no-image condition (:mod:`vqadiag.probes.no_image`: text alone, a blank image, or no
objects, whichever the model allows) runs beside the plain run on the same questions:
GQA's diagnosed questions (``gqa.all``, shared with the accuracy suite) and every
annotated VQA v2 question of the split (``vqa2.questions``; ``--max-questions`` keeps a
fixed pseudo-random subset). The figures are the multi-modal gains in points with their
paired 95% intervals; each one's test of gain = 0 (McNemar's exact test on GQA, the paired
bootstrap on VQA v2's soft accuracies) is recorded in the result's ``tests`` for the
report's findings, so one model alone gets the "uses the image" verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from vqadiag.errors import SuiteSkipped
from vqadiag.probes.conditions import Condition
from vqadiag.probes.no_image import no_image_condition, no_image_variant
from vqadiag.probes.runner import ConditionRun
from vqadiag.protocols.gain.formulas import gqa_correct, multimodal_gain, vqa2_accuracy
from vqadiag.suites.base import Figure, FindingRule, Suite, SuiteOutput, register_suite
from vqadiag.suites.sources import (
    needs_visual,
    plain_run,
    probe_of,
    raw_texts,
    unit_row,
    vqa_context,
    vqa_data,
    vqa_probe,
)
from vqadiag.suites.state import DiagnoseState, subsample, write_predictions

GQA_GAIN = "gain_gqa"
VQA2_GAIN = "gain_vqa2"
_SENTENCE = "{label} {value} [{ci}]: accuracy {other_value} without its image ({test}, {p})"
_ABSENT = "{label} {value} [{ci}] not above 0: accuracy {other_value} without its image " \
    "({test}, {p})"  # fmt: skip


@register_suite
class GainSuite(Suite):
    """Accuracy with the image − accuracy without it, per dataset (module docstring)."""

    name = "gain"
    title = "Multi-modal gain (the model without its image)"
    datasets = ("gqa", "vqa2")
    conditions = ("gqa.all", "gqa.noimage", "vqa2.questions", "vqa2.noimage")
    display_order = 15
    own_prefix = True
    figures = (
        Figure(GQA_GAIN, "multi-modal gain (GQA)", unit="points"),
        Figure(VQA2_GAIN, "multi-modal gain (VQA v2)", unit="points"),
    )
    findings = (
        FindingRule(GQA_GAIN, "own", "above", "uses the image", _SENTENCE, tone="good"),
        FindingRule(
            GQA_GAIN, "own", "not_above", "answers as well without the image", _ABSENT,
            tone="bad",
        ),
        FindingRule(VQA2_GAIN, "own", "above", "uses the image (VQA v2)", _SENTENCE, tone="good"),
        FindingRule(
            VQA2_GAIN, "own", "not_above", "answers VQA v2 as well without the image", _ABSENT,
            tone="bad",
        ),
    )  # fmt: skip

    def missing_capability(self, model: Any) -> str | None:
        caps = model.capabilities
        if not caps.reruns:
            return "the model's answers are fixed (a prediction file): it cannot be asked again"
        if caps.blind:
            return "the model reads no image: without one it answers the same (gain 0)"
        if no_image_variant(caps) is None:
            return "the model ignores the object mask: it cannot be shown no objects"
        return None

    def run(self, state: DiagnoseState) -> SuiteOutput:
        return gain_suite(state)

    def not_run_reason(self, key: str, skipped: str | None, result: Any) -> str | None:
        if skipped is not None or not isinstance(result, Mapping):
            return skipped
        part = result.get("gqa" if key == GQA_GAIN else "vqa2")
        return part.get("skipped") if isinstance(part, Mapping) else None


def gain_suite(state: DiagnoseState) -> SuiteOutput:
    """Both parts (GQA, VQA v2); a part whose data is missing is recorded as skipped, and
    the suite is skipped when both are."""
    out = SuiteOutput({"tests": {}})
    parts: dict[str, Callable[[DiagnoseState], tuple[Any, ...]]] = {
        GQA_GAIN: _gqa_runs,
        VQA2_GAIN: _vqa2_runs,
    }
    reasons = []
    for key, runs_of in parts.items():
        dataset = "gqa" if key == GQA_GAIN else "vqa2"
        try:
            qids, records, plain, none, score = runs_of(state)
        except SuiteSkipped as why:
            out.result[dataset] = {"skipped": str(why)}
            reasons.append(f"{dataset}: {why}")
            continue
        _score_part(state, out, key, dataset, qids, records, plain, none, score)
    if not out.summary:
        raise SuiteSkipped("; ".join(reasons))
    return out


def _gqa_runs(state: DiagnoseState) -> tuple[Any, ...]:
    """The GQA questions, the plain run and the no-image run."""
    src, plain = plain_run(state)
    qids = src.prefix(state.options.questions_for("gain"))
    if len(qids) < len(src.qids):  # a prefix of the plain run's questions
        answer_of = dict(zip(src.qids, plain.answers, strict=True))
        plain = replace(plain, answers=[answer_of[q] for q in qids])
    probes = [probe_of(src.records[q], q) for q in qids]
    cond = no_image_condition("gqa.noimage", state.model.capabilities, state.options.fill)
    none = state.run(src.ctx, cond, probes)
    return qids, src.records, plain, none, gqa_correct


def _vqa2_runs(state: DiagnoseState) -> tuple[Any, ...]:
    """Every annotated VQA v2 question of the split (subsampled), both runs."""
    data = vqa_data(state)
    needs_visual(state, data)
    records = data.questions(state.options.split)
    qids = subsample([q for q, r in records.items() if r.get("answers")],
                     state.options.questions_for("gain"))  # fmt: skip
    qids = state.drop_missing_images(qids, {q: str(records[q]["imageId"]) for q in qids}, data)
    if not qids:
        raise SuiteSkipped("no annotated VQA v2 question has its image")
    ctx = vqa_context(state, data)
    probes = [vqa_probe(q, records[q]) for q in qids]
    plain = state.run(ctx, Condition("vqa2.questions", "plain"), probes)
    cond = no_image_condition("vqa2.noimage", state.model.capabilities, state.options.fill)
    none = state.run(ctx, cond, probes)
    return qids, records, plain, none, vqa2_accuracy


def _score_part(
    state: DiagnoseState,
    out: SuiteOutput,
    key: str,
    dataset: str,
    qids: Sequence[str],
    records: Mapping[str, Mapping[str, Any]],
    plain: ConditionRun,
    none: ConditionRun,
    score: Callable[..., Any],
) -> None:
    """The gain of one dataset into ``out``: result, per-question rows, summary, test,
    and both runs' prediction files (``predictions/gain/<dataset>_all.json``,
    ``<dataset>_noimage.json``)."""
    write_predictions(state, "gain", f"{dataset}_all", qids, plain.answers)
    write_predictions(state, "gain", f"{dataset}_noimage", qids, none.answers)
    recs = [records[q] for q in qids]
    acc_all = score([a.answer for a in plain.answers], recs)
    acc_none = score([a.answer for a in none.answers], recs)
    o = state.options
    gain = multimodal_gain(acc_all, acc_none, seed=o.seed, n_bootstrap=o.n_bootstrap)
    variant = none.counts()
    out.result[dataset] = {
        **gain,
        "variant": variant["variant"],
        **({"fill": variant["fill"]} if "fill" in variant else {}),
    }
    out.result["tests"][key] = {
        **gain["test"],
        "accuracy_noimage": gain["accuracy_noimage"],
        "n_bootstrap": o.n_bootstrap,
    }
    out.summary[key] = dict(gain["gain"])
    for q, a, b, x, y in zip(qids, plain.answers, none.answers, acc_all, acc_none, strict=True):
        out.rows.append(
            unit_row(
                "gain",
                q,
                records[q],
                id=f"{dataset}:{q}",
                answers={"all": a.answer, "noimage": b.answer},
                values={key: float(x - y), "accuracy_all": float(x), "accuracy_noimage": float(y)},
                **raw_texts({"all": a, "noimage": b}),
            )
        )
