"""``vqadiag score robustness``: accuracy under basic-question noise and R_score (protocols.md §4).

The model answered every main question once clean (``clean``) and once per
noise partition k = 1..K (``noisy[k-1]``: the main question followed by the 3
basic questions of partition k; the prediction keeps the main question's id).

* ``truth`` is VQA v2 annotations (official VQA accuracy, also per answer type)
  or a GQA questions file (exact match; balanced questions unless
  ``all_questions``); the shape of the file decides (:func:`truth_format`).
* Per partition: accuracy, ``acc_diff = |clean − accuracy|`` and
  ``r_score = R(acc_diff)``.
* Overall ``acc_diff`` / ``r_score`` are those of **partition 1**, the least
  noisy one: that is how the paper's Table 1 is built from its Table 2 (e.g.
  HieCoAtt-VGG: first-partition diff 5.85 → R = 0.48; LSTM Q+I: 13.55 → 0.19).
* ``monotonic``: whether accuracy is non-increasing from partition 1 to K.
* Intervals: one bootstrap over questions, resampling clean and noisy answers
  of a question together (so ``acc_diff`` and ``r_score`` get intervals too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.arguments import one_or_many
from vqadiag.data.formats.predictions import align_predictions, answers_of, read_predictions
from vqadiag.data.formats.sniff import truth_format
from vqadiag.data.io.jsonio import collector_paused_over, read_json
from vqadiag.errors import DataError, record_label
from vqadiag.metrics.bootstrap import (
    DEFAULT_RESAMPLES,
    Estimate,
    resampled_sums,
)
from vqadiag.protocols.robustness.formulas import (
    DEFAULT_M,
    DEFAULT_T,
    accuracy_difference,
    check_limits,
    is_monotonic_fall,
    monotonic_violations,
    r_score,
)

MAX_PARTITIONS = 7


def estimate(value: float, boot: np.ndarray, n: int) -> dict[str, Any]:
    """``{"value", "ci_low", "ci_high", "n"}`` from a point value and its bootstrap values."""
    with np.errstate(invalid="ignore"):
        return Estimate.from_bootstrap(value, boot, n).to_dict()


def _restrict_ids(path: str | Path, known: Mapping[str, Any], truth: Path) -> list[str]:
    """Question ids of ``--questions``: a JSON list, a VQA questions file or a GQA file."""
    p = Path(path)
    data = read_json(p)
    if isinstance(data, Mapping) and isinstance(data.get("questions"), list):
        items = data["questions"]
        ids = []
        for i, record in enumerate(items):
            if not isinstance(record, Mapping) or "question_id" not in record:
                raise DataError(p, "missing field 'question_id'", f"item {i}")
            ids.append(str(record["question_id"]).strip())
    elif isinstance(data, Mapping):
        ids = [str(k).strip() for k in data]
    elif isinstance(data, list):
        ids = [str(v).strip() for v in data]
    else:
        raise DataError(p, "expected a list of question ids or a VQA/GQA questions file")
    if not ids:
        raise DataError(p, "no question ids in file")
    for qid in ids:
        if qid not in known:
            raise DataError(p, f"question id is not in {truth.name}", record_label(qid))
    return list(dict.fromkeys(ids))


class Truth:
    """Ground truth of one robustness run (the inputs of docs/protocols.md §4): the scored
    question ids, their records, and how an answer is scored (official VQA accuracy on
    VQA v2 annotations, exact match on GQA questions)."""

    def __init__(
        self,
        path: str | Path,
        *,
        all_questions: bool,
        lenient: bool,
        records: Mapping[str, Any] | None = None,
    ) -> None:
        self.path = Path(path)
        self.lenient = lenient
        if records is not None:  # GQA questions already read from ``path``
            from vqadiag.data.formats.gqa import check_gqa_questions

            check_gqa_questions(records, self.path, ("question", "answer"))
            self.kind = "gqa"
            self.records: Mapping[str, Any] = records
            self._gqa_ids(all_questions)
            return
        self.kind = truth_format(self.path)
        if self.kind == "vqa_annotations":
            from vqadiag.data.formats.vqa2 import read_vqa_annotations

            self.records = read_vqa_annotations(self.path)
            self.ids = list(self.records)
        elif self.kind == "gqa":
            from vqadiag.data.formats.gqa import read_gqa_questions

            if lenient:
                raise DataError(
                    "--lenient", "normalises answers for VQA accuracy: GQA answers match exactly"
                )
            self.records = read_gqa_questions(self.path, require=("question", "answer"))
            self._gqa_ids(all_questions)
        else:
            raise DataError(
                self.path,
                f"this is {_answerless_kind(self.path, self.kind)}, which has no answers; "
                "pass VQA v2 annotations or a GQA questions file as --truth",
            )

    def _gqa_ids(self, all_questions: bool) -> None:
        from vqadiag.data.formats.gqa import is_balanced

        self.ids = [q for q, r in self.records.items() if all_questions or is_balanced(r)]
        if not self.ids:
            raise DataError(self.path, "no balanced questions (use --all-questions)")

    def restrict(self, ids: list[str]) -> None:
        """Score only ``ids`` (each a question of the truth file)."""
        self.ids = ids

    def answer_types(self) -> list[str] | None:
        """VQA v2's answer type of each scored question (None for GQA)."""
        if self.kind != "vqa_annotations":
            return None
        return [self.records[q]["answer_type"] for q in self.ids]

    def score(self, answers: Sequence[str | None]) -> np.ndarray:
        """Per-question accuracy in [0, 1]: official VQA accuracy or GQA exact match."""
        if self.kind == "vqa_annotations":
            from vqadiag.metrics.vqa_accuracy import vqa_accuracies

            gts = [self.records[q]["answer_list"] for q in self.ids]
            return vqa_accuracies(list(answers), gts, lenient=self.lenient)
        gold = [self.records[q]["answer"] for q in self.ids]
        return np.array(
            [a is not None and a == g for a, g in zip(answers, gold, strict=True)], float
        )

    @property
    def metric(self) -> str:
        """The name of the per-question score."""
        return "vqa_accuracy" if self.kind == "vqa_annotations" else "exact_match"


