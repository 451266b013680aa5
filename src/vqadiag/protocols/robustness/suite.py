"""Suite ``robustness``: accuracy under basic-question noise, Acc_diff and R_score
(docs/protocols.md §4)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np

from vqadiag.data.io.atomic import file_digest
from vqadiag.data.io.jsonio import write_json
from vqadiag.errors import DataError
from vqadiag.metrics.compare import compare_statistic
from vqadiag.probes.conditions import Condition
from vqadiag.probes.store import Answer
from vqadiag.protocols.robustness.bqd_cache import fetch_shared, keep_shared
from vqadiag.protocols.robustness.formulas import DEFAULT_M, DEFAULT_T, r_score_statistic
from vqadiag.protocols.robustness.plots import PLOTS
from vqadiag.suites.base import (
    Drilldown,
    Figure,
    FindingRule,
    Suite,
    SuiteOutput,
    SuiteSkipped,
    Units,
    register_suite,
)
from vqadiag.suites.sources import GQASource, plain_run, probe_of, raw_texts, unit_row
from vqadiag.suites.state import DiagnoseState, estimate_of, write_predictions

if TYPE_CHECKING:
    from vqadiag.protocols.robustness.basic_questions.noise import PackedTriples

N_PARTITIONS = 7


def r_score_test(units_a: Units, units_b: Units, result_a: Any, *, seed: int, n_bootstrap: int):
    """Paired bootstrap of R_score_A − R_score_B (partition 1) over the questions both
    models carry, with A's limits t and m (docs/report.md)."""

    def carries(units: Units) -> set[str]:
        return {
            i
            for i, v in units.items()
            if v.get("correct_clean") is not None and v.get("correct_noise_1") is not None
        }

    ids = sorted(carries(units_a) & carries(units_b))
    if not ids:
        return None
    suite = result_a if isinstance(result_a, dict) else {}
    t, m = float(suite.get("t", DEFAULT_T)), float(suite.get("m", DEFAULT_M))

    def cols(units: Units) -> np.ndarray:
        return np.array(
            [[units[i]["correct_clean"], units[i]["correct_noise_1"], 1.0] for i in ids]
        )

    return compare_statistic(
        cols(units_a), cols(units_b), r_score_statistic(t, m), n_resamples=n_bootstrap, seed=seed
    )


def noise_flip(values: Any) -> bool | None:
    """Right on the clean question, wrong on some noisy one."""
    clean = values.get("correct_clean")
    if clean is None:
        return None
    noisy = [v for k, v in values.items() if k.startswith("correct_noise_") and v is not None]
    return clean >= 1.0 and any(v < 1.0 for v in noisy)


@register_suite
class RobustnessSuite(Suite):
    """The model on each main question with 3 basic questions appended, 7 partitions."""

    name = "robustness"
    title = "Robustness to basic-question noise"
    datasets = ("gqa", "basic-question dataset (--bqd, or built from gqa train)")
    conditions = ("gqa.all", *(f"gqa.noise_{k}" for k in range(1, N_PARTITIONS + 1)))
    requires: ClassVar[Mapping[str, str]] = {
        "reruns": "prediction files answer only the plain condition (noisy questions)"
    }
    display_order = 60
    own_prefix = True
    plots = PLOTS
    figures = (
        Figure("r_score", "R_score (partition 1)", unit="0–1", decimals=3, test=r_score_test),
        Figure("noise_accuracy", "accuracy, noise partition", many=True, card=False),
    )
    findings = (
        FindingRule(
            "r_score", 0.5, "below", "fragile to related questions",
            "R_score {value} [{ci}] below 0.5: related questions appended change its answers",
            tone="bad",
        ),
    )  # fmt: skip
    drilldown = Drilldown(
        "Noise flips: right on the clean question, wrong with basic questions added", noise_flip
    )

    def run(self, state: DiagnoseState) -> SuiteOutput:
        return robustness_suite(state)


