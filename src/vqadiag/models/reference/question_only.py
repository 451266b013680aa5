"""Question-only (blind) model: a GRU over word embeddings → answer classifier.

The language-only baseline of VQA v2 (Goyal et al. 2017) and GQA-OOD (Kervadec et
al. 2021): ``h = GRU(E[w_1..w_T])`` (last hidden state at the question's length),
``logits = W_2 · ReLU(W_1 · h)``, trained with :func:`~vqadiag.models.training.fit`.
It never sees the image (``Capabilities(visual="none")``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from vqadiag.models.base import Capabilities
from vqadiag.models.training import TRAINING_DEFAULTS, TorchModel


def make_question_encoder(n_words: int, emb: int, hidden: int) -> Any:
    """``QuestionEncoder``: word embeddings + one-layer GRU; ``forward(tokens, lengths)`` →
    the GRU state after each question's last token (B, hidden)."""
    import torch
    from torch import nn

    class QuestionEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(n_words, emb, padding_idx=0)
            self.gru = nn.GRU(emb, hidden, batch_first=True)

        def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            states, _ = self.gru(self.embedding(tokens))  # (B, T, H); causal, so padding
            last = (lengths - 1).clamp(min=0)  # after the last token is never read
            return states[torch.arange(tokens.shape[0]), last]

    return QuestionEncoder()


def build_question_only_net(n_words: int, n_answers: int, options: Mapping[str, Any]) -> Any:
    """GRU question encoder → ``Linear(H, 2H) → ReLU → Dropout → Linear(2H, A)``."""
    import torch
    from torch import nn

    emb, hidden, dropout = options["embedding_dim"], options["hidden_dim"], options["dropout"]

    class QuestionOnlyNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.question = make_question_encoder(n_words, emb, hidden)
            self.classifier = nn.Sequential(
                nn.Linear(hidden, 2 * hidden),
                nn.ReLU(),
                nn.Dropout(dropout),
                nn.Linear(2 * hidden, n_answers),
            )

        def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            return self.classifier(self.question(tokens, lengths))

    return QuestionOnlyNet()


class QuestionOnlyModel(TorchModel):
    """Blind GRU baseline; ``predict`` ignores the visual input."""

    name: ClassVar[str] = "question-only"
    capabilities: ClassVar[Capabilities] = Capabilities(
        visual="none", object_masking=False, attention=False, gradients=False
    )
    uses_objects: ClassVar[bool] = False
    defaults: ClassVar[dict[str, Any]] = TRAINING_DEFAULTS

    @classmethod
    def build_net(
        cls, n_words: int, n_answers: int, feature_dim: int, options: Mapping[str, Any]
    ) -> Any:
        """See :func:`build_question_only_net` (``feature_dim`` is unused)."""
        return build_question_only_net(n_words, n_answers, options)
