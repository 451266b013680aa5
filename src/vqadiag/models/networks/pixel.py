"""The pixel model's networks (:mod:`vqadiag.models.reference.pixel` describes the model;
docs/models.md, "The pixel model"): the image encoders (the grid CNN, the crop CNNs of the
box encoder) and the two heads over their units, :class:`PixelNet` (top-down attention)
and :class:`TokenPixelNet` (token-grounded)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from vqadiag.models.networks.crop_cache import CropFeatureCache
from vqadiag.models.networks.question import QuestionEncoder, QuestionEncoderConfig


def grid_encoder(c: int) -> nn.Sequential:
    """The grid CNN (the pixel model's module docstring): (U, 3, S, S) → (U, 4c, S/8, S/8)."""
    return nn.Sequential(
        nn.Conv2d(3, c, 5, stride=2, padding=2),
        nn.BatchNorm2d(c),
        nn.ReLU(),
        nn.Conv2d(c, 2 * c, 3, stride=2, padding=1),
        nn.BatchNorm2d(2 * c),
        nn.ReLU(),
        nn.Conv2d(2 * c, 4 * c, 3, stride=2, padding=1),
        nn.BatchNorm2d(4 * c),
        nn.ReLU(),
        nn.Conv2d(4 * c, 4 * c, 3, stride=1, padding=1),
        nn.ReLU(),
    )


def _crop_trunk(c: int) -> list[nn.Module]:
    """The first three blocks of both crop CNNs: 3×3 convolutions of ``c``, 2c stride 2
    and 4c stride 2 channels, each with batch norm and ReLU."""
    layers: list[nn.Module] = []
    for k, (n_in, n_out) in enumerate(((3, c), (c, 2 * c), (2 * c, 4 * c))):
        layers += [
            nn.Conv2d(n_in, n_out, 3, stride=1 if k == 0 else 2, padding=1),
            nn.BatchNorm2d(n_out),
            nn.ReLU(),
        ]
    return layers


def crop_encoder(c: int) -> nn.Sequential:
    """The crop CNN: (K, 3, S, S) → (K, 4c): four 3×3 convolutions (``c``, 2c stride 2,
    4c stride 2, 4c; batch norm and ReLU) and the mean over positions."""
    return nn.Sequential(
        *_crop_trunk(c),
        nn.Conv2d(4 * c, 4 * c, 3, padding=1),
        nn.BatchNorm2d(4 * c),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    )


def layout_crop_encoder(c: int, crop: int) -> nn.Sequential:
    """The crop CNN that keeps the layout (``crop_pooling`` ``layout``): (K, 3, S, S) →
    (K, 4c). The same first three blocks as :func:`crop_encoder`, a fourth 3×3
    convolution of ⌊4c/3⌋ channels (batch norm, ReLU), then the whole ⌈S/4⌉ × ⌈S/4⌉ map
    flattened into a linear layer of 4c outputs (batch norm, ReLU) instead of the mean
    over positions, so where a part sits in the crop (a class's mark inside its
    silhouette, a state's badge) still counts."""
    side = (crop + 3) // 4
    last = (4 * c) // 3
    return nn.Sequential(
        *_crop_trunk(c),
        nn.Conv2d(4 * c, last, 3, padding=1),
        nn.BatchNorm2d(last),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(last * side * side, 4 * c),
        nn.BatchNorm1d(4 * c),
        nn.ReLU(),
    )


def cell_centres(grid: int) -> torch.Tensor:
    """(1, G·G, 2): each cell's normalised centre (x, y), row by row."""
    ys, xs = torch.meshgrid(
        (torch.arange(grid) + 0.5) / grid, (torch.arange(grid) + 0.5) / grid, indexing="ij"
    )
    return torch.stack([xs, ys], -1).reshape(1, grid * grid, 2)


def masked_scores(
    scores: torch.Tensor, mask: torch.Tensor | None, image_of: torch.Tensor
) -> torch.Tensor:
    """``scores`` (B, …, N) with the padding units of each question's image set to −∞
    (unchanged when ``mask`` is None). An image without any real unit keeps its first
    (padding) unit, so its softmax stays defined."""
    if mask is None:
        return scores
    keep = mask.clone()
    keep[:, 0] |= ~mask.any(dim=1)
    keep = keep[image_of]
    if scores.dim() == 3:
        keep = keep[:, None, :]
    return scores.masked_fill(~keep, float("-inf"))


def run_gru(gru: nn.GRU, x: torch.Tensor, lengths: torch.Tensor) -> tuple[Any, Any]:
    """``gru`` over the first ``lengths`` steps of each row of ``x`` (packed): the states
    (B, T, ·), zero after each row's length, and the last states."""
    packed = nn.utils.rnn.pack_padded_sequence(
        x, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False
    )
    states, last = gru(packed)
    states, _ = nn.utils.rnn.pad_packed_sequence(states, batch_first=True, total_length=x.shape[1])
    return states, last


@dataclass(frozen=True)
class PixelNetConfig:
    """Sizes and options of the pixel networks, as the pixel model's options name them
    (``encoder`` ``grid`` or ``boxes``; ``aux_sizes``: the cell-label heads' name and
    attribute counts)."""

    n_words: int
    n_answers: int
    embedding_dim: int
    hidden_dim: int
    attention_dim: int
    dropout: float
    channels: int
    image_size: int
    encoder: str
    crop_pooling: str
    crop_size: int
    aux_sizes: tuple[int, int]

    @property
    def unit_dim(self) -> int:
        """Width of one unit the heads attend over: a grid cell's ``4c`` features and its
        centre (``4c + 2``), or a box's ``4c`` crop features and its 5 spatial features."""
        return 4 * self.channels + (5 if self.encoder == "boxes" else 2)

    @property
    def question(self) -> QuestionEncoderConfig:
        """The config of the top-down head's question encoder."""
        return QuestionEncoderConfig(self.n_words, self.embedding_dim, self.hidden_dim)


class CellNetwork(nn.Module):
    """The base of both pixel networks: the image encoder (``cnn``), ``cells`` (the units
    the heads attend over, with a mask of the real ones) and ``forward`` = ``head(tokens,
    lengths, *cells(view), image_of)``; a subclass adds its layers, then calls
    :meth:`add_output_heads`, and defines ``head``."""

    frozen_encoder = False

    def __init__(self, config: PixelNetConfig) -> None:
        super().__init__()
        self.config = config
        self.attach_encoder()

    def attach_encoder(self) -> None:
        """Set the image encoder: ``cnn`` = :func:`grid_encoder` and the ``coords`` buffer
        (``encoder`` ``grid``), or ``cnn`` = the crop encoder (``boxes``)."""
        config = self.config
        c = int(config.channels)
        self.units = config.encoder
        if self.units == "boxes":
            if config.crop_pooling == "layout":
                self.cnn = layout_crop_encoder(c, int(config.crop_size))
            else:
                self.cnn = crop_encoder(c)
            self.crop_dim = 4 * c
            self.crop_cache = CropFeatureCache()
            return
        self.cnn = grid_encoder(c)
        self.register_buffer("coords", cell_centres(int(config.image_size) // 8))

    def add_output_heads(self) -> None:
        """Add the cell-label heads (``aux_name``, ``aux_attr``: ``aux_sizes`` outputs from
        the units) and the answer classifier (``Dropout → Linear(H, 2H) → ReLU → Dropout →
        Linear(2H, A)``), in that order (saved weights keep their names)."""
        config = self.config
        dim, hidden, dropout = config.unit_dim, config.hidden_dim, config.dropout
        n_names, n_attrs = (int(x) for x in config.aux_sizes)
        self.aux_name = nn.Linear(dim, max(1, n_names))
        self.aux_attr = nn.Linear(dim, max(1, n_attrs))
        self.classifier = nn.Sequential(
            nn.Dropout(dropout), nn.Linear(hidden, 2 * hidden), nn.ReLU(),
            nn.Dropout(dropout), nn.Linear(2 * hidden, config.n_answers),
        )  # fmt: skip

    def train(self, mode: bool = True) -> CellNetwork:
        """``nn.Module.train``; a frozen encoder stays in evaluation mode (and keeps
        its cached crop features); otherwise the box encoder's cached crop features
        are dropped, as training may change the weights."""
        super().train(mode)
        if self.frozen_encoder:
            self.cnn.eval()
        elif mode and hasattr(self, "crop_cache"):
            self.crop_cache.clear()
        return self

    def encode(self, crops: torch.Tensor) -> torch.Tensor:
        """The crop CNN's (K, 4c) features of (K, 3, s, s) crops. One crop in training
        mode is read with batch norm's running statistics: a batch of one has no
        statistics for the layout encoder's last (per-feature) batch norm."""
        if not (self.training and self.cnn.training and crops.shape[0] == 1):
            return self.cnn(crops)
        self.cnn.eval()
        try:
            return self.cnn(crops)
        finally:
            self.cnn.train()

    def load_state_dict(self, *args: Any, **kwargs: Any) -> Any:
        """``nn.Module.load_state_dict``, dropping the cached crop features."""
        if hasattr(self, "crop_cache"):
            self.crop_cache.clear()
        return super().load_state_dict(*args, **kwargs)

    def cells(self, view: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Grid: (U, 3, S, S) images → (U, G·G, 4c + 2) cell features with their
        centres, no mask. Boxes: ``(crops (K, 3, s, s), positions (U, N, 5), mask
        (U, N))`` with one crop per real box, in row order (or the crops' features
        (K, 4c) in their place: a frozen or cached encoder's) → (U, N, 4c + 5) box
        features (zeros for padding) and the mask."""
        if self.units == "boxes":
            crops, positions, mask = view
            f = positions.new_zeros((*mask.shape, self.crop_dim))
            if crops.shape[0]:
                f[mask] = crops if crops.dim() == 2 else self.encode(crops)
            return torch.cat([f, positions], dim=2), mask
        f = self.cnn(view).flatten(2).transpose(1, 2)
        return torch.cat([f, self.coords.expand(f.shape[0], -1, -1)], dim=2), None

    def head(
        self,
        tokens: torch.Tensor,
        lengths: torch.Tensor,
        cells: torch.Tensor,
        image_of: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Answer logits and attention over the units (defined by each network)."""
        raise NotImplementedError

    def forward(
        self,
        tokens: torch.Tensor,
        lengths: torch.Tensor,
        view: Any,
        image_of: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``head`` over the units of ``view`` (:meth:`cells`)."""
        cells, mask = self.cells(view)
        return self.head(tokens, lengths, cells, image_of, mask)


class PixelNet(CellNetwork):
    """The grid network of the pixel model's module docstring (``head`` ``grid``):
    top-down attention of the question over the units, product fusion, classifier."""

    def __init__(self, config: PixelNetConfig) -> None:
        super().__init__(config)
        dim, hidden, att = config.unit_dim, config.hidden_dim, int(config.attention_dim)
        self.question = QuestionEncoder(config.question)
        self.att_v = nn.Linear(dim, att)
        self.att_q = nn.Linear(hidden, att)
        self.att_w = nn.Linear(att, 1)
        self.joint_q = nn.Linear(hidden, hidden)
        self.joint_v = nn.Linear(dim, hidden)
        self.add_output_heads()

    def head(
        self,
        tokens: torch.Tensor,
        lengths: torch.Tensor,
        cells: torch.Tensor,
        image_of: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Answer logits and attention from the unique images' units (U, N, dim) (grid
        cells, or boxes with their ``mask`` (U, N))."""
        q = self.question(tokens, lengths)
        keys = self.att_v(cells)[image_of]  # (B, N, att)
        scores = self.att_w(torch.tanh(keys + self.att_q(q)[:, None, :]))
        alpha = torch.softmax(masked_scores(scores.squeeze(-1), mask, image_of), dim=1)
        pooled = torch.bmm(alpha[:, None, :], cells[image_of]).squeeze(1)
        joint = torch.relu(self.joint_q(q)) * torch.relu(self.joint_v(pooled))
        return self.classifier(joint), alpha


class TokenPixelNet(CellNetwork):
    """The token-grounded network (docs/models.md, "The pixel model"): the same cells as
    the grid network; every question token t queries them.

    * ``h_t``: bidirectional GRU state; ``u_t = W_u [h_t; e_t]`` (``e_t`` the embedding);
      ``s_tc = u_t · W_k v_c / √d``; ``α_tc = softmax_c(s_tc)``; ``r_t = Σ_c α_tc W_r v_c``;
      the evidence ``(logmeanexp_c s_tc, max_c s_tc)`` says whether what t names is there.
    * A second GRU reads ``[h_t; r_t; evidence_t]``; its last state → the classifier.
    * Reported cell attention ``α_c = Σ_t g_t α_tc``, ``g = softmax_t(w_g · h_t)`` over the
      question's tokens; the per-token ``α_tc`` are kept in ``token_attention`` for
      their supervision (the pixel model's ``GridObjective``).
    """

    def __init__(self, config: PixelNetConfig) -> None:
        super().__init__(config)
        emb, hidden = config.embedding_dim, config.hidden_dim
        dim, att = config.unit_dim, int(config.attention_dim)
        self.embedding = nn.Embedding(config.n_words, emb, padding_idx=0)
        self.encoder = nn.GRU(emb, hidden // 2, batch_first=True, bidirectional=True)
        self.query = nn.Linear(2 * (hidden // 2) + emb, att)
        self.key = nn.Linear(dim, att)
        self.read = nn.Linear(dim, att)
        self.reader = nn.GRU(2 * (hidden // 2) + att + 2, hidden, batch_first=True)
        self.gate = nn.Linear(2 * (hidden // 2), 1)
        self.add_output_heads()
        self.token_attention: torch.Tensor | None = None

    def head(
        self,
        tokens: torch.Tensor,
        lengths: torch.Tensor,
        cells: torch.Tensor,
        image_of: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Answer logits and attention (B, N) over the units (grid cells, or boxes
        with their ``mask`` (U, N)); per-token attention (B, T, N) in
        ``token_attention``."""
        words = self.embedding(tokens)
        states, _ = run_gru(self.encoder, words, lengths)
        queries = self.query(torch.cat([states, words], dim=2))
        keys = self.key(cells)[image_of]
        raw = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[2])
        scores = masked_scores(raw, mask, image_of)
        alpha = torch.softmax(scores, dim=2)
        read = torch.bmm(alpha, self.read(cells)[image_of])
        if mask is None:
            log_n = math.log(scores.shape[2])
        else:
            real = torch.isfinite(scores[:, :1, :]).sum(2, keepdim=True)
            log_n = torch.log(real.to(scores.dtype)).squeeze(2)
        evidence = torch.stack([torch.logsumexp(scores, 2) - log_n, scores.amax(2)], dim=2)
        _, last = run_gru(self.reader, torch.cat([states, read, evidence], dim=2), lengths)
        valid = torch.arange(tokens.shape[1])[None, :] < lengths[:, None]
        gate = self.gate(states).squeeze(2).masked_fill(~valid, float("-inf"))
        cell_alpha = torch.bmm(torch.softmax(gate, 1)[:, None, :], alpha).squeeze(1)
        self.token_attention = alpha
        return self.classifier(last[0]), cell_alpha
