"""The Python API's arguments, bounded as the command line bounds its options.

A function of ``vqadiag``'s API (``vqadiag.score_vqa`` …) is called through
:func:`public`, which refuses, in one line naming the argument, a whole number the
command would refuse (``n_bootstrap=0`` gave NaN intervals, ``batch_size=0`` an empty
prediction file, ``top=-1`` all answers but one), and returns the result with NaN and
infinite numbers as ``None``, as ``--json`` prints it and ``results.json`` holds it
(README, "Using it": the Python API paragraph).
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping
from os import PathLike
from typing import Any

from vqadiag.errors import DataError

#: the largest seed: every seed goes to JSON, NumPy and PyTorch as a signed 64-bit integer
MAX_SEED = 2**63 - 1

#: the least value of each whole-number argument of the API, by its name (the same name
#: means the same thing in every function), as the command line's ``min=`` has it
LEAST = {
    "seed": 0,
    "n_bootstrap": 10,
    "batch_size": 1,
    "max_questions": 1,
    "max_objects": 1,
    "probs_k": 0,
    "top": 1,
    "epochs": 1,
    "examples": 0,
    "max_main": 1,
    "workers": 0,
}
#: the largest value of a whole-number argument, where there is one
MOST = {"seed": MAX_SEED}


def check_counts(**given: Any) -> None:
    """Each of ``given`` that is not None a whole number within :data:`LEAST` and
    :data:`MOST`, else one :class:`DataError` naming it as its command-line option."""
    for name, value in given.items():
        if value is None:
            continue
        option = "--" + name.replace("_", "-")
        if isinstance(value, bool) or not isinstance(value, int):
            raise DataError(option, f"must be a whole number, got {value!r}")
        if value < LEAST[name]:
            raise DataError(option, f"must be at least {LEAST[name]}, got {value}")
        if name in MOST and value > MOST[name]:
            raise DataError(option, f"must be at most {MOST[name]}, got {value}")


def finite_or_null(value: Any) -> Any:
    """``value`` with every NaN or infinite float (Python's or numpy's) in its dicts,
    lists and tuples replaced by None, as ``--json`` writes it; anything else as it is."""
    if isinstance(value, Mapping):
        return {key: finite_or_null(item) for key, item in value.items()}
    if isinstance(value, list):
        return [finite_or_null(item) for item in value]
    if isinstance(value, tuple):
        return tuple(finite_or_null(item) for item in value)
    if isinstance(value, float) and not math.isfinite(value):  # numpy's float64 is a float
        return None
    if type(value).__module__ == "numpy" and hasattr(value, "dtype") and value.ndim == 0:
        return None if value.dtype.kind == "f" and not math.isfinite(float(value)) else value
    return value


def public(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` as the API gives it (module docstring): its whole-number arguments
    checked before it runs, its dict result with NaN and infinities as None."""
    signature = inspect.signature(function)
    counted = [name for name in signature.parameters if name in LEAST]

    @functools.wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        if counted:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return function(*args, **kwargs)  # Python's own message for a bad call
            check_counts(**{k: v for k, v in bound.arguments.items() if k in LEAST})
        result = function(*args, **kwargs)
        return finite_or_null(result) if isinstance(result, Mapping) else result

    return checked


def one_or_many(value: Any) -> list[Any]:
    """``value`` as a list: a string or path given alone is one item (``noisy="n1.json"``,
    ``plugins="mine.py"``), not the list of its characters; ``None`` is no item."""
    if value is None:
        return []
    if isinstance(value, (str, bytes, PathLike)):
        return [value]
    return list(value)
