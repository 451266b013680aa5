"""VQA v2 questions, 10-annotator answers and complementary pairs for the synthetic world.

Questions come from templates that are functions of an image's facts; a
template applied to another image returns its answer there, or ``None`` when
the question's premise fails there ("What color is the banana?" needs exactly
one banana). Complementary pairs follow Goyal et al. (docs/protocols.md §2): for a
question (I, Q, A), among the 24 nearest neighbours of I in the scene
embedding, keep the images where Q's premise holds and the answer differs; the
"annotator" picks one with probability ∝ 0.85^rank (closer images are
preferred) and the same question is asked about it. When no neighbour
qualifies the pair is "not possible".

Annotators: for each question a noise level q ~ U(0, 0.35); the number of
non-canonical answers is Binomial(10, q) capped at 4 (so the canonical answer
is always the most frequent, i.e. ``multiple_choice_answer``). A non-canonical
answer is a case change, trailing punctuation, an article, a number word, a
synonym, or a disagreement (another plausible answer).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vqadiag.synth.taxonomy import (
    CLASSES,
    COLORS,
    INDOOR_PLACES,
    PLACES,
    SEATS,
    WARM_MATERIALS,
    WILD_ANIMALS,
    ripeness,
)

#: the official 65 VQA v2 question types (first words); the longest matching prefix wins
QUESTION_TYPES: tuple[str, ...] = (
    "how many", "is the", "what", "what color is the", "what is the", "is this",
    "is this a", "what is", "are the", "what kind of", "is there a", "what type of",
    "is it", "what are the", "where is the", "is there", "does the", "what color are the",
    "are these", "are there", "which", "is", "what is the man", "is the man", "are", "how",
    "does this", "what is on the", "what does the", "how many people are", "what is in the",
    "what is this", "do", "what are", "are they", "what time", "what sport is",
    "are there any", "is he", "what color is", "why", "where are the", "what color",
    "who is", "what animal is", "is the woman", "is this an", "do you",
    "how many people are in", "what room is", "has", "is this person", "what is the woman",
    "can you", "why is the", "is the person", "what is the color of the",
    "what is the person", "could", "was", "is that a", "what number is", "what is the name",
    "what brand", "none of the above",
)  # fmt: skip

NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                "ten")  # fmt: skip
SYNONYMS: dict[str, tuple[str, ...]] = {
    "gray": ("grey",), "couch": ("sofa",), "bicycle": ("bike",), "motorcycle": ("motorbike",),
    "airplane": ("plane", "jet"), "cup": ("mug",), "dog": ("puppy",), "cat": ("kitten",),
    "yes": ("yeah", "yep"), "no": ("nope",), "living room": ("lounge",), "street": ("road",),
    "wood": ("wooden",), "metal": ("steel",), "pot": ("pan",), "shoe": ("sneaker",),
}  # fmt: skip
NOISE_MAX, MAX_ODD = 0.35, 4
PICK_DECAY = 0.85


def question_type(question: str) -> str:
    """The official question type: the longest of the 65 prefixes matching the first words."""
    words = question.lower().rstrip("?").split()
    best = "none of the above"
    best_len = 0
    for qt in QUESTION_TYPES:
        parts = qt.split()
        if len(parts) > best_len and words[: len(parts)] == parts:
            best, best_len = qt, len(parts)
    return best


@dataclass
class Facts:
    """What VQA templates may ask about one image."""

    place: str
    names: list[str]
    cls: list[int]
    attrs: dict[str, list[str | None]]
    on: list[tuple[int, int]]  # (a, b): a is on b
    count: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for n in self.names:
            self.count[n] = self.count.get(n, 0) + 1

    def unique(self, name: str) -> int | None:
        """Index of the only object named ``name``, else None."""
        if self.count.get(name) != 1:
            return None
        return self.names.index(name)

    def only_of_category(self, category: str) -> int | None:
        """Index of the only object of ``category``, else None."""
        hits = [i for i, c in enumerate(self.cls) if CLASSES[c].category == category]
        return hits[0] if len(hits) == 1 else None


# -------------------------------------------------------------------- templates
def _attr(family: str) -> Callable[[Facts, str], str | None]:
    def answer(f: Facts, name: str) -> str | None:
        i = f.unique(name)
        return None if i is None else f.attrs[family][i]

    return answer


def _verify_color(f: Facts, param: str) -> str | None:
    name, color = param.split("|")
    i = f.unique(name)
    if i is None or f.attrs["color"][i] is None:
        return None
    return "yes" if f.attrs["color"][i] == color else "no"


def _on(f: Facts, name: str) -> str | None:
    i = f.unique(name)
    if i is None:
        return None
    names = {f.names[a] for a, b in f.on if b == i}
    return names.pop() if len(names) == 1 else None


def _ripe(f: Facts, name: str) -> str | None:
    i = f.unique(name)
    if i is None or f.attrs["color"][i] is None:
        return None
    return "yes" if ripeness(f.attrs["color"][i]) == "ripe" else "no"


def _warm(f: Facts, name: str) -> str | None:
    i = f.unique(name)
    if i is None or f.attrs["material"][i] is None:
        return None
    return "yes" if f.attrs["material"][i] in WARM_MATERIALS else "no"


def _wild(f: Facts, _param: str) -> str | None:
    i = f.only_of_category("animal")
    return None if i is None else ("yes" if f.names[i] in WILD_ANIMALS else "no")


def _animal(f: Facts, _param: str) -> str | None:
    i = f.only_of_category("animal")
    return None if i is None else f.names[i]


def _seat_free(f: Facts, name: str) -> str | None:
    i = f.unique(name)
    if i is None:
        return None
    return "no" if any(b == i for _, b in f.on) else "yes"


def _anything_on(f: Facts, name: str) -> str | None:
    i = f.unique(name)
    if i is None:
        return None
    return "yes" if any(b == i for _, b in f.on) else "no"


#: key -> (text pattern, answer type, answer function of (facts, param))
TEMPLATES: dict[str, tuple[str, str, Callable[[Facts, str], str | None]]] = {
    "color": ("What color is the {0}?", "other", _attr("color")),
    "material": ("What is the {0} made of?", "other", _attr("material")),
    "count": ("How many {1} are there?", "number", lambda f, n: str(f.count.get(n, 0))),
    "exist": ("Is there a {0} in the picture?", "yes/no",
              lambda f, n: "yes" if f.count.get(n) else "no"),
    "any": ("Are there any {1}?", "yes/no", lambda f, n: "yes" if f.count.get(n) else "no"),
    "verify_color": ("Is the {0} {2}?", "yes/no", _verify_color),
    "on": ("What is on the {0}?", "other", _on),
    "room": ("What room is this?", "other",
             lambda f, _: f.place if f.place in INDOOR_PLACES else None),
    "indoors": ("Is this picture taken indoors?", "yes/no",
                lambda f, _: "yes" if f.place in INDOOR_PLACES else "no"),
    "animal": ("What animal is this?", "other", _animal),
    # reasoning questions (rules of the world) and their perception sub-questions
    "ripe": ("Is the {0} ripe?", "yes/no", _ripe),
    "warm": ("Is the {0} warm?", "yes/no", _warm),
    "wild": ("Is the animal wild?", "yes/no", _wild),
    "seat": ("Can you sit on the {0}?", "yes/no", _seat_free),
    "anything_on": ("Is there anything on the {0}?", "yes/no", _anything_on),
}  # fmt: skip
REASONING = ("ripe", "warm", "wild", "seat")
#: perception sub-questions that suffice to answer each reasoning question
SUB_QUESTIONS: dict[str, tuple[str, ...]] = {
    "ripe": ("color",),
    "warm": ("material",),
    "wild": ("animal",),
    "seat": ("anything_on",),
}


def render(key: str, param: str) -> str:
    """The question text of template ``key`` with parameter ``param``."""
    parts = param.split("|")
    name = parts[0]
    plural = next((c.plural for c in CLASSES if c.name == name), name)
    extra = parts[1] if len(parts) > 1 else ""
    return TEMPLATES[key][0].format(name, plural, extra)


def answer_of(key: str, param: str, facts: Facts) -> str | None:
    """The answer of template ``key`` on an image, or None when its premise fails."""
    return TEMPLATES[key][2](facts, param)


def candidate_questions(facts: Facts, rng: random.Random) -> list[tuple[str, str]]:
    """Applicable ``(template, param)`` pairs for an image, in a random order."""
    out: list[tuple[str, str]] = []
    uniques = [n for n, c in facts.count.items() if c == 1]
    for n in uniques:
        i = facts.names.index(n)
        cat = CLASSES[facts.cls[i]].category
        if facts.attrs["color"][i] is not None:
            out.append(("color", n))
            color = facts.attrs["color"][i] if rng.random() < 0.5 else rng.choice(COLORS)
            out.append(("verify_color", f"{n}|{color}"))
            if cat == "fruit":
                out.append(("ripe", n))
        if facts.attrs["material"][i] is not None:
            out.append(("material", n))
            if cat == "clothing":
                out.append(("warm", n))
        if n in SEATS:
            out.append(("seat", n))
        if _on(facts, n) is not None:
            out.append(("on", n))
    for n in sorted(facts.count):
        out.append(("count", n))
        out.append(("exist" if rng.random() < 0.5 else "any", n))
    absent = [c.name for c in CLASSES if c.name not in facts.count]
    for n in rng.sample(absent, 2):
        out.append(("exist" if rng.random() < 0.5 else "any", n))
    out.append(("indoors", ""))
    if facts.place in INDOOR_PLACES:
        out.append(("room", ""))
    if facts.only_of_category("animal") is not None:
        out.append(("animal", ""))
        out.append(("wild", ""))
    out.sort()
    rng.shuffle(out)
    return out


# ------------------------------------------------------------------- annotators
def _variant(answer: str, answer_type: str, kind: str, rng: random.Random) -> str:
    if kind == "case":
        return answer.capitalize() if answer[:1].islower() else answer.upper()
    if kind == "punct":
        return answer + rng.choice((".", "!", " ."))
    if kind == "article":
        if answer_type == "number" and answer.isdigit() and int(answer) <= 10:
            return NUMBER_WORDS[int(answer)]
        if answer_type == "other":
            return rng.choice(("a ", "the ")) + answer
        return answer.capitalize()
    if kind == "synonym" and answer in SYNONYMS:
        return rng.choice(SYNONYMS[answer])
    # disagreement: another plausible answer
    if answer_type == "yes/no":
        return "no" if answer == "yes" else "yes"
    if answer_type == "number":
        n = int(answer)
        return str(n + 1 if n == 0 or rng.random() < 0.5 else n - 1)
    if answer in COLORS:
        return rng.choice([c for c in COLORS if c != answer])
    if answer in PLACES:
        return rng.choice([p for p in PLACES if p != answer])
    return rng.choice([c.name for c in CLASSES if c.name != answer])


def annotator_answers(answer: str, answer_type: str, rng: random.Random) -> list[dict[str, Any]]:
    """Ten annotator answers around the canonical ``answer`` (see module docstring)."""
    noise = rng.random() * NOISE_MAX
    odd = min(MAX_ODD, sum(rng.random() < noise for _ in range(10)))
    given: list[tuple[str, str]] = [(answer, "yes")] * (10 - odd)
    kinds = ("case", "punct", "article", "synonym", "disagree")
    for _ in range(odd):
        kind = rng.choices(kinds, (0.25, 0.15, 0.15, 0.15, 0.3))[0]
        text = _variant(answer, answer_type, kind, rng)
        given.append((text, "maybe" if kind == "disagree" else "yes"))
    rng.shuffle(given)
    return [
        {"answer": text, "answer_confidence": conf, "answer_id": k + 1}
        for k, (text, conf) in enumerate(given)
    ]
