"""GQA's own metrics, as the official ``eval.py`` computes them (docs/protocols.md §7).

Pure functions over parsed GQA question records and answer strings; no file I/O.
The numbers equal the official script's on the same input (same arithmetic,
same order of summation); where the official script crashes we do the right
thing and say so:

* accuracy: exact string match with ``answer`` (no normalization), over
  ``isBalanced`` questions (all with ``all_questions``); also per
  ``types.structural``, open (``structural == "query"``) vs binary (every other
  structural type), per ``types.semantic``, per word count
  ``len(question.split())`` and per number of reasoning steps;
* steps: the ``semantic`` operations whose text ``"<operation>: <argument>"``
  contains none of ``"exist"``, ``"query: name"``, ``"choose name"`` (substring
  test, as the official ``getStepsNum``);
* validity / plausibility: the prediction is in ``choices[qid].valid`` /
  ``.plausible``; when ``types.detailed`` contains ``"Common"`` the list is
  replaced by ``["color", "material", "shape"]`` (official ``belongs``);
* consistency: for each correctly answered scored question q with entailed
  questions E_q = entailed(q) \\ {q}: s_q = mean over e ∈ E_q of [pred_e == gold_e];
  consistency = 100 · mean_q s_q. The official script raises ``KeyError`` when
  an entailed question has no prediction (or is not in the question file); we
  skip such entailed questions, drop q when none is left, and count both;
* distribution: per ``groups.global`` g (null groups are left out) with gold
  answer counts e_ga and predicted counts o_ga of the same answers,
  χ²_g = Σ_a (o_ga − e_ga)² / e_ga; distribution = Σ_g χ²_g · N_g / Σ_g N_g / 100
  with N_g = Σ_a e_ga (lower is better).

Official rates are ``float(sum(scores)) / len(scores) * 100`` (and 0 for an
empty list); we return NaN for an empty list instead of a misleading 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Operation texts that do not count as a reasoning step (official ``getStepsNum``).
STEP_EXCLUDED: tuple[str, ...] = ("exist", "query: name", "choose name")
#: Answer group used for validity / plausibility of "Common" questions (official ``belongs``).
COMMON_GROUP: tuple[str, ...] = ("color", "material", "shape")


def words_count(question: str) -> int:
    """Question length in words: ``len(question.split())`` (``getWordsNum``, protocols.md §7)."""
    return len(question.split())


def steps_count(semantic: Iterable[Mapping[str, Any]]) -> int:
    """Reasoning steps of a question (official ``getStepsNum``, docs/protocols.md §7).

    Counts the ``semantic`` operations c for which the text
    ``f"{c['operation']}: {c['argument']}"`` contains none of :data:`STEP_EXCLUDED`
    as a substring (so ``exist``, ``query: name`` and ``choose name`` steps are
    not counted).
    """
    return steps_of_pairs((op["operation"], op["argument"]) for op in semantic)


_EXIST, _QUERY_NAME, _CHOOSE_NAME = STEP_EXCLUDED  # tested inline: no generator per step


def steps_of_pairs(steps: Iterable[tuple[Any, Any]]) -> int:
    """:func:`steps_count` of ``(operation, argument)`` pairs."""
    count = 0
    for operation, argument in steps:
        text = f"{operation}: {argument}"
        if _EXIST not in text and _QUERY_NAME not in text and _CHOOSE_NAME not in text:
            count += 1
    return count


def belongs(answer: str | None, group: Sequence[str], detailed_type: str) -> bool:
    """Whether ``answer`` is in ``group`` (official ``belongs``, docs/protocols.md §7).

    For questions whose ``types.detailed`` contains ``"Common"`` (e.g.
    ``twoCommon``: "What do the X and Y have in common?") the group is replaced
    by :data:`COMMON_GROUP`. A missing prediction (``None``) belongs nowhere.
    """
    if answer is None:
        return False
    if "Common" in detailed_type:
        group = COMMON_GROUP
    return answer in group


def official_rate(scores: Sequence[float]) -> float:
    """``float(sum(scores)) / len(scores) * 100`` in the official order of operations.

    Python's sequential ``sum`` is used so the last bits equal the official
    script's; an empty list gives NaN (the official script prints 0).
    """
    if len(scores) == 0:
        return float("nan")
    return float(sum(scores)) / len(scores) * 100


@dataclass(frozen=True, slots=True)
class ConsistencyResult:
    """Per-question consistency scores s_q and what had to be skipped.

    ``question_ids[i]`` has score ``scores[i]`` (a fraction in [0, 1]) computed
    over ``n_entailed[i]`` entailed questions. ``entailed_skipped`` counts
    entailed references without a prediction (or unknown to the question file);
    ``questions_skipped`` counts correct questions all of whose entailed
    questions were skipped.
    """

    question_ids: list[str]
    scores: list[float]
    n_entailed: list[int]
    entailed_skipped: int
    questions_skipped: int

    @property
    def value(self) -> float:
        """100 · mean_q s_q (official order of summation), NaN without scored questions."""
        return official_rate(self.scores)


def consistency_scores(
    scored_ids: Sequence[str],
    correct: Sequence[bool],
    questions: Mapping[str, Mapping[str, Any]],
    predictions: Mapping[str, str | None],
) -> ConsistencyResult:
    """GQA consistency over the correctly answered scored questions (docs/protocols.md §7).

    For each q in ``scored_ids`` with ``correct`` true and non-empty
    E_q = [e in q.entailed if e != q]: s_q = mean_{e ∈ E_q} [pred_e == gold_e],
    skipping entailed questions that are missing from ``questions`` or have no
    (or a ``None``) prediction — the official script would raise ``KeyError``.
    """
    entailed = [questions[qid].get("entailed") or () for qid in scored_ids]
    answer_of = {qid: record.get("answer") for qid, record in questions.items()}
    return consistency_of_lists(scored_ids, correct, entailed, answer_of, predictions)


def consistency_of_lists(
    scored_ids: Sequence[str],
    correct: Sequence[bool],
    entailed: Sequence[Sequence[str]],
    answer_of: Mapping[str, Any],
    predictions: Mapping[str, str | None],
) -> ConsistencyResult:
    """:func:`consistency_scores` with each scored question's ``entailed`` ids given as a
    list and ``answer_of`` holding the gold answer of every question of the file."""
    ids: list[str] = []
    scores: list[float] = []
    counts: list[int] = []
    entailed_skipped = 0
    questions_skipped = 0
    for qid, ok, refs in zip(scored_ids, correct, entailed, strict=True):
        if not ok:
            continue
        inferred = [eid for eid in refs if eid != qid]
        if not inferred:
            continue
        hits: list[float] = []
        for eid in inferred:
            predicted = predictions.get(eid)
            if eid not in answer_of or predicted is None:
                entailed_skipped += 1
                continue
            hits.append(float(1 if predicted == answer_of[eid] else 0))
        if not hits:
            questions_skipped += 1
            continue
        ids.append(qid)
        scores.append(float(sum(hits)) / len(hits))
        counts.append(len(hits))
    return ConsistencyResult(ids, scores, counts, entailed_skipped, questions_skipped)


@dataclass(frozen=True, slots=True)
class DistributionIndex:
    """Per-question coding of the distribution metric for fast bootstrap.

    ``gold_pair[i]``: index of (global group, gold answer) of question i, or −1
    when its global group is null; ``pred_pair[i]``: index of (global group,
    predicted answer) when that pair is one of the gold pairs, else −1;
    ``pair_group[k]``: group index of pair k.
    """

    gold_pair: np.ndarray
    pred_pair: np.ndarray
    pair_group: np.ndarray
    n_groups: int


def distribution_index(
    global_groups: Sequence[str | None],
    gold: Sequence[str],
    predicted: Sequence[str | None],
) -> DistributionIndex:
    """Code questions by (global group, answer) pairs for :func:`distribution_from_counts`."""
    pairs: dict[tuple[str, str], int] = {}
    groups: dict[str, int] = {}
    pair_group: list[int] = []
    gold_pair = np.full(len(gold), -1, dtype=np.int64)
    for i, (group, answer) in enumerate(zip(global_groups, gold, strict=True)):
        if group is None:
            continue
        key = (group, answer)
        k = pairs.get(key)
        if k is None:
            k = pairs[key] = len(pairs)
            pair_group.append(groups.setdefault(group, len(groups)))
        gold_pair[i] = k
    pred_pair = np.full(len(gold), -1, dtype=np.int64)
    for i, (group, answer) in enumerate(zip(global_groups, predicted, strict=True)):
        if group is not None and answer is not None:
            pred_pair[i] = pairs.get((group, answer), -1)
    return DistributionIndex(gold_pair, pred_pair, np.asarray(pair_group, np.int64), len(groups))


def distribution_from_counts(
    gold_counts: np.ndarray, pred_counts: np.ndarray, pair_group: np.ndarray, n_groups: int
) -> np.ndarray:
    """Distribution score from (B × k) gold / predicted counts of the k (group, answer) pairs.

    Pairs with a zero gold count are not gold answers of that sample and are
    left out (as in the official histogram). Returns B values
    Σ_g χ²_g · N_g / Σ_g N_g / 100 (NaN where no gold answer is left).
    """
    e = np.atleast_2d(np.asarray(gold_counts, dtype=np.float64))
    o = np.atleast_2d(np.asarray(pred_counts, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(e > 0, (o - e) ** 2 / np.where(e > 0, e, 1.0), 0.0)
    onehot = np.zeros((pair_group.shape[0], n_groups))
    onehot[np.arange(pair_group.shape[0]), pair_group] = 1.0
    chi = terms @ onehot
    overall = e @ onehot
    total = overall.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (chi * overall).sum(axis=1) / total / 100


def chi_square_distribution(
    global_groups: Sequence[str | None],
    gold: Sequence[str],
    predicted: Sequence[str | None],
) -> float:
    """GQA's distribution metric, official ``chiSquare(gold, predicted) / 100`` (protocols.md §7).

    Groups and answers are visited in first-seen order and summed with Python
    floats exactly as the official script; questions whose global group is null
    do not count; a missing prediction (``None``) adds to no histogram. NaN when
    no question has a global group (the official script divides by zero).
    """
    gold_dist: dict[str, dict[str, int]] = {}
    pred_dist: dict[str, dict[str, int]] = {}
    for group, answer, pred in zip(global_groups, gold, predicted, strict=True):
        if group is None:
            continue
        g = gold_dist.setdefault(group, {})
        g[answer] = g.get(answer, 0) + 1
        p = pred_dist.setdefault(group, {})
        if pred is not None:
            p[pred] = p.get(pred, 0) + 1
    sum_score: float = 0
    sum_overall = 0
    for group, answers in gold_dist.items():
        score: float = 0
        overall = 0
        for answer, e in answers.items():
            o = pred_dist[group].get(answer, 0)
            score += (float(o - e) ** 2) / e
            overall += e
        sum_score += score * overall
        sum_overall += overall
    if sum_overall == 0:
        return float("nan")
    return float(sum_score) / sum_overall / 100


def bootstrap_distribution(
    index: DistributionIndex, *, n_resamples: int = 1000, seed: int = 0
) -> np.ndarray:
    """Bootstrap replicates of the distribution score, resampling questions.

    Each replicate draws n question indices with replacement and recounts the
    (group, answer) histograms of the drawn questions (a question outside every pair
    counts in a last, dropped bin) — O(n) per replicate, whatever the number of pairs.
    Questions with the same (gold pair, predicted pair) count alike, so the drawn ones
    are counted per such combination (one ``np.bincount``) and the combinations' counts
    summed into both histograms (whole numbers, exact in float64).
    """
    n = index.gold_pair.shape[0]
    k = index.pair_group.shape[0]
    out = np.full(n_resamples, np.nan)
    if n == 0 or k == 0:
        return out
    rng = np.random.default_rng(seed)
    gold_bin = np.where(index.gold_pair >= 0, index.gold_pair, k)
    pred_bin = np.where(index.pred_pair >= 0, index.pred_pair, k)
    combinations, combination_of = np.unique(gold_bin * (k + 1) + pred_bin, return_inverse=True)
    combination_gold, combination_pred = np.divmod(combinations, k + 1)
    chunk = 64
    for start in range(0, n_resamples, chunk):
        stop = min(n_resamples, start + chunk)
        e = np.empty((stop - start, k))
        o = np.empty((stop - start, k))
        for row in range(stop - start):
            drawn = rng.integers(0, n, size=n)
            times = np.bincount(combination_of[drawn], minlength=len(combinations))
            e[row] = np.bincount(combination_gold, weights=times, minlength=k + 1)[:k]
            o[row] = np.bincount(combination_pred, weights=times, minlength=k + 1)[:k]
        out[start:stop] = distribution_from_counts(e, o, index.pair_group, index.n_groups)
    return out


@dataclass(slots=True)
class GQAEvaluation:
    """Per-question outcomes of the scored questions, in question-file order.

    ``correct``, ``valid`` and ``plausible`` are 0/1 float arrays (the last two
    ``None`` without choices); ``structural``, ``semantic``, ``words`` and
    ``steps`` are the per-question categories; ``consistency`` and
    ``distribution`` the two non-accuracy metrics.
    """

    question_ids: list[str]
    correct: np.ndarray
    structural: list[str]
    semantic: list[str]
    words: list[int]
    steps: list[int]
    valid: np.ndarray | None
    plausible: np.ndarray | None
    consistency: ConsistencyResult
    distribution: float
    distribution_index: DistributionIndex
    breakdowns: dict[str, dict[Any, list[int]]] = field(default_factory=dict)

    @property
    def is_open(self) -> np.ndarray:
        """Open questions: structural type ``query``; every other type is binary."""
        return np.array([s == "query" for s in self.structural], dtype=bool)


def _group_positions(keys: Sequence[Any]) -> dict[Any, list[int]]:
    out: dict[Any, list[int]] = {}
    for i, key in enumerate(keys):
        out.setdefault(key, []).append(i)
    return out


@dataclass(frozen=True, slots=True)
class GQAQuestionColumns:
    """What eval.py reads of the scored questions, in question-file order
    (docs/protocols.md §7): gold ``answers``, ``structural`` / ``semantic`` / ``detailed``
    types (``detailed`` None when not needed), ``global_groups``, word counts, step counts
    and the ``entailed`` ids; ``answer_of`` holds the gold answer of every question of the
    file (entailed questions need not be scored)."""

    question_ids: list[str]
    answers: list[Any]
    structural: list[str]
    semantic: list[str]
    detailed: list[str] | None
    global_groups: list[str | None]
    words: list[int]
    steps: list[int]
    entailed: list[Sequence[str]]
    answer_of: Mapping[str, Any]


def question_columns(
    questions: Mapping[str, Mapping[str, Any]], scored_ids: Sequence[str], *, detailed: bool
) -> GQAQuestionColumns:
    """:class:`GQAQuestionColumns` of parsed question records (``detailed``: also read
    ``types.detailed``)."""
    records = [questions[qid] for qid in scored_ids]
    return GQAQuestionColumns(
        question_ids=list(scored_ids),
        answers=[r["answer"] for r in records],
        structural=[r["types"]["structural"] for r in records],
        semantic=[r["types"]["semantic"] for r in records],
        detailed=[r["types"]["detailed"] for r in records] if detailed else None,
        global_groups=[r["groups"]["global"] for r in records],
        words=[words_count(r["question"]) for r in records],
        steps=[steps_count(r["semantic"]) for r in records],
        entailed=[r.get("entailed") or () for r in records],
        answer_of={qid: record.get("answer") for qid, record in questions.items()},
    )


def evaluate_gqa(
    questions: Mapping[str, Mapping[str, Any]],
    predictions: Mapping[str, str | None],
    scored_ids: Sequence[str],
    choices: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
) -> GQAEvaluation:
    """Every GQA eval.py metric over ``scored_ids`` (docs/protocols.md §7).

    ``questions`` holds every question (entailed ones included); ``predictions``
    maps ids to answers (``None`` or absent = no prediction, scored as wrong,
    invalid and implausible); ``choices`` (optional) gives ``valid`` and
    ``plausible`` answer lists per scored question. Records must carry
    ``question``, ``answer``, ``types.structural``, ``types.semantic``,
    ``semantic`` and ``groups.global`` (and ``types.detailed`` with choices).
    """
    columns = question_columns(questions, scored_ids, detailed=choices is not None)
    lists = None
    if choices is not None:
        lists = (
            [choices[qid]["valid"] for qid in scored_ids],
            [choices[qid]["plausible"] for qid in scored_ids],
        )
    return evaluate_columns(columns, predictions, lists)


def _belonging(
    preds: Sequence[str | None], groups: Sequence[Sequence[str]], detailed: Sequence[str]
) -> np.ndarray:
    return np.array(
        [belongs(p, g, d) for p, g, d in zip(preds, groups, detailed, strict=True)],
        dtype=np.float64,
    )


def evaluate_columns(
    columns: GQAQuestionColumns,
    predictions: Mapping[str, str | None],
    choice_lists: tuple[Sequence[Sequence[str]], Sequence[Sequence[str]]] | None = None,
) -> GQAEvaluation:
    """:func:`evaluate_gqa` on :class:`GQAQuestionColumns`; ``choice_lists`` are the valid
    and the plausible answers of each scored question (``columns.detailed`` is needed
    with them)."""
    scored_ids = columns.question_ids
    preds = [predictions.get(qid) for qid in scored_ids]
    gold = columns.answers
    correct_flags = [p is not None and p == g for p, g in zip(preds, gold, strict=True)]
    valid = plausible = None
    if choice_lists is not None:
        if columns.detailed is None:
            raise ValueError("choices need the questions' detailed types")
        valid = _belonging(preds, choice_lists[0], columns.detailed)
        plausible = _belonging(preds, choice_lists[1], columns.detailed)
    global_groups = columns.global_groups
    consistency = consistency_of_lists(
        scored_ids, correct_flags, columns.entailed, columns.answer_of, predictions
    )
    return GQAEvaluation(
        question_ids=list(scored_ids),
        correct=np.array(correct_flags, dtype=np.float64),
        structural=columns.structural,
        semantic=columns.semantic,
        words=columns.words,
        steps=columns.steps,
        valid=valid,
        plausible=plausible,
        consistency=consistency,
        distribution=chi_square_distribution(global_groups, gold, preds),
        distribution_index=distribution_index(global_groups, gold, preds),
        breakdowns={
            "perStructuralType": _group_positions(columns.structural),
            "perSemanticType": _group_positions(columns.semantic),
            "perLength": _group_positions(columns.words),
            "perSteps": _group_positions(columns.steps),
        },
    )
