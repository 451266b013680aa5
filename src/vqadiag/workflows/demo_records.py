"""The demo's stage records (docs/report.md, "Resume"): ``OUT/stages/<stage>.json`` holds
a finished stage's configuration and the fingerprint of its output, and a stage whose
record matches both is skipped; the hashes those fingerprints are made of.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vqadiag.errors import DataError


def file_hash(path: Path) -> str | None:
    """SHA-256 (16 hex) of a file's bytes, None when it does not exist."""
    if not path.is_file():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


#: ``results.json`` keys that say how a run went, not what it found: the time and the
#: per-condition computed / cached counts (a resumed diagnosis reads answers from its store).
RUN_KEYS = ("created", "conditions")


def results_hash(path: Path) -> str | None:
    """Hash of ``results.json`` without the keys of :data:`RUN_KEYS`."""
    from vqadiag.data.io.jsonio import read_json
    from vqadiag.probes.fingerprints import stable_hash

    if not path.is_file():
        return None
    try:
        data = read_json(path)
    except DataError:
        return None
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k not in RUN_KEYS}
    return stable_hash(data)


class Stages:
    """Stage records in ``OUT/stages``: skip a stage whose config and output match."""

    def __init__(self, out: Path, progress: bool) -> None:
        from rich.console import Console

        self.folder = out / "stages"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.console = Console(stderr=True, quiet=not progress)
        self.log: list[dict[str, Any]] = []
        self.count = 0
        self.total = 0

    def _path(self, name: str) -> Path:
        return self.folder / f"{name.replace('/', '_')}.json"

    def done(self, name: str, config: Mapping[str, Any], fingerprint: str | None) -> bool:
        """Whether stage ``name`` finished with this ``config`` and its output still has
        ``fingerprint`` (the output's current fingerprint; None = output missing)."""
        from vqadiag.data.io.jsonio import read_json

        path = self._path(name)
        if fingerprint is None or not path.is_file():
            return False
        try:
            record = read_json(path)
        except DataError:
            return False
        return record.get("config") == dict(config) and record.get("fingerprint") == fingerprint

    def header(self, title: str) -> None:
        self.count += 1
        self.console.rule(f"[bold]vqadiag demo [{self.count}/{self.total}] {title}", align="left")

    def skip(self, name: str, title: str) -> None:
        self.header(title)
        self.console.print(f"  already done with the same configuration: skipped ({name})")
        self.log.append({"stage": name, "status": "skipped", "seconds": 0.0})

    def finish(
        self,
        name: str,
        config: Mapping[str, Any],
        fingerprint: str | None,
        seconds: float,
        facts: Mapping[str, Any] | None = None,
    ) -> None:
        """Record stage ``name`` as done, with ``facts`` about its output that a skipped
        stage reports again (:meth:`recorded`)."""
        from vqadiag.data.io.jsonio import write_json

        record = {"config": dict(config), "fingerprint": fingerprint, "facts": dict(facts or {})}
        write_json(self._path(name), record)
        self.console.print(f"  done in {seconds:.1f} s")
        self.log.append({"stage": name, "status": "done", "seconds": seconds})

    def recorded(self, name: str) -> dict[str, Any]:
        """The facts stage ``name``'s record holds (a record written before facts had
        their own key holds them beside its config and fingerprint)."""
        from vqadiag.data.io.jsonio import read_json

        record = read_json(self._path(name))
        beside = {k: v for k, v in record.items() if k not in ("config", "fingerprint")}
        return dict(record.get("facts", beside))


#: options added after demo folders were written, at the value that trains the same
#: weights as before they existed (the chat VLM's ``question_sets``, ``pretrain_world``
#: and ``pretrain_checkpoint``)
NEUTRAL_DEFAULTS: dict[str, Any] = {
    "question_sets": "gqa",
    "pretrain_world": "",
    "pretrain_checkpoint": "",
}
_UNSET = object()


def defaults_digest(name: str) -> str | None:
    """SHA-256 (16 hex) of a trainable model's default options (None when it has none), so
    that a demo folder trained before the defaults changed trains that model again."""
    import orjson

    from vqadiag.models.registry import model_class

    defaults = getattr(model_class(name), "defaults", None)
    if not defaults:
        return None
    # the chat VLM's device is not a default that changes its weights on the CPU; a stage
    # on another device is keyed by it (the demo's training stage). An option added later
    # at the value that trains as before it existed leaves the digest as it was.
    defaults = {
        k: v for k, v in defaults.items() if k != "device" and NEUTRAL_DEFAULTS.get(k, _UNSET) != v
    }
    return hashlib.sha256(orjson.dumps(defaults, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def run_fingerprint_of(run: Path) -> str | None:
    """The run folder's fingerprint, None when it has no ``config.json``."""
    from vqadiag.models.checkpoint import run_fingerprint

    return run_fingerprint(run) if (run / "config.json").is_file() else None
