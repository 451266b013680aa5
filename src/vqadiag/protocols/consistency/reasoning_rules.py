"""Regex-style rules that eliminate Perception questions (protocols.md §6; Selvaraju Table 2).

The SQuINT paper builds its Reasoning split of VQA by removing every question
that one of its hand-written rules flags as Perception (§3.1, appendix B.2);
what survives is "highly likely to be Reasoning" (18% of VQA). Each rule has
up to four parts, all of which must hold:

* **starts with** a phrase — the question's first words are the phrase's words;
* **contains** a phrase — the phrase's words occur consecutively in the question;
  a phrase ending in ``?`` (``on?``, ``doing?`` …) must be the question's last
  word; the two fragments ``ed?`` and ``ing?`` match a last word ending in
  ``ed`` / ``ing``;
* **not contains** — none of the listed words occurs in the question;
* **length** — the question has exactly that many (whitespace-separated) words.

Matching is case-insensitive on words (``[a-z0-9']+`` tokens), so ``color``
does not fire inside ``colorful`` and ``or`` not inside ``for``; word-level
matching is what makes the paper's separate ``wear`` / ``wearing`` and ``on`` /
``on?`` rows meaningful, and its ``or`` / ``US`` exclusions sensible.

Provenance (documented in ``docs/robustness-consistency.md``): the 40 rules
below are the paper's Table 2 ("top-40 rules based on data eliminated"), in
its order, with the table's duplicated row ``What … playing?`` kept once.
The paper lists only the first entries of five "not contains" lists and ends
them with "etc."; we implement the listed words only. The paper's full rule
set (beyond the top 40) was not published in any source we could find, so
this split is a close approximation of the paper's, not a copy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_WORD = re.compile(r"[a-z0-9']+")
_SUFFIXES = frozenset({"ed?", "ing?"})
PERCEPTION = "perception"
REASONING = "reasoning"


def words(question: str) -> list[str]:
    """Lower-cased word tokens ``[a-z0-9']+`` of a question (punctuation dropped)."""
    return _WORD.findall(question.lower())


def _has_phrase(tokens: list[str], phrase: list[str]) -> bool:
    k = len(phrase)
    return any(tokens[i : i + k] == phrase for i in range(len(tokens) - k + 1))


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of paper Table 2; a question is Perception if all given parts hold."""

    number: int
    starts: str | None = None
    contains: str | None = None
    not_contains: tuple[str, ...] = ()
    length: int | None = None
    _start: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _phrase: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _excluded: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_start", tuple(words(self.starts or "")))
        object.__setattr__(self, "_phrase", tuple(words(self.contains or "")))
        object.__setattr__(self, "_excluded", tuple(tuple(words(w)) for w in self.not_contains))

    def matches(self, question: str) -> bool:
        """Whether this rule flags ``question`` as Perception (module docstring for semantics)."""
        return self.matches_words(words(question), len(question.split()))

    def matches_words(self, tokens: list[str], n_words: int) -> bool:
        """:meth:`matches` on a question already split into ``words`` and counted."""
        if self._start and tokens[: len(self._start)] != list(self._start):
            return False
        if self.length is not None and n_words != self.length:
            return False
        if self.contains is not None and not self._contains(tokens):
            return False
        return not any(_has_phrase(tokens, list(w)) for w in self._excluded)

    def _contains(self, tokens: list[str]) -> bool:
        phrase = self.contains.lower()
        if phrase in _SUFFIXES:
            return bool(tokens) and tokens[-1].endswith(phrase[:-1])
        if phrase.endswith("?"):
            return tokens[-1:] == list(self._phrase)
        return _has_phrase(tokens, list(self._phrase))

    def describe(self) -> dict[str, object]:
        """The rule as a JSON object (``rule``, ``starts``, ``contains``, ``not_contains``,
        ``length``)."""
        return {
            "rule": self.number,
            "starts": self.starts,
            "contains": self.contains,
            "not_contains": list(self.not_contains),
            "length": self.length,
        }


def _table() -> tuple[Rule, ...]:
    rows: list[tuple[str | None, str | None, tuple[str, ...], int | None]] = [
        ("How many", None, (), None),
        (None, "color", (), None),
        ("What is the", None, (), None),
        ("What", "on", (), None),
        ("What", "in", (), None),
        ("Is there", None, (), None),
        (None, "wear", ("appropriate", "acceptable", "etiquitte"), None),
        (None, "wearing", (), None),
        ("Is this a", None, (), 4),
        ("Where", None, (), None),
        (None, "old", (), None),
        ("What kind of", None, (), None),
        ("What are", None, (), None),
        (None, "on?", (), None),
        ("Are there", None, (), None),
        ("What type of", None, (), None),
        (None, "doing?", (), None),
        (None, "holding", (), None),
        (None, "low", (), None),
        (None, "round?", (), None),
        ("Do", "have", (), None),
        ("Is the", "on the", (), None),
        ("Are these", None, ("homemade", "healthy", "domesticated"), 3),
        ("Is the", "in the", ("wild", "mountain", "desert", "woods"), None),
        ("Does", "have", (), None),
        (None, "number", (), None),
        ("What is this", None, (), None),
        ("Is", "ed?", ("overexposed", "doctored", "ventilated"), 3),
        ("Is", "ing?", ("horrifying", "relaxing", "competing"), 3),
        ("Is", "on", (), 3),
        ("Who", "on", (), None),
        (None, "shown?", (), None),
        ("What sport", None, (), None),
        (None, "sun", (), None),
        (None, "see", (), None),
        (None, "visible", (), None),
        ("What", "say?", (), None),
        ("What", "playing?", (), None),
        ("Are the", "in the", ("US", "wild", "team", "or"), None),
        ("Are", "on the", (), None),
    ]
    return tuple(
        Rule(i, starts, contains, not_contains, length)
        for i, (starts, contains, not_contains, length) in enumerate(rows, start=1)
    )


#: The 40 rules of paper Table 2, numbered 1..40 in the table's order.
RULES: tuple[Rule, ...] = _table()


def matching_rules(question: str, rules: Iterable[Rule] = RULES) -> list[int]:
    """Numbers of every rule that flags ``question`` as Perception (paper Table 2)."""
    tokens, n_words = words(question), len(question.split())
    return [rule.number for rule in rules if rule.matches_words(tokens, n_words)]


def classify(question: str, rules: Iterable[Rule] = RULES) -> str:
    """``"perception"`` if any rule of paper Table 2 fires, else ``"reasoning"`` (§3.1)."""
    return PERCEPTION if matching_rules(question, rules) else REASONING
