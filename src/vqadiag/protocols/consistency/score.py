"""Reasoning / perception consistency, introspect question files, Reasoning split (protocols.md §6).

* :func:`score_consistency` — ``vqadiag score consistency``: quadrants,
  consistency (plain and balanced), all-subs-wrong, reasoning and sub accuracy,
  with bootstrap intervals over main questions (a main and all its pairs are
  resampled together).
* :func:`introspect_questions` — ``vqadiag introspect-questions``: VQA v2-style
  question/annotation files for the main and sub-questions.
* :func:`classify_questions` — ``vqadiag classify-questions``: the paper's
  Table 2 rules, Perception vs Reasoning per question.

Correctness (documented choice, following the paper's use of VQA accuracy):

* main question — with ``annotations`` (VQA v2 annotations holding the main
  question ids) its official VQA accuracy, *correct* when it reaches
  ``threshold`` (default 1.0: at least 4 of 10 annotators gave the answer; 3 give 0.9);
  without, a normalized match (official VQA normalization of both sides,
  docs/protocols.md §1) with ``reasoning_answer_most_common``;
* sub-question — a normalized match with its ``sub_answer`` (VQA-introspect
  has one answer per sub-question, so VQA accuracy does not apply).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.data.formats.introspect import (
    DEFAULT_INCLUDE,
    Introspect,
    SubQuestion,
    answer_type,
    read_introspect,
)
from vqadiag.data.formats.predictions import (
    Prediction,
    align_predictions,
    answers_of,
    read_predictions,
)
from vqadiag.data.formats.sniff import truth_format
from vqadiag.data.io.jsonio import collector_paused_over, write_json
from vqadiag.errors import DataError, record_label
from vqadiag.metrics.bootstrap import DEFAULT_RESAMPLES, Estimate, resampled_sums
from vqadiag.metrics.vqa_normalize import canonical_answer, normalize_answer
from vqadiag.protocols.consistency.formulas import (
    QUADRANTS,
    balanced_pair_weights,
    consistency_columns,
    consistency_statistics,
)
from vqadiag.protocols.consistency.reasoning_rules import (
    PERCEPTION,
    REASONING,
    RULES,
    matching_rules,
)

_TOLERANCE = 1e-9


def _normalized(text: str | None) -> str | None:
    return None if text is None else normalize_answer(text)


def normalized_match(predictions: Sequence[str | None], answers: Sequence[str]) -> np.ndarray:
    """``normalize(pred) == normalize(answer)`` per question (official VQA normalization).

    A missing prediction (``None``) is wrong.
    """
    return np.array(
        [
            p is not None and _normalized(p) == _normalized(a)
            for p, a in zip(predictions, answers, strict=True)
        ],
        dtype=bool,
    )


def _aligned_pair(
    main_path: str | Path,
    sub_path: str | Path,
    intro: Introspect,
    allow_missing: bool,
) -> tuple[list[Prediction | None], list[Prediction | None], int]:
    """Main and sub predictions in id order (None where missing, with
    ``allow_missing``), and how many predictions are for ids that are neither a main
    nor a sub-question (ignored, so that a file of a whole split may be given, as
    ``score gqa`` ignores them). One file may hold both (the same path twice)."""
    main_file, sub_file = Path(main_path), Path(sub_path)
    main_preds = read_predictions(main_file)
    same = main_file.resolve() == sub_file.resolve()
    sub_preds = main_preds if same else read_predictions(sub_file)
    kwargs = {"allow_missing": allow_missing, "allow_extra": True}
    aligned = {
        "main": align_predictions(main_preds, list(intro.mains), main_file, **kwargs),
        "sub": align_predictions(sub_preds, list(intro.subs), sub_file, **kwargs),
    }
    known = (intro.mains, intro.subs, intro.left_out)
    extra = 0
    for path, preds in [(main_file, main_preds)] + ([] if same else [(sub_file, sub_preds)]):
        for qid in preds:
            if not any(qid in k for k in known):
                _check_not_a_sub(qid, intro, path)
                extra += 1
    return aligned["main"], aligned["sub"], extra


def _check_not_a_sub(qid: str, intro: Introspect, path: Path) -> None:
    """An id ``<main id>_<k>`` of a main question that has no ``k``-th sub-question: the
    file numbers that main's sub-questions otherwise than vqadiag (before deduplication,
    say), so its sub answers would be paired with the wrong sub-questions; refused
    rather than ignored as a question of another set."""
    main, _, k = qid.rpartition("_")
    if main in intro.mains and k.isdigit():
        raise DataError(
            path, f"question id is not a sub-question of main question {main!r} in the "
            "introspect file (sub-questions are numbered <main id>_<k> from 0 after "
            "deduplication)", record_label(qid),
        )  # fmt: skip


def _vqa_scores(
    annotations: Mapping[str, Mapping[str, Any]],
    ids: Sequence[str],
    answers: Sequence[str | None],
    path: str | Path,
    lenient: bool,
) -> np.ndarray:
    from vqadiag.metrics.vqa_accuracy import vqa_accuracies

    for qid in ids:
        if qid not in annotations:
            raise DataError(path, "main question has no annotation", record_label(qid))
    gts = [annotations[q]["answer_list"] for q in ids]
    return vqa_accuracies(list(answers), gts, lenient=lenient)


@dataclass
class ConsistencyInputs:
    """A VQA-introspect file ready to score (docs/protocols.md §6): its main and
    sub-questions, and the VQA v2 annotations of the mains when they are scored by VQA
    accuracy (``annotations_path`` names them in errors)."""

    intro: Introspect
    annotations: Mapping[str, Mapping[str, Any]] | None = None
    annotations_path: str | Path | None = None

    @property
    def main_ids(self) -> list[str]:
        """The main question ids, in file order."""
        return list(self.intro.mains)

    @property
    def sub_list(self) -> list[SubQuestion]:
        """The sub-questions, main by main in file order (the pairs)."""
        return list(self.intro.subs.values())


def load_consistency(
    introspect: str | Path | Introspect,
    *,
    annotations: str | Path | None = None,
    include_types: Iterable[str] = DEFAULT_INCLUDE,
) -> ConsistencyInputs:
    """The inputs of ``score consistency``: the introspect file (or one already parsed)
    and, optionally, the VQA v2 annotations of its main questions."""
    intro = (
        introspect
        if isinstance(introspect, Introspect)
        else read_introspect(introspect, include_types)
    )
    anns = None
    if annotations is not None:
        from vqadiag.data.formats.vqa2 import read_vqa_annotations

        anns = read_vqa_annotations(annotations, slim=True)
    return ConsistencyInputs(intro, anns, None if annotations is None else Path(annotations))


@dataclass
class ConsistencyScore:
    """Consistency's figures (docs/protocols.md §6) in the order the command prints them,
    their intervals in ``ci``, and ``units``: each main's correctness, the (main, sub)
    pairs and each sub's correctness, the values the figures are computed from."""

    values: dict[str, Any]
    ci: dict[str, Any]
    units: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The dict ``vqadiag score consistency --json`` prints."""
        return {**self.values, "ci": self.ci}


def _main_correctness(
    inputs: ConsistencyInputs, answers: Sequence[str | None], threshold: float, lenient: bool
) -> tuple[np.ndarray, np.ndarray, str]:
    """(correct, score, rule) per main: VQA accuracy ≥ ``threshold`` with annotations,
    else a normalized match with ``reasoning_answer_most_common``."""
    main_ids = inputs.main_ids
    if inputs.annotations is not None:
        assert inputs.annotations_path is not None
        scores = _vqa_scores(
            inputs.annotations, main_ids, answers, inputs.annotations_path, lenient
        )
        return scores >= threshold - _TOLERANCE, scores, f"vqa_accuracy >= {threshold:g}"
    correct = normalized_match(answers, [inputs.intro.mains[q].answer for q in main_ids])
    return correct, correct.astype(np.float64), "normalized_match"


def score_answers(
    inputs: ConsistencyInputs,
    main_answers: Sequence[str | None],
    sub_answers: Sequence[str | None],
    *,
    threshold: float = 1.0,
    lenient: bool = False,
    overall_answers: Sequence[str | None] | None = None,
    extra_predictions: int = 0,
    seed: int = 0,
    n_bootstrap: int = DEFAULT_RESAMPLES,
) -> ConsistencyScore:
    """Consistency of the mains' and subs' answers (aligned with ``inputs.main_ids`` and
    ``inputs.sub_list``; None is wrong, counted in ``missing_predictions``), with
    intervals over main questions (a main and all its pairs resampled together).
    ``overall_answers`` (on every annotated question, in annotation order) adds the
    paper's Overall VQA accuracy; ``extra_predictions``: predictions the files held for
    other questions (ignored)."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    main_ids, sub_list = inputs.main_ids, inputs.sub_list
    main_correct, main_scores, main_rule = _main_correctness(
        inputs, main_answers, threshold, lenient
    )
    position = {qid: i for i, qid in enumerate(main_ids)}
    pair_main = np.array([position[s.main_id] for s in sub_list], dtype=np.int64)
    sub_correct = normalized_match(sub_answers, [s.answer for s in sub_list])
    units = {
        "main_correct": dict(zip(main_ids, main_correct.tolist(), strict=True)),
        "pairs": [(s.main_id, s.sub_id) for s in sub_list],
        "sub_correct": sub_correct,
    }
    weights = balanced_pair_weights([_normalized(s.answer) for s in sub_list])
    columns = consistency_columns(
        pair_main, main_correct, sub_correct, pair_weights=weights, main_scores=main_scores
    )
    values, ci = _figures(columns, len(main_ids), inputs.annotations is not None, seed, n_bootstrap)
    if overall_answers is not None:
        assert inputs.annotations is not None and inputs.annotations_path is not None
        values["overall_accuracy"], ci["overall_accuracy"], values["n_overall"] = _overall(
            inputs, overall_answers, lenient, seed, n_bootstrap
        )
    pairs_per_main = columns[:, 4]
    values.update(
        n_main=len(main_ids),
        n_pairs=len(sub_list),
        n_main_without_subs=int(np.sum(pairs_per_main == 0)),
        n_main_correct=int(main_correct.sum()),
        main_correctness=main_rule,
        sub_correctness="normalized_match",
        extra_predictions=extra_predictions,
        missing_predictions={
            "main": sum(a is None for a in main_answers),
            "sub": sum(a is None for a in sub_answers),
        },
    )
    return ConsistencyScore(values, ci, units)


