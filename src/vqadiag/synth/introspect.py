"""VQA-introspect records: reasoning questions with perception sub-questions.

For every reasoning question of the VQA v2 files (ripeness, warmth, wildness,
free seat — rules in ``world.json``), three "annotators" each give one entry:
``perception`` (probability 0.8) with the perception sub-question that suffices
to answer the main question by the world's rule, ``reasoning`` (0.12) with a
rephrased reasoning question, or ``invalid`` (0.08) repeating the main question.
Sub-answers are the true perceptual facts of the image. Each ``sub_qa`` entry carries,
beside the official ``sub_question`` / ``sub_answer``, the sub-question's program
(``semantic``, :func:`vqadiag.synth.vqa2_programs.program_of`): the perception
template's for a perception entry (whichever of its two phrasings), the main question's
for a rephrased or repeated one.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from vqadiag.data.io.jsonio import write_json
from vqadiag.synth.vqa2 import SUB_QUESTIONS, Facts, answer_of, render
from vqadiag.synth.vqa2_programs import program_of

_REPHRASE = {
    "ripe": "Does the {0} look ripe?",
    "warm": "Would the {0} keep you warm?",
    "wild": "Does the animal live in the wild?",
    "seat": "Is the {0} free to sit on?",
}
_ALT_PERCEPTION = {
    "color": "What is the color of the {0}?",
    "material": "What material is the {0}?",
    "animal": "Which animal is this?",
    "anything_on": "Is something on the {0}?",
}


def _sub_qa(question: str, answer: str, key: str, param: str) -> dict[str, Any]:
    """One ``sub_qa`` entry: the sub-question, its answer and its program."""
    return {"sub_question": question, "sub_answer": answer, "semantic": program_of(key, param)}


def introspect_record(
    key: str, param: str, question: str, answer: str, image_id: int, facts: Facts,
    rng: random.Random,
) -> dict[str, Any]:  # fmt: skip
    """The introspect record of one reasoning question (see module docstring)."""
    entries = []
    for _ in range(3):
        kind = rng.choices(("perception", "reasoning", "invalid"), (0.8, 0.12, 0.08))[0]
        if kind == "perception":
            sub_qa = []
            for sub in SUB_QUESTIONS[key]:
                sub_answer = answer_of(sub, param, facts)
                if sub_answer is None:  # cannot happen when the main premise holds
                    continue
                text = render(sub, param)
                if rng.random() < 0.4:
                    text = _ALT_PERCEPTION[sub].format(param)
                sub_qa.append(_sub_qa(text, sub_answer, sub, param))
        elif kind == "reasoning":
            sub_qa = [_sub_qa(_REPHRASE[key].format(param), answer, key, param)]
        else:
            sub_qa = [_sub_qa(question, answer, key, param)]
        entries.append({"pred_q_type": kind, "sub_qa": sub_qa})
    return {
        "reasoning_question": question,
        "reasoning_answer_most_common": answer,
        "image_id": image_id,
        "introspect": entries,
    }


def write_introspect_split(
    out: Path, split: str, records: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """Write ``introspect/VQAIntrospect_{split}v1.0.json`` (``records`` by VQA v2 question
    id) under ``out``. Returns the file (relative to ``out``) and the split's entry of
    ``world.json`` ``splits.introspect``: ``{"questions", "sub_questions"}``."""
    name = f"VQAIntrospect_{split}v1.0.json"
    write_json(out / "introspect" / name, records)
    stats = {
        "questions": len(records),
        "sub_questions": sum(len(e["sub_qa"]) for r in records.values() for e in r["introspect"]),
    }
    return f"introspect/{name}", stats
