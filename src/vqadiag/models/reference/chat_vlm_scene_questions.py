"""Scene questions: more training questions for the chat VLM, from the training split's
scene graphs and the phrasing of its own questions (docs/chat-vlm.md, "Scene
questions").

A *template* is a training question whose program is one ``select`` of an object by name
followed by one attribute operation: ``query CAT`` (the answer is the object's attribute
of category CAT), ``verify CAT`` with argument ``A`` (yes when A is one of the object's
attributes, else no) or ``choose CAT`` with argument ``A|B`` (the one of A and B the
object has). The categories come from those programs too: an attribute belongs to CAT
when a template's answer (``query``) or argument (``verify``, ``choose``) of category CAT
names it.

A scene question re-targets a template to another object of a training image: an
object whose name no other object of its scene has, asked about a category in which it
has exactly one attribute and which has templates. An operation is drawn evenly from
those with templates of that category (``choose`` only when the category has another
attribute), then one of its templates, so each operation is asked about as often
whatever the split's own mix. The template's object name (the words its
``annotations`` tie to the selected object, which must be that name exactly) is replaced
by the object's name, and for ``verify`` and ``choose`` the attribute words by new ones:
``verify`` asks the object's own attribute or, with probability ½, another of the
category (answer no: the scene graph is taken to list every attribute the object has);
``choose`` asks its own and another, in random order. The other attribute is one the
training scene graphs give an object of the same name, else any of the category. The
record keeps the annotation of the object's name, so grounding reads it as it reads the
split's own questions.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar

import numpy as np

from vqadiag.models.reference.chat_vlm_data import annotation_span, question_words

T = TypeVar("T")

#: the attribute operations a template may end with
OPERATIONS = ("query", "verify", "choose")


@dataclass(frozen=True)
class Template:
    """A training question as a pattern: its text, the word span (``first``, ``stop``)
    of the selected object's name, the operation and its category, and the attribute
    words of its argument (none for ``query``)."""

    question: str
    first: int
    stop: int
    operation: str
    category: str
    arguments: tuple[str, ...]

    @cached_property
    def masked(self) -> str:
        """The question with its name words replaced by ``"\\x00"``."""
        words = question_words(self.question)
        start, end = words[self.first][0], words[self.stop - 1][1]
        return self.question[:start] + "\x00" + self.question[end:]


def template(record: Mapping[str, Any]) -> Template | None:
    """The :class:`Template` of one training question, or None when its program is not
    ``select`` then one attribute operation with distinct non-empty arguments, when its
    annotations do not tie the selected object to words of the question that are its
    name exactly (``zebra,`` or ``it`` are not), or when an argument is not one whole word
    of the rest of the question, once."""
    program = record.get("semantic")
    if not isinstance(program, Sequence) or len(program) != 2:
        return None
    select, last = program
    if not isinstance(select, Mapping) or not isinstance(last, Mapping):
        return None
    match = re.fullmatch(r"(.+) \((\d+)\)", str(select.get("argument", "")))
    operation, _, category = str(last.get("operation", "")).partition(" ")
    if select.get("operation") != "select" or match is None or operation not in OPERATIONS:
        return None
    if operation == "query":
        category, arguments = str(last.get("argument", "")), ()
    else:
        arguments = tuple(str(last.get("argument", "")).split("|"))
    if category in ("", "name", "place", "rel") or len(arguments) != OPERATIONS.index(operation):
        return None
    if "" in arguments or len(set(arguments)) != len(arguments):
        return None
    question = str(record.get("question", ""))
    words = question_words(question)
    span = _name_span(record, match.group(2))
    if span is None or not 0 <= span[0] < span[1] <= len(words):
        return None
    start, end = words[span[0]][0], words[span[1] - 1][1]
    found = Template(question, *span, operation, category, arguments)
    if question[start:end] != match.group(1) or any(
        len(re.findall(rf"\b{re.escape(a)}\b", found.masked)) != 1 for a in arguments
    ):
        return None
    return found


def _name_span(record: Mapping[str, Any], object_id: str) -> tuple[int, int] | None:
    """The word span the question annotations tie to ``object_id``, if any."""
    tied = (record.get("annotations") or {}).get("question") or {}
    for span, tied_id in tied.items() if isinstance(tied, Mapping) else ():
        words = annotation_span(span)
        if str(tied_id) == object_id and words is not None:
            return words
    return None


@dataclass(frozen=True)
class SceneQuestions:
    """What scene questions are drawn from: the templates by (operation, category), each
    attribute's category, and the attributes each object name is seen with."""

    templates: Mapping[tuple[str, str], Sequence[Template]]
    category: Mapping[str, str]
    seen_with: Mapping[str, frozenset[str]]

    @classmethod
    def learn(
        cls, records: Sequence[Mapping[str, Any]], scenes: Mapping[str, Any]
    ) -> SceneQuestions:
        """Templates and categories of ``records``; names' attributes of ``scenes``."""
        templates: dict[tuple[str, str], list[Template]] = defaultdict(list)
        category: dict[str, str] = {}
        for record in records:
            found = template(record)
            if found is None:
                continue
            templates[(found.operation, found.category)].append(found)
            named = found.arguments or (str(record.get("answer")),)
            for attribute in named:
                category.setdefault(attribute, found.category)
        seen: dict[str, set[str]] = defaultdict(set)
        for scene in scenes.values():
            for obj in scene["objects"].values():
                seen[str(obj["name"])].update(str(a) for a in obj.get("attributes") or ())
        return cls(dict(templates), category, {name: frozenset(a) for name, a in seen.items()})

    def ask(
        self, image_id: str, scene: Mapping[str, Any], k: int, rng: np.random.Generator
    ) -> list[dict[str, Any]]:
        """At most ``k`` scene questions of one image (module docstring) as question
        records (``question``, ``answer``, ``imageId``, ``annotations``); fewer when a
        draw finds no template, none when the scene has no object to ask about."""
        names = Counter(str(o["name"]) for o in scene["objects"].values())
        objects = []
        for object_id, obj in sorted(scene["objects"].items()):
            own = self._own(obj)
            if names[str(obj["name"])] == 1 and own:
                objects.append((str(object_id), obj, own))
        out: list[dict[str, Any]] = []
        for _ in range(k if objects else 0):
            object_id, obj, own = _pick(objects, rng)
            category = _pick(sorted(own), rng)
            asked = self._retarget(image_id, object_id, obj, category, own[category], rng)
            if asked is not None:
                out.append(asked)
        return out

    def _own(self, obj: Mapping[str, Any]) -> dict[str, str]:
        """The object's attribute per category that has templates, for the categories
        where it has exactly one (a black and white zebra has no one colour to ask)."""
        found: dict[str, list[str]] = defaultdict(list)
        for attribute in dict.fromkeys(str(a) for a in obj.get("attributes") or ()):
            category = self.category.get(attribute)
            if category is not None and any((op, category) in self.templates for op in OPERATIONS):
                found[category].append(attribute)
        return {category: only for category, (only, *more) in found.items() if not more}

    def _retarget(
        self, image_id: str, object_id: str, obj: Mapping[str, Any], category: str,
        attribute: str, rng: np.random.Generator,
    ) -> dict[str, Any] | None:  # fmt: skip
        """One template of ``category`` asked about ``obj``, whose attribute is
        ``attribute``: an operation drawn evenly from those with templates of the category
        (``choose`` only when the category has another attribute), then one of its
        templates; None when there is none."""
        name = str(obj["name"])
        others = self._others(name, category, set(obj.get("attributes") or ()))
        usable = [op for op in OPERATIONS if (op, category) in self.templates]
        usable = [op for op in usable if op != "choose" or others]
        if not usable:
            return None
        chosen = _pick(self.templates[(_pick(usable, rng), category)], rng)
        answer, asked = attribute, ()
        if chosen.operation == "verify":
            shown = attribute if not others or rng.random() < 0.5 else _pick(others, rng)
            answer, asked = ("yes" if shown == attribute else "no"), (shown,)
        elif chosen.operation == "choose":
            asked = (attribute, _pick(others, rng))
            if rng.random() < 0.5:
                asked = asked[::-1]
        question, span = _rewrite(chosen, name, asked)
        return {
            "question": question,
            "answer": answer,
            "imageId": image_id,
            "annotations": {"question": {span: object_id}},
        }

    def _others(self, name: str, category: str, has: set[str]) -> list[str]:
        """Attributes of ``category`` the object lacks: those its name is seen with, else
        any of the category (sorted)."""
        of_category = sorted(a for a, c in self.category.items() if c == category and a not in has)
        seen = [a for a in of_category if a in self.seen_with.get(name, ())]
        return seen or of_category


