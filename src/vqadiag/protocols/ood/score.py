"""GQA-OOD scoring: the head / tail split and its accuracies (docs/protocols.md §3).

``score_ood`` mirrors ``vqadiag score ood``: it builds the official split (or
takes a released one), calls the pure metrics of
:mod:`vqadiag.protocols.ood.formulas` and returns exactly the dict the command
prints with ``--json``. Every rate is in percent at full precision and has a
``{"value", "ci_low", "ci_high", "n"}`` twin under ``"ci"`` (95% percentile
bootstrap over questions).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.data.formats.gqa import (
    check_gqa_questions,
    check_local_group,
    is_balanced,
    read_gqa_questions,
)
from vqadiag.data.formats.gqa_typed import OODQuestion, ood_questions
from vqadiag.data.formats.predictions import read_scored_answers
from vqadiag.data.io.jsonio import collector_paused_over, write_json
from vqadiag.errors import DataError, record_label
from vqadiag.metrics.bootstrap import (
    finite_or_none,
    official_rate_ci,
    sums_statistic_ci,
)
from vqadiag.protocols.ood.formulas import (
    DEFAULT_ALPHA,
    NONE_GROUP,
    OOD_ALPHA_GRID,
    OODColumns,
    OODGroups,
    OODSplit,
    accuracy_percent,
    delta_percent,
    ood_groups,
)

SPLIT_FILES = {"all": "ood_all.json", "head": "ood_head.json", "tail": "ood_tail.json"}


# ----------------------------------------------------------------- score ood


def write_ood_split(
    questions: Mapping[str, Mapping[str, Any]], split: OODSplit, directory: str | Path
) -> dict[str, str]:
    """Write ``ood_all.json``, ``ood_head.json``, ``ood_tail.json`` into ``directory``.

    Each file is ``{qid: record}`` with the GQA question records unchanged and
    ids sorted, as the official GQA-OOD release (which dumps with sorted keys).
    """
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise DataError(out, "is a file, expected a directory for the split files")
    written: dict[str, str] = {}
    for name, ids in (("all", split.all_ids), ("head", split.head_ids), ("tail", split.tail_ids)):
        path = write_json(out / SPLIT_FILES[name], {qid: questions[qid] for qid in sorted(ids)})
        written[name] = str(path)
    return written


def _delta_ci(
    correct: np.ndarray, is_tail: np.ndarray, value: float, seed: int, n_bootstrap: int
) -> dict[str, Any] | None:
    """Δ's interval: resample the questions of ``all``, recompute both accuracies."""
    if value != value:
        return None
    head = ~is_tail
    columns = np.column_stack([correct * head, head, correct * is_tail, is_tail]).astype(float)

    def statistic(s: np.ndarray) -> np.ndarray:
        acc_head = 100 * s[:, 0] / s[:, 1]
        acc_tail = 100 * s[:, 2] / s[:, 3]
        return (acc_head - acc_tail) / acc_tail * 100

    est = sums_statistic_ci(columns, statistic, n_resamples=n_bootstrap, seed=seed).to_dict()
    est["value"] = value
    return est


#: names of GQA-OOD's released split files (and of ``--write-split``'s)
RELEASED_SPLIT_NAME = re.compile(r"^ood_(?:.+_)?(?:all|head|tail)\.json$")


def _released_split(
    head: Path, tail: Path, questions: Path | None
) -> tuple[dict[str, Any], set[str]]:
    """The records of a released split (head ∪ tail) and the ids of its tail file; the
    optional ``all`` file must be exactly head ∪ tail."""
    head_records = read_gqa_questions(head, require=("answer",))
    tail_records = read_gqa_questions(tail, require=("answer",))
    for qid in tail_records:
        if qid in head_records:
            raise DataError(tail, "question in both the --head and --tail files", record_label(qid))
    records = {**head_records, **tail_records}
    if questions is not None:
        all_ids = set(read_gqa_questions(questions, require=("answer",)))
        differ = sorted(all_ids ^ set(records))
        if differ:
            raise DataError(
                questions,
                f"is not head ∪ tail of the --head / --tail files ({len(differ)} ids differ, "
                f"first {differ[0]!r})",
            )
    return records, set(tail_records)


def _ood_columns(records: Mapping[str, OODQuestion]) -> OODColumns:
    """The split's columns of typed question records (docs/gqa.md, "Loading speed")."""
    values = list(records.values())
    return OODColumns(
        ids=list(records),
        local_groups=[NONE_GROUP if (g := r.groups.local) is None else g for r in values],
        answers=[r.answer for r in values],
        balanced=np.fromiter((r.isBalanced is not False for r in values), bool, len(values)),
    )


