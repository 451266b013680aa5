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


def build_question_only_net(n_words: int, n_answers: int, options: Mapping[str, Any]) -> Any:
    """GRU question encoder → ``Linear(H, 2H) → ReLU → Dropout → Linear(2H, A)``
    (:class:`~vqadiag.models.networks.question.QuestionOnlyNet`)."""
    from vqadiag.models.networks.question import QuestionOnlyNet, QuestionOnlyNetConfig

    config = QuestionOnlyNetConfig(
        n_words=n_words,
        n_answers=n_answers,
        embedding_dim=options["embedding_dim"],
        hidden_dim=options["hidden_dim"],
        dropout=options["dropout"],
    )
    return QuestionOnlyNet(config)


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
