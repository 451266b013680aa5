"""Read the pickle files of other research code without running any of it (README,
"Prediction files"; docs/fpvg.md, "FPVG's own files").

A pickle is a small program: loading one with :func:`pickle.load` can import and call any
function, so a file from the internet could run code. :func:`load_plain_pickle` runs the
pickle machine with every import refused: only the values the format builds by itself
come out — dicts, lists, tuples, sets, strings, bytes, integers, floats, booleans and
None — and anything else (a NumPy array, a class instance, a function) stops the load
with one line naming the class the file asked for.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

from vqadiag.data.io.bounded import read_input
from vqadiag.errors import DataError


class _PlainUnpickler(pickle.Unpickler):
    """An unpickler whose every global lookup fails (module docstring)."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _PLAIN_CONSTRUCTORS:  # older protocols build sets this way
            return _PLAIN_CONSTRUCTORS[(module, name)]
        raise pickle.UnpicklingError(f"{module}.{name}")


#: the only names a pickle may ask for: plain containers' own constructors
_PLAIN_CONSTRUCTORS = {
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("__builtin__", "set"): set,
    ("__builtin__", "frozenset"): frozenset,
}


def load_plain_pickle(path: str | Path) -> Any:
    """The value in a pickle file made only of plain Python values (module docstring);
    a :class:`DataError` naming the file otherwise."""
    p = Path(path)
    raw = read_input(p)
    if not raw:
        raise DataError(p, "file is empty")
    try:
        return _PlainUnpickler(io.BytesIO(raw)).load()
    except pickle.UnpicklingError as err:
        text = str(err)
        if "." in text and " " not in text:
            raise DataError(
                p, f"the pickle asks for {text}; vqadiag reads only plain dicts, lists, "
                "strings and numbers from pickles (it never runs a pickle's code): convert "
                "the file to JSON",
            ) from None  # fmt: skip
        raise DataError(p, f"malformed pickle: {text}") from None
    except (EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError) as err:
        raise DataError(p, f"malformed pickle: {type(err).__name__}: {err}") from None