def _check_ood_arguments(
    questions: Path | None, head: Path | None, tail: Path | None, curve: bool,
    write_split: str | Path | None,
) -> None:  # fmt: skip
    """One line for arguments that do not define one split (docs/gqa.md)."""
    if (head is None) != (tail is None):
        raise DataError("--head / --tail", "give both released files: --head FILE --tail FILE")
    if head is not None:
        if curve:
            raise DataError(
                "--curve", "--curve and --plot rebuild the split for every α from a GQA "
                "question file: give --questions without --head / --tail",
            )  # fmt: skip
        if write_split is not None:
            raise DataError("--write-split", "--head / --tail are a split already")
        return
    if questions is None:
        raise DataError(
            "--questions", "give a GQA question file to build the split from, or a released "
            "split as --head FILE --tail FILE",
        )  # fmt: skip
    if RELEASED_SPLIT_NAME.match(questions.name):
        raise DataError(
            questions, "is a GQA-OOD split file already; building a split inside it gives "
            "another benchmark: score the released files as --head …_head.json --tail "
            "…_tail.json, or build from the GQA question file (e.g. "
            "testdev_balanced_questions.json)",
        )  # fmt: skip


@dataclass
class OODInputs:
    """A GQA-OOD split ready to score (docs/protocols.md §3): its questions in file order,
    their gold answers, and which are scored (balanced, or all with ``all_questions``) in
    the head and in the tail. ``groups`` (a built split) gives the curve and the split
    files; ``records`` (whole question records) are kept only for the split files."""

    ids: list[str]
    gold: list[str]
    scored: np.ndarray
    head: np.ndarray
    tail: np.ndarray
    members: Mapping[str, Any]
    split: dict[str, Any]
    source: Path
    groups: OODGroups | None = None
    records: Mapping[str, Any] | None = None

    @property
    def scored_ids(self) -> list[str]:
        """The ids of the questions of ``all`` (head ∪ tail, scored), in file order."""
        return [self.ids[i] for i in np.flatnonzero(self.head | self.tail).tolist()]


