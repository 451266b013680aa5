"""Glue of ``vqadiag train`` and ``vqadiag predict``: data folder → model → run folder /
prediction file, and the result dicts those commands print with ``--json``.

Accuracy here is exact match of the predicted answer with the GQA ``answer``
(percent), with a 95% bootstrap interval over questions (``mean_ci``); ``vqadiag
score gqa`` gives the full GQA protocol on the written prediction file.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from itertools import islice
from pathlib import Path
from typing import Any

from vqadiag.data.io.atomic import FolderLock, writable_file
from vqadiag.data.io.folders import claim_folder, owned_folder
from vqadiag.data.io.outputs import folders_read, outputs_apart, spec_path
from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError, option_errors
from vqadiag.metrics.bootstrap import mean_ci
from vqadiag.models.checkpoint import RUN_FOLDER, run_fingerprint
from vqadiag.models.option_checks import names_path
from vqadiag.models.predict import accuracy_values, predict_split, write_prediction_file
from vqadiag.models.registry import MODELS, TRAINABLE, load_model_spec, model_class
from vqadiag.models.training import has_split

DATASETS = ("gqa", "vqa2")


def open_data(
    data_dir: str | Path, dataset: str = "gqa", images: str | Path | None = None
) -> GQAData:
    """The data folder as model data: ``gqa`` → :class:`GQAData`, ``vqa2`` →
    :class:`~vqadiag.data.model_inputs.vqa2_data.VQA2Data` (VQA v2 questions and annotations,
    ``answer`` = ``multiple_choice_answer``); ``images``: the folder of the image files
    when they are not in the data folder (docs/diagnose.md, "Images")."""
    if dataset == "gqa":
        return GQAData(data_dir, images=images)
    if dataset == "vqa2":
        from vqadiag.data.model_inputs.vqa2_data import VQA2Data

        return VQA2Data(data_dir, images=images)
    raise DataError("--dataset", f"unknown dataset {dataset!r} (known: {', '.join(DATASETS)})")


def _accuracy(
    predictions: Mapping[str, Any],
    questions: Mapping[str, Mapping[str, Any]],
    seed: int,
    n_bootstrap: int,
) -> dict[str, Any] | None:
    """``{"value", "ci_low", "ci_high", "n"}`` of exact-match accuracy, None without answers."""
    values = accuracy_values(predictions, questions)
    if not values:
        return None
    return mean_ci(values, n_resamples=n_bootstrap, seed=seed).to_dict()


def train(
    data_dir: str | Path,
    model: str,
    out: str | Path,
    *,
    epochs: int | None = None,
    seed: int = 0,
    split: str = "train",
    val_split: str = "val",
    options: Mapping[str, Any] | None = None,
    progress: bool = True,
    n_bootstrap: int = 1000,
    dataset: str = "gqa",
    images: str | Path | None = None,
    val_questions: int | None = None,
) -> dict[str, Any]:
    """Train ``model`` on ``split`` of ``data_dir``, save it to ``out`` and score ``val_split``
    (its first ``val_questions`` questions in file order; None: all).

    ``dataset`` is ``gqa`` (GQA layout) or ``vqa2`` (VQA v2 files, :func:`open_data`);
    ``images`` the image folder a pixel model reads (default: the data folder's).
    Returns ``{model, run, data, dataset, split, seed, epochs, options, train_questions,
    seconds, fingerprint, history, val: {split, questions, accuracy} | None,
    ci: {val: {accuracy}}}`` (accuracy in percent), with ``pretrain`` and
    ``training_questions`` (questions per question set; ``train_questions`` is then their
    sum) where the model logs them.
    """
    if model not in MODELS:
        model_class(model)  # raises the unknown-model error
    if model not in TRAINABLE:
        raise DataError(
            "--model",
            f"model {model!r} is not trained by vqadiag (trainable: {', '.join(TRAINABLE)})",
        )
    if options is not None and not isinstance(options, Mapping):
        raise DataError(
            "--option", f"options are a mapping of KEY to value, got {type(options).__name__}"
        )
    if model == "prior" and epochs is not None:
        raise DataError("--epochs", "the prior model counts answers: it trains no epochs")
    if val_questions is not None and int(val_questions) < 1:
        raise DataError("--val-questions", f"must be at least 1, not {val_questions}")
    outputs_apart(
        {"--out": out}, {"--data": data_dir, "--images": images},
        read_whole=folders_read(data=data_dir, images=images),
    )  # fmt: skip
    cls = model_class(model)
    _path_options_apart(cls, options or {}, out, data_dir, images)
    caps = getattr(cls, "capabilities", None)  # the chat VLM's class has none: it reads pixels
    if images is not None and caps is not None and not caps.pixel_input:
        raise DataError("--images", f"is where a pixel model reads; {model} reads no pixels")
    owned_folder(out, RUN_FOLDER)  # before training, not after
    data = open_data(data_dir, dataset, images)
    data.questions(split)  # bad or missing question files fail before any work
    if val_split != "val" and val_split != split and not has_split(data, val_split):
        raise DataError("val_split", f"no split {val_split!r} to score in {data_dir}")
    start = time.perf_counter()
    with FolderLock(out, tidy=True):  # a second training into one --out is one line
        with option_errors():
            trained = cls.train(
                data, split=split, epochs=epochs, seed=seed, progress=progress,
                **dict(options or {}),
            )  # fmt: skip
        seconds = time.perf_counter() - start
        run = claim_folder(out, RUN_FOLDER)
        trained.save(run)
    log = getattr(trained, "training_log", None) or {}
    result: dict[str, Any] = {
        "model": model,
        "run": str(run),
        "data": str(data_dir),
        "dataset": dataset,
        "split": split,
        "seed": seed,
        "epochs": epochs if epochs is not None else getattr(trained, "options", {}).get("epochs"),
        "options": dict(getattr(trained, "options", None) or options or {}),
        "train_questions": sum(log["training_questions"].values())
        if "training_questions" in log
        else len(data.questions(split)),
        "seconds": seconds,
        "fingerprint": trained.fingerprint(),
        "run_fingerprint": run_fingerprint(run),
        "history": list(log.get("history", [])),
        **({"pretrain": log["pretrain"]} if "pretrain" in log else {}),
        **{k: log[k] for k in ("training_questions",) if k in log},
        "val": None,
        "ci": {"val": None},
    }
    if val_split != split and has_split(data, val_split):
        scored = data.questions(val_split)
        if val_questions is not None:  # the first ones in file order
            scored = {qid: scored[qid] for qid in islice(scored, int(val_questions))}
        preds = predict_split(
            trained, data, val_split, question_ids=list(scored), progress=progress
        )
        ci = _accuracy(preds, scored, seed, n_bootstrap)
        result["val"] = {
            "split": val_split,
            "questions": len(preds),
            "accuracy": None if ci is None else ci["value"],
        }
        result["ci"] = {"val": {"accuracy": ci}}
    return result


def _path_options_apart(
    cls: type, options: Mapping[str, Any], out: str | Path, data_dir: str | Path,
    images: str | Path | None,
) -> None:  # fmt: skip
    """The model's path options (its ``read_options``, folders it reads whole, and its
    ``written_options``, files it writes) kept apart, before any work: ``--out`` not
    inside a folder read, and a file written neither an input, nor inside a folder read,
    nor inside ``--out`` (a stopped run leaves ``--out`` unclaimed, and a file there
    would stop the next run from claiming it). One :class:`DataError` naming both."""

    def given(names: tuple[str, ...]) -> dict[str, str]:
        return {f"-o {k}": str(options[k]) for k in names if names_path(options.get(k))}

    read = given(getattr(cls, "read_options", ()))
    written = given(getattr(cls, "written_options", ()))
    if not read and not written:
        return
    read_folders = {flag: Path(p) for flag, p in read.items() if Path(p).is_dir()}
    read_whole = {**folders_read(data=data_dir, images=images), **read_folders}
    outputs_apart({"--out": out}, read, read_whole=read_folders)
    outputs_apart(written, {"--data": data_dir, "--images": images, **read}, read_whole=read_whole)
    outputs_apart({}, written, write_whole={"--out": out})


def predict(
    run: str | Path,
    data_dir: str | Path,
    out: str | Path,
    *,
    split: str = "val",
    batch_size: int = 256,
    probs_k: int = 0,
    progress: bool = True,
    seed: int = 0,
    n_bootstrap: int = 1000,
    dataset: str = "gqa",
    images: str | Path | None = None,
    model_args: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Answer every question of ``split`` with the model of ``run`` and write ``out``
    (``{qid: answer}``, or ``{qid: {"answer", "probs": top-k}}`` with ``probs_k > 0``).

    ``dataset``: ``gqa`` or ``vqa2`` and ``images`` (:func:`open_data`); ``model_args``: an
    adapter's settings (``--model-args``). Returns ``{model, run,
    fingerprint, data, dataset, split, out, questions, seconds,
    questions_per_second, accuracy | None, ci: {accuracy}}`` (accuracy in percent,
    exact match, when the questions carry answers).
    """
    from vqadiag.plugins import load_plugins

    load_plugins(())
    read = spec_path(run)
    outputs_apart(
        {"--out": out}, {"--model": read, "--data": data_dir, "--images": images},
        read_whole=folders_read(model=read, data=data_dir, images=images),
    )  # fmt: skip
    writable_file(out)
    model = load_model_spec(str(run), model_args)
    if images is not None and not model.capabilities.pixel_input:
        raise DataError("--images", f"is where a pixel model reads; {model.name} reads no pixels")
    data = open_data(data_dir, dataset, images)
    questions = data.questions(split)
    start = time.perf_counter()
    preds = predict_split(
        model, data, split, batch_size=batch_size, probs_k=probs_k, progress=progress
    )
    seconds = time.perf_counter() - start
    path = write_prediction_file(out, preds)
    ci = _accuracy(preds, questions, seed, n_bootstrap)
    return {
        "model": model.name,
        "run": str(run),
        "fingerprint": model.fingerprint(),
        "data": str(data_dir),
        "dataset": dataset,
        "split": split,
        "out": str(path),
        "questions": len(preds),
        "seconds": seconds,
        "questions_per_second": len(preds) / seconds if seconds > 0 else None,
        "accuracy": None if ci is None else ci["value"],
        "ci": {"accuracy": ci},
    }
