"""Glue of ``vqadiag explain train | eval | show``: counter-example explanations
(Goyal et al. 2017 §5, docs/protocols.md §2) on VQA v2-format data.

Data: the VQA v2 questions and annotations of a data folder (:class:`VQA2Data`;
a synthetic world has them under ``vqa2/``) and a candidates file
``{qid: {image_id, candidates: [K VQA image ids, nearest first], complement_image_id}}``
(default ``vqa2/synth_{split}2014_pair_candidates.json``; ``--candidates`` for
real VQA v2). VQA image ids become detector image ids through the folder's image
map. Each function returns exactly the dict its command prints with ``--json``.

Evaluation ranks each question's K candidates by the trained explaining head and
by the baselines, and reports Recall@1/5/10 (percent, 95% bootstrap interval over
questions) and the paired comparison (paired bootstrap + McNemar's exact test) of
the model against the best baseline at Recall@5.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.data.formats.pair_candidates import (
    PairCandidates,
    candidates_path,
    read_pair_candidates,
)
from vqadiag.data.io.atomic import FolderLock
from vqadiag.data.io.folders import claim_folder, owned_folder
from vqadiag.data.io.outputs import folders_read, outputs_apart
from vqadiag.data.model_inputs.vqa2_data import VQA2Data
from vqadiag.errors import DataError, option_errors, record_label
from vqadiag.metrics.bootstrap import mcnemar_exact, mean_ci, paired_bootstrap
from vqadiag.metrics.counterexample import (
    PAPER_RECALL_AT_5,
    distance_scores,
    embedding_distance_scores,
    random_expected_recall,
    random_scores,
    recall_at_k,
    recall_hits,
    target_ranks,
    vqa_model_scores,
)
from vqadiag.models.checkpoint import CONFIG, RUN_FOLDER, run_fingerprint
from vqadiag.models.training import has_split

RECALL_KS = (1, 5, 10)
BASELINES = ("random", "distance", "distance_features", "vqa_model")


# -------------------------------------------------------------------------- data
def _candidates(
    data: VQA2Data, split: str, path: str | Path | None
) -> tuple[dict[str, PairCandidates], Path]:
    questions = data.questions(split)
    file = Path(path) if path is not None else candidates_path(data.vqa_dir, split)
    return read_pair_candidates(file, known_ids=questions), file


def explain_items(
    data: VQA2Data,
    split: str,
    candidates: Mapping[str, PairCandidates],
    path: Path,
    *,
    need_answer: bool = True,
) -> list[Any]:
    """One :class:`~vqadiag.models.remedies.counterexample.ExplainItem` per question of
    ``candidates`` (in file order), with image ids translated to detector ids; a
    candidates record whose image differs from the question's raises ``DataError``."""
    from vqadiag.models.remedies.counterexample import ExplainItem

    questions = data.questions(split)
    items = []
    for qid, cand in candidates.items():
        record = questions[qid]
        label = record_label(qid)
        if str(record.get("image_id")) != cand.image_id:
            raise DataError(
                path,
                f"image_id {cand.image_id} differs from the question's image "
                f"{record.get('image_id')}",
                label,
            )
        if need_answer and "answer" not in record:
            raise DataError(data.questions_path(split), "question has no annotated answer", label)
        items.append(
            ExplainItem(
                question_id=qid,
                question=record["question"],
                image_id=str(record["imageId"]),
                candidates=tuple(data.feature_image_id(c, path, qid) for c in cand.candidates),
                target=cand.complement_index,
                answer=record.get("answer", ""),
            )
        )
    return items


def _check_k(model: Any, items: Sequence[Any], path: Path) -> None:
    """The candidates file must give the K candidates the explaining head was trained on."""
    if items and len(items[0].candidates) != model.k_candidates:
        raise DataError(
            path,
            f"has {len(items[0].candidates)} candidates per question; the model was trained "
            f"with K = {model.k_candidates}",
            record_label(items[0].question_id),
        )


