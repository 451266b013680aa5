"""Answer normalization of the official VQA v2 evaluation (docs/protocols.md §1, steps 1–2).

The tables (21 punctuation characters, number words, articles, 120
contractions) live in ``vqadiag/resources/vqa_answer_normalization.json`` and
are loaded once. The functions reproduce the official behaviour byte for byte,
including its quirks:

* the punctuation rule looks at the ORIGINAL text: a character ``p`` is deleted
  when the text contains ``p + " "`` or ``" " + p`` or any ``digit,digit``,
  otherwise it is replaced by a space;
* the period rule is the official regex ``(?!<=\\d)(\\.)(?!\\d)`` (the
  look-behind is malformed, so it deletes every ``.`` not followed by a digit)
  and it is called with ``re.UNICODE`` (= 32) as its *count*, so at most 32
  periods are removed;
* number words become digits before articles are dropped; contractions are
  mapped afterwards (capitalised keys such as ``"Im"`` never match, because the
  text was lower-cased first).
"""

from __future__ import annotations

import json
import re
from functools import cache, lru_cache
from importlib import resources
from typing import Any

#: The official period regex, kept verbatim (its look-behind is malformed).
PERIOD_STRIP = re.compile(r"(?!<=\d)(\.)(?!\d)")
#: A comma between two digits anywhere in the text (``"1,000"``).
COMMA_STRIP = re.compile(r"(\d)(,)(\d)")
#: The official code passes ``re.UNICODE`` as the ``count`` argument of ``sub``.
PERIOD_COUNT = int(re.UNICODE)


@cache
def normalization_tables() -> dict[str, Any]:
    """The official tables: ``punctuation``, ``number_words``, ``articles``, ``contractions``.

    Loaded once from ``vqadiag/resources/vqa_answer_normalization.json`` (docs/protocols.md §1).
    """
    text = (
        resources.files("vqadiag")
        .joinpath("resources/vqa_answer_normalization.json")
        .read_text(encoding="utf-8")
    )
    data = json.loads(text)
    return {
        "punctuation": tuple(data["punctuation"]),
        "number_words": dict(data["number_words"]),
        "articles": frozenset(data["articles"]),
        "contractions": dict(data["contractions"]),
    }


@cache
def _any_punctuation() -> re.Pattern[str]:
    """Matches any of the 21 punctuation characters or a period."""
    chars = "".join(normalization_tables()["punctuation"]) + "."
    return re.compile("[" + re.escape(chars) + "]")


def clean_whitespace(text: str) -> str:
    """docs/protocols.md §1 step 1: replace ``\\n`` and ``\\t`` by a space, then strip."""
    return text.replace("\n", " ").replace("\t", " ").strip()


def process_punctuation(text: str) -> str:
    """Official punctuation rule (docs/protocols.md §1 step 2).

    For each of the 21 characters ``p``: if the original ``text`` contains
    ``p + " "`` or ``" " + p``, or matches ``(\\d)(,)(\\d)``, delete every ``p``;
    else replace every ``p`` by a space. Then delete at most 32 periods that are
    not followed by a digit.
    """
    punctuation = normalization_tables()["punctuation"]
    if _any_punctuation().search(text) is None:
        return text  # no punctuation and no period: nothing to delete or replace
    has_digit_comma = COMMA_STRIP.search(text) is not None
    out = text
    for p in punctuation:
        if p not in out:
            continue  # replacing an absent character changes nothing
        if has_digit_comma or (p + " ") in text or (" " + p) in text:
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    return PERIOD_STRIP.sub("", out, PERIOD_COUNT)


def process_digit_article(text: str) -> str:
    """Official word rule (docs/protocols.md §1 step 2).

    Lower-case, split on whitespace, map number words (``none``, ``zero`` …
    ``ten``) to digits, drop the articles ``a an the``, then map contractions
    (``dont`` → ``don't``), and join with one space.
    """
    tables = normalization_tables()
    numbers = tables["number_words"]
    articles = tables["articles"]
    contractions = tables["contractions"]
    words = [numbers.get(w, w) for w in text.lower().split()]
    words = [w for w in words if w not in articles]
    return " ".join(contractions.get(w, w) for w in words)


@lru_cache(maxsize=1 << 18)
def normalize_answer(text: str) -> str:
    """Full official normalization of one answer string (docs/protocols.md §1 steps 1–2).

    ``process_digit_article(process_punctuation(clean_whitespace(text)))``.
    Memoized: each distinct string is processed once.
    """
    return process_digit_article(process_punctuation(clean_whitespace(text)))


def canonical_answer(text: str) -> str:
    """The official normalization of one answer (docs/protocols.md §1), or the stripped raw
    text when normalization leaves nothing: the key under which answers are compared,
    counted and looked up outside the accuracy formula."""
    return normalize_answer(text) or text.strip()
