"""``--model-args KEY=VALUE,KEY=VALUE``: settings passed to a model adapter (docs/vlms.md).

The text is split at commas that are followed by ``KEY=`` (so a value may itself hold
commas, e.g. a prompt), each part at its first ``=``. Adapters read the values with
:class:`ModelArgs`, which converts types and names the option in every error, and
refuses keys it was not asked for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from vqadiag.errors import DataError

SOURCE = "--model-args"
_SPLIT = re.compile(r",(?=\s*[A-Za-z_][A-Za-z0-9_]*\s*=)")


def parse_model_args(text: str | None) -> dict[str, str]:
    """``"a=1,b=x"`` → ``{"a": "1", "b": "x"}`` (empty or None → ``{}``)."""
    out: dict[str, str] = {}
    if not text or not text.strip():
        return out
    for part in _SPLIT.split(text):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise DataError(SOURCE, f"expected KEY=VALUE, got {part.strip()!r}")
        if key in out:
            raise DataError(SOURCE, f"{key!r} given twice")
        out[key] = value.strip()
    return out


class ModelArgs:
    """Typed reads of adapter settings; :meth:`finish` refuses the keys nobody read."""

    def __init__(self, args: Mapping[str, Any] | None, adapter: str) -> None:
        self.args = dict(args or {})
        self.adapter = adapter
        self.read: set[str] = set()

    def _raw(self, key: str) -> Any:
        self.read.add(key)
        return self.args.get(key)

    def text(self, key: str, default: str | None) -> str | None:
        value = self._raw(key)
        return default if value is None else str(value)

    def integer(self, key: str, default: int, minimum: int = 1) -> int:
        value = self._raw(key)
        if value is None:
            return default
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise DataError(SOURCE, f"{key} must be an integer, got {value!r}") from None
        if number < minimum:
            raise DataError(SOURCE, f"{key} must be at least {minimum}, got {number}")
        return number

    def number(self, key: str, default: float, minimum: float = 0.0) -> float:
        value = self._raw(key)
        if value is None:
            return default
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise DataError(SOURCE, f"{key} must be a number, got {value!r}") from None
        if not number >= minimum or number != number or number == float("inf"):
            raise DataError(SOURCE, f"{key} must be a finite number ≥ {minimum}, got {value!r}")
        return number

    def choice(self, key: str, default: str, choices: Iterable[str]) -> str:
        allowed = tuple(choices)
        value = self.text(key, default)
        if value not in allowed:
            raise DataError(SOURCE, f"{key} must be one of {', '.join(allowed)}, got {value!r}")
        return str(value)

    def finish(self) -> None:
        """Refuse every key that was not read (a typo would otherwise be ignored)."""
        unknown = sorted(set(self.args) - self.read)
        if unknown:
            known = ", ".join(sorted(self.read))
            raise DataError(
                SOURCE,
                f"unknown setting(s) {', '.join(unknown)} for the {self.adapter!r} adapter "
                f"(known: {known})",
            )
