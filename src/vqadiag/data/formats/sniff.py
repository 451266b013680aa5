"""Tell which dataset format a JSON file holds from its first bytes, without parsing it."""

from __future__ import annotations

import re
from pathlib import Path

_SNIFF_BYTES = 1 << 16
_FIRST_KEY = re.compile(rb'^\s*\{\s*"((?:[^"\\]|\\.)*)"\s*:')
_VQA_TOP_KEYS = {"info", "license", "data_type", "data_subtype", "task_type"}


def truth_format(path: str | Path) -> str:
    """Tell the kind of a question/annotation file from its first bytes, without parsing it.

    ``"vqa_annotations"`` (``{"annotations": [...]}`` or a list of records with
    ``answers``), ``"vqa_questions"`` (``{"questions": [...]}``),
    ``"introspect"`` (records with ``reasoning_question``) or ``"gqa"`` (any
    other object keyed by question id). Unreadable files fall to ``"gqa"`` and
    that reader reports the problem.
    """
    p = Path(path)
    try:
        with p.open("rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError:
        return "gqa"
    stripped = head.lstrip()
    if stripped.startswith(b"["):
        return "vqa_annotations" if b'"answers"' in head else "vqa_questions"
    match = _FIRST_KEY.match(head)
    first = match.group(1).decode("utf-8", "replace") if match else ""
    if first in _VQA_TOP_KEYS or first in {"annotations", "questions"}:
        if first == "annotations" or re.search(rb'"annotations"\s*:\s*\[', head):
            return "vqa_annotations"
        return "vqa_questions"
    return "introspect" if b'"reasoning_question"' in head else "gqa"
