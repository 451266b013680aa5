"""GQA-OOD scoring: the head / tail split and its accuracies (docs/protocols.md §3).

``score_ood`` mirrors ``vqadiag score ood``: it builds the official split (or
takes a released one), calls the pure metrics of
:mod:`vqadiag.protocols.ood.formulas` and returns exactly the dict the command
prints with ``--json``. Every rate is in percent at full precision and has a
``{"value", "ci_low", "ci_high", "n"}`` twin under ``"ci"`` (95% percentile
bootstrap over questions).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.data.gqa import check_local_group, is_balanced, read_gqa_questions
from vqadiag.data.gqa_typed import OODQuestion, ood_questions
from vqadiag.data.jsonio import collector_paused_over, write_json
from vqadiag.data.predictions import read_scored_answers
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


@collector_paused_over("questions", "predictions", "head", "tail")
def score_ood(
    questions: str | Path | None,
    predictions: str | Path | None = None,
    *,
    head: str | Path | None = None,
    tail: str | Path | None = None,
    alpha: float = DEFAULT_ALPHA,
    curve: bool = False,
    plot: str | Path | None = None,
    write_split: str | Path | None = None,
    all_questions: bool = False,
    allow_missing: bool = False,
    seed: int = 0,
    n_bootstrap: int = 1000,
    units: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """GQA-OOD: build the official head / tail split, or take a released one, and score
    it (docs/protocols.md §3, docs/gqa.md).

    Built (``questions``): groups from every question of the file, as the official
    ``build_gqa_ood.py``; the ``isBalanced`` questions of the split are scored (all with
    ``all_questions``), as the official evaluation. Released (``head`` and ``tail``, the
    ``ood_*_{head,tail}.json`` files; ``questions`` may name their ``all`` file): each
    file is the split as it is, its balanced questions scored. With ``predictions``:
    acc_all, acc_head, acc_tail, delta (×100) and, with ``curve`` (or ``plot``; built
    only), acc_tail over :data:`OOD_ALPHA_GRID`; ``plot`` writes the curve PNG.
    Predictions for questions outside the file(s) are ignored and counted
    (``extra_predictions``). Without predictions only the split is built (counts,
    ``curve`` of tail sizes, ``write_split``). ``units``, when given with predictions,
    receives the per-unit values of the same computation: ``{"acc_head": {qid: 0/1},
    "acc_tail": {qid: 0/1}}`` (scored head / tail questions).
    """
    q_path = None if questions is None else Path(questions)
    h_path = None if head is None else Path(head)
    t_path = None if tail is None else Path(tail)
    if plot is not None and predictions is None:
        raise DataError(None, "--plot needs --predictions (the curve plots acc_tail)")
    want_curve = curve or plot is not None
    _check_ood_arguments(q_path, h_path, t_path, want_curve, write_split)

    groups = records = None  # records: whole question records, for --write-split only
    if h_path is not None and t_path is not None:
        released, tail_names = _released_split(h_path, t_path, q_path)
        members: Mapping[str, Any] = released
        ids = list(released)
        gold = [r["answer"] for r in released.values()]
        balanced = np.fromiter(map(is_balanced, released.values()), dtype=bool, count=len(ids))
        in_tail = np.fromiter((q in tail_names for q in ids), dtype=bool, count=len(ids))
        in_head = ~in_tail  # the records are head ∪ tail
        split_info: dict[str, Any] = {
            "source": "released",
            "head": str(h_path),
            "tail": str(t_path),
            "balanced_only": not all_questions,
            "n_questions": len(ids),
        }
        source = h_path
    else:
        assert q_path is not None
        typed = None if write_split is not None else ood_questions(q_path)
        columns = None if typed is None else _ood_columns(typed)
        if columns is None:  # not plainly official, or the split files need whole records
            records = read_gqa_questions(q_path, require=("answer", "groups"))
            for qid, record in records.items():
                check_local_group(record, q_path, qid)
            columns = OODColumns.of(records)
        members = records if typed is None else typed
        ids, gold, balanced = columns.ids, columns.answers, columns.balanced
        groups = ood_groups(columns, balanced_only=False)
        kept, in_tail = groups.question_masks(alpha)
        in_head = kept & ~in_tail
        split_info = {
            "source": "built",
            "balanced_only": not all_questions,
            "n_questions": len(ids),
            "n_groups": len(groups.groups),
            "n_groups_kept": groups.n_groups_kept,
            "entropy_threshold": groups.entropy_threshold,
        }
        source = q_path

    scored = np.ones(len(ids), dtype=bool) if all_questions else balanced  # as officially
    head_mask, tail_mask = in_head & scored, in_tail & scored
    all_mask = head_mask | tail_mask
    all_at = np.flatnonzero(all_mask).tolist()
    if not all_at:
        raise DataError(
            source, "no balanced questions (isBalanced true) in the split; use --all-questions "
            "to score all",
        )  # fmt: skip

    def ids_of(mask: np.ndarray) -> list[str]:
        return [ids[i] for i in np.flatnonzero(mask).tolist()]

    result: dict[str, Any] = {"alpha": float(alpha)}
    ci: dict[str, Any] = {}
    correct: np.ndarray | None = None
    if predictions is not None:
        answers, counts = read_scored_answers(predictions, members, [ids[i] for i in all_at],
                                        allow_missing)  # fmt: skip
        result.update(counts)
        correct = np.zeros(len(ids))
        correct[all_at] = np.fromiter(  # a missing prediction is wrong, whatever the gold
            ((a := answers.get(ids[i])) is not None and a == gold[i] for i in all_at),
            dtype=bool,
            count=len(all_at),
        )

    for key, mask in (("acc_all", all_mask), ("acc_head", head_mask), ("acc_tail", tail_mask)):
        if correct is None:
            result[key], ci[key] = None, None
            continue
        values = correct[mask]
        if units is not None and key != "acc_all":
            units[key] = dict(zip(ids_of(mask), values.tolist(), strict=True))
        result[key], ci[key] = official_rate_ci(values, accuracy_percent(values), seed, n_bootstrap)
    if correct is None:
        result["delta"], ci["delta"] = None, None
    else:
        delta = delta_percent(
            *(float("nan") if result[k] is None else result[k] for k in ("acc_head", "acc_tail"))
        )
        result["delta"] = finite_or_none(delta)
        ci["delta"] = _delta_ci(correct[all_mask], tail_mask[all_mask], delta, seed, n_bootstrap)
    result["n_all"] = int(all_mask.sum())
    result["n_head"] = int(head_mask.sum())
    result["n_tail"] = int(tail_mask.sum())
    result["split"] = split_info
    if want_curve:
        points: list[dict[str, Any]] = []
        ci_points: list[dict[str, Any]] = []
        assert groups is not None
        for a in OOD_ALPHA_GRID:
            tail_of_a = groups.question_masks(a)[1] & scored
            point: dict[str, Any] = {"alpha": a, "acc_tail": None, "n_tail": int(tail_of_a.sum())}
            ci_point: dict[str, Any] = {"alpha": a, "acc_tail": None}
            if correct is not None:
                values = correct[tail_of_a]
                point["acc_tail"], ci_point["acc_tail"] = official_rate_ci(
                    values, accuracy_percent(values), seed, n_bootstrap
                )
            points.append(point)
            ci_points.append(ci_point)
        result["curve"] = points
        ci["curve"] = ci_points
    if plot is not None:
        from vqadiag.protocols.ood.curve import plot_ood_curve

        result["plot"] = str(plot_ood_curve(result["curve"], plot, reference=result["acc_all"]))
    if write_split is not None:
        assert groups is not None and records is not None
        result["split_files"] = write_ood_split(records, groups.split(alpha), write_split)
    result["ci"] = ci
    return result
