"""The parts of a GQA question record: its text with token annotations (:class:`Phrase`),
its program (:func:`step`, :func:`semantic_str`), the image facts the question families
read (:class:`ImageContext`), the record itself (:func:`question_record`) and the links
between one image's records (:func:`finalize`); docs/synth.md.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any, Protocol

from vqadiag.synth.taxonomy import CLASSES


class Phrase:
    """A sentence built token by token, remembering which tokens name which object."""

    __slots__ = ("annotations", "tokens")

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.annotations: dict[str, str] = {}

    def add(self, words: str) -> Phrase:
        """Append plain words."""
        self.tokens.extend(words.split())
        return self

    def obj(self, words: str, oid: str | None) -> Phrase:
        """Append words that refer to object ``oid`` (annotated unless ``oid`` is None)."""
        start = len(self.tokens)
        self.tokens.extend(words.split())
        if oid is not None:
            stop = len(self.tokens)
            key = str(start) if stop == start + 1 else f"{start}:{stop}"
            self.annotations[key] = oid
        return self

    def text(self, end: str) -> str:
        """The sentence, capitalised, ending in ``end``."""
        s = " ".join(self.tokens) + end
        return s[0].upper() + s[1:]


def step(operation: str, deps: Sequence[int], argument: str) -> dict[str, Any]:
    """One GQA program step."""
    return {"operation": operation, "dependencies": list(deps), "argument": argument}


def semantic_str(program: Sequence[dict[str, Any]]) -> str:
    """GQA's ``semanticStr``: ``op: arg [deps]`` joined by ``->``."""
    parts = []
    for st in program:
        deps = ", ".join(str(d) for d in st["dependencies"])
        parts.append(f"{st['operation']}: {st['argument']}" + (f" [{deps}]" if deps else ""))
    return "->".join(parts)


def article(word: str) -> str:
    """The indefinite article of ``word`` ("a" or "an")."""
    return "an" if word[0] in "aeiou" else "a"


class ImageContext:
    """What the question generator needs to know about one image."""

    def __init__(
        self,
        image_id: str,
        place: str,
        oids: list[str],
        cls: list[int],
        attrs: dict[str, list[str | None]],
        areas: list[int],
        triples: list[tuple[int, int, int]],
    ) -> None:
        self.image_id = image_id
        self.place = place
        self.oids = oids
        self.cls = cls
        self.names = [CLASSES[c].name for c in cls]
        self.attrs = attrs
        self.areas = areas
        self.count = Counter(self.names)
        self.unique = [i for i, n in enumerate(self.names) if self.count[n] == 1]
        self.rels: set[tuple[int, int, int]] = set(triples)
        self.triples = triples
        self.subjects: dict[tuple[int, int], list[int]] = defaultdict(list)  # (r, b) -> [a]
        self.objects: dict[tuple[int, int], list[int]] = defaultdict(list)  # (a, r) -> [b]
        for a, r, b in triples:
            self.subjects[(r, b)].append(a)
            self.objects[(a, r)].append(b)


def question_record(
    ctx: ImageContext,
    question: Phrase,
    answer: str,
    full: Phrase,
    program: list[dict[str, Any]],
    types: tuple[str, str, str],
    groups: tuple[str | None, str],
    answer_oid: str | None = None,
    plausible: Sequence[str] = (),
) -> dict[str, Any]:
    """One GQA question record of image ``ctx`` (``isBalanced``, ``entailed`` and
    ``equivalent`` are set later, by :func:`finalize` and
    :func:`vqadiag.synth.gqa_questions.mark_balanced`); ``_plausible`` keeps the answer
    family the answer was drawn from, for the split's ``choices`` file."""
    return {
        "imageId": ctx.image_id,
        "question": question.text("?"),
        "answer": answer,
        "fullAnswer": full.text("."),
        "isBalanced": True,
        "groups": {"global": groups[0], "local": groups[1]},
        "types": {"structural": types[0], "semantic": types[1], "detailed": types[2]},
        "annotations": {
            "question": question.annotations,
            "answer": {"0": answer_oid} if answer_oid is not None else {},
            "fullAnswer": full.annotations,
        },
        "semantic": program,
        "semanticStr": semantic_str(program),
        "entailed": [],
        "equivalent": [],
        "_plausible": sorted(set(plausible) | {answer}),
    }


def finalize(records: list[dict[str, Any]], qids: list[str]) -> None:
    """Turn in-image bundle indices into ``entailed`` / ``equivalent`` question ids (in place).

    ``records`` are one image's questions in order and ``qids`` their ids.
    """
    for k, rec in enumerate(records):
        rec["entailed"] = [qids[j] for j in rec.pop("_bundle")]
        other = rec.pop("_equivalent_with", None)
        rec["equivalent"] = [qids[k]]
        if other is not None:
            rec["equivalent"].append(qids[other])
            records[other]["equivalent"].append(qids[k])
    for rec in records:
        rec["equivalent"].sort()


class Maker(Protocol):
    """What the question families use of the question maker
    (:class:`vqadiag.synth.gqa_questions.QuestionMaker`): its random stream, the
    attribute priors, the places' class priors and the false-value draw."""

    rng: random.Random
    attr_priors: dict[str, list[dict[str, float]]]
    place_classes: dict[str, list[tuple[str, float]]]

    def false_value(self, ctx: ImageContext, i: int, family: str) -> str | None:
        """A value object ``i`` does not have, drawn from its class prior."""
        ...
