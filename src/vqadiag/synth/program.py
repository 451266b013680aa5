"""Execute GQA ``semantic`` programs on a scene graph of the synthetic world.

The executor itself is general (:mod:`vqadiag.data.formats.gqa_program`); this module binds it
to the world's fixed taxonomy: attribute families, class categories and the short
answers of left / right relations. Every generated question's program executes
to its answer (tested on every generated question).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vqadiag.data.formats.gqa_program import ProgramError, ProgramVocabulary
from vqadiag.data.formats.gqa_program import execute as _execute
from vqadiag.synth.taxonomy import ATTRIBUTE_FAMILY, CLASSES, RELATION_ANSWER

__all__ = ["SYNTH_VOCABULARY", "ProgramError", "execute"]

#: the synthetic world's program vocabulary
SYNTH_VOCABULARY = ProgramVocabulary(
    attribute_family=dict(ATTRIBUTE_FAMILY),
    categories={c.name: (c.category,) for c in CLASSES},
    relation_answer=dict(RELATION_ANSWER),
    scene_keys={"place": "location"},
)


def execute(program: Sequence[Mapping[str, Any]], scene: Mapping[str, Any]) -> str:
    """Run a GQA program on a synthetic scene graph (strictly) and return the answer."""
    return _execute(program, scene, SYNTH_VOCABULARY, strict=True)
