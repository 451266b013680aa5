"""Reader of counter-example candidate files (Goyal et al. 2017 §5, docs/protocols.md §2).

A candidates file gives, for each question (I, Q, A) that has a complementary
image I', the K nearest-neighbour images of I among which I' was picked::

    {"<question_id>": {"image_id": 17,
                       "candidates": [523, 88, ...],      # K image ids, nearest first
                       "complement_image_id": 88}, ...}

A synthetic world writes it as ``vqa2/synth_{train,val}2014_pair_candidates.json``
(K = 24). Image ids are VQA image ids (integers or strings); question ids become
strings. Every problem raises :class:`~vqadiag.errors.DataError` naming the file
and the record: not an object, missing field, a bad id, an empty or duplicated
candidate list, the question's own image among its candidates, the complementary
image not among the candidates, or records with different K.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vqadiag.data.formats.predictions import normalize_id
from vqadiag.data.io.jsonio import read_json, require_field
from vqadiag.errors import DataError, excerpt, record_label


@dataclass(frozen=True, slots=True)
class PairCandidates:
    """The candidates of one question: its image, K candidate images (nearest first) and
    the complementary image with its position ``complement_index`` in ``candidates``."""

    image_id: str
    candidates: tuple[str, ...]
    complement_image_id: str
    complement_index: int


def _image_id(value: Any, path: Path, label: str, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip():
        raise DataError(
            path, f"{what} must be an image id (string or integer), got {excerpt(value)}", label
        )
    return str(value).strip()


def read_pair_candidates(
    path: str | Path, known_ids: Collection[str] | None = None
) -> dict[str, PairCandidates]:
    """Read and validate a candidates file → ``{question_id: PairCandidates}``.

    ``known_ids`` (e.g. the question ids of the split) makes an unknown question id
    an error. All records must have the same number K of candidates (the explaining
    head of Goyal et al. scores a fixed K = 24).
    """
    p = Path(path)
    data = read_json(p)
    if not isinstance(data, dict):
        raise DataError(p, "expected a JSON object {question_id: {image_id, candidates, ...}}")
    if not data:
        raise DataError(p, "no questions in file")
    out: dict[str, PairCandidates] = {}
    k: int | None = None
    first = ""
    for raw_qid, record in data.items():
        qid = normalize_id(raw_qid, p, record_label(raw_qid))
        label = record_label(qid)
        if known_ids is not None and qid not in known_ids:
            raise DataError(p, "question id is not in the questions file", label)
        image = _image_id(require_field(record, "image_id", p, label), p, label, "'image_id'")
        raw_cands = require_field(record, "candidates", p, label)
        if not isinstance(raw_cands, list) or not raw_cands:
            raise DataError(p, "'candidates' must be a non-empty list of image ids", label)
        cands = tuple(_image_id(c, p, label, "a candidate") for c in raw_cands)
        if len(set(cands)) != len(cands):
            raise DataError(p, "'candidates' lists an image twice", label)
        if image in cands:
            raise DataError(p, f"the question's own image {image} is among its candidates", label)
        comp = _image_id(
            require_field(record, "complement_image_id", p, label),
            p,
            label,
            "'complement_image_id'",
        )
        if comp not in cands:
            raise DataError(p, f"complementary image {comp} is not among the candidates", label)
        if k is None:
            k, first = len(cands), qid
        elif len(cands) != k:
            raise DataError(
                p,
                f"has {len(cands)} candidates; record {excerpt(first)} has {k} "
                "(K must be the same)",
                label,
            )
        out[qid] = PairCandidates(image, cands, comp, cands.index(comp))
    return out


def candidates_path(vqa_dir: str | Path, split: str) -> Path:
    """Where a synthetic world keeps the candidates of ``split`` (``train`` / ``val``):
    ``<vqa_dir>/synth_{split}2014_pair_candidates.json``."""
    name = split if split.endswith("2014") else f"{split}2014"
    return Path(vqa_dir) / f"synth_{name}_pair_candidates.json"
