"""The question sets the chat VLM answers in training (docs/chat-vlm.md, "Training"):
``-o question_sets=gqa,vqa2,introspect`` (default ``gqa``).

* ``gqa``: the split's answered GQA questions (what the data folder reads).
* ``vqa2``: the split's VQA v2 questions of the same folder (``DIR/vqa2/``), each as
  :class:`~vqadiag.data.model_inputs.vqa2_data.VQA2Data` reads it: the annotation's
  ``multiple_choice_answer`` is the target, and the image is the feature image its
  VQA image id maps to (a synthetic world's ``world.json`` maps them to the GQA images).
* ``introspect``: the sub-questions of the split's VQA-introspect file
  (``DIR/introspect/VQAIntrospect_{split}v1.0.json``, deduplicated as
  :func:`~vqadiag.data.formats.introspect.read_introspect` reads them), each asked about
  its main question's image with its own answer. The main questions are VQA v2
  questions, so ``vqa2`` already holds them.

Every record's image must be one the data folder has pixels for (the pixels are read
with the GQA images); a set whose files are missing is refused in one line naming the
file, before any training.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError

#: the sets ``question_sets`` may name, in the order their records are listed
QUESTION_SETS = ("gqa", "vqa2", "introspect")


def parse_question_sets(value: Any) -> tuple[str, ...]:
    """``"gqa,vqa2"`` → ``("gqa", "vqa2")``: each set once, in :data:`QUESTION_SETS`
    order; ``gqa`` must be among them (its scene graphs label the tower's patches and
    its val split scores the run). Anything else is refused in one line."""
    names = [n.strip() for n in str(value).split(",") if n.strip()]
    unknown = sorted(set(names) - set(QUESTION_SETS))
    if unknown or not names:
        raise DataError(
            "--option",
            f"question_sets must name some of {', '.join(QUESTION_SETS)} (comma-separated), "
            f"not {value!r}",
        )
    if "gqa" not in names:
        raise DataError("--option", f"question_sets must include gqa, not {value!r}")
    return tuple(n for n in QUESTION_SETS if n in names)


def training_records(
    data: GQAData, split: str, sets: tuple[str, ...]
) -> dict[str, list[dict[str, Any]]]:
    """``{set: answered records}`` of ``split`` for each of ``sets`` (module docstring),
    each record GQA-like: ``question``, ``answer``, ``imageId`` and, for GQA, its own
    fields (``annotations``, ``semantic`` …)."""
    out: dict[str, list[dict[str, Any]]] = {}
    gqa = [r for r in data.questions(split).values() if r.get("answer") is not None]
    if not gqa:
        raise DataError(data.root, f"no answered questions in split {split!r}")
    out["gqa"] = gqa
    wanted = [name for name in ("vqa2", "introspect") if name in sets]
    if wanted:
        vqa = _vqa2_data(data.root, split, wanted)
        if "vqa2" in sets:
            out["vqa2"] = _vqa2_records(vqa, split)
        if "introspect" in sets:
            out["introspect"] = _introspect_records(vqa, data.root, split)
    return out


def _vqa2_data(root: Path, split: str, wanted: list[str]) -> Any:
    """The folder's VQA v2 data, refused naming the question file of ``split`` when it is
    missing (``introspect`` needs it too: its main questions are VQA v2 questions)."""
    from vqadiag.data.model_inputs.vqa2_data import VQA2Data

    vqa = VQA2Data(root)
    try:
        vqa.questions_path(split)
    except DataError as err:
        problem = f"question_sets has {' and '.join(wanted)}, but {err.problem}"
        raise DataError(err.path, problem) from None
    return vqa


def _vqa2_records(vqa: Any, split: str) -> list[dict[str, Any]]:
    questions = vqa.questions(split)
    records = [
        {"question": r["question"], "answer": r["answer"], "imageId": str(r["imageId"])}
        for r in questions.values()
        if r.get("answer") is not None
    ]
    if not records:
        raise DataError(
            vqa.questions_path(split), "question_sets has vqa2, but no question is annotated"
        )
    return records


def _introspect_records(vqa: Any, root: Path, split: str) -> list[dict[str, Any]]:
    from vqadiag.data.formats.introspect import introspect_path, read_introspect
    from vqadiag.data.model_inputs.vqa2_data import main_question_image

    path = introspect_path(root, split)
    if not path.is_file():
        raise DataError(path, "question_sets has introspect, but this file is missing")
    intro = read_introspect(path)
    records = []
    for main in intro.mains.values():
        image = main_question_image(vqa, split, main.main_id, main.image_id)
        records.extend(
            {"question": s.question, "answer": s.answer, "imageId": image} for s in main.subs
        )
    if not records:
        raise DataError(path, "question_sets has introspect, but the file has no sub-question")
    return records
