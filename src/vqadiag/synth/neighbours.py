"""K nearest neighbours of images in an integer scene embedding (exact, blocked).

The scene embedding of an image is its class-count histogram followed by a
one-hot of its place times ``PLACE_WEIGHT`` — all integers, so squared L2
distances are exact in float64 and the blocked matrix-product search returns
exactly what a naive per-image search returns. Ties are broken by the lower
image index. Goyal et al. (VQA v2, docs/protocols.md §2) use K = 24.
"""

from __future__ import annotations

import numpy as np

K_NEIGHBOURS = 24
PLACE_WEIGHT = 4


def scene_embedding(
    cls: np.ndarray, offsets: np.ndarray, place: np.ndarray, n_classes: int, n_places: int
) -> np.ndarray:
    """``[count of class 0 … count of class C−1, PLACE_WEIGHT · onehot(place)]`` per image."""
    n = place.shape[0]
    img = np.repeat(np.arange(n), np.diff(offsets))
    emb = np.zeros((n, n_classes + n_places), np.float64)
    np.add.at(emb, (img, cls), 1.0)
    emb[np.arange(n), n_classes + place] = PLACE_WEIGHT
    return emb


def knn(emb: np.ndarray, k: int = K_NEIGHBOURS, block: int = 1024) -> np.ndarray:
    """Indices of the ``k`` nearest other rows of ``emb`` (squared L2, ties → lower index).

    Blocked: ``d(i, j) = |e_i|² + |e_j|² − 2 e_i·e_j`` for a block of rows at a
    time, then a partial sort on the unique key ``d · n + j``.
    Returns an (n, min(k, n − 1)) int64 array, nearest first.
    """
    n = emb.shape[0]
    k = min(k, n - 1)
    out = np.empty((n, max(k, 0)), np.int64)
    if k <= 0:
        return out
    sq = (emb * emb).sum(axis=1)
    cols = np.arange(n, dtype=np.int64)
    for lo in range(0, n, block):
        hi = min(n, lo + block)
        d = sq[lo:hi, None] + sq[None, :] - 2.0 * (emb[lo:hi] @ emb.T)
        key = np.rint(d).astype(np.int64) * n + cols[None, :]
        key[np.arange(hi - lo), np.arange(lo, hi)] = np.iinfo(np.int64).max
        part = np.argpartition(key, k - 1, axis=1)[:, :k]
        part_keys = np.take_along_axis(key, part, axis=1)
        out[lo:hi] = np.take_along_axis(part, np.argsort(part_keys, axis=1), axis=1)
    return out


def knn_naive(emb: np.ndarray, k: int = K_NEIGHBOURS, rows: np.ndarray | None = None) -> np.ndarray:
    """Reference search: for each row, sort all other rows by (distance, index)."""
    n = emb.shape[0]
    k = min(k, n - 1)
    rows = np.arange(n) if rows is None else rows
    out = np.empty((rows.shape[0], max(k, 0)), np.int64)
    idx = np.arange(n)
    for r, i in enumerate(rows):
        d = ((emb - emb[i]) ** 2).sum(axis=1)
        order = np.lexsort((idx, d))
        out[r] = order[order != i][:k]
    return out
