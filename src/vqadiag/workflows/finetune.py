"""Glue of ``vqadiag finetune``: sub-question fine-tuning / SQuINT with before/after figures.

docs/protocols.md §6. :func:`finetune` loads an UpDn run trained on VQA v2, fine-tunes it on the
VQA-introspect training pairs of a data folder (:mod:`vqadiag.models.remedies.finetune`),
saves the new run, and measures the model before and after on the introspect val
file: the consistency quadrants and figures of :func:`vqadiag.protocols.consistency.score.
score_consistency` (main correct = VQA accuracy 1.0 against the VQA v2 val
annotations when they hold the main questions, else a normalized match), the mean
Pearson correlation of main and sub-question attention over the image's objects
(paper §7 "Attn Corr"), and VQA accuracy on every VQA v2 val question.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.data.formats.introspect import Introspect, introspect_path, read_introspect
from vqadiag.data.io.atomic import FolderLock
from vqadiag.data.io.folders import claim_folder, owned_folder
from vqadiag.data.io.jsonio import write_json
from vqadiag.data.io.outputs import folders_read, outputs_apart
from vqadiag.data.model_inputs.vqa2_data import main_question_image
from vqadiag.errors import DataError, option_errors
from vqadiag.metrics.bootstrap import mean_ci
from vqadiag.models.base import QuestionBatch
from vqadiag.models.checkpoint import RUN_FOLDER

CONSISTENCY_KEYS = (
    "quadrants",
    "consistency",
    "consistency_balanced",
    "all_subs_wrong",
    "reasoning_accuracy",
    "sub_accuracy",
    "n_main",
    "n_pairs",
    "main_correctness",
)


def _introspect_questions(
    intro: Introspect, data: Any, split: str
) -> tuple[list[str], list[str], list[str]]:
    """``(ids, texts, feature image ids)`` of every main and sub-question of ``intro``."""
    ids: list[str] = []
    texts: list[str] = []
    images: list[str] = []
    for main in intro.mains.values():
        image = main_question_image(data, split, main.main_id, main.image_id)
        for qid, text in [(main.main_id, main.question)] + [
            (s.sub_id, s.question) for s in main.subs
        ]:
            ids.append(qid)
            texts.append(text)
            images.append(image)
    return ids, texts, images


def answer_with_attention(
    model: Any, data: Any, ids: list[str], texts: list[str], images: list[str], batch: int = 256
) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    """Answers and attention (over the image's objects, padding cut) of questions."""
    answers: dict[str, str] = {}
    attention: dict[str, np.ndarray] = {}
    for start in range(0, len(ids), batch):
        sl = slice(start, start + batch)
        qb = QuestionBatch(ids[sl], texts[sl], images[sl])
        visual = data.object_input(qb.image_ids, model.options["max_objects"])
        out = model.predict(qb, visual)
        counts = visual.mask.sum(axis=1)
        for i, qid in enumerate(qb.question_ids):
            answers[qid] = out.answers[i]
            if out.attention is not None:
                attention[qid] = out.attention[i, : counts[i]]
    return answers, attention


def evaluate_introspect(
    model: Any,
    data: Any,
    intro_path: Path,
    val_split: str,
    predictions_out: Path,
    *,
    seed: int = 0,
    n_bootstrap: int = 1000,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(figures, ci)`` of ``model`` on an introspect val file (module docstring); writes
    the main + sub answers to ``predictions_out``."""
    from vqadiag.metrics.vqa_accuracy import vqa_accuracies
    from vqadiag.models.predict import predict_split
    from vqadiag.protocols.consistency.formulas import attention_correlation
    from vqadiag.protocols.consistency.score import score_consistency

    intro = read_introspect(intro_path)
    ids, texts, images = _introspect_questions(intro, data, val_split)
    answers, attention = answer_with_attention(model, data, ids, texts, images)
    write_json(predictions_out, answers)
    ann_path = data.annotations_path(val_split)
    val_questions = data.questions(val_split)
    use_ann = ann_path is not None and all(
        "answers" in val_questions.get(q, {}) for q in intro.mains
    )
    scored = score_consistency(
        intro_path,
        predictions_out,
        predictions_out,
        annotations=ann_path if use_ann else None,
        seed=seed,
        n_bootstrap=n_bootstrap,
    )
    figures = {k: scored[k] for k in CONSISTENCY_KEYS}
    ci = {k: scored["ci"][k] for k in CONSISTENCY_KEYS if k in scored["ci"]}
    corr = np.array(
        [
            attention_correlation(attention[s.main_id], attention[s.sub_id])[0]
            for s in intro.subs.values()
            if s.main_id in attention and s.sub_id in attention
        ],
        dtype=np.float64,
    )
    corr = corr[np.isfinite(corr)]
    est = mean_ci(corr, scale=1.0, n_resamples=n_bootstrap, seed=seed).to_dict()
    figures["attention_correlation"] = est["value"]
    ci["attention_correlation"] = est
    preds = predict_split(model, data, val_split)
    scored_ids = [q for q, r in val_questions.items() if r.get("answers")]
    if scored_ids:
        acc = vqa_accuracies(
            [preds[q] for q in scored_ids], [val_questions[q]["answers"] for q in scored_ids]
        )
        est = mean_ci(acc, n_resamples=n_bootstrap, seed=seed).to_dict()
        figures["vqa_accuracy"], ci["vqa_accuracy"] = est["value"], est
    else:
        figures["vqa_accuracy"], ci["vqa_accuracy"] = None, None
    figures["predictions"] = str(predictions_out)
    return figures, ci


def finetune(
    model: str | Path,
    data_dir: str | Path,
    out: str | Path,
    *,
    method: str = "squint",
    epochs: int | None = None,
    lr: float | None = None,
    seed: int = 0,
    split: str = "train",
    val_split: str = "val",
    introspect: str | Path | None = None,  # folder of the introspect files
    options: Mapping[str, Any] | None = None,
    evaluate: bool = True,
    progress: bool = True,
    n_bootstrap: int = 1000,
) -> dict[str, Any]:
    """Fine-tune the UpDn run ``model`` with ``method`` (``squint`` | ``subq``) on the
    introspect pairs of ``data_dir`` (VQA v2 layout), save it to ``out``.

    Returns ``{method, model, out, data, seed, epochs, lr, options, pairs, pairs_left_out,
    seconds, fingerprint_before, fingerprint, run_fingerprint, history, before, after,
    ci: {before, after}}``; ``before`` / ``after`` (null without an introspect val file or
    with ``evaluate=False``) hold ``quadrants, consistency, consistency_balanced,
    all_subs_wrong, reasoning_accuracy, sub_accuracy, n_main, n_pairs,
    main_correctness, attention_correlation, vqa_accuracy, predictions``.
    """
    from vqadiag.models.checkpoint import run_fingerprint
    from vqadiag.models.remedies.finetune import METHODS

    if method not in METHODS:
        raise DataError("--method", f"unknown method {method!r} (known: {', '.join(METHODS)})")
    opts = _finetune_options(options, epochs, lr, method)  # refused before the model loads
    outputs_apart(
        {"--out": out}, {"--model": model, "--data": data_dir, "--introspect": introspect},
        read_whole=folders_read(model=model, data=data_dir),
    )  # fmt: skip
    owned_folder(out, RUN_FOLDER)  # before the model loads
    net_model = _load_attention_model(model)
    data, intro, val_path, do_eval = _finetune_data(
        data_dir, split, val_split, introspect, evaluate
    )
    with FolderLock(out, tidy=True):  # a second fine-tuning into one --out is one line
        run = claim_folder(out, RUN_FOLDER)
        start = time.perf_counter()
        before, ci_before = _maybe_evaluate(
            do_eval, net_model, data, val_path, val_split, run / "introspect_val_before.json",
            seed=seed, n_bootstrap=n_bootstrap,
        )  # fmt: skip
        fingerprint_before = net_model.fingerprint()
        log = _finetune_and_save(
            net_model, data, intro, method, run, model, fingerprint_before,
            split=split, seed=seed, progress=progress, options=opts,
        )  # fmt: skip
        after, ci_after = _maybe_evaluate(
            do_eval, net_model, data, val_path, val_split, run / "introspect_val_after.json",
            seed=seed, n_bootstrap=n_bootstrap,
        )  # fmt: skip
    return {
        "method": method,
        "model": str(model),
        "out": str(run),
        "data": str(data_dir),
        "seed": seed,
        "epochs": log["options"]["epochs"],
        "lr": log["options"]["lr"],
        "options": log["options"],
        "pairs": log["pairs"],
        "pairs_left_out": log["pairs_left_out"],
        "seconds": time.perf_counter() - start,
        "fingerprint_before": fingerprint_before,
        "fingerprint": net_model.fingerprint(),
        "run_fingerprint": run_fingerprint(run),
        "history": log["history"],
        "before": before,
        "after": after,
        "ci": {"before": ci_before, "after": ci_after},
    }


def _load_attention_model(model: str | Path) -> Any:
    """Load the run ``model`` (plug-ins first); it must attend over objects (UpDn)."""
    from vqadiag.models.registry import load_model
    from vqadiag.plugins import load_plugins

    load_plugins(())  # a plug-in may register the run's model class
    net_model = load_model(model)
    if not hasattr(getattr(net_model, "net", None), "attend"):
        raise DataError(
            Path(model) / "config.json",
            f"model {net_model.name!r} has no object attention to fine-tune (train --model updn)",
        )
    return net_model


def _finetune_data(
    data_dir: str | Path,
    split: str,
    val_split: str,
    introspect: str | Path | None,
    evaluate: bool,
) -> tuple[Any, Introspect, Path, bool]:
    """``(data, training introspect pairs, introspect val path, evaluate)``: read the
    questions of ``split`` and the training pairs, and the ``val_split`` questions when
    there is an introspect val file to evaluate on."""
    from vqadiag.data.model_inputs.vqa2_data import VQA2Data

    data = VQA2Data(data_dir)
    data.questions(split)
    train_path = introspect_path(data_dir, "train", introspect)
    intro = read_introspect(train_path)
    val_path = introspect_path(data_dir, "val", introspect)
    do_eval = evaluate and val_path.is_file()
    if do_eval:
        data.questions(val_split)
    return data, intro, val_path, do_eval


def _finetune_options(
    options: Mapping[str, Any] | None, epochs: int | None, lr: float | None, method: str
) -> dict[str, Any]:
    """The fine-tuning options: ``options`` with ``epochs`` and ``lr`` when given, each
    known to ``method`` and in its range (one line naming it, before any work)."""
    from vqadiag.models.remedies.finetune import check_finetune_options

    opts = dict(options or {})
    if epochs is not None:
        opts["epochs"] = int(epochs)
    if lr is not None:
        opts["lr"] = float(lr)
    with option_errors(ValueError):
        return check_finetune_options(opts, method)


def _maybe_evaluate(
    do_eval: bool,
    net_model: Any,
    data: Any,
    val_path: Path,
    val_split: str,
    predictions_out: Path,
    *,
    seed: int,
    n_bootstrap: int,
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """:func:`evaluate_introspect` of the model when ``do_eval``, else ``(None, None)``."""
    if not do_eval:
        return None, None
    return evaluate_introspect(
        net_model,
        data,
        val_path,
        val_split,
        predictions_out,
        seed=seed,
        n_bootstrap=n_bootstrap,
    )


def _finetune_and_save(
    net_model: Any,
    data: Any,
    intro: Introspect,
    method: str,
    run: Path,
    model: str | Path,
    fingerprint_before: str,
    *,
    split: str,
    seed: int,
    progress: bool,
    options: dict[str, Any],
) -> dict[str, Any]:
    """Fine-tune ``net_model`` in place, record it in its training log (with the run and
    fingerprint it started from) and save it to ``run``; returns the fine-tuning log."""
    from vqadiag.models.remedies.finetune import finetune_model

    with option_errors(ValueError):
        log = finetune_model(
            net_model, data, intro, method, split=split, seed=seed, progress=progress,
            options=options,
        )  # fmt: skip
    net_model.training_log = {
        **net_model.training_log,
        "finetune": {**log, "from_run": str(model), "from_fingerprint": fingerprint_before},
    }
    net_model.save(run)
    return log
