"""The question encoder shared by the neural models and the question-only network.

``h = GRU(E[w_1..w_T])``, the last hidden state at each question's length
(:mod:`vqadiag.models.reference.question_only`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class QuestionEncoderConfig:
    """Sizes of :class:`QuestionEncoder`: vocabulary, word embedding and GRU state."""

    n_words: int
    embedding_dim: int
    hidden_dim: int


class QuestionEncoder(nn.Module):
    """Word embeddings + one-layer GRU; ``forward(tokens, lengths)`` → the GRU state after
    each question's last token (B, hidden)."""

    def __init__(self, config: QuestionEncoderConfig) -> None:
        super().__init__()
        self.embedding = nn.Embedding(config.n_words, config.embedding_dim, padding_idx=0)
        self.gru = nn.GRU(config.embedding_dim, config.hidden_dim, batch_first=True)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """The GRU state after each question's last token (B, hidden)."""
        states, _ = self.gru(self.embedding(tokens))  # (B, T, H); causal, so padding
        last = (lengths - 1).clamp(min=0)  # after the last token is never read
        return states[torch.arange(tokens.shape[0]), last]


@dataclass(frozen=True)
class QuestionOnlyNetConfig:
    """Sizes and dropout of :class:`QuestionOnlyNet`."""

    n_words: int
    n_answers: int
    embedding_dim: int
    hidden_dim: int
    dropout: float

    @property
    def question(self) -> QuestionEncoderConfig:
        """The config of the network's question encoder."""
        return QuestionEncoderConfig(self.n_words, self.embedding_dim, self.hidden_dim)


class QuestionOnlyNet(nn.Module):
    """GRU question encoder → ``Linear(H, 2H) → ReLU → Dropout → Linear(2H, A)``."""

    def __init__(self, config: QuestionOnlyNetConfig) -> None:
        super().__init__()
        hidden = config.hidden_dim
        self.question = QuestionEncoder(config.question)
        self.classifier = nn.Sequential(
            nn.Linear(hidden, 2 * hidden),
            nn.ReLU(),
            nn.Dropout(config.dropout),
            nn.Linear(2 * hidden, config.n_answers),
        )

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Answer logits (B, A) of the questions alone."""
        return self.classifier(self.question(tokens, lengths))
