"""The UpDn network (:mod:`vqadiag.models.reference.updn` describes the model): question
GRU, top-down attention restricted to the visible objects, fusion and classifier, with
the parts the remedy losses recombine (:meth:`UpDnNet.encode`, :meth:`UpDnNet.attend`,
:meth:`UpDnNet.answer`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from vqadiag.models.networks.question import QuestionEncoder, QuestionEncoderConfig
from vqadiag.models.training import SPATIAL_DIM


def masked_softmax(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the ``True`` entries of ``mask`` along the last axis; masked entries
    are exactly 0 and an all-masked row is all 0 (never NaN)."""
    any_visible = mask.any(dim=-1, keepdim=True)
    filled = torch.where(mask, logits, torch.full_like(logits, float("-inf")))
    filled = torch.where(any_visible, filled, torch.zeros_like(logits))
    return torch.softmax(filled, dim=-1) * mask.to(logits.dtype)


@dataclass(frozen=True)
class ObjectNetSizes:
    """What every question-and-objects network is sized by: vocabularies, object feature
    width, embedding and hidden widths, dropout (UpDn's and the counter-example net's)."""

    n_words: int
    n_answers: int
    feature_dim: int
    embedding_dim: int
    hidden_dim: int
    dropout: float

    @property
    def object_dim(self) -> int:
        """Width of one object ``v``: its features and its 5 spatial features."""
        return self.feature_dim + SPATIAL_DIM

    @property
    def question(self) -> QuestionEncoderConfig:
        """The config of the network's question encoder."""
        return QuestionEncoderConfig(self.n_words, self.embedding_dim, self.hidden_dim)


@dataclass(frozen=True)
class UpDnNetConfig(ObjectNetSizes):
    """Sizes and architecture options of :class:`UpDnNet` (``feature_norm``, ``pooling``
    and ``debias`` as the model's options, already validated)."""

    feature_norm: str
    pooling: str
    debias: str


