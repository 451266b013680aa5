"""Content fingerprints that key the prediction store (model, data, condition).

A stored answer is reused only when all three fingerprints match:

* **model** — :meth:`VQAModel.fingerprint` (weights + config);
* **data** — per question: the question record *as the model can read it*
  (every field except the gold / annotation fields of :data:`GOLD_FIELDS`), and
  the digest of the image's object features and boxes (:func:`object_digest`;
  ``"blind"`` for models that never see the image), plus the digest of the
  donor image for the ``other-images`` replacement;
* **condition** — what the diagnostic changes: the condition kind and its
  parameters (removed / kept objects, replacement policy, noisy question text,
  ``max_objects``), :func:`condition_fingerprint`.

So changing the model invalidates everything, changing one image invalidates
only the questions on it, and adding a condition computes only that condition.
Hashes are SHA-256 (BLAKE2b for feature arrays), cut to 16 hex characters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.data.io.jsonio import stable_hash as stable_hash  # re-exported: fingerprints

#: Record fields that carry the gold answer or its annotations: never model input,
#: so they do not enter the data fingerprint (fixing a gold answer keeps the cache).
GOLD_FIELDS = frozenset(
    {
        "answer",
        "answers",
        "fullAnswer",
        "annotations",
        "entailed",
        "equivalent",
        "isBalanced",
        "multiple_choice_answer",
        "answer_list",
    }
)


def object_digest(features: np.ndarray, boxes: np.ndarray) -> str:
    """BLAKE2b of an image's float32 features and boxes (shapes included), 16 hex chars."""
    f = np.ascontiguousarray(features, dtype=np.float32)
    b = np.ascontiguousarray(boxes, dtype=np.float32)
    digest = hashlib.blake2b(digest_size=8)
    digest.update(repr((f.shape, b.shape)).encode())
    digest.update(f.tobytes())
    digest.update(b.tobytes())
    return digest.hexdigest()


def model_input_fields(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record without :data:`GOLD_FIELDS` (what a model may read)."""
    return {k: v for k, v in record.items() if k not in GOLD_FIELDS}


def data_fingerprint(
    record: Mapping[str, Any], question: str, image_digest: str, donor_digest: str = ""
) -> str:
    """Fingerprint of one question's input data: model-readable record fields, the
    question text, the image's object digest (and the donor image's, if any)."""
    return stable_hash([model_input_fields(record), question, image_digest, donor_digest])


def condition_fingerprint(kind: str, params: Mapping[str, Any]) -> str:
    """Fingerprint of a condition: its kind and parameters (see the module docstring)."""
    return stable_hash({"kind": kind, "params": dict(params)})


def combined_fingerprint(parts: Any) -> str:
    """One fingerprint over many (e.g. the data fingerprints of every question of a run)."""
    return stable_hash(parts)


#: Files up to this size are hashed by content; larger ones (and binary feature files)
#: by name and size only, so that fingerprinting real GQA never reads gigabytes.
CONTENT_HASH_LIMIT = 256 << 20
_BINARY_SUFFIXES = (".h5", ".hdf5", ".npz", ".npy")


_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def dataset_fingerprint(root: Path, split: str) -> str:
    """Fingerprint of the data folder as the diagnosed split sees it, whatever the model.

    Covers every file under ``root`` whose name contains ``split`` (questions, scene
    graphs, choices, annotations, pairs, introspect) and the detector folder's files:
    JSON files up to :data:`CONTENT_HASH_LIMIT` by content (BLAKE2b), larger files and
    feature arrays by relative name and size. Two results with equal dataset
    fingerprints were computed on the same questions, so a report pairs them.
    """
    parts = []
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        in_split = split in path.name
        is_detector = "objects" in path.parent.name or path.suffix in _BINARY_SUFFIXES
        if not (in_split or is_detector) or path.suffix in (".sqlite", ".tmp"):
            continue
        if path.suffix.lower() in _IMAGE_SUFFIXES:  # per-question fingerprints cover images
            continue
        size = path.stat().st_size
        if path.suffix in _BINARY_SUFFIXES or size > CONTENT_HASH_LIMIT:
            parts.append([rel, size])
            continue
        digest = hashlib.blake2b(digest_size=8)
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        parts.append([rel, size, digest.hexdigest()])
    return stable_hash(parts)
