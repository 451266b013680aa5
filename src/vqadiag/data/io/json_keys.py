"""Duplicate keys in a JSON file's top-level object (docs/reliability.md, "Duplicate keys").

JSON parsers, orjson included, keep the last of two equal keys, so a prediction or
question file with a question id twice would be read as if it had it once. The
top-level object of a file is checked by counting its members in the raw bytes and
comparing with the parsed dict's length: :func:`count_top_level_members` scans the
bytes in chunks with numpy (no Python object per byte or token):

* a ``"`` delimits a string unless it is preceded by an odd run of backslashes;
* ``{ [ } ] ,`` outside strings are the structure; the depth before each of them is the
  running sum of opens (+1) and closes (−1);
* the members of the top-level object are its commas at depth 1, plus one.

Only when the counts differ is the file decoded again, slowly, to name the duplicate
key (:func:`first_duplicate_key`). An object with a few keys is first checked in one
pass of ``bytes.count`` per key (:func:`keys_surely_unique`), which skips the scan for
files such as VQA v2's annotations (one key holding 180 MB).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

CHUNK = 1 << 20  # 1 MiB of bytes per numpy pass (its int64 index arrays: 8 MiB each)
_QUOTE, _BACKSLASH, _COMMA = ord('"'), ord("\\"), ord(",")
_DELTA = np.zeros(256, dtype=np.int8)
_DELTA[[ord("{"), ord("[")]] = 1
_DELTA[[ord("}"), ord("]")]] = -1
_WHITESPACE = np.zeros(256, dtype=bool)
_WHITESPACE[[ord(" "), ord("\t"), ord("\r"), ord("\n")]] = True
_STRUCTURAL = np.zeros(256, dtype=bool)
_STRUCTURAL[[ord("{"), ord("["), ord("}"), ord("]"), _COMMA]] = True


def count_top_level_members(raw: bytes) -> int:
    """Members of the top-level object of the valid JSON text ``raw`` (0 for ``{}``), or
    the elements of a top-level array."""
    in_string = False
    depth = 0
    backslashes = 0  # length of the backslash run that ended the previous chunk
    commas = 0
    nonempty = False
    data = np.frombuffer(raw, dtype=np.uint8)
    for start in range(0, len(data), CHUNK):
        c = data[start : start + CHUNK]
        n = len(c)
        quotes = np.flatnonzero(c == _QUOTE)
        is_bs = c == _BACKSLASH
        if quotes.size and (backslashes or is_bs.any()):
            last_other = np.maximum.accumulate(np.where(is_bs, -1, np.arange(n)))
            before = quotes - 1
            run = np.where(before >= 0, before - last_other[np.maximum(before, 0)], 0)
            reaches_start = (before < 0) | (last_other[np.maximum(before, 0)] < 0)
            run = run + np.where(reaches_start, backslashes, 0)
            quotes = quotes[run % 2 == 0]
        structural = np.flatnonzero(_STRUCTURAL[c])
        outside = (np.searchsorted(quotes, structural) + in_string) % 2 == 0
        structural = structural[outside]
        delta = _DELTA[c[structural]].astype(np.int64)
        depth_before = depth + np.cumsum(delta) - delta
        is_comma = c[structural] == _COMMA
        commas += int(np.count_nonzero(is_comma & (depth_before == 1)))
        if not nonempty:
            # a member exists once anything but whitespace follows the top-level opener
            nonempty = _has_member(c, structural, depth_before, delta, in_string, depth)
        depth += int(delta.sum())
        in_string = bool((in_string + len(quotes)) % 2)
        if n and c[-1] == _BACKSLASH:
            others = np.flatnonzero(~is_bs)
            backslashes = n - 1 - int(others[-1]) if others.size else backslashes + n
        else:
            backslashes = 0
    return commas + 1 if nonempty else 0


def _has_member(
    c: np.ndarray,
    structural: np.ndarray,
    depth_before: np.ndarray,
    delta: np.ndarray,
    in_string: bool,
    depth: int,
) -> bool:
    """Whether this chunk shows a non-whitespace byte inside the top-level container."""
    if depth >= 1 or in_string:
        inside_from = 0
    else:
        opener = np.flatnonzero((depth_before == 0) & (delta == 1))
        if not opener.size:
            return False
        inside_from = int(structural[opener[0]]) + 1
    rest = c[inside_from:]
    for window in (64, len(rest)):  # the first byte that is not whitespace, usually near
        text = np.flatnonzero(~_WHITESPACE[rest[:window]])
        if text.size:
            return int(rest[text[0]]) not in (ord("}"), ord("]"))
    return False


#: at most this many top-level keys are checked by :func:`keys_surely_unique`
FEW_KEYS = 64


def keys_surely_unique(raw: bytes, keys: Any) -> bool:
    """A cheap proof that the top-level object of the valid JSON text ``raw`` has no
    duplicate key, for files whose object has a few keys and one huge value (VQA v2's
    ``{"info", …, "annotations": [...]}``). When no key anywhere in ``raw`` holds an
    escape (:func:`_escaped_key`), every key is written byte for byte as its UTF-8, so
    a key written twice shows ``"key"`` twice; if each of the (at most
    :data:`FEW_KEYS`) parsed keys occurs exactly once, there is no duplicate. False
    means "not proven" (the full count decides), never "duplicate"."""
    if len(keys) > FEW_KEYS or _escaped_key(raw):
        return False
    return all(raw.count(b'"' + str(key).encode() + b'"') == 1 for key in keys)


def _escaped_key(raw: bytes) -> bool:
    """Whether some string holding a backslash escape is followed by ``:`` (a key). Each
    backslash found is inside a string (valid JSON); its string ends at the next quote
    not preceded by an odd run of backslashes."""
    i = raw.find(b"\\")
    while i != -1:
        q = raw.find(b'"', i)
        while True:
            k = q - 1
            while raw[k] == _BACKSLASH:
                k -= 1
            if (q - 1 - k) % 2 == 0:
                break
            q = raw.find(b'"', q + 1)
        m = q + 1
        while raw[m] in b" \t\r\n":
            m += 1
        if raw[m] == ord(":"):
            return True
        i = raw.find(b"\\", q + 1)
    return False


def first_duplicate_key(raw: bytes) -> str | None:
    """The first key that occurs twice in the top-level object of ``raw`` (slow: only
    called once a duplicate is known to exist)."""
    pairs: Any = json.loads(raw, object_pairs_hook=lambda items: items)
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    return None
