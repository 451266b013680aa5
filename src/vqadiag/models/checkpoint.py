"""Checkpoints: ``config.json`` + ``weights.safetensors`` + ``answers.json`` in a run folder.

Loading never unpickles: weights are safetensors (plain tensors), the rest JSON. Every
file is written atomically and ``config.json`` last, with the sha256 of the weights
(``weights_sha256``) and of the answer list (``answers_sha256``), which loading verifies
(docs/reliability.md): the answer list decides every answer as much as the weights do.
``config.json`` always names the model (``"model"``) so ``vqadiag predict`` can
rebuild it; the fingerprint of a run is a hash of all three files' contents.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag import __version__
from vqadiag.data.io.atomic import file_digest, writable_folder, write_bytes_atomic
from vqadiag.data.io.folders import FolderKind, read_json_file
from vqadiag.data.io.jsonio import read_json, require_field, write_json
from vqadiag.errors import DataError

CONFIG = "config.json"
WEIGHTS = "weights.safetensors"
ANSWERS = "answers.json"


def _earlier_run_folder(folder: Path) -> bool:
    """A run folder an earlier vqadiag wrote: its ``config.json`` names the model and the
    vqadiag version that saved it (every checkpoint's config has both)."""
    config = read_json_file(folder / CONFIG)
    return (
        isinstance(config, dict)
        and isinstance(config.get("model"), str)
        and isinstance(config.get("vqadiag_version"), str)
    )


#: ``train --out``, ``explain train --out``, ``finetune --out``
RUN_FOLDER = FolderKind("run folder", "vqadiag run (config.json)", _earlier_run_folder)


def save_checkpoint(
    run_dir: str | Path,
    config: Mapping[str, Any],
    tensors: Mapping[str, np.ndarray],
    answers: Sequence[str],
) -> Path:
    """Write a run folder; ``config`` must name the model under ``"model"``."""
    from safetensors.numpy import save

    if "model" not in config:
        raise ValueError("a checkpoint config must name its model under 'model'")
    out = writable_folder(run_dir)
    arrays = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    weights = save(arrays)
    write_bytes_atomic(out / WEIGHTS, weights)
    write_json(out / ANSWERS, list(answers), indent=True)
    # config.json comes last and commits the others: it records their digests
    meta = {
        "vqadiag_version": __version__,
        "weights_sha256": hashlib.sha256(weights).hexdigest(),
        "answers_sha256": file_digest(out / ANSWERS),
    }
    write_json(out / CONFIG, {**config, **meta}, indent=True)
    return out


def load_checkpoint(
    run_dir: str | Path,
) -> tuple[dict[str, Any], dict[str, np.ndarray], list[str]]:
    """Read ``(config, tensors, answers)`` of a run folder, with errors naming the file."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    folder = Path(run_dir)
    if not folder.is_dir():
        raise DataError(folder, "run folder not found")
    config = read_json(folder / CONFIG)
    if not isinstance(config, dict):
        raise DataError(folder / CONFIG, "expected a JSON object")
    require_field(config, "model", folder / CONFIG, "config")
    recorded_answers = config.pop("answers_sha256", None)  # runs saved before: not recorded
    answers_file = folder / ANSWERS
    if (  # a missing file is read_json's one line below
        recorded_answers is not None
        and answers_file.is_file()
        and recorded_answers != file_digest(answers_file)
    ):
        raise DataError(
            answers_file,
            "does not match the answers_sha256 config.json records: the file is damaged "
            "or was replaced; train again or restore it",
        )
    answers = read_json(folder / ANSWERS)
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise DataError(folder / ANSWERS, "expected a JSON list of answer strings")
    weights = folder / WEIGHTS
    if not weights.is_file():
        raise DataError(weights, "file not found")
    recorded = config.pop("weights_sha256", None)  # the checkpoint's, not the model's
    if recorded is not None and recorded != file_digest(weights):
        raise DataError(
            weights,
            "does not match the weights_sha256 config.json records: the file is damaged "
            "or was replaced; train again or restore it",
        )
    try:
        tensors = load_file(str(weights))
    except (SafetensorError, OSError, ValueError) as err:
        raise DataError(weights, f"cannot read safetensors: {err}") from None
    return config, tensors, answers


def run_fingerprint(run_dir: str | Path) -> str:
    """SHA-256 over the config, weights and answers files of a run (hex, 16 chars)."""
    digest = hashlib.sha256()
    folder = Path(run_dir)
    for name in (CONFIG, WEIGHTS, ANSWERS):
        path = folder / name
        digest.update(name.encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def folder_digest(folder: Path, settings: Mapping[str, Any]) -> str:
    """SHA-256 (16 hex) over ``settings`` and every file of ``folder`` (names relative to
    it, contents): a copied folder has the same digest, a changed weight another."""
    digest = hashlib.sha256(repr(sorted(settings.items())).encode())
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode())
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:16]
