"""The user's cache folder: artefacts that are slow to build and the same for every output
folder, shared between runs (docs/reliability.md, "The shared cache").

``VQADIAG_CACHE_DIR`` names it; ``off`` (or an empty value) turns it off. Without it the
folder is ``$XDG_CACHE_HOME/vqadiag``, else ``~/.cache/vqadiag``. A cache is a
convenience, never a source of truth: an entry is used only when everything that shapes
it matches its key and its bytes match the digest recorded beside them, and a cache that
cannot be read or written is passed over (the work is done again), never an error.
"""

from __future__ import annotations

import os
from pathlib import Path

#: the environment variable that names the shared cache folder (``off``: none)
CACHE_ENV = "VQADIAG_CACHE_DIR"
_OFF = {"", "off", "none", "0"}


def user_cache_dir() -> Path | None:
    """The shared cache folder (module docstring), or None when it is turned off."""
    value = os.environ.get(CACHE_ENV)
    if value is not None:
        return None if value.strip().lower() in _OFF else Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vqadiag"
