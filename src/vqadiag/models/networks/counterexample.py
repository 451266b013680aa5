"""The counter-example explanation network of Goyal et al. 2017 §5
(:mod:`vqadiag.models.remedies.counterexample` describes the model): a shared question /
image base, the answering head and the explaining head over K candidate images."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from vqadiag.models.networks.question import QuestionEncoder
from vqadiag.models.networks.updn import ObjectNetSizes, masked_softmax


@dataclass(frozen=True)
class CounterExampleNetConfig(ObjectNetSizes):
    """Sizes and options of :class:`CounterExampleNet` (``pooling``: ``"attention"`` or
    ``"mean"``; ``count_feature`` applies to attention pooling only)."""

    k_candidates: int
    explain_dim: int
    pooling: str
    attention_dim: int
    count_feature: bool

    @property
    def counting(self) -> bool:
        """Whether the soft count of attended objects is appended to ``v̂``."""
        return self.count_feature and self.pooling == "attention"


class CounterExampleNet(nn.Module):
    """``forward(tokens, lengths, feats, spatial, mask)`` → ``(answer logits (B, A),
    pooling weights (B, N))``; ``explain(tokens, lengths, feats (B, K, N, D), spatial,
    mask, answer (B,))`` → ``(scores S (B, K), answer logits per candidate (B, K, A))``."""

    def __init__(self, config: CounterExampleNetConfig) -> None:
        super().__init__()
        self.config = config
        hidden, vdim, dropout = config.hidden_dim, config.object_dim, config.dropout
        k, edim = config.k_candidates, config.explain_dim
        self.question = QuestionEncoder(config.question)
        if config.pooling == "attention":
            self.att_v = nn.Linear(vdim, config.attention_dim)
            self.att_q = nn.Linear(hidden, config.attention_dim)
            self.att_out = nn.Linear(config.attention_dim, 1)
        self.fuse_q = nn.Linear(hidden, hidden)
        self.fuse_v = nn.Linear(vdim + (1 if config.counting else 0), hidden)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Sequential(
            nn.Linear(hidden, 2 * hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(2 * hidden, config.n_answers),
        )
        self.explain_qi = nn.Linear(hidden, edim)
        self.answer_embedding = nn.Embedding(config.n_answers + 1, edim)
        self.explain_fc = nn.Linear(k, k)
        with torch.no_grad():
            self.explain_fc.weight.copy_(torch.eye(k))
            self.explain_fc.bias.zero_()

    def joint(
        self, q: torch.Tensor, feats: torch.Tensor, spatial: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(QI embedding h (M, H), pooling weights (M, N))`` of questions ``q`` (M, H)
        over the objects ``feats`` / ``spatial`` / ``mask`` of M images."""
        counting = self.config.counting
        v = torch.cat([feats, spatial], dim=-1)
        v = torch.where(mask.unsqueeze(-1), v, torch.zeros_like(v))
        if self.config.pooling == "attention":
            # w·(ReLU(W_v v_j) ⊙ ReLU(W_q q)) + b as one batched product (no (M, N, H)
            # element-wise tensor: the explaining head runs this on B·K images)
            g = torch.relu(self.att_q(q)) * self.att_out.weight  # (M, A)
            r = torch.relu(self.att_v(v))  # (M, N, A)
            logit = torch.bmm(r, g.unsqueeze(2)).squeeze(2) + self.att_out.bias
            alpha = masked_softmax(logit, mask)
            if counting:  # soft count of the objects the question is about
                count = (torch.sigmoid(logit) * mask.to(v.dtype)).sum(1, keepdim=True)
        else:
            m = mask.to(v.dtype)
            alpha = m / m.sum(dim=1, keepdim=True).clamp(min=1.0)
        v_hat = torch.bmm(alpha.unsqueeze(1), v).squeeze(1)
        if counting:
            v_hat = torch.cat([v_hat, count], dim=1)
        return torch.relu(self.fuse_q(q)) * torch.relu(self.fuse_v(v_hat)), alpha

    def forward(
        self,
        tokens: torch.Tensor,
        lengths: torch.Tensor,
        feats: torch.Tensor,
        spatial: torch.Tensor,
        mask: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The answering head: ``(answer logits (B, A), pooling weights (B, N))``."""
        h, alpha = self.joint(self.question(tokens, lengths), feats, spatial, mask)
        return self.classifier(h), alpha

    def explain(
        self,
        tokens: torch.Tensor,
        lengths: torch.Tensor,
        feats: torch.Tensor,
        spatial: torch.Tensor,
        mask: torch.Tensor,
        answer: torch.Tensor,
        with_logits: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The explaining head: ``(scores S (B, K), answer logits per candidate (B, K, A)
        or None)`` of the K candidates ``feats`` (B, K, N, D) for ``answer`` (B,)."""
        b, kk, n, d = feats.shape
        q = self.question(tokens, lengths).repeat_interleave(kk, dim=0)
        h, _ = self.joint(
            q, feats.reshape(b * kk, n, d), spatial.reshape(b * kk, n, -1), mask.reshape(-1, n)
        )
        e = self.explain_qi(self.dropout(h)).view(b, kk, -1)
        a = self.answer_embedding(answer).unsqueeze(2)  # (B, E, 1)
        inner = torch.bmm(e, a).squeeze(2)  # (B, K)
        logits = self.classifier(h).view(b, kk, -1) if with_logits else None
        return self.explain_fc(inner), logits
