"""From a generative model's text to a short answer (docs/vlms.md, "From generated text to
an answer").

A chat VLM is asked ``prompt.format(question=...)`` (default :data:`DEFAULT_PROMPT`, the
short-answer instruction of LLaVA-1.5's VQA evaluation) and answers in free text. Before
the official normalisation of the dataset's metric (VQA v2's, or GQA's exact match),
``extraction="short"`` applies, in this order:

1. the first non-empty line, surrounding white space removed;
2. surrounding quotes, back-ticks, asterisks and underscores (Markdown emphasis)
   removed, then a leading answer prefix dropped (``Answer:``, ``**Answer:**``, ``The
   answer is``, ``The final answer is:`` …, any case);
3. surrounding quotes, back-ticks, asterisks and underscores removed again;
4. trailing ``. , ; : ! ?`` removed;
5. lower case;
6. a text that starts with the word ``yes`` or ``no`` followed by punctuation becomes
   that word (``"Yes, it is red."`` → ``yes``; ``"No one"`` and ``"no-entry sign"`` stay);
7. a whole answer that is a number word from ``zero`` to ``twenty`` becomes its digits.

``extraction="raw"`` keeps the text with only its surrounding white space removed. The
raw text is kept beside the answer (``per_question.jsonl``'s ``raw``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from vqadiag.errors import DataError

DEFAULT_PROMPT = "{question}\nAnswer the question using a single word or phrase."
EXTRACTIONS = ("short", "raw")

_PREFIX = re.compile(
    r"^(?:(?:the\s+)?(?:final\s+|short\s+)?answer\s*(?:is\s*:?|:)[\s*_]*)", re.IGNORECASE
)
_WRAPPERS = "\"'`*_“”‘’"
_TRAILING = ".,;:!?"
_YES_NO = re.compile(r"^(yes|no)(?=[,.;:!?]|$)")
_NUMBERS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen twenty"
)
NUMBER_WORDS = {word: str(i) for i, word in enumerate(_NUMBERS.split(" "))}


def short_answer(text: str) -> str:
    """Steps 1–7 of the module docstring."""
    lines = [line.strip() for line in str(text).splitlines()]
    answer = next((line for line in lines if line), "")
    answer = answer.strip(_WRAPPERS).strip()
    answer = _PREFIX.sub("", answer, count=1).strip()
    answer = answer.strip(_WRAPPERS).strip()
    answer = answer.rstrip(_TRAILING).strip().strip(_WRAPPERS).strip()
    answer = answer.lower()
    yes_no = _YES_NO.match(answer)
    if yes_no:
        return yes_no.group(1)
    return NUMBER_WORDS.get(answer, answer)


@dataclass(frozen=True)
class Generation:
    """How a generative model is asked and how its text becomes an answer.

    ``prompt`` must contain ``{question}``; ``extraction`` is ``"short"`` (the module
    docstring's steps) or ``"raw"``; ``max_new_tokens`` bounds the generated text.
    """

    prompt: str = DEFAULT_PROMPT
    extraction: str = "short"
    max_new_tokens: int = 16

    def __post_init__(self) -> None:
        if "{question}" not in self.prompt:
            raise ValueError("the prompt must contain {question}")
        try:
            self.prompt.format(question="")
        except (AttributeError, IndexError, KeyError, ValueError) as err:
            raise ValueError(
                f"the prompt is not a format string with {{question}}: {err}"
            ) from None
        if self.extraction not in EXTRACTIONS:
            raise ValueError(f"extraction must be one of {', '.join(EXTRACTIONS)}")
        if int(self.max_new_tokens) < 1:
            raise ValueError("max_new_tokens must be at least 1")

    def ask(self, question: str) -> str:
        """The text sent to the model for ``question``."""
        return self.prompt.format(question=question)

    def answer(self, text: str) -> str:
        """The answer scored from the generated ``text``."""
        return short_answer(text) if self.extraction == "short" else str(text).strip()

    def to_json(self) -> dict[str, Any]:
        """What ``results.json`` records under ``model.settings``."""
        return {
            "prompt": self.prompt,
            "extraction": self.extraction,
            "max_new_tokens": int(self.max_new_tokens),
        }


def read_generation(args: Any) -> Generation:
    """The :class:`Generation` of ``--model-args`` ``prompt``, ``extraction`` and
    ``max_new_tokens`` (a :class:`vqadiag.models.model_args.ModelArgs`)."""
    defaults = Generation()
    try:
        return Generation(
            prompt=args.text("prompt", defaults.prompt),
            extraction=args.choice("extraction", defaults.extraction, EXTRACTIONS),
            max_new_tokens=args.integer("max_new_tokens", defaults.max_new_tokens),
        )
    except DataError:
        raise  # already names --model-args
    except ValueError as err:
        raise DataError("--model-args", str(err)) from None
