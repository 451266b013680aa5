"""Question tokenizer, word vocabulary and answer vocabulary of the built-in models.

* :func:`tokenize`: lowercase, words (``\\w+``, apostrophes kept inside words) and
  every other non-space character as its own token — ``"Is it red?"`` →
  ``["is", "it", "red", "?"]``.
* :class:`WordVocab`: index 0 is padding (``<pad>``), 1 the unknown word
  (``<unk>``); the rest are the training words seen at least ``min_count`` times,
  most frequent first (ties alphabetical), so the same questions give the same vocabulary.
* :class:`AnswerVocab`: the training answers, most frequent first (ties alphabetical),
  optionally only the top K. There is no ``<unk>`` answer: a model predicts only
  answers it saw in training, and training questions whose answer is outside the
  vocabulary are left out of the loss.

Both serialise to plain JSON (stored in a run's ``config.json`` / ``answers.json``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

PAD = "<pad>"
UNK = "<unk>"
_TOKEN = re.compile(r"\w+(?:'\w+)*|[^\w\s]")


def tokenize(text: str) -> list[str]:
    """Lowercase ``text`` and split it into words and single punctuation marks."""
    return _TOKEN.findall(text.lower())


def _by_frequency(counts: Counter[str]) -> list[str]:
    return sorted(counts, key=lambda w: (-counts[w], w))


@dataclass
class WordVocab:
    """Words → ids; ``words[0] == "<pad>"``, ``words[1] == "<unk>"``."""

    words: list[str]
    index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.words[:2] != [PAD, UNK]:
            raise ValueError("a word vocabulary starts with '<pad>', '<unk>'")
        self.index = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def build(cls, questions: Iterable[str], min_count: int = 1) -> WordVocab:
        """The words of ``questions`` seen at least ``min_count`` times, most frequent first."""
        counts: Counter[str] = Counter()
        for q in questions:
            counts.update(tokenize(q))
        kept = [w for w in _by_frequency(counts) if counts[w] >= min_count and w not in (PAD, UNK)]
        return cls([PAD, UNK, *kept])

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, questions: Sequence[str], max_len: int = 30) -> tuple[np.ndarray, np.ndarray]:
        """``(ids (B, L) int64, lengths (B,) int64)``: token ids padded with 0 to the longest
        question (at most ``max_len`` tokens; unknown words → 1; empty questions get one
        ``<unk>`` so every row has length ≥ 1)."""
        rows = [[self.index.get(t, 1) for t in tokenize(q)][:max_len] or [1] for q in questions]
        width = max((len(r) for r in rows), default=1)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = r
        return ids, np.array([len(r) for r in rows], dtype=np.int64)

    def to_json(self) -> list[str]:
        """The word list (JSON-serialisable)."""
        return list(self.words)


@dataclass
class AnswerVocab:
    """Answers → class ids, most frequent training answer first."""

    answers: list[str]
    index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if len(set(self.answers)) != len(self.answers):
            raise ValueError("answer vocabulary has duplicates")
        self.index = {a: i for i, a in enumerate(self.answers)}

    @classmethod
    def build(cls, answers: Iterable[str], top_k: int | None = None) -> AnswerVocab:
        """All distinct ``answers`` by descending frequency (ties alphabetical); the first
        ``top_k`` when given."""
        ranked = _by_frequency(Counter(answers))
        return cls(ranked if top_k is None else ranked[:top_k])

    def __len__(self) -> int:
        return len(self.answers)

    def encode(self, answers: Sequence[str]) -> np.ndarray:
        """Class ids (B,) int64; answers outside the vocabulary → −100 (ignored by the loss)."""
        return np.array([self.index.get(a, -100) for a in answers], dtype=np.int64)


def vocab_config(words: WordVocab, max_len: int) -> dict[str, Any]:
    """The part of a run config that rebuilds the tokenizer."""
    return {"words": words.to_json(), "max_question_tokens": max_len}


def words_from_config(config: Mapping[str, Any]) -> WordVocab:
    """The :class:`WordVocab` stored by :func:`vocab_config`."""
    return WordVocab(list(config["words"]))