def _bqd_texts(
    state: DiagnoseState, src: GQASource, mains: list[str]
) -> tuple[Iterator[Any], Path, dict]:
    """The basic-question dataset's ``(question id, question, basic texts)``
    (:func:`~vqadiag.data.formats.bqd.read_bqd_texts`), its file and what results.json
    says of it: ``--bqd`` or a General BQD built (and cached) here for the main questions
    ``mains`` (the suite's prefix)."""
    o = state.options
    if o.bqd is not None:
        try:
            from vqadiag.data.formats.bqd import read_bqd_texts
        except ImportError:
            raise SuiteSkipped("basic-question datasets need vqadiag.data.formats.bqd") from None
        return read_bqd_texts(o.bqd), Path(o.bqd), {"path": str(o.bqd), "built": False}
    try:
        from vqadiag.data.formats.bqd import read_bqd_texts
        from vqadiag.protocols.robustness.basic_questions.bqd_build import build_bqd
    except ImportError:
        raise SuiteSkipped("no --bqd and basic-question ranking is not available") from None
    pool, pool_split = _pool_file(src, o.split)
    from vqadiag.probes.fingerprints import stable_hash

    main_file = src.prefix_file(mains, state.inputs / "robustness_main_questions.json")
    out = state.out / "bqd.json"
    key = stable_hash(
        {
            "pool": file_digest(pool),  # its content: a copy keeps size and time (cp -p)
            "main": mains,
            "main_questions": file_digest(main_file),
            "ranker": o.bq_ranker,
            "seed": o.seed,
        }
    )
    meta_path = state.out / "bqd.meta.json"
    meta = {
        "key": key, "pool": str(pool), "pool_split": pool_split, "ranker": o.bq_ranker,
        "embedder": "lsa",
    }  # fmt: skip
    cached = _bqd_cached(out, meta_path, key)
    shared = False
    if not cached:
        # bqd.meta.json commits bqd.json: it goes first and comes back last, with the
        # digest of the dataset it describes, so a kill in between never leaves a pair
        # that a later run would take for another ranker's dataset
        meta_path.unlink(missing_ok=True)
        digest = fetch_shared(key, out)
        shared = digest is not None
        if digest is None:
            build_bqd([pool], main_file, out, ranker=o.bq_ranker, seed=o.seed, progress=o.progress)
            digest = file_digest(out)
            keep_shared(key, out, digest)
        write_json(meta_path, {**meta, "sha256": digest})
    info = {"path": out.name, "built": True, "cached": cached, "shared_cache": shared, **meta}
    return read_bqd_texts(out), out, info


def _applied(texts: Iterator[Any], src: GQASource, wanted: set[str], bqd: Path) -> Iterator[Any]:
    """The triples of the BQD file ``bqd`` for the diagnosed questions ``wanted`` (no
    texts kept for the others), each checked to be about the question it is applied to
    (:func:`~vqadiag.data.formats.bqd.check_same_main`)."""
    from vqadiag.data.formats.bqd import check_same_main

    for triple in texts:
        qid = triple[0]
        if qid in wanted:
            check_same_main(bqd, qid, triple[1], src.records[qid]["question"], src.questions_file)
            yield triple


def _pool_file(src: GQASource, split: str) -> tuple[Path, str]:
    """The basic-question pool: the GQA train questions, else (data that holds one split
    only, e.g. a testdev copy) the diagnosed split's own questions; a main question is
    never its own basic question (docs/basic-questions.md, "The pool")."""
    for pool_split in ("train", split):
        try:
            return src.data.questions_path(pool_split), pool_split
        except DataError:
            continue
    raise SuiteSkipped("no --bqd and no GQA questions for the basic-question pool")


def _bqd_cached(out: Path, meta_path: Path, key: str) -> bool:
    """Whether ``out`` is the dataset of ``key``: its meta file names the key and the
    digest of exactly the bytes ``out`` holds."""
    if not (out.is_file() and meta_path.is_file()):
        return False
    from vqadiag.data.io.jsonio import read_json

    try:
        recorded = read_json(meta_path)
    except DataError:
        return False
    return (
        isinstance(recorded, dict)
        and recorded.get("key") == key
        and recorded.get("sha256") == file_digest(out)
    )


class _Raw(NamedTuple):
    """A generative model's raw text, as :func:`raw_texts` reads it off an answer."""

    raw: str | None


