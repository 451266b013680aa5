"""Number options of the trained models (``-o KEY=VALUE``, docs/models.md "Models"):
each one a whole number or a finite number in its range, or one line naming it and
what it must be, before training starts (a batch size of 0 would divide by zero deep in
training; a gradient clip of 0 would zero every step's gradients). :func:`names_path`
says whether an option's value names a path."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vqadiag.errors import excerpt


@dataclass(frozen=True)
class Number:
    """The values a number option takes: whole or not, from ``low`` up to ``high``
    (each end included unless ``*_open``), or None (``null``) where ``none`` (off)."""

    whole: bool = True
    low: float = 1
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    none: bool = False

    def admits(self, value: Any) -> bool:
        """Whether ``value`` is one of them: a Python or NumPy integer (for a whole
        number) or real (otherwise), finite (``True`` and ``False`` are not numbers)."""
        if value is None:
            return self.none
        kind = numbers.Integral if self.whole else numbers.Real
        if isinstance(value, bool) or not isinstance(value, kind):
            return False
        if not isinstance(value, numbers.Integral) and not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def describe(self) -> str:
        """``"a whole number of 1 or more"``, ``"a number above 0"``, ``"a number from 0
        to below 1"``, ``"a number above 0 and at most 2"`` …"""
        kind = "a whole number" if self.whole else "a number"
        low = f"{self.low:g}"
        if self.high == math.inf:
            text = f"{kind} above {low}" if self.low_open else f"{kind} of {low} or more"
        elif self.low_open:
            end = "below" if self.high_open else "at most"
            text = f"{kind} above {low} and {end} {self.high:g}"
        else:
            end = "below " if self.high_open else ""
            text = f"{kind} from {low} to {end}{self.high:g}"
        return f"{text}, or null" if self.none else text


#: a count of things, at least one (layers, epochs, a batch's questions)
POSITIVE = Number()
#: a count that may be 0
COUNT = Number(low=0)
#: a rate or weight above 0 (learning rates)
RATE = Number(whole=False, low=0, low_open=True)
#: a weight of 0 (off) or more
WEIGHT = Number(whole=False, low=0)
#: a share from 0 to 1
SHARE = Number(whole=False, low=0, high=1)
#: a dropout probability (1 would drop everything)
DROPOUT = Number(whole=False, low=0, high=1, high_open=True)

#: the options of ``TRAINING_DEFAULTS`` (every neural reference model)
TRAINING_NUMBERS: dict[str, Number] = {
    "epochs": POSITIVE,
    "batch_size": POSITIVE,
    "lr": RATE,
    "weight_decay": WEIGHT,
    "grad_clip": Number(whole=False, low=0, none=True),  # 0 or null: no clipping
    "embedding_dim": POSITIVE,
    "hidden_dim": POSITIVE,
    "dropout": DROPOUT,
    "min_word_count": COUNT,
    "top_answers": Number(low=0, none=True),  # 0 or null: every training answer
    "max_question_tokens": POSITIVE,
    "max_objects": POSITIVE,
    "threads": Number(low=0, none=True),  # 0 or null: PyTorch's own thread count
}


def check_numbers(options: Mapping[str, Any], rules: Mapping[str, Number]) -> None:
    """Raise ``ValueError`` naming the first option of ``rules`` in ``options`` whose
    value its rule does not admit (``"batch_size must be a whole number of 1 or more,
    not 0"``); options without a rule are left to their model."""
    for key, rule in rules.items():
        if key in options and not rule.admits(options[key]):
            raise ValueError(f"{key} must be {rule.describe()}, not {excerpt(options[key])}")


def check_switches(options: Mapping[str, Any], keys: tuple[str, ...]) -> None:
    """Raise ``ValueError`` naming the first on/off option of ``keys`` in ``options`` that
    is not true or false (``-o count_feature=no`` was read as on: any non-empty text is
    true to Python)."""
    for key in keys:
        if key in options and options[key] not in (True, False):  # 1 and 0 are equal to them
            raise ValueError(f"{key} must be true or false, not {excerpt(options[key])}")


def check_divides(options: Mapping[str, Any], width: str, heads: str) -> None:
    """Raise ``ValueError`` unless ``options[heads]`` attention heads split the width
    ``options[width]`` evenly (both already checked as whole numbers)."""
    if int(options[width]) % int(options[heads]):
        raise ValueError(
            f"{width} ({options[width]}) must be a multiple of {heads} ({options[heads]})"
        )


def names_path(value: Any) -> bool:
    """Whether an option's value names a path: text or a whole number (``-o KEY=5``
    parses as one), not a bool and not empty."""
    return isinstance(value, (str, int)) and not isinstance(value, bool) and value != ""
