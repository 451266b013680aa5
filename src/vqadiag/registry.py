"""The one registry type of vqadiag: diagnosis suites, model classes and model adapters are
each a :class:`Registry` of named entries (docs/contributing.md, "The map").

Entries keep their registration order (the suites' run order, the adapters' order in help
texts); registering a name again replaces its entry in place. An entry may be a
``"module:attribute"`` string that :func:`resolve` imports when it is first used, so that
registering a built-in costs no import.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from os import PathLike
from typing import Any, Generic, TypeVar

from vqadiag.errors import DataError

T = TypeVar("T")


class Registry(Generic[T]):
    """Named entries of one kind (``what``: "suite", "model" …), in registration order."""

    def __init__(self, what: str, entries: dict[str, T] | None = None) -> None:
        self.what = what
        self._entries: dict[str, T] = dict(entries or {})

    def add(self, name: str, entry: T) -> None:
        """Register ``entry`` as ``name`` (replacing, in place, an entry of that name)."""
        self._entries[name] = entry

    def remove(self, name: str) -> None:
        """Forget ``name`` (nothing happens when it is not registered)."""
        self._entries.pop(name, None)

    def get(self, name: str, source: str | PathLike[str] | None = None) -> T:
        """The entry of ``name``; an unknown name is a one-line :class:`DataError` naming
        ``source`` (the option or file it came from) and the known names."""
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(self._entries)
            raise DataError(source, f"unknown {self.what} {name!r} (known: {known})") from None

    def names(self) -> list[str]:
        """The registered names, in registration order."""
        return list(self._entries)

    def as_dict(self) -> dict[str, T]:
        """A copy of the entries by name, in registration order."""
        return dict(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)


def resolve(target: str | Any) -> Any:
    """``"module:attribute"`` imported and looked up; anything else as it is."""
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