def _answer_texts(answers: Sequence[Answer]) -> tuple[list[str], list[str | None] | None]:
    """The answers' texts, and their raw texts when any answer has one: all the suite
    keeps of a run once its prediction file is written."""
    raws = [a.raw for a in answers]
    return [a.answer for a in answers], raws if any(r is not None for r in raws) else None


def _noise_runs(
    state: DiagnoseState, src: GQASource, qids: list[str], clean: list[Answer],
    triples: PackedTriples,
) -> dict[str, tuple[list[str], list[str | None] | None]]:  # fmt: skip
    """``{"clean" | "noise_k": (answer texts, raw texts or None)}`` of ``qids``, each
    condition's prediction file written (for ``vqadiag score robustness`` to re-score).
    ``triples``: the basic-question dataset's texts (``shared_texts``). Partition k's
    noisy questions are made when its run asks them, and the run is released as soon as
    its file is written: the suite never holds the seven partitions' texts or the seven
    runs' answers at once."""
    from vqadiag.protocols.robustness.basic_questions.noise import partition_of_texts

    write_predictions(state, "robustness", "clean", qids, clean)
    answers = {"clean": _answer_texts(clean)}
    for k in range(1, N_PARTITIONS + 1):
        part = partition_of_texts(triples, k - 1)
        probes = [probe_of(src.records[q], q, question=part[q]) for q in qids]
        del part
        name = f"gqa.noise_{k}"
        run = state.run(src.ctx, Condition(name, "text", {"partition": k}), probes)
        del probes
        write_predictions(state, "robustness", f"noise_{k}", qids, run.answers)
        answers[f"noise_{k}"] = _answer_texts(run.answers)
        del run
        state.release([name])
    return answers


def robustness_suite(state: DiagnoseState) -> SuiteOutput:
    """Accuracy under the 7 basic-question noise partitions, Acc_diff, R_score (protocols.md §4).

    Noisy condition k: same image and objects, question text = the main question
    followed by the 3 basic questions of partition k (``noise_partitions``). Scored from
    the runs' answers in memory; the prediction files are written for ``vqadiag score
    robustness`` to re-score.
    """
    from vqadiag.protocols.robustness.score import Truth, score_accuracies

    src, clean = plain_run(state)
    prefix = src.prefix(state.options.questions_for("robustness"))
    texts, bqd, bqd_info = _bqd_texts(state, src, prefix)
    from vqadiag.protocols.robustness.basic_questions.noise import shared_texts

    triples = shared_texts(_applied(texts, src, set(prefix), bqd))
    covered = set(triples.question_ids())
    qids = [q for q in prefix if q in covered]
    del covered
    if not qids:
        raise SuiteSkipped("the basic-question dataset covers none of the diagnosed questions")
    bqd_info["covers"] = {"questions": len(qids), "diagnosed": len(prefix)}
    clean_of = dict(zip(src.qids, clean.answers, strict=True))
    answers = _noise_runs(state, src, qids, [clean_of[q] for q in qids], triples)
    del triples
    write_json(state.inputs / "robustness_questions.json", qids)
    o = state.options
    truth = Truth(src.questions_file, all_questions=False, lenient=False, records=src.records)
    truth.restrict(qids)
    acc = np.column_stack([truth.score(said) for said, _ in answers.values()])
    score = score_accuracies(truth, acc, seed=o.seed, n_bootstrap=o.n_bootstrap)
    result = score.to_dict()
    result["bqd"] = bqd_info
    units = score.units
    accuracy_of = dict(zip(units["ids"], units["accuracy"].tolist(), strict=True))
    rows = []
    for i, q in enumerate(qids):
        rec = src.records[q]
        ans = {k: said[i] for k, (said, _) in answers.items()}
        values = {f"correct_{k}": int(v) for k, v in zip(ans, accuracy_of[q], strict=True)}
        raw = raw_texts({k: _Raw(raws[i] if raws else None) for k, (_, raws) in answers.items()})
        rows.append(unit_row("robustness", q, rec, answers=ans, values=values, **raw))
    del answers
    ci = result["ci"]
    summary = {
        "r_score": estimate_of(ci, "r_score"),
        "noise_accuracy": [dict(p["accuracy"]) for p in ci["partitions"]],
    }
    return SuiteOutput(result, rows, summary)