def _scores(truth: Truth, path: str | Path, allow_missing: bool) -> tuple[np.ndarray, int]:
    """Per-question accuracy of one prediction file, in ``truth.ids`` order, and how
    many of those questions it has no prediction for (scored 0, with ``allow_missing``).

    Ids unknown to the truth file are an error; predictions for questions of
    the truth file left out of the run (unbalanced GQA, ``--questions``) are ignored.
    """
    predictions = read_predictions(path)
    for qid in predictions:
        if qid not in truth.records:
            raise DataError(path, f"question id is not in {truth.path.name}", record_label(qid))
    aligned = align_predictions(
        predictions, truth.ids, path, allow_missing=allow_missing, allow_extra=True
    )
    return truth.score(answers_of(aligned)), aligned.count(None)


@dataclass
class RobustnessScore:
    """Robustness's figures (docs/protocols.md §4) in the order the command prints them,
    their intervals in ``ci``, and ``units``: the scored ids and their per-question
    accuracy, column 0 clean and column k noise partition k."""

    values: dict[str, Any]
    ci: dict[str, Any]
    units: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The dict ``vqadiag score robustness --json`` prints."""
        return {**self.values, "ci": self.ci}


def _column_rates(
    acc: np.ndarray, types: list[str] | None, t: float, m: float, seed: int, n_bootstrap: int
) -> tuple[dict[str, Any], dict[str, Any], list[str], Any]:
    """Accuracy (clean and per partition), Acc_diff and R_score, overall and per answer
    type, from the per-question accuracies: the point values (one row) and the bootstrap
    values (one row per resample of questions); the answer types and their counts."""
    n, n_parts = acc.shape[0], acc.shape[1] - 1
    type_names = list(dict.fromkeys(types)) if types is not None else []
    masks = np.column_stack([[a == name for a in types] for name in type_names]) if types else None
    blocks = [acc]
    if masks is not None:
        for j in range(len(type_names)):
            blocks.append(acc * masks[:, j : j + 1])
        blocks.append(masks.astype(np.float64))
    columns = np.column_stack(blocks)

    def rates(sums: np.ndarray) -> dict[str, Any]:
        """All statistics from rows of column sums (point estimate: one row)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            accuracy = 100.0 * sums[:, : 1 + n_parts] / n
            diff = accuracy_difference(accuracy[:, :1], accuracy[:, 1:])
            per_type = {}
            for j, name in enumerate(type_names):
                start = (1 + n_parts) * (1 + j)
                denom = sums[:, (1 + n_parts) * (1 + len(type_names)) + j][:, None]
                per_type[name] = 100.0 * sums[:, start : start + 1 + n_parts] / denom
        return {"accuracy": accuracy, "diff": diff, "r": r_score(diff, t, m), "types": per_type}

    point = rates(columns.sum(axis=0)[None, :])
    resampled = rates(resampled_sums(columns, n_bootstrap, seed))
    type_n = masks.sum(axis=0).astype(int) if masks is not None else []
    return point, resampled, type_names, type_n


