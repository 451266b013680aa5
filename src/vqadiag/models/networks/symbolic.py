"""The symbolic model's two classifiers (:mod:`vqadiag.models.reference.symbolic`): the
object classifier (one softmax head for the name, one per attribute family) and the
relation classifier over pair geometry and both objects' names."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ObjectNetConfig:
    """Sizes of :class:`ObjectNet`: input width, hidden width and the number of classes of
    each head (the name head first)."""

    input_dim: int
    hidden_dim: int
    head_sizes: tuple[int, ...]


class ObjectNet(nn.Module):
    """A two-layer MLP trunk with one linear head per entry of ``head_sizes``;
    ``forward(x)`` → the heads' logits."""

    def __init__(self, config: ObjectNetConfig) -> None:
        super().__init__()
        hidden = config.hidden_dim
        self.trunk = nn.Sequential(
            nn.Linear(config.input_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU()
        )
        self.heads = nn.ModuleList(nn.Linear(hidden, k) for k in config.head_sizes)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """The logits of every head for objects ``x`` (n, input_dim)."""
        z = self.trunk(x)
        return [head(z) for head in self.heads]


@dataclass(frozen=True)
class RelationNetConfig:
    """Sizes of :class:`RelationNet`: name classes, relations and pair-geometry features
    (plus the name embedding and hidden widths)."""

    n_names: int
    n_relations: int
    pair_features: int
    name_dim: int = 16
    hidden_dim: int = 128


class RelationNet(nn.Module):
    """An MLP over pair geometry and embeddings of both objects' names; ``forward(geo, a,
    b)`` → one logit per relation (at least one)."""

    def __init__(self, config: RelationNetConfig) -> None:
        super().__init__()
        hidden = config.hidden_dim
        self.emb = nn.Embedding(config.n_names, config.name_dim)
        self.mlp = nn.Sequential(
            nn.Linear(config.pair_features + 2 * config.name_dim, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, max(config.n_relations, 1)),
        )

    def forward(self, geo: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Relation logits (n, R) of pairs with geometry ``geo`` and name indices ``a``,
        ``b``."""
        return self.mlp(torch.cat([geo, self.emb(a), self.emb(b)], dim=1))
