"""The two official result lists, read typed: VQA's ``[{"question_id": int, "answer": str}]``
and GQA's ``[{"questionId": str, "prediction": str}]`` (docs/reliability.md, "Fast paths
defer to the checked readers").

msgspec decodes the file straight into two-field records. A file is taken only when
every record has exactly those two fields with those types, GQA ids are clean
(non-empty, no surrounding spaces) and no id repeats; for anything else the reader
returns ``None`` and the general prediction reader checks the file record by record and
names the problem.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from vqadiag.data.io.typed_json import JSONInt, decode_or_none, map_file


class VQAResult(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """One record of VQA's official result list: exactly these two fields."""

    question_id: JSONInt
    answer: str


class _GQAResult(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    questionId: str
    prediction: str


#: decodes a whole VQA result list (also read in columns by ``score vqa``)
VQA_RESULTS = msgspec.json.Decoder(list[VQAResult])
_GQA = msgspec.json.Decoder(list[_GQAResult])


def read_result_list(path: str | Path) -> dict[str, str] | None:
    """``{question id: answer}`` of a plain VQA or GQA result list (integer ids as decimal
    strings), or None for any other file (see the module docstring)."""
    raw = map_file(path)
    if raw is None:
        return None
    gqa = decode_or_none(raw, _GQA)
    if gqa is not None:
        if not all(r.questionId and r.questionId.strip() == r.questionId for r in gqa):
            return None  # the general reader strips or refuses it
        out = {r.questionId: r.prediction for r in gqa}
        return out if out and len(out) == len(gqa) else None
    vqa = decode_or_none(raw, VQA_RESULTS)
    if vqa is None:
        return None
    out = {str(r.question_id): r.answer for r in vqa}
    return out if out and len(out) == len(vqa) else None  # a repeated id: named there