def _figures(
    columns: np.ndarray, n_main: int, annotated: bool, seed: int, n_bootstrap: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The quadrants and consistency figures of the per-main columns, with intervals."""
    point = consistency_statistics(columns.sum(axis=0)[None, :])
    boot = consistency_statistics(resampled_sums(columns, n_bootstrap, seed))

    def pick(key: str) -> tuple[float, dict[str, Any]]:
        value = point[key][0]
        return float(value), Estimate.from_bootstrap(value, boot[key], n_main).to_dict()

    values: dict[str, Any] = {"quadrants": {}}
    ci: dict[str, Any] = {"quadrants": {}}
    for name in QUADRANTS:
        values["quadrants"][name], ci["quadrants"][name] = pick(name)
    keys = [
        "consistency",
        "consistency_balanced",
        "all_subs_wrong",
        "reasoning_accuracy",
        "sub_accuracy",
    ]
    if annotated:
        keys.append("reasoning_vqa_accuracy")
        point["reasoning_vqa_accuracy"] = point["reasoning_score"]
        boot["reasoning_vqa_accuracy"] = boot["reasoning_score"]
    for key in keys:
        values[key], ci[key] = pick(key)
    return values, ci


def _overall(
    inputs: ConsistencyInputs,
    answers: Sequence[str | None],
    lenient: bool,
    seed: int,
    n_bootstrap: int,
) -> tuple[float, dict[str, Any], int]:
    """The paper's Overall VQA accuracy on every annotated question, with its interval."""
    assert inputs.annotations is not None and inputs.annotations_path is not None
    all_ids = list(inputs.annotations)
    scores = _vqa_scores(inputs.annotations, all_ids, answers, inputs.annotations_path, lenient)
    sums = resampled_sums(scores, n_bootstrap, seed)[:, 0]
    value = 100.0 * float(scores.sum()) / scores.size
    boot_overall = 100.0 * sums / scores.size
    est = Estimate.from_bootstrap(value, boot_overall, scores.size).to_dict()
    return value, est, int(scores.size)


@collector_paused_over("introspect", "main", "sub", "annotations", "overall")
def score_consistency(
    introspect: str | Path,
    main: str | Path,
    sub: str | Path,
    *,
    annotations: str | Path | None = None,
    overall: str | Path | None = None,
    threshold: float = 1.0,
    lenient: bool = False,
    include_types: Iterable[str] = DEFAULT_INCLUDE,
    allow_missing: bool = False,
    seed: int = 0,
    n_bootstrap: int = DEFAULT_RESAMPLES,
) -> dict[str, Any]:
    """Consistency of main (Reasoning) and sub (Perception) answers (protocols.md §6, paper §5, §7).

    Returns the JSON object of ``vqadiag score consistency --json``: the four
    quadrants (% of pairs), ``consistency`` = M✓S✓ / (M✓S✓ + M✓S✗),
    ``consistency_balanced``, ``all_subs_wrong`` (% of correct mains whose subs
    are all wrong), ``reasoning_accuracy`` (% mains correct, each once),
    ``sub_accuracy`` (% pairs whose sub is correct), counts and intervals.
    ``overall`` (predictions on every question of ``annotations``) adds the
    paper's Overall VQA accuracy. :func:`load_consistency` and :func:`score_answers`
    are the same steps in memory.
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if overall is not None and annotations is None:
        raise ValueError("overall accuracy needs the VQA v2 annotations (--annotations)")
    intro = read_introspect(introspect, include_types)
    main_pred, sub_pred, extra = _aligned_pair(main, sub, intro, allow_missing)
    inputs = load_consistency(intro, annotations=annotations)
    overall_answers = None
    if overall is not None:
        assert inputs.annotations is not None
        aligned = align_predictions(
            read_predictions(overall), list(inputs.annotations), overall,
            allow_missing=allow_missing,
        )  # fmt: skip
        overall_answers = answers_of(aligned)
    score = score_answers(
        inputs, answers_of(main_pred), answers_of(sub_pred), threshold=threshold,
        lenient=lenient, overall_answers=overall_answers, extra_predictions=extra, seed=seed,
        n_bootstrap=n_bootstrap,
    )  # fmt: skip
    return score.to_dict()


def introspect_questions(
    introspect: str | Path, out: str | Path, include_types: Iterable[str] = DEFAULT_INCLUDE
) -> dict[str, Any]:
    """Write VQA v2-style files for the main and sub-questions (``vqadiag introspect-questions``).

    Sub-question ids are ``"<main_qid>_<k>"`` (:mod:`vqadiag.data.formats.introspect`).
    Returns ``{"n_main", "n_sub", "files": {name: path}}``.
    """
    intro = read_introspect(introspect, include_types)
    files = write_vqa_style(intro, out)
    return {"n_main": len(intro.mains), "n_sub": len(intro.subs), "files": files}


def _questions_of(path: str | Path) -> tuple[str, list[tuple[str, str, str]]]:
    """``(format, [(qid, question text, kind)])`` of a VQA v2, GQA or introspect file."""
    kind = truth_format(path)
    if kind == "vqa_questions":
        from vqadiag.data.formats.vqa2 import read_vqa_questions

        records = read_vqa_questions(path)
        return "vqa", [(q, r["question"], "main") for q, r in records.items()]
    if kind == "vqa_annotations":
        raise DataError(path, "this is a VQA v2 annotations file; pass the questions file")
    if kind == "introspect":
        intro = read_introspect(path)
        rows = [(m.main_id, m.question, "main") for m in intro.mains.values()]
        rows += [(s.sub_id, s.question, "sub") for s in intro.subs.values()]
        return "introspect", rows
    from vqadiag.data.formats.gqa import read_gqa_questions

    records = read_gqa_questions(path, require=("question",))
    for qid, record in records.items():
        if not isinstance(record["question"], str):
            raise DataError(path, "'question' must be a string", record_label(qid))
    return "gqa", [(q, r["question"], "main") for q, r in records.items()]


def classify_questions(
    questions: str | Path,
    out: str | Path | None = None,
    *,
    seed: int = 0,
    n_bootstrap: int = DEFAULT_RESAMPLES,
) -> dict[str, Any]:
    """Label each question Perception or Reasoning with paper Table 2's rules (protocols.md §6).

    Input: VQA v2 questions, GQA questions or VQA-introspect (main and
    sub-questions). ``out`` receives ``{qid: {"label", "rules"}}``. Returns
    counts, the reasoning share (percent, with its interval over questions)
    and how many questions each rule flags (a question can match several).
    """
    fmt, rows = _questions_of(questions)
    labels: dict[str, dict[str, Any]] = {}
    hits = np.zeros(len(RULES) + 1, dtype=np.int64)
    by_kind: dict[str, dict[str, int]] = {}
    reasoning = np.zeros(len(rows), dtype=np.float64)
    for i, (qid, text, kind) in enumerate(rows):
        matched = matching_rules(text)
        label = PERCEPTION if matched else REASONING
        labels[qid] = {"label": label, "rules": matched}
        hits[matched] += 1
        reasoning[i] = not matched
        counts = by_kind.setdefault(kind, {REASONING: 0, PERCEPTION: 0})
        counts[label] += 1
    n = len(rows)
    value = 100.0 * float(reasoning.sum()) / n
    boot = 100.0 * resampled_sums(reasoning, n_bootstrap, seed)[:, 0] / n
    result: dict[str, Any] = {
        "format": fmt,
        "n": n,
        "counts": {REASONING: int(reasoning.sum()), PERCEPTION: int(n - reasoning.sum())},
        "reasoning_percent": value,
        "by_rule": [{**rule.describe(), "n": int(hits[rule.number])} for rule in RULES],
    }
    if fmt == "introspect":
        result["by_kind"] = by_kind
    result["ci"] = {"reasoning_percent": Estimate.from_bootstrap(value, boot, n).to_dict()}
    if out is not None:
        write_json(out, labels)
        result["out"] = str(out)
    return result


def _vqa_files(
    rows: list[tuple[str, Any, str, str]], subtype: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    info = {"description": "written by vqadiag introspect-questions from VQA-introspect"}
    questions = [
        {"question_id": qid, "image_id": image_id, "question": question}
        for qid, image_id, question, _ in rows
    ]
    annotations = [
        {
            "question_id": qid,
            "image_id": image_id,
            "question_type": "introspect",
            "answer_type": answer_type(answer),
            "multiple_choice_answer": answer,
            "answers": [
                {"answer": answer, "answer_confidence": "yes", "answer_id": i} for i in range(1, 11)
            ],
        }
        for qid, image_id, _, answer in rows
    ]
    head = {"info": info, "data_type": "mscoco", "data_subtype": subtype}
    return {**head, "questions": questions}, {**head, "annotations": annotations}


def write_vqa_style(intro: Introspect, out_dir: str | Path) -> dict[str, str]:
    """Write the main and sub-questions as VQA v2-style files under ``out_dir``.

    Files: ``main_questions.json``, ``main_annotations.json``,
    ``sub_questions.json``, ``sub_annotations.json`` (``{"questions": [...]}`` /
    ``{"annotations": [...]}`` with string ``question_id``; each annotation
    repeats the single known answer, in its official VQA normalization
    (docs/protocols.md §1), 10 times, so the VQA accuracy of a prediction is 1 when it
    equals that answer and 0 otherwise) and
    ``sub_index.json`` ``{sub_id: main_id}``. Returns ``{name: path}``.
    """
    out = Path(out_dir)
    mains = [
        (m.main_id, m.image_id, m.question, canonical_answer(m.answer))
        for m in intro.mains.values()
    ]
    subs = [
        (s.sub_id, intro.mains[s.main_id].image_id, s.question, canonical_answer(s.answer))
        for s in intro.subs.values()
    ]
    written: dict[str, str] = {}
    for prefix, rows in (("main", mains), ("sub", subs)):
        questions, annotations = _vqa_files(rows, f"vqa-introspect-{prefix}")
        written[f"{prefix}_questions"] = str(
            write_json(out / f"{prefix}_questions.json", questions)
        )
        written[f"{prefix}_annotations"] = str(
            write_json(out / f"{prefix}_annotations.json", annotations)
        )
    index = {s.sub_id: s.main_id for s in intro.subs.values()}
    written["sub_index"] = str(write_json(out / "sub_index.json", index))
    return written
