"""Suite ``ood``: GQA-OOD head / tail accuracy, Δ and the acc-tail curve (docs/protocols.md §3)."""

from __future__ import annotations

from vqadiag.data.formats.predictions import in_memory_counts
from vqadiag.errors import DataError, SuiteSkipped
from vqadiag.metrics.compare import compare_statistic
from vqadiag.protocols.ood.formulas import ood_delta_columns, ood_delta_statistic
from vqadiag.protocols.ood.plots import PLOTS
from vqadiag.suites.base import (
    Drilldown,
    Figure,
    FindingRule,
    Suite,
    SuiteOutput,
    Units,
    below_one,
    register_suite,
)
from vqadiag.suites.sources import GQASource, plain_run, unit_row
from vqadiag.suites.state import DiagnoseState, estimate_of, write_predictions


def delta_test(units_a: Units, units_b: Units, _result_a: object, *, seed: int, n_bootstrap: int):
    """Paired bootstrap of Δ_A − Δ_B over the questions both models answered: the
    statistic is recomputed from the resampled head / tail sums (docs/report.md)."""
    import numpy as np

    ids = sorted(set(units_a) & set(units_b))
    if not ids:
        return None

    def columns(units: Units):
        nan = float("nan")
        head = np.array([_value(units[i], "acc_head", nan) for i in ids])
        tail = np.array([_value(units[i], "acc_tail", nan) for i in ids])
        return ood_delta_columns(head, tail)

    return compare_statistic(
        columns(units_a), columns(units_b), ood_delta_statistic, n_resamples=n_bootstrap, seed=seed
    )


def _value(values, key: str, default: float) -> float:
    v = values.get(key)
    return default if v is None else float(v)


@register_suite
class OODSuite(Suite):
    """``vqadiag score ood --curve`` on the plain run."""

    name = "ood"
    title = "GQA-OOD head / tail"
    datasets = ("gqa",)
    conditions = ("gqa.all",)
    display_order = 20
    plots = PLOTS
    figures = (
        Figure("acc_head", "GQA-OOD acc-head"),
        Figure("acc_tail", "GQA-OOD acc-tail"),
        Figure(
            "delta",
            "GQA-OOD Δ (head−tail)/tail",
            direction="lower",
            test=delta_test,
            bounded=False,
        ),
    )
    findings = (
        FindingRule(
            "delta", 20.0, "above", "weak on rare answers",
            "acc-tail {summary[acc_tail]} vs acc-head {summary[acc_head]}: "
            "Δ {value} [{ci}] above 20",
            tone="bad",
        ),
    )  # fmt: skip
    drilldown = Drilldown("Wrong answers on GQA-OOD tail questions", below_one("acc_tail"))

    def run(self, state: DiagnoseState) -> SuiteOutput:
        return ood_suite(state)


def ood_suite(state: DiagnoseState) -> SuiteOutput:
    """GQA-OOD head / tail, Δ and the acc-tail curve (``score ood --curve``, protocols.md §3),
    scored from the plain run's answers in memory; the prediction file is written for
    ``vqadiag score ood`` to re-score. The split is GQA-OOD's released one when its files
    are given or lie beside the questions (:mod:`vqadiag.protocols.ood.released`; no
    curve then), else built from the diagnosed questions' answer groups."""
    from vqadiag.protocols.ood.score import score_split

    src, run = plain_run(state)
    o = state.options
    inputs, to_diagnosed = _split_inputs(state, src)
    write_predictions(state, "ood", "all", src.qids, run.answers)
    answer_of = {q: a.answer for q, a in zip(src.qids, run.answers, strict=True)}
    released = to_diagnosed is not None
    if released:
        answer_of = {r: answer_of[q] for r, q in to_diagnosed.items()}
    score = score_split(
        inputs, answer_of, curve=not released, seed=o.seed, n_bootstrap=o.n_bootstrap,
        prediction_counts=in_memory_counts(),
    )  # fmt: skip
    diagnosed_id = to_diagnosed.get if released else (lambda q: q)
    rows = [
        unit_row("ood", q, src.records[q], answers={"all": answer_of[r]}, values={key: int(value)})
        for key in ("acc_head", "acc_tail")
        for r, value in score.units[key].items()
        if (q := diagnosed_id(r)) is not None
    ]
    result = score.to_dict()
    summary = {k: estimate_of(result["ci"], k) for k in ("acc_head", "acc_tail", "delta")}
    return SuiteOutput(result, rows, summary)


def _split_inputs(state: DiagnoseState, src: GQASource):
    """The released split joined to the diagnosed questions and ``{released id:
    diagnosed id}``, or the split built from their groups and None."""
    from vqadiag.protocols.ood.released import join_released, released_files
    from vqadiag.protocols.ood.score import built_inputs, released_inputs

    split = state.options.split
    folder = state.extra_file("ood_split", src.data.gqa_dir)
    files = released_files(folder, split)
    if files is None and state.options.ood_split is not None:
        raise DataError(folder, f"--ood-split: no ood_{split}_head.json and ood_{split}_tail.json")
    if files is not None:
        return join_released(released_inputs(*files, None), src.records, files[0])
    lacking = next((q for q, r in src.records.items() if "groups" not in r), None)
    if lacking is not None:
        raise SuiteSkipped(
            f"the questions carry no answer groups to build the GQA-OOD split from (question "
            f"{lacking}): give GQA-OOD's released files with --ood-split DIR"
        )
    return built_inputs(src.records, source=src.questions_file), None
