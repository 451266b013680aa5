"""Run any model over a split in batches and write prediction files ``vqadiag score`` reads.

No torch here: the loop only calls :meth:`VQAModel.predict`. Visual input is built
from the model's :class:`~vqadiag.models.base.Capabilities`: ``"objects"`` →
:meth:`GQAData.object_input`, ``"none"`` → ``None``, ``"pixels"`` → ``data.pixel_input``
when the data folder offers images.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from vqadiag.data.io.jsonio import write_json
from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError
from vqadiag.models.base import ModelOutput, ObjectInput, PixelInput, QuestionBatch, VQAModel
from vqadiag.progress import progress_bar

DEFAULT_BATCH = 256
MAX_OBJECTS = 100


def visual_input(
    model: VQAModel, data: GQAData, image_ids: Sequence[str], max_objects: int = MAX_OBJECTS
) -> ObjectInput | PixelInput | None:
    """The visual input ``model`` asks for (its ``capabilities.visual``) for ``image_ids``."""
    kind = model.capabilities.visual
    if kind == "none":
        return None
    if kind == "objects":
        return data.object_input(image_ids, max_objects=max_objects)
    loader = getattr(data, "pixel_input", None)
    if kind == "pixels" and loader is not None:
        return loader(image_ids, size=getattr(model, "input_size", None), max_objects=max_objects)
    raise DataError(data.root, f"model {model.name!r} needs {kind} input, which this folder lacks")


def iter_batches(
    model: VQAModel,
    data: GQAData,
    split: str,
    question_ids: Sequence[str] | None = None,
    *,
    batch_size: int = DEFAULT_BATCH,
    max_objects: int = MAX_OBJECTS,
    progress: bool = False,
    description: str = "predict",
) -> Iterator[tuple[QuestionBatch, ModelOutput]]:
    """Yield ``(batch, output)`` over the questions of ``split`` (all, or ``question_ids``),
    ``batch_size`` at a time, with a rich progress bar when ``progress``."""
    qids = list(data.questions(split)) if question_ids is None else list(question_ids)
    starts = range(0, len(qids), max(1, batch_size))
    bar = progress_bar(progress, transient=True)
    with bar:
        task = bar.add_task(description, total=len(qids))
        for start in starts:
            batch = data.batch(split, qids[start : start + batch_size])
            visual = visual_input(model, data, batch.image_ids, max_objects)
            output = model.predict(batch, visual)
            yield batch, output
            bar.advance(task, len(batch))


def predict_split(
    model: VQAModel,
    data: GQAData,
    split: str,
    *,
    question_ids: Sequence[str] | None = None,
    batch_size: int = DEFAULT_BATCH,
    probs_k: int = 0,
    max_objects: int = MAX_OBJECTS,
    progress: bool = False,
) -> dict[str, Any]:
    """``{qid: answer}`` or, with ``probs_k > 0``, ``{qid: {"answer", "probs": top-k}}``,
    over the questions of ``split`` (all, or ``question_ids``)."""
    out: dict[str, Any] = {}
    vocab = list(model.answer_vocab)
    for batch, output in iter_batches(
        model,
        data,
        split,
        question_ids,
        batch_size=batch_size,
        max_objects=max_objects,
        progress=progress,
    ):
        if probs_k > 0 and output.probs is not None:
            tops = output.top_probs(vocab, probs_k)
            for qid, answer, top in zip(batch.question_ids, output.answers, tops, strict=True):
                out[qid] = {"answer": answer, "probs": top}
        else:
            out.update(zip(batch.question_ids, output.answers, strict=True))
    return out


def accuracy_values(
    predictions: Mapping[str, Any], questions: Mapping[str, Mapping[str, Any]]
) -> list[float]:
    """1.0 / 0.0 per question with a gold ``answer``: exact match of the predicted answer."""
    values = []
    for qid, record in questions.items():
        if "answer" not in record or qid not in predictions:
            continue
        pred = predictions[qid]
        answer = pred["answer"] if isinstance(pred, Mapping) else pred
        values.append(1.0 if answer == record["answer"] else 0.0)
    return values


def write_prediction_file(path: str | Path, predictions: Mapping[str, Any]) -> Path:
    """Write ``{qid: answer | {"answer", "probs"}}`` as JSON (a shape ``vqadiag score`` reads)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out, dict(predictions))
    return out