class UpDnNet(nn.Module):
    """``forward(tokens, lengths, feats, spatial, mask)`` → ``(logits (B, A), attention
    (B, N))``, with parts ``encode`` / ``objects`` / ``attend`` / ``answer`` for the
    remedy losses."""

    def __init__(self, config: UpDnNetConfig) -> None:
        super().__init__()
        self.config = config
        hidden, vdim, dropout = config.hidden_dim, config.object_dim, config.dropout
        self.question = QuestionEncoder(config.question)
        self.att_v = nn.Linear(vdim, hidden)
        self.att_q = nn.Linear(hidden, hidden)
        self.att_out = nn.Linear(hidden, 1)
        self.fuse_q = nn.Linear(hidden, hidden)
        self.fuse_v = nn.Linear(vdim, hidden)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Sequential(
            nn.Linear(hidden, 2 * hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(2 * hidden, config.n_answers),
        )
        if config.feature_norm == "layer":
            self.feature_norm = nn.LayerNorm(config.feature_dim)
        if config.debias in ("rubi", "rubi+qb"):
            # RUBi's question-only branch (Cadene et al. 2019): NN_q → mask logits,
            # c_q → the question-only classifier trained by its own loss.
            self.rubi_q = nn.Sequential(
                nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, config.n_answers)
            )
            self.rubi_out = nn.Linear(config.n_answers, config.n_answers)
        if config.debias == "lmh":
            self.lmh_gate = nn.Linear(hidden, 1)  # g(x) = softplus(w · h + b)
        self.keep_question_branch = config.debias == "rubi+qb"
        self._read_features: list[torch.Tensor] | None = None

    def encode(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Question vector ``q`` (B, H)."""
        return self.question(tokens, lengths)

    def objects(
        self, feats: torch.Tensor, spatial: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        """``v`` (B, N, D + 5): normalised features + box, zero where masked."""
        if self.config.feature_norm == "layer":
            feats = self.feature_norm(feats)
        elif self.config.feature_norm == "l2":
            feats = feats / feats.norm(dim=-1, keepdim=True).clamp(min=1e-6)
        if self._read_features is not None:
            self._read_features.append(feats)
        v = torch.cat([feats, spatial], dim=-1)
        return torch.where(mask.unsqueeze(-1), v, torch.zeros_like(v))

    @contextmanager
    def features_read(self) -> Iterator[list[torch.Tensor]]:
        """While open, each forward pass appends to the list it yields the object features
        the network reads: the features after ``feature_norm`` (before the box is joined).
        GradCAM differentiates the answer's logit with respect to them (docs/protocols.md
        §5.7): a LayerNorm's output does not change when the same amount is added to every
        feature of an object, so the gradient with respect to the raw features sums to
        exactly 0 over the feature dimension, whatever the model looks at."""
        self._read_features = read = []
        try:
            yield read
        finally:
            self._read_features = None

    def attend(self, q: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Attention ``α`` (B, N) of question ``q`` over the visible objects of ``v``."""
        if self.config.pooling == "answers":  # one dropout mask per question, shared by its objects
            qa = self.dropout(torch.relu(self.att_q(q)))
            joint = torch.relu(self.att_v(v)) * qa.unsqueeze(1)
            return masked_softmax(self.att_out(joint).squeeze(-1), mask)
        joint = torch.relu(self.att_v(v)) * torch.relu(self.att_q(q)).unsqueeze(1)
        return masked_softmax(self.att_out(self.dropout(joint)).squeeze(-1), mask)

    def answer(
        self, q: torch.Tensor, v: torch.Tensor, alpha: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits (B, A), fused h (B, H))`` of question ``q`` looking at the objects
        ``v`` with attention ``alpha`` (``"answers"`` pooling: ``h = Σ α_i h_i``)."""
        if self.config.pooling == "answers":
            return self.mix_answers(q, v, alpha)
        v_hat = torch.bmm(alpha.unsqueeze(1), v).squeeze(1)
        h = torch.relu(self.fuse_q(q)) * torch.relu(self.fuse_v(v_hat))
        return self.classifier(h), h

    def mix_answers(
        self, q: torch.Tensor, v: torch.Tensor, alpha: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``log Σ_i α_i softmax(C(h_i))``: each object's answer, mixed by attention;
        an empty object (``v = 0``) answers alone for rows without visible objects.
        Only objects with weight > 0 go through the classifier (the others add
        exactly nothing: their log-weight is −∞)."""
        empty = (alpha.sum(dim=-1, keepdim=True) == 0).to(alpha.dtype)
        v = torch.cat([v, torch.zeros_like(v[:, :1])], dim=1)
        weight = torch.cat([alpha, empty], dim=1)  # (B, N + 1), rows sum to 1
        h = torch.relu(self.fuse_q(q)).unsqueeze(1) * (1 + torch.relu(self.fuse_v(v)))
        used = weight > 0
        first, relu, _, last = self.classifier
        z = relu(first(h[used]))  # (K, 2H): the used objects of all rows
        # one dropout mask per question, shared by its objects
        keep = self.dropout(torch.ones_like(z[:1]).expand(h.shape[0], -1))
        row = used.nonzero()[:, 0]
        log_p = torch.log_softmax(last(z * keep[row]), dim=-1)  # (K, A)
        log_w = torch.log(weight[used].clamp(min=torch.finfo(weight.dtype).tiny))[:, None]
        scores = torch.full((*weight.shape, log_p.shape[-1]), float("-inf"), dtype=log_p.dtype)
        scores = scores.index_put(used.nonzero(as_tuple=True), log_p + log_w)
        log_mix = torch.logsumexp(scores, dim=1)  # log p (B, A)
        # centred over answers (softmax unchanged), so that they behave like ordinary
        # logits under RUBi's multiplicative mask (log p alone is ≤ 0 everywhere)
        logits = log_mix - log_mix.mean(dim=-1, keepdim=True)
        return logits, torch.bmm(weight.unsqueeze(1), h).squeeze(1)

    def question_mask(self, q: torch.Tensor) -> torch.Tensor:
        """RUBi's mask logits ``NN_q(q)`` (B, A); ``q`` is detached, so the
        question-only loss never trains the shared question encoder."""
        return self.rubi_q(q.detach())

    def forward(
        self,
        tokens: torch.Tensor,
        lengths: torch.Tensor,
        feats: torch.Tensor,
        spatial: torch.Tensor,
        mask: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits (B, A), attention α (B, N))``; RUBi+QB keeps its question-only mask."""
        q = self.encode(tokens, lengths)
        v = self.objects(feats, spatial, mask)
        alpha = self.attend(q, v, mask)
        logits, _ = self.answer(q, v, alpha)
        if self.keep_question_branch:  # RUBi+QB: the training-time masking at test time
            logits = logits * torch.sigmoid(self.question_mask(q))
        return logits, alpha


def the_features_read(read: list[torch.Tensor]) -> torch.Tensor:
    """The object features of the one forward pass :meth:`UpDnNet.features_read` saw."""
    if len(read) != 1:
        raise RuntimeError(f"expected one forward pass over the objects, saw {len(read)}")
    return read[0]