def load_explainer(run: str | Path) -> Any:
    """The :class:`CounterExampleModel` of a run folder written by ``vqadiag explain train``."""
    from vqadiag.data.io.jsonio import read_json
    from vqadiag.models.remedies.counterexample import CounterExampleModel

    folder = Path(run)
    if not folder.is_dir():
        raise DataError(folder, "run folder not found")
    config = read_json(folder / CONFIG)
    if not isinstance(config, dict) or config.get("model") != CounterExampleModel.name:
        found = config.get("model") if isinstance(config, dict) else None
        raise DataError(
            folder / CONFIG,
            f"not a counter-example run (model {found!r}); train one with `vqadiag explain train`",
        )
    return CounterExampleModel.load(folder)


# -------------------------------------------------------------------------- train
def train(
    data_dir: str | Path,
    out: str | Path,
    *,
    epochs: int | None = None,
    seed: int = 0,
    lambda_: float | None = None,
    margin: float | None = None,
    split: str = "train",
    val_split: str | None = "val",
    candidates: str | Path | None = None,
    val_candidates: str | Path | None = None,
    options: Mapping[str, Any] | None = None,
    progress: bool = True,
    n_bootstrap: int = 1000,
) -> dict[str, Any]:
    """Train the two-headed counter-example model on ``split`` and save it to ``out``;
    Recall@5 on ``val_split`` (None: no validation) after every epoch and at the end.

    Returns ``{model, run, data, split, seed, epochs, options, train_questions,
    explained_questions, candidates, seconds, fingerprint, run_fingerprint, history,
    val: {split, questions, recall@5: {value, ci_low, ci_high, n}} | None}``.
    """
    from vqadiag.models.remedies.counterexample import CounterExampleModel

    outputs_apart(
        {"--out": out},
        {"--data": data_dir, "--candidates": candidates, "--val-candidates": val_candidates},
        read_whole=folders_read(data=data_dir),
    )
    data = VQA2Data(data_dir)
    cands, path = _candidates(data, split, candidates)
    items = explain_items(data, split, cands, path)
    val_items = _val_items(data, split, val_split, val_candidates)
    opts = _explainer_options(options, lambda_, margin)
    owned_folder(out, RUN_FOLDER)  # before training, not after
    start = time.perf_counter()
    with FolderLock(out, tidy=True):  # a second training into one --out is one line
        with option_errors():
            model = CounterExampleModel.train_explainer(
                data,
                items,
                split=split,
                epochs=epochs,
                seed=seed,
                progress=progress,
                val_items=val_items,
                val_split=val_split or "",
                **opts,
            )
        seconds = time.perf_counter() - start
        run = claim_folder(out, RUN_FOLDER)
        model.save(run)
    return {
        "model": model.name,
        "run": str(run),
        "data": str(data_dir),
        "split": split,
        "seed": seed,
        "epochs": model.options["epochs"],
        "options": model.options,
        "train_questions": model.training_log["questions"],
        "explained_questions": len(items),
        "candidates": str(path),
        "seconds": seconds,
        "fingerprint": model.fingerprint(),
        "run_fingerprint": run_fingerprint(run),
        "history": model.training_log["history"],
        "val": _val_recall(model, data, val_items, val_split, seed, n_bootstrap),
    }


def _val_items(
    data: VQA2Data, split: str, val_split: str | None, val_candidates: str | Path | None
) -> list[Any] | None:
    """The validation items of ``val_split`` (None: no validation split different from
    ``split``, or no candidates file for it)."""
    if (
        val_split is not None
        and val_split != split
        and (val_candidates is not None or has_split(data, val_split))
    ):
        vpath = (
            Path(val_candidates)
            if val_candidates is not None
            else candidates_path(data.vqa_dir, val_split)
        )
        if val_candidates is not None or vpath.is_file():
            vcands, vpath = _candidates(data, val_split, vpath)
            return explain_items(data, val_split, vcands, vpath)
    return None


def _explainer_options(
    options: Mapping[str, Any] | None, lambda_: float | None, margin: float | None
) -> dict[str, Any]:
    """The training options: ``options`` with ``lambda`` and ``margin`` when given."""
    opts = dict(options or {})
    if lambda_ is not None:
        opts["lambda"] = float(lambda_)
    if margin is not None:
        opts["margin"] = float(margin)
    return opts


