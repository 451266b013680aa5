"""Coding values as integers in first-seen order, for the metrics that group strings
(VQA answer strings, GQA-OOD's (local group, answer) pairs)."""

from __future__ import annotations

import itertools
from collections.abc import Hashable

import numpy as np


def first_seen_codes(values: list[Hashable]) -> tuple[np.ndarray, list[Hashable]]:
    """Integer codes of ``values`` and the list of distinct values, numbered in first-seen
    order (as ``pandas.factorize(sort=False)`` numbers them, without importing pandas).

    One C-level pass: ``dict.setdefault(value, position)`` keeps the position of each
    value's first occurrence; the first positions, in insertion (= ascending) order, are
    then renumbered 0, 1, 2 … with one array lookup.
    """
    first_at: dict[Hashable, int] = {}
    first = np.fromiter(
        map(first_at.setdefault, values, itertools.count()), dtype=np.int64, count=len(values)
    )
    positions = np.fromiter(first_at.values(), dtype=np.int64, count=len(first_at))
    renumber = np.empty(len(values), dtype=np.int64)
    renumber[positions] = np.arange(len(positions))
    return renumber[first], list(first_at)