def _masks(
    ids: list[str], balanced: np.ndarray, in_head: np.ndarray, in_tail: np.ndarray,
    all_questions: bool, source: Path,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """(scored, scored head, scored tail); scored = balanced unless ``all_questions``, as
    the official evaluation."""
    scored = np.ones(len(ids), dtype=bool) if all_questions else balanced
    head, tail = in_head & scored, in_tail & scored
    if not (head | tail).any():
        raise DataError(
            source, "no balanced questions (isBalanced true) in the split; use --all-questions "
            "to score all",
        )  # fmt: skip
    return scored, head, tail


def released_inputs(
    head: Path, tail: Path, questions: Path | None, *, all_questions: bool = False
) -> OODInputs:
    """A released split (``ood_*_head.json`` and ``…_tail.json``, ``questions`` its
    optional ``all`` file), each file as it is."""
    released, tail_names = _released_split(head, tail, questions)
    ids = list(released)
    balanced = np.fromiter(map(is_balanced, released.values()), dtype=bool, count=len(ids))
    in_tail = np.fromiter((q in tail_names for q in ids), dtype=bool, count=len(ids))
    scored, head_mask, tail_mask = _masks(
        ids, balanced, ~in_tail, in_tail, all_questions, head
    )  # the records are head ∪ tail
    split = {
        "source": "released",
        "head": str(head),
        "tail": str(tail),
        "balanced_only": not all_questions,
        "n_questions": len(ids),
    }
    gold = [r["answer"] for r in released.values()]
    return OODInputs(ids, gold, scored, head_mask, tail_mask, released, split, head)


def built_inputs(
    questions: Path | Mapping[str, Any],
    *,
    alpha: float = DEFAULT_ALPHA,
    all_questions: bool = False,
    whole_records: bool = False,
    source: Path | None = None,
) -> OODInputs:
    """The split built from GQA questions as the official ``build_gqa_ood.py`` builds it:
    groups from every question, the tail at ``alpha``. ``questions`` is a question file,
    or records already read (``source`` then names their file in errors);
    ``whole_records`` keeps the records whole (for the split files)."""
    if isinstance(questions, Mapping):
        assert source is not None
        check_gqa_questions(questions, source, ("answer", "groups"))
        for qid, record in questions.items():
            check_local_group(record, source, qid)
        records: Mapping[str, Any] | None = questions
        typed = None
        columns = OODColumns.of(questions)
    else:
        source = questions
        typed = None if whole_records else ood_questions(source)
        columns = None if typed is None else _ood_columns(typed)
        records = None
        if columns is None:  # not plainly official, or the split files need whole records
            records = read_gqa_questions(source, require=("answer", "groups"))
            for qid, record in records.items():
                check_local_group(record, source, qid)
            columns = OODColumns.of(records)
    groups = ood_groups(columns, balanced_only=False)
    kept, in_tail = groups.question_masks(alpha)
    scored, head, tail = _masks(
        columns.ids, columns.balanced, kept & ~in_tail, in_tail, all_questions, source
    )
    split = {
        "source": "built",
        "balanced_only": not all_questions,
        "n_questions": len(columns.ids),
        "n_groups": len(groups.groups),
        "n_groups_kept": groups.n_groups_kept,
        "entropy_threshold": groups.entropy_threshold,
    }
    members = typed if typed is not None else records
    assert members is not None
    return OODInputs(
        columns.ids, columns.answers, scored, head, tail, members, split, source, groups, records
    )


@dataclass
class OODScore:
    """GQA-OOD's figures (docs/protocols.md §3): ``values`` acc_all, acc_head, acc_tail
    (percent) and delta (×100), each with its interval in ``ci`` (None without
    predictions); ``n`` the scored questions of all, head and tail; ``curve`` acc_tail
    over :data:`OOD_ALPHA_GRID` when asked; ``units`` the per-question 0/1 of the head
    and tail questions, the values the rates are the means of."""

    alpha: float | None  # None: a released split, whose tail is its own
    values: dict[str, float | None]
    ci: dict[str, Any]
    n: dict[str, int]
    split: dict[str, Any]
    prediction_counts: dict[str, int] = field(default_factory=dict)
    curve: list[dict[str, Any]] | None = None
    curve_ci: list[dict[str, Any]] | None = None
    units: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The dict ``vqadiag score ood --json`` prints (without ``plot`` / ``split_files``)."""
        out: dict[str, Any] = {"alpha": self.alpha, **self.prediction_counts, **self.values}
        out.update({f"n_{k}": v for k, v in self.n.items()}, split=self.split)
        ci = dict(self.ci)
        if self.curve is not None:
            out["curve"], ci["curve"] = self.curve, self.curve_ci
        out["ci"] = ci
        return out


def score_split(
    inputs: OODInputs,
    answers: Mapping[str, str] | None,
    *,
    alpha: float = DEFAULT_ALPHA,
    curve: bool = False,
    seed: int = 0,
    n_bootstrap: int = 1000,
    prediction_counts: Mapping[str, int] | None = None,
) -> OODScore:
    """Score a split: acc = 100 · mean [answer = gold] over all, head and tail, Δ =
    (acc_head − acc_tail) / acc_tail × 100, each with its 95% bootstrap interval; a
    missing answer is wrong. Without ``answers`` only the split's counts (and the
    curve's tail sizes). ``alpha`` is recorded for a built split (``inputs.groups``);
    a released split's tail is its own, and its ``alpha`` is None."""
    ids, all_mask = inputs.ids, inputs.head | inputs.tail
    correct: np.ndarray | None = None
    if answers is not None:
        all_at = np.flatnonzero(all_mask).tolist()
        correct = np.zeros(len(ids))
        correct[all_at] = np.fromiter(  # a missing prediction is wrong, whatever the gold
            ((a := answers.get(ids[i])) is not None and a == inputs.gold[i] for i in all_at),
            dtype=bool,
            count=len(all_at),
        )
    values: dict[str, float | None] = {}
    ci: dict[str, Any] = {}
    units: dict[str, dict[str, float]] = {}
    for key, mask in (("acc_all", all_mask), ("acc_head", inputs.head), ("acc_tail", inputs.tail)):
        if correct is None:
            values[key], ci[key] = None, None
            continue
        rates = correct[mask]
        if key != "acc_all":
            at = np.flatnonzero(mask).tolist()
            units[key] = dict(zip([ids[i] for i in at], rates.tolist(), strict=True))
        values[key], ci[key] = official_rate_ci(rates, accuracy_percent(rates), seed, n_bootstrap)
    if correct is None:
        values["delta"], ci["delta"] = None, None
    else:
        delta = delta_percent(
            *(float("nan") if values[k] is None else values[k] for k in ("acc_head", "acc_tail"))
        )
        values["delta"] = finite_or_none(delta)
        ci["delta"] = _delta_ci(correct[all_mask], inputs.tail[all_mask], delta, seed, n_bootstrap)
    masks = (("all", all_mask), ("head", inputs.head), ("tail", inputs.tail))
    n = {k: int(m.sum()) for k, m in masks}
    recorded = None if inputs.groups is None else float(alpha)
    score = OODScore(
        recorded, values, ci, n, inputs.split, dict(prediction_counts or {}), units=units
    )
    if curve:
        score.curve, score.curve_ci = _curve(inputs, correct, seed, n_bootstrap)
    return score


def _curve(
    inputs: OODInputs, correct: np.ndarray | None, seed: int, n_bootstrap: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """acc_tail and the tail size at every α of :data:`OOD_ALPHA_GRID` (a built split)."""
    assert inputs.groups is not None
    points: list[dict[str, Any]] = []
    ci_points: list[dict[str, Any]] = []
    for a in OOD_ALPHA_GRID:
        tail_of_a = inputs.groups.question_masks(a)[1] & inputs.scored
        point: dict[str, Any] = {"alpha": a, "acc_tail": None, "n_tail": int(tail_of_a.sum())}
        ci_point: dict[str, Any] = {"alpha": a, "acc_tail": None}
        if correct is not None:
            values = correct[tail_of_a]
            point["acc_tail"], ci_point["acc_tail"] = official_rate_ci(
                values, accuracy_percent(values), seed, n_bootstrap
            )
        points.append(point)
        ci_points.append(ci_point)
    return points, ci_points


@collector_paused_over("questions", "predictions", "head", "tail")
def score_ood(
    questions: str | Path | None,
    predictions: str | Path | None = None,
    *,
    head: str | Path | None = None,
    tail: str | Path | None = None,
    alpha: float | None = None,
    curve: bool = False,
    plot: str | Path | None = None,
    write_split: str | Path | None = None,
    all_questions: bool = False,
    allow_missing: bool = False,
    seed: int = 0,
    n_bootstrap: int = 1000,
) -> dict[str, Any]:
    """GQA-OOD: build the official head / tail split, or take a released one, and score
    it (docs/protocols.md §3, docs/gqa.md). ``alpha`` sizes the tail of a built split
    (None: :data:`DEFAULT_ALPHA`); a released split has its own, so an ``alpha`` given
    with ``head`` / ``tail`` is refused and the result's ``alpha`` is null.

    Built (``questions``): groups from every question of the file, as the official
    ``build_gqa_ood.py``; the ``isBalanced`` questions of the split are scored (all with
    ``all_questions``), as the official evaluation. Released (``head`` and ``tail``, the
    ``ood_*_{head,tail}.json`` files; ``questions`` may name their ``all`` file): each
    file is the split as it is, its balanced questions scored. With ``predictions``:
    acc_all, acc_head, acc_tail, delta (×100) and, with ``curve`` (or ``plot``; built
    only), acc_tail over :data:`OOD_ALPHA_GRID`; ``plot`` writes the curve PNG.
    Predictions for questions outside the file(s) are ignored and counted
    (``extra_predictions``). Without predictions only the split is built (counts,
    ``curve`` of tail sizes, ``write_split``). :func:`built_inputs` /
    :func:`released_inputs` and :func:`score_split` are the same steps in memory.
    """
    q_path = None if questions is None else Path(questions)
    h_path = None if head is None else Path(head)
    t_path = None if tail is None else Path(tail)
    if plot is not None and predictions is None:
        raise DataError(None, "--plot needs --predictions (the curve plots acc_tail)")
    if plot is not None and Path(plot).suffix.lower() != ".png":
        raise DataError(Path(plot), "--plot writes a PNG: name the file … .png")
    want_curve = curve or plot is not None
    _check_ood_arguments(q_path, h_path, t_path, want_curve, write_split)
    released = h_path is not None and t_path is not None
    if released and alpha is not None:
        raise DataError("--alpha", "sizes the tail of a built split: --head / --tail have theirs")
    if alpha is not None and not (math.isfinite(alpha) and alpha > -1):
        raise DataError("--alpha", f"must be a finite number greater than -1, got {alpha}")
    alpha = DEFAULT_ALPHA if alpha is None else alpha
    if released:
        inputs = released_inputs(h_path, t_path, q_path, all_questions=all_questions)
    else:
        assert q_path is not None
        inputs = built_inputs(
            q_path, alpha=alpha, all_questions=all_questions,
            whole_records=write_split is not None,
        )  # fmt: skip
    answers, counts = None, None
    if predictions is not None:
        answers, counts = read_scored_answers(
            predictions, inputs.members, inputs.scored_ids, allow_missing
        )
    score = score_split(
        inputs, answers, alpha=alpha, curve=want_curve, seed=seed, n_bootstrap=n_bootstrap,
        prediction_counts=counts,
    )  # fmt: skip
    result = score.to_dict()
    ci = result.pop("ci")
    if plot is not None:
        from vqadiag.protocols.ood.curve import plot_ood_curve

        result["plot"] = str(plot_ood_curve(result["curve"], plot, reference=result["acc_all"]))
    if write_split is not None:
        assert inputs.groups is not None and inputs.records is not None
        result["split_files"] = write_ood_split(
            inputs.records, inputs.groups.split(alpha), write_split
        )
    result["ci"] = ci
    return result