def _val_recall(
    model: Any,
    data: VQA2Data,
    val_items: list[Any] | None,
    val_split: str | None,
    seed: int,
    n_bootstrap: int,
) -> dict[str, Any] | None:
    """The trained model's Recall@5 on the validation items (None without any)."""
    if not val_items:
        return None
    scores, _ = model.score_candidates(data, val_items)
    ranks = target_ranks(scores, np.array([i.target for i in val_items]))
    est = recall_at_k(ranks, 5, n_resamples=n_bootstrap, seed=seed)
    return {
        "split": val_split,
        "questions": len(val_items),
        "recall@5": est.to_dict(),
    }


# -------------------------------------------------------------------------- eval
def _image_embedding(data: VQA2Data, image_id: str) -> np.ndarray:
    """Mean of an image's detector object features (the Distance-in-features embedding)."""
    feats, _ = data.image_objects(image_id)
    return feats.mean(axis=0) if len(feats) else np.zeros(feats.shape[1], np.float32)


def _feature_distance_scores(data: VQA2Data, items: Sequence[Any]) -> np.ndarray:
    query = np.stack([_image_embedding(data, i.image_id) for i in items])
    cands = np.stack([np.stack([_image_embedding(data, c) for c in i.candidates]) for i in items])
    return embedding_distance_scores(query, cands)


def external_vqa_probs(
    run: str | Path,
    data: VQA2Data,
    items: Sequence[Any],
    *,
    split: str = "val",
    progress: bool = False,
    items_per_batch: int = 8,
) -> tuple[np.ndarray, int, str]:
    """``(P(A | Q, I_i) (n, K), #questions whose answer A is not in the model's vocabulary,
    model name)`` from any run folder ``vqadiag`` can load; answers outside the model's
    vocabulary get P = 0 (so their candidates tie and fall to the random tie-break)."""
    from vqadiag.models.base import QuestionBatch
    from vqadiag.models.predict import visual_input
    from vqadiag.models.registry import load_model
    from vqadiag.plugins import load_plugins
    from vqadiag.progress import progress_bar

    load_plugins(())  # a plug-in may register the run's model class
    model = load_model(run)
    records = data.questions(split)
    vocab = {a: i for i, a in enumerate(model.answer_vocab)}
    k = len(items[0].candidates) if items else 0
    probs = np.zeros((len(items), k), np.float64)
    missing = sum(1 for i in items if i.answer not in vocab)
    bar = progress_bar(progress, transient=True)
    with bar:
        task = bar.add_task("VQA-model baseline", total=len(items))
        for start in range(0, len(items), items_per_batch):
            chunk = items[start : start + items_per_batch]
            rows = [(i, c) for i in chunk for c in i.candidates]
            batch = QuestionBatch(
                question_ids=[f"{i.question_id}@{c}" for i, c in rows],
                questions=[i.question for i, _ in rows],
                image_ids=[c for _, c in rows],
                records=[{**records.get(i.question_id, {}), "imageId": c} for i, c in rows],
            )
            try:
                output = model.predict(batch, visual_input(model, data, batch.image_ids))
            except (KeyError, TypeError, ValueError) as err:
                if isinstance(err, DataError):
                    raise
                raise DataError(
                    run, f"model {model.name!r} cannot answer these questions: {err!r}"
                ) from None
            if output.probs is None:
                raise DataError(run, f"model {model.name!r} gives no answer probabilities")
            p = np.asarray(output.probs, dtype=np.float64).reshape(len(chunk), k, -1)
            for row, item in enumerate(chunk):
                a = vocab.get(item.answer)
                if a is not None:
                    probs[start + row] = p[row, :, a]
            bar.advance(task, len(chunk))
    return probs, missing, str(getattr(model, "name", "model"))


def _method_block(ranks: np.ndarray, seed: int, n_bootstrap: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        f"recall@{k}": recall_at_k(ranks, k, n_resamples=n_bootstrap, seed=seed).to_dict()
        for k in RECALL_KS
    }
    out["mean_rank"] = float(ranks.mean() + 1.0) if len(ranks) else float("nan")
    return out