def score_accuracies(
    truth: Truth,
    acc: np.ndarray,
    *,
    t: float = DEFAULT_T,
    m: float = DEFAULT_M,
    missing: Sequence[int] | None = None,
    seed: int = 0,
    n_bootstrap: int = DEFAULT_RESAMPLES,
) -> RobustnessScore:
    """Accuracy, Acc_diff and R_score of the per-question accuracies ``acc`` (n × (1 + K)
    in ``truth.ids`` order: column 0 clean, column k partition k), in percent (R_score in
    [0, 1]), with 95% bootstrap intervals over questions. ``missing``: per column, the
    questions its prediction file had no answer for (scored 0; none when not given),
    reported as ``missing_predictions`` ``{clean, noisy_1, …}``."""
    n, n_parts = acc.shape[0], acc.shape[1] - 1
    point, resampled, type_names, type_n = _column_rates(
        acc, truth.answer_types(), t, m, seed, n_bootstrap
    )

    def est(key: str, col: int, name: str | None = None) -> dict[str, Any]:
        if name is None:
            return estimate(point[key][0, col], resampled[key][:, col], n)
        j = type_names.index(name)
        return estimate(point["types"][name][0, col], resampled["types"][name][:, col], type_n[j])

    partitions, ci_partitions = [], []
    for k in range(1, n_parts + 1):
        row = {
            "partition": k,
            "accuracy": float(point["accuracy"][0, k]),
            "acc_diff": float(point["diff"][0, k - 1]),
            "r_score": float(point["r"][0, k - 1]),
        }
        ci_row: dict[str, Any] = {
            "partition": k,
            "accuracy": est("accuracy", k),
            "acc_diff": est("diff", k - 1),
            "r_score": est("r", k - 1),
        }
        if type_names:
            row["perAnswerType"] = {t_: float(point["types"][t_][0, k]) for t_ in type_names}
            ci_row["perAnswerType"] = {t_: est("types", k, t_) for t_ in type_names}
        partitions.append(row)
        ci_partitions.append(ci_row)
    part_acc = [p["accuracy"] for p in partitions]
    values: dict[str, Any] = {
        "truth": truth.kind,
        "metric": truth.metric,
        "clean": float(point["accuracy"][0, 0]),
        "partitions": partitions,
        "acc_diff": partitions[0]["acc_diff"],
        "r_score": partitions[0]["r_score"],
        "monotonic": is_monotonic_fall(part_acc),
        "monotonic_violations": monotonic_violations(part_acc),
        "t": float(t),
        "m": float(m),
        "n": n,
        "missing_predictions": dict(
            zip(
                ["clean", *(f"noisy_{k}" for k in range(1, n_parts + 1))],
                [int(x) for x in missing] if missing is not None else [0] * (n_parts + 1),
                strict=True,
            )
        ),
    }
    ci: dict[str, Any] = {
        "clean": est("accuracy", 0),
        "partitions": ci_partitions,
        "acc_diff": ci_partitions[0]["acc_diff"],
        "r_score": ci_partitions[0]["r_score"],
    }
    if type_names:
        values["perAnswerType"] = {t_: float(point["types"][t_][0, 0]) for t_ in type_names}
        ci["perAnswerType"] = {t_: est("types", 0, t_) for t_ in type_names}
    return RobustnessScore(values, ci, {"ids": list(truth.ids), "accuracy": acc})


@collector_paused_over("truth", "clean", "noisy", "questions")
def score_robustness(
    truth: str | Path,
    clean: str | Path,
    noisy: Sequence[str | Path],
    *,
    t: float = DEFAULT_T,
    m: float = DEFAULT_M,
    questions: str | Path | None = None,
    all_questions: bool = False,
    lenient: bool = False,
    allow_missing: bool = False,
    seed: int = 0,
    n_bootstrap: int = DEFAULT_RESAMPLES,
) -> dict[str, Any]:
    """Score clean and noisy predictions: accuracy, Acc_diff, R_score (protocols.md §4).

    Returns the JSON object of ``vqadiag score robustness --json`` (keys in
    ``docs/robustness-consistency.md``). Accuracies and Acc_diff are in percent;
    R_score is in [0, 1]. :class:`Truth` and :func:`score_accuracies` are the same steps
    in memory.
    """
    noisy = one_or_many(noisy)  # one file given alone is one partition
    check_limits(t, m)
    if not noisy:
        raise ValueError("give at least one noisy prediction file (partition 1)")
    if len(noisy) > MAX_PARTITIONS:
        raise ValueError(f"at most {MAX_PARTITIONS} noisy partitions, got {len(noisy)}")
    gt = Truth(truth, all_questions=all_questions, lenient=lenient)
    if questions is not None:
        gt.restrict(_restrict_ids(questions, gt.records, gt.path))
    scored = [_scores(gt, path, allow_missing) for path in (clean, *noisy)]
    # n × (1 + K): column 0 clean, column k partition k
    acc = np.column_stack([column for column, _ in scored])
    missing = [n for _, n in scored]
    score = score_accuracies(gt, acc, t=t, m=m, missing=missing, seed=seed, n_bootstrap=n_bootstrap)
    return score.to_dict()


def _answerless_kind(path: Path, kind: str) -> str:
    """What a ``--truth`` file without annotator answers is, by its first bytes:
    VQA-introspect, a list of question ids (``--questions``' file), a list of answers
    given (a prediction file), or a VQA v2 questions file."""
    if kind == "introspect":
        return "VQA-introspect"
    with path.open("rb") as fh:
        head = fh.read(512).lstrip()
    if head.startswith(b"[") and not head[1:].lstrip().startswith(b"{"):
        return "a list of question ids (the --questions file)"
    if head.startswith(b"[") and b'"answer"' in head:
        return "a prediction file"
    return "a VQA v2 questions file"