def scene_questions(
    records: Sequence[Mapping[str, Any]], scenes: Mapping[str, Any],
    image_ids: Sequence[str], k: int, seed: int,
) -> list[dict[str, Any]]:  # fmt: skip
    """At most ``k`` scene questions of each of ``image_ids`` that has a scene graph
    (:meth:`SceneQuestions.ask`), from the
    templates of ``records``, drawn from their own generator seeded by ``seed`` (so the
    run's other draws are the same with and without them)."""
    if k <= 0:
        return []
    learned = SceneQuestions.learn(records, scenes)
    rng = np.random.default_rng([seed, 0x5C])
    return [q for i in image_ids if i in scenes for q in learned.ask(i, scenes[i], k, rng)]


def _pick(values: Sequence[T], rng: np.random.Generator) -> T:
    """One of ``values``, drawn evenly by ``rng``."""
    return values[int(rng.integers(len(values)))]


def _rewrite(chosen: Template, name: str, asked: tuple[str, ...]) -> tuple[str, str]:
    """The template's question with the name words replaced by ``name`` and its
    argument attributes by ``asked`` (each its first whole-word occurrence, all in one
    pass), and the annotation span of the new name."""
    marked = chosen.masked
    todo = dict(zip(chosen.arguments, asked, strict=True))
    if todo:
        pattern = "|".join(rf"\b{re.escape(old)}\b" for old in sorted(todo, key=len, reverse=True))

        def swap(match: re.Match[str]) -> str:
            return todo.pop(match.group(0), match.group(0))

        marked = re.sub(pattern, swap, marked)
    head, _, tail = marked.partition("\x00")
    first = len(question_words(head + "x")) - 1  # the words as annotations count them
    count = len(name.split(" "))
    span = str(first) if count == 1 else f"{first}:{first + count}"
    return head + name + tail, span