def evaluate(
    run: str | Path,
    data_dir: str | Path,
    *,
    split: str = "val",
    candidates: str | Path | None = None,
    vqa_model: str | Path | None = None,
    seed: int = 0,
    n_bootstrap: int = 1000,
    progress: bool = True,
) -> dict[str, Any]:
    """Recall@1/5/10 of the trained explainer and of the Random, Distance (candidates'
    order), Distance-in-features (L2 between mean object features) and VQA-model
    (ascending P(A | Q, I_i); the explainer's own answering head, or ``vqa_model``)
    baselines on ``split``, plus the paired comparison with the best baseline.

    Returns ``{run, fingerprint, data, split, candidates, questions, k_candidates,
    answer_accuracy, vqa_model: {source, model, answers_not_in_vocabulary},
    methods: {model|random|distance|distance_features|vqa_model: {recall@1, recall@5,
    recall@10, mean_rank}}, random_expected: {recall@1, recall@5, recall@10},
    comparison: {baseline, k, difference, p_value, test, mcnemar_p_value},
    paper_recall@5, seed, n_bootstrap}``.
    """
    model = load_explainer(run)
    data = VQA2Data(data_dir)
    cands, path = _candidates(data, split, candidates)
    items = explain_items(data, split, cands, path)
    _check_k(model, items, path)
    n, k = len(items), model.k_candidates
    targets = np.array([i.target for i in items], np.int64)
    scores, own_probs = model.score_candidates(data, items, progress=progress)
    correct = _answers_correct(model, data, split, items)
    if vqa_model is None:
        probs = own_probs
        known = set(model.answer_vocab)
        missing = sum(1 for i in items if i.answer not in known)
        source, vqa_name = f"answering head of {run}", model.name
    else:
        probs, missing, vqa_name = external_vqa_probs(
            vqa_model, data, items, split=split, progress=progress
        )
        source = str(vqa_model)
    ranks = _method_ranks(data, items, k, scores, probs, targets, seed)
    methods = {name: _method_block(r, seed, n_bootstrap) for name, r in ranks.items()}
    comparison = _best_baseline_comparison(methods, ranks, seed, n_bootstrap)
    return {
        "run": str(run),
        "fingerprint": model.fingerprint(),
        "data": str(data_dir),
        "split": split,
        "candidates": str(path),
        "questions": n,
        "k_candidates": k,
        "answer_accuracy": mean_ci(correct, n_resamples=n_bootstrap, seed=seed).to_dict(),
        "vqa_model": {
            "source": source,
            "model": vqa_name,
            "answers_not_in_vocabulary": missing,
        },
        "methods": methods,
        "random_expected": {f"recall@{r}": random_expected_recall(r, k) for r in RECALL_KS},
        "comparison": comparison,
        "paper_recall@5": dict(PAPER_RECALL_AT_5),
        "seed": seed,
        "n_bootstrap": n_bootstrap,
    }


def _answers_correct(model: Any, data: VQA2Data, split: str, items: Sequence[Any]) -> list[float]:
    """1.0 / 0.0 per item: the answering head, on the original image, gives its answer."""
    from vqadiag.models.predict import iter_batches

    qids = [i.question_id for i in items]
    gold = {i.question_id: i.answer for i in items}
    return [
        1.0 if answer == gold[qid] else 0.0
        for batch, output in iter_batches(model, data, split, qids, batch_size=256)
        for qid, answer in zip(batch.question_ids, output.answers, strict=True)
    ]


def _method_ranks(
    data: VQA2Data,
    items: Sequence[Any],
    k: int,
    scores: np.ndarray,
    probs: np.ndarray,
    targets: np.ndarray,
    seed: int,
) -> dict[str, np.ndarray]:
    """The rank of each item's complement image (among its ``k`` candidates) by the
    model and by each baseline."""
    n = len(items)
    random_keys = random_scores(n, k, seed + 1)
    return {
        "model": target_ranks(scores, targets),
        "random": target_ranks(random_scores(n, k, seed), targets),
        "distance": target_ranks(distance_scores(n, k), targets),
        "distance_features": target_ranks(_feature_distance_scores(data, items), targets),
        "vqa_model": target_ranks(vqa_model_scores(probs), targets, tiebreak=random_keys),
    }


