"""Noisy questions from a basic-question dataset (docs/protocols.md §4, Huang et al. §3–4).

Partition k (0-based) of a main question holds its basic questions
``basic[k·size : (k+1)·size]`` (7 partitions of 3 in the paper, from the least
noisy to the noisiest). The noisy question is the main question followed by
those basic questions, joined with single spaces (the paper's "direct
concatenation").

**Word limit** (26 in the paper: the models read at most 26 words). A model
that reads at most ``max_words`` words sees the first ``max_words`` words of
the concatenation, so the noisy text is cut there: the main question is
always kept whole (even when it alone is longer than the limit), then the basic
questions are appended word by word, in rank order, until the limit; the rest
of the last basic question that does not fit, and every later one, is
dropped. ``max_words=None`` (or 0) keeps everything. Words are whitespace-
separated tokens.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate
from typing import Any, overload

DEFAULT_PARTITIONS = 7
DEFAULT_SIZE = 3
DEFAULT_MAX_WORDS = 26


def noisy_question(
    main: str, basics: Sequence[str], max_words: int | None = DEFAULT_MAX_WORDS
) -> str:
    """Main question + basic questions (single spaces), cut to ``max_words`` words.

    The main question is never cut; basic-question words fill the remaining
    ``max_words − len(main)`` words (none when the main question alone is at
    or over the limit).
    """
    words = main.split()
    budget = None if not max_words else max(max_words - len(words), 0)
    extra: list[str] = []
    for basic in basics:
        extra.extend(basic.split())
        if budget is not None and len(extra) >= budget:
            extra = extra[:budget]
            break
    return " ".join(words + extra)


def noise_partitions(
    records: Sequence[Mapping[str, Any]],
    *,
    partitions: int = DEFAULT_PARTITIONS,
    size: int = DEFAULT_SIZE,
    max_words: int | None = DEFAULT_MAX_WORDS,
) -> list[dict[str, str]]:
    """Per partition k (0-based), ``{question_id: noisy question text}``.

    The noisy text of partition k is :func:`noisy_question` of the main question
    and ``basic[k·size:(k+1)·size]`` (docs/protocols.md §4). A record with fewer basic
    questions uses what its slice holds (possibly none: the main question).
    """
    texts = (
        (str(r["question_id"]), r["question"], [b["question"] for b in r["basic"]]) for r in records
    )
    return partitions_of_texts(texts, partitions=partitions, size=size, max_words=max_words)


def partitions_of_texts(
    records: Iterable[tuple[str, str, Sequence[str]]],
    *,
    partitions: int = DEFAULT_PARTITIONS,
    size: int = DEFAULT_SIZE,
    max_words: int | None = DEFAULT_MAX_WORDS,
) -> list[dict[str, str]]:
    """:func:`noise_partitions` of ``(question_id, main question, basic texts)`` triples
    (:func:`vqadiag.data.formats.bqd.read_bqd_texts`)."""
    if partitions < 1 or size < 1:
        raise ValueError("partitions and size must be at least 1")
    listed = list(records)
    return [
        partition_of_texts(listed, k, size=size, max_words=max_words) for k in range(partitions)
    ]


class _PackedStrings:
    """Strings kept as one UTF-8 buffer and where each ends; item ``i`` is decoded when
    read. A few objects in all, however many strings."""

    __slots__ = ("_blob", "_ends")

    def __init__(self, strings: Sequence[str]) -> None:
        encoded = [text.encode() for text in strings]
        self._blob = b"".join(encoded)
        self._ends = array("q", accumulate(len(e) for e in encoded))

    def __getitem__(self, i: int) -> str:
        return self._blob[self._ends[i - 1] if i else 0 : self._ends[i]].decode()

    def __len__(self) -> int:
        return len(self._ends)


class PackedTriples(Sequence[tuple[Any, str, list[str]]]):
    """``(question_id, main question, basic texts)`` triples packed into a few flat
    buffers (:class:`_PackedStrings` for the ids, the main questions and each distinct
    basic text once, an index array for the basic questions of each record); a triple is
    rebuilt each time it is read, equal to the one given.

    The triples of a basic-question dataset live through every noise run. Kept as the
    decoder's own strings, they would pin the memory of everything decoded beside them
    (docs/diagnose.md, "Benchmark": the memory paragraph); packed, nothing of the
    decode outlives it.
    """

    def __init__(self, records: Iterable[tuple[Any, str, Sequence[str]]]) -> None:
        ids: list[Any] = []
        mains: list[str] = []
        texts: list[str] = []
        position: dict[str, int] = {}
        self._basic = array("q")
        self._ends = array("q")
        for qid, main, basic in records:
            ids.append(qid)
            mains.append(main)
            for text in basic:
                j = position.get(text)
                if j is None:
                    j = position[text] = len(texts)
                    texts.append(text)
                self._basic.append(j)
            self._ends.append(len(self._basic))
        packable = all(type(qid) is str for qid in ids)
        self._ids: Sequence[Any] = _PackedStrings(ids) if packable else ids
        self._mains = _PackedStrings(mains)
        self._texts = _PackedStrings(texts)

    @property
    def distinct_basic_texts(self) -> int:
        """How many distinct basic-question texts are kept."""
        return len(self._texts)

    def __len__(self) -> int:
        return len(self._ends)

    def question_ids(self) -> list[Any]:
        """The triples' question ids, in order (no basic text decoded)."""
        return [self._ids[i] for i in range(len(self))]

    @overload
    def __getitem__(self, i: int) -> tuple[Any, str, list[str]]: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple[Any, str, list[str]]]: ...
    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        start = self._ends[i - 1] if i else 0
        texts = self._texts
        basic = [texts[j] for j in self._basic[start : self._ends[i]]]
        return self._ids[i], self._mains[i], basic


def shared_texts(records: Iterable[tuple[Any, str, Sequence[str]]]) -> PackedTriples:
    """The ``(question_id, main question, basic texts)`` triples packed, each distinct
    basic text kept once (a pool question is the basic question of many main ones): what
    :func:`partition_of_texts` builds one partition at a time from."""
    return PackedTriples(records)


def partition_of_texts(
    records: Sequence[tuple[str, str, Sequence[str]]],
    k: int,
    *,
    size: int = DEFAULT_SIZE,
    max_words: int | None = DEFAULT_MAX_WORDS,
) -> dict[str, str]:
    """Partition ``k`` (0-based) of :func:`partitions_of_texts` alone: the same
    ``{question_id: noisy question text}``, without the other partitions' texts."""
    if k < 0 or size < 1:
        raise ValueError("k must be at least 0 and size at least 1")
    return {
        qid: noisy_question(main, basic[k * size : (k + 1) * size], max_words)
        for qid, main, basic in records
    }
