"""The crop CNN's feature cache of the pixel network's box encoder (docs/diagnose.md, "Images")."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np

from vqadiag.data.io.lru import ByteLRU

#: bytes of features a :class:`CropFeatureCache` keeps (about 80,000 boxes of 96 features)
CROP_CACHE_BYTES = 32 << 20


class CropFeatureCache:
    """The crop CNN's features of crops already seen, keyed by the crops' bytes (a 128-bit
    BLAKE2b digest of the uint8 pixels). In a diagnosis most conditions leave most boxes'
    pixels as they were (noise questions, other boxes replaced), so each distinct crop
    goes through the CNN once. The owner clears it whenever the weights may change: the
    pixel network does on entering training mode (unless its encoder is frozen) and on
    ``load_state_dict``; code that edits the CNN's weights in place must call
    :meth:`clear` itself. LRU past :data:`CROP_CACHE_BYTES`."""

    def __init__(self, limit: int = CROP_CACHE_BYTES) -> None:
        self._features: ByteLRU[bytes, np.ndarray] = ByteLRU(limit, _nbytes)
        self._generation = 0  # counts clears: features computed before one are not kept

    def __len__(self) -> int:
        """The number of crops whose features are kept."""
        return len(self._features)

    def clear(self) -> None:
        """Forget every feature (the weights changed)."""
        self._generation += 1
        self._features.clear()

    def features(self, crops: np.ndarray, encode: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``(K, F)``: ``encode(crops)`` row for row, computing only the distinct crops not
        in the cache (``crops`` (K, s, s, 3) uint8; ``encode`` → (k, F) float32)."""
        if not len(crops):
            return encode(crops)
        generation = self._generation
        keys = [hashlib.blake2b(c.tobytes(), digest_size=16).digest() for c in crops]
        rows: list[np.ndarray | None] = [self._features.get(k) for k in keys]
        todo: dict[bytes, int] = {}
        for i, (key, row) in enumerate(zip(keys, rows, strict=True)):
            if row is None:
                todo.setdefault(key, i)
        if todo:
            fresh = encode(crops[list(todo.values())])
            # one copy per row, so that a kept row does not keep its whole batch alive
            computed = {key: fresh[j].copy() for j, key in enumerate(todo)}
            if generation == self._generation:  # no clear while encoding
                computed = {key: self._features.put(key, row) for key, row in computed.items()}
            rows = [computed[k] if r is None else r for k, r in zip(keys, rows, strict=True)]
        return np.stack(rows)


def _nbytes(array: np.ndarray) -> int:
    return array.nbytes