def _best_baseline_comparison(
    methods: Mapping[str, Any], ranks: Mapping[str, np.ndarray], seed: int, n_bootstrap: int
) -> dict[str, Any]:
    """The paired comparison (paired bootstrap + McNemar's exact test) of the model with
    the baseline of highest Recall@5, at Recall@5."""
    best = max(BASELINES, key=lambda b: methods[b]["recall@5"]["value"])
    hits_model = recall_hits(ranks["model"], 5)
    hits_best = recall_hits(ranks[best], 5)
    paired = paired_bootstrap(hits_model, hits_best, n_resamples=n_bootstrap, seed=seed)
    return {
        "model": "model",
        "baseline": best,
        "k": 5,
        "difference": paired.difference.to_dict(),
        "p_value": paired.p_value,
        "test": paired.test,
        "mcnemar_p_value": mcnemar_exact(hits_model > 0, hits_best > 0),
    }


# -------------------------------------------------------------------------- show
def show(
    run: str | Path,
    data_dir: str | Path,
    question: str,
    *,
    split: str = "val",
    candidates: str | Path | None = None,
    top: int = 5,
    gold: bool = False,
) -> dict[str, Any]:
    """Answer one question and list its top counter-example images.

    The explained answer is the model's predicted answer (the paper's test-time use)
    or, with ``gold``, the annotated answer. Returns ``{question_id, question, split,
    image_id, feature_image_id, answer, predicted_answer, probability, explained_answer,
    explained, k_candidates, counter_examples: [{rank, image_id, feature_image_id,
    score, distance_rank, p_explained_answer, is_complement}], complement_image_id,
    complement_rank}`` (ranks 1-based; ``distance_rank`` is the candidate's position,
    nearest first).
    """
    import torch

    model = load_explainer(run)
    data = VQA2Data(data_dir)
    qid = str(question).strip()
    questions = data.questions(split)
    cands, path = _candidates(data, split, candidates)
    if qid not in questions:
        raise DataError(data.questions_path(split), "unknown question id", record_label(qid))
    if qid not in cands:
        raise DataError(path, "question has no candidates in this file", record_label(qid))
    if gold and "answer" not in questions[qid]:
        raise DataError(
            data.questions_path(split), "question has no annotated answer", record_label(qid)
        )
    (item,) = explain_items(data, split, {qid: cands[qid]}, path, need_answer=False)
    _check_k(model, [item], path)
    batch = data.batch(split, [qid])
    output = model.predict(batch, data.object_input(batch.image_ids, model.options["max_objects"]))
    predicted = output.answers[0]
    probability = float(np.max(output.probs[0]))
    explained = item.answer if gold else predicted
    with torch.inference_mode():
        scores, probs = model.score_candidates(data, [item], [explained])
    ranks = target_ranks(scores, np.array([item.target]))
    order = np.lexsort((np.arange(len(item.candidates)), -scores[0]))
    record = cands[qid]
    counter = [
        {
            "rank": r + 1,
            "image_id": record.candidates[j],
            "feature_image_id": item.candidates[j],
            "score": float(scores[0, j]),
            "distance_rank": int(j) + 1,
            "p_explained_answer": float(probs[0, j]),
            "is_complement": bool(j == item.target),
        }
        for r, j in enumerate(order[: max(0, top)])
    ]
    return {
        "question_id": qid,
        "question": item.question,
        "split": split,
        "image_id": record.image_id,
        "feature_image_id": item.image_id,
        "answer": questions[qid].get("answer"),
        "predicted_answer": predicted,
        "probability": probability,
        "explained_answer": explained,
        "explained": "gold" if gold else "predicted",
        "k_candidates": len(item.candidates),
        "counter_examples": counter,
        "complement_image_id": record.complement_image_id,
        "complement_rank": int(ranks[0]) + 1,
    }
