"""Fixed embeddings of scene-graph labels, the image features of perfect perception
(docs/chat-vlm.md, "What limits it"): a patch's feature is the sum of its labels'
embeddings, so how the embeddings of different labels overlap decides whether the name
can be read back from a sum of a name and attributes.

* ``gaussian``: every row drawn from N(0, 1)^D, the groups one after the other.
* ``orthogonal``: every row of every group orthogonal to every other, each of norm √D
  (a Gaussian row's expected squared norm): the rows of a random orthogonal matrix (the
  Q of a Gaussian matrix's QR decomposition) scaled by √D. Needs at most D rows in all.
* ``split``: the first group (the names) in the first D/2 coordinates, the other groups
  (the attributes) in the last D − D/2, each row Gaussian there and zero elsewhere,
  scaled to the same expected squared norm D: the name and the attributes of a sum lie
  in orthogonal subspaces, while rows within a part overlap as Gaussian rows do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

#: the layouts :func:`label_embeddings` draws
EMBEDDING_LAYOUTS = ("gaussian", "orthogonal", "split")


def needed_width(sizes: Sequence[int], layout: str) -> int:
    """The least width ``D`` the layout fits ``sizes`` in: ``Σ sizes`` for ``orthogonal``
    (one direction per row), 0 for the others."""
    return sum(sizes) if layout == "orthogonal" else 0


def label_embeddings(
    sizes: Sequence[int], dim: int, layout: str, generator: torch.Generator
) -> list[torch.Tensor]:
    """One ``(sizes[g], dim)`` tensor of embeddings per group ``g`` (the names first), laid
    out as the module docstring says; ``gaussian`` draws exactly ``torch.randn(size, dim)``
    per group in order, as the experiments drew before the other layouts existed."""
    if layout == "gaussian":
        return [torch.randn(size, dim, generator=generator) for size in sizes]
    if layout == "orthogonal":
        total = needed_width(sizes, layout)
        if total > dim:
            raise ValueError(f"{total} orthogonal embeddings do not fit in {dim} dimensions")
        q, _ = torch.linalg.qr(torch.randn(dim, total, generator=generator))
        return list((q.T * math.sqrt(dim)).split(list(sizes)))
    if layout == "split":
        half = dim // 2
        out = []
        for g, size in enumerate(sizes):
            lo, hi = (0, half) if g == 0 else (half, dim)
            rows = torch.zeros(size, dim)
            rows[:, lo:hi] = torch.randn(size, hi - lo, generator=generator)
            out.append(rows * math.sqrt(dim / (hi - lo)))
        return out
    raise ValueError(f"unknown embedding layout {layout!r}; use one of {EMBEDDING_LAYOUTS}")
