"""GQA-OOD: the official head / tail construction and its metrics (docs/protocols.md §3).

Construction (Kervadec et al., official ``gqa_ood`` code), from a GQA question
file (the official split starts from the *balanced* val / testdev files, so
questions with ``isBalanced: false`` are left out unless asked otherwise):

1. group questions by ``groups.local`` (null → one group ``"none"``);
2. per group, the answer histogram p over its K distinct answers (in first-seen
   order) and its normalized entropy H = −Σ p ln(p + 1e-9) / ln K (K = 1: H = 1);
3. keep ("imbalanced") the groups with H ≤ mean(H) − std(H), mean and
   population std over all local groups;
4. in a kept group, answer a is **tail** if p_a < mean(p) · (1 + α) = (1 + α)/K
   (strict), else **head**; all = head ∪ tail of the kept groups.

Metrics: acc-all, acc-head, acc-tail (exact match, %) and
Δ = (acc-head − acc-tail) / acc-tail, reported ×100 as in the paper's Table 2;
the curve acc-tail(α) over :data:`OOD_ALPHA_GRID`, plotted at x = 1 + α.
The arithmetic mirrors the official numpy code (same operations, same order),
so edge cases such as p_a == (1 + α)/K fall on the same side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vqadiag.data.formats.gqa import is_balanced
from vqadiag.metrics.first_seen import first_seen_codes

#: The official α grid of the acc-tail curve (GQA-OOD ``evaluation.py``), ascending.
OOD_ALPHA_GRID: tuple[float, ...] = (
    -0.7, -0.6, -0.5, -0.4, -0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.3,
    0.4, 0.8, 1.0, 1.4, 1.8, 2.2, 2.8, 3.6, 5.0, 7.0, 9.0,
)  # fmt: skip
#: Default tail parameter α of the official split.
DEFAULT_ALPHA = 0.2
#: Name of the group of questions whose ``groups.local`` is null.
NONE_GROUP = "none"


def normalized_entropy(p: np.ndarray) -> float:
    """H(p) = −Σ p ln(p + 1e-9) / ln K, and 1.0 for K = 1 (official ``n_entropy``, protocols.md §3).

    For K = 1 the official code divides the entropy by itself, which is 1.0.
    """
    p = np.asarray(p, dtype=np.float64)
    e = -(p * np.log(p + 1e-9)).sum()
    n = np.log(len(p)) if len(p) > 1 else e
    return float(e / n)


@dataclass(frozen=True, slots=True)
class OODGroup:
    """One local group: its answers (first-seen order), counts, p, entropy, kept flag."""

    name: str
    answers: tuple[str, ...]
    counts: tuple[int, ...]
    probs: np.ndarray
    entropy: float
    kept: bool

    def tail_answers(self, alpha: float) -> list[str]:
        """Answers with p_a < mean(p) · (α + 1) (empty for groups that are not kept)."""
        if not self.kept:
            return []
        threshold = self.probs.mean() * (alpha + 1)
        return [a for a, p in zip(self.answers, self.probs, strict=True) if p < threshold]

    def to_dict(self, alpha: float) -> dict[str, Any]:
        """JSON view: entropy, kept, K, n and the answer counts, tail answers at ``alpha``."""
        return {
            "entropy": self.entropy,
            "kept": self.kept,
            "n_answers": len(self.answers),
            "n": int(sum(self.counts)),
            "answers": dict(zip(self.answers, self.counts, strict=True)),
            "tail_answers": self.tail_answers(alpha),
        }


def n_kept(groups: Mapping[str, OODGroup]) -> int:
    """Number of imbalanced (kept) groups among ``groups``."""
    return sum(1 for g in groups.values() if g.kept)


@dataclass(frozen=True, slots=True)
class OODGroups:
    """The α-independent part of the construction: groups, entropies, kept groups.

    ``question_ids`` are the questions the split starts from (file order);
    ``question_pair[i]`` indexes the (group, answer) pair of question i;
    per pair: ``pair_prob`` (p_a), ``pair_mean`` (mean p of its group) and
    ``pair_kept`` (its group is kept).
    """

    question_ids: list[str]
    groups: dict[str, OODGroup]
    entropy_mean: float
    entropy_std: float
    question_pair: np.ndarray
    pair_prob: np.ndarray
    pair_mean: np.ndarray
    pair_kept: np.ndarray
    balanced_only: bool

    @property
    def entropy_threshold(self) -> float:
        """mean(H) − std(H) over all local groups (population std)."""
        return self.entropy_mean - self.entropy_std

    @property
    def n_groups_kept(self) -> int:
        """Number of imbalanced (kept) local groups."""
        return n_kept(self.groups)

    def tail_pairs(self, alpha: float) -> np.ndarray:
        """Boolean per pair: kept group and p_a < mean(p) · (α + 1)."""
        return self.pair_kept & (self.pair_prob < self.pair_mean * (alpha + 1))

    def question_masks(self, alpha: float) -> tuple[np.ndarray, np.ndarray]:
        """Per question (``question_ids`` order): in a kept group (all), and tail at
        ``alpha``; head is kept and not tail."""
        return self.pair_kept[self.question_pair], self.tail_pairs(alpha)[self.question_pair]

    def split(self, alpha: float = DEFAULT_ALPHA) -> OODSplit:
        """The head / tail split at ``alpha`` (step 4 of the construction)."""
        kept_q, tail_q = self.question_masks(alpha)
        ids = np.asarray(self.question_ids, dtype=object)
        return OODSplit(
            alpha=float(alpha),
            all_ids=ids[kept_q].tolist(),
            head_ids=ids[kept_q & ~tail_q].tolist(),
            tail_ids=ids[tail_q].tolist(),
            groups=self.groups,
            entropy_threshold=self.entropy_threshold,
            n_questions=len(self.question_ids),
            balanced_only=self.balanced_only,
        )


@dataclass(frozen=True, slots=True)
class OODSplit:
    """A GQA-OOD split: ids of all / head / tail (question-file order) and the groups."""

    alpha: float
    all_ids: list[str]
    head_ids: list[str]
    tail_ids: list[str]
    groups: dict[str, OODGroup]
    entropy_threshold: float
    n_questions: int
    balanced_only: bool

    @property
    def n_groups_kept(self) -> int:
        """Number of imbalanced (kept) local groups."""
        return n_kept(self.groups)

    def summary(self) -> dict[str, Any]:
        """Counts of the split: questions considered, groups, kept groups, threshold."""
        return {
            "alpha": self.alpha,
            "balanced_only": self.balanced_only,
            "n_questions": self.n_questions,
            "n_groups": len(self.groups),
            "n_groups_kept": self.n_groups_kept,
            "entropy_threshold": self.entropy_threshold,
            "n_all": len(self.all_ids),
            "n_head": len(self.head_ids),
            "n_tail": len(self.tail_ids),
        }


def local_group(record: Mapping[str, Any]) -> str:
    """``groups.local`` of a question record, null → ``"none"`` (official ``filter_none``)."""
    value = record["groups"]["local"]
    return NONE_GROUP if value is None else value


@dataclass(frozen=True, slots=True)
class OODColumns:
    """What the construction reads of each question, in file order: ids, local group
    (null → ``"none"``), gold answer and whether it is balanced (``isBalanced`` not
    false)."""

    ids: list[str]
    local_groups: list[str]
    answers: list[str]
    balanced: np.ndarray

    @classmethod
    def of(cls, questions: Mapping[str, Mapping[str, Any]]) -> OODColumns:
        """The columns of ``{qid: record}`` records (each needs ``answer`` and
        ``groups.local``)."""
        records = list(questions.values())
        return cls(
            ids=list(questions),
            local_groups=[local_group(r) for r in records],
            answers=[r["answer"] for r in records],
            balanced=np.fromiter(map(is_balanced, records), dtype=bool, count=len(records)),
        )

    def subset(self, keep: np.ndarray) -> OODColumns:
        """The questions where the boolean ``keep`` is true, in the same order."""
        at = np.flatnonzero(keep).tolist()
        return OODColumns(
            ids=[self.ids[i] for i in at],
            local_groups=[self.local_groups[i] for i in at],
            answers=[self.answers[i] for i in at],
            balanced=self.balanced[keep],
        )


def ood_groups(
    questions: Mapping[str, Mapping[str, Any]] | OODColumns, *, balanced_only: bool = True
) -> OODGroups:
    """Steps 1–3 of the official construction (protocols.md §3): groups, entropies, kept groups.

    ``questions``: ``{qid: record}`` (every record needs ``answer`` and
    ``groups.local``) or their :class:`OODColumns`. Starts from the balanced questions
    (``isBalanced`` not false) unless ``balanced_only`` is false.
    """
    if isinstance(questions, OODColumns):
        columns = questions.subset(questions.balanced) if balanced_only else questions
    else:  # an unbalanced record left out is never read
        kept = (
            {qid: r for qid, r in questions.items() if is_balanced(r)}
            if balanced_only
            else questions
        )
        columns = OODColumns.of(kept)
    question_pair, pair_names = first_seen_codes(
        list(zip(columns.local_groups, columns.answers, strict=True))
    )
    pair_counts = np.bincount(question_pair, minlength=len(pair_names)).tolist()
    per_group: dict[str, list[int]] = {}
    for k, (group, _answer) in enumerate(pair_names):
        per_group.setdefault(group, []).append(k)
    n_pairs = len(pair_counts)
    pair_prob = np.zeros(n_pairs)
    pair_mean = np.zeros(n_pairs)
    pair_group_idx = np.zeros(n_pairs, dtype=np.int64)
    entropies: dict[str, float] = {}
    probs_of: dict[str, np.ndarray] = {}
    for g, (group, pairs) in enumerate(per_group.items()):
        counts = np.array([pair_counts[k] for k in pairs])
        p = counts / counts.sum()
        probs_of[group] = p
        entropies[group] = normalized_entropy(p)
        pair_prob[pairs] = p
        pair_mean[pairs] = p.mean()
        pair_group_idx[pairs] = g
    values = np.array(list(entropies.values()))
    mean = float(values.mean()) if values.size else float("nan")
    std = float(values.std()) if values.size else float("nan")
    threshold = values.mean() - values.std() if values.size else float("nan")
    groups: dict[str, OODGroup] = {}
    kept_of_group = np.zeros(len(per_group), dtype=bool)
    for g, (group, pairs) in enumerate(per_group.items()):
        kept = bool(entropies[group] <= threshold)
        kept_of_group[g] = kept
        groups[group] = OODGroup(
            name=group,
            answers=tuple(pair_names[k][1] for k in pairs),
            counts=tuple(pair_counts[k] for k in pairs),
            probs=probs_of[group],
            entropy=entropies[group],
            kept=kept,
        )
    return OODGroups(
        question_ids=columns.ids,
        groups=groups,
        entropy_mean=mean,
        entropy_std=std,
        question_pair=question_pair,
        pair_prob=pair_prob,
        pair_mean=pair_mean,
        pair_kept=kept_of_group[pair_group_idx],
        balanced_only=balanced_only,
    )


def build_ood_split(
    questions: Mapping[str, Mapping[str, Any]],
    alpha: float = DEFAULT_ALPHA,
    *,
    balanced_only: bool = True,
) -> OODSplit:
    """The official GQA-OOD split of ``questions`` at ``alpha`` (docs/protocols.md §3).

    Groups by ``groups.local``; keeps groups with normalized answer entropy
    H ≤ mean(H) − std(H); in them, answers with p_a < (1 + α)/K are tail, the
    rest head. Starts from the balanced questions unless ``balanced_only`` is
    false (the official split is built from the balanced files).
    """
    return ood_groups(questions, balanced_only=balanced_only).split(alpha)


def accuracy_percent(correct: Sequence[float] | np.ndarray) -> float:
    """100 · mean of 0/1 outcomes as the official GQA eval computes it (NaN when empty)."""
    c = np.asarray(correct, dtype=np.float64)
    if c.size == 0:
        return float("nan")
    return float(c.sum()) / c.size * 100


def delta_percent(acc_head: float, acc_tail: float) -> float:
    """Δ = (acc-head − acc-tail) / acc-tail × 100 (protocols.md §3; the paper's Table 2 is ×100).

    NaN when acc-tail is 0 or undefined.
    """
    if not np.isfinite(acc_tail) or acc_tail == 0 or not np.isfinite(acc_head):
        return float("nan")
    return (acc_head - acc_tail) / acc_tail * 100


def ood_delta_statistic(sums: np.ndarray) -> np.ndarray:
    """Δ = (acc-head − acc-tail) / acc-tail × 100 from column sums
    ``[head correct, head count, tail correct, tail count]`` (docs/protocols.md §3)."""
    head = sums[:, 0] / sums[:, 1]
    tail = sums[:, 2] / sums[:, 3]
    out = (head - tail) / tail * 100.0
    return np.where(tail == 0, np.nan, out)


def ood_delta_columns(acc_head: np.ndarray, acc_tail: np.ndarray) -> np.ndarray:
    """Per-unit columns of :func:`ood_delta_statistic`: a unit is a head question
    (``acc_head`` its correctness, ``acc_tail`` NaN) or a tail question (the reverse)."""
    h = np.asarray(acc_head, dtype=np.float64)
    t = np.asarray(acc_tail, dtype=np.float64)
    is_h, is_t = np.isfinite(h), np.isfinite(t)
    return np.column_stack([np.where(is_h, h, 0.0), is_h, np.where(is_t, t, 0.0), is_t])
