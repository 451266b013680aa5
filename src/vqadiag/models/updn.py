"""UpDn: bottom-up top-down attention over detector objects (Anderson et al. 2018).

Per question, with ``q = GRU(words)`` (last state) and object features
``v_i = [f_i ; x1/W, y1/H, x2/W, y2/H, area/(W·H)]`` (features + normalised box):

* top-down attention ``a_i = w_a · Dropout(ReLU(W_v v_i) ⊙ ReLU(W_q q))``,
  ``α = softmax(a)`` **restricted to the visible objects**: masked objects get
  exactly zero weight (logit −∞) and their features are replaced by zeros before
  any layer, so they have no influence at all on the output (a row with no visible
  object attends to nothing: ``α = 0``, ``v̂ = 0``);
* ``v̂ = Σ_i α_i v_i``; fusion ``h = ReLU(U_q q) ⊙ ReLU(U_v v̂)`` (element-wise product);
* classifier ``Linear(H, 2H) → ReLU → Dropout → Linear(2H, A)``.

``ModelOutput.attention`` is ``α`` (B, N); :meth:`UpDnModel.object_gradients` gives
``∂ logit_a / ∂ f`` for GradCAM-style importance (SPEC.md §5).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from vqadiag.models.base import Capabilities, ObjectInput, QuestionBatch
from vqadiag.models.question_only import make_question_encoder
from vqadiag.models.training import SPATIAL_DIM, TRAINING_DEFAULTS, TorchModel


def masked_softmax(logits: Any, mask: Any) -> Any:
    """Softmax over the ``True`` entries of ``mask`` along the last axis; masked entries
    are exactly 0 and an all-masked row is all 0 (never NaN)."""
    import torch

    any_visible = mask.any(dim=-1, keepdim=True)
    filled = torch.where(mask, logits, torch.full_like(logits, float("-inf")))
    filled = torch.where(any_visible, filled, torch.zeros_like(logits))
    return torch.softmax(filled, dim=-1) * mask.to(logits.dtype)


def build_updn_net(
    n_words: int, n_answers: int, feature_dim: int, options: Mapping[str, Any]
) -> Any:
    """The UpDn network; ``forward(tokens, lengths, feats, spatial, mask)`` →
    ``(logits (B, A), attention (B, N))``."""
    import torch
    from torch import nn

    emb, hidden, dropout = options["embedding_dim"], options["hidden_dim"], options["dropout"]
    vdim = feature_dim + SPATIAL_DIM

    class UpDnNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.question = make_question_encoder(n_words, emb, hidden)
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
                nn.Linear(2 * hidden, n_answers),
            )

        def forward(
            self,
            tokens: torch.Tensor,
            lengths: torch.Tensor,
            feats: torch.Tensor,
            spatial: torch.Tensor,
            mask: torch.Tensor,
        ) -> tuple[torch.Tensor, torch.Tensor]:
            q = self.question(tokens, lengths)
            v = torch.cat([feats, spatial], dim=-1)
            v = torch.where(mask.unsqueeze(-1), v, torch.zeros_like(v))
            joint = torch.relu(self.att_v(v)) * torch.relu(self.att_q(q)).unsqueeze(1)
            alpha = masked_softmax(self.att_out(self.dropout(joint)).squeeze(-1), mask)
            v_hat = torch.bmm(alpha.unsqueeze(1), v).squeeze(1)
            h = torch.relu(self.fuse_q(q)) * torch.relu(self.fuse_v(v_hat))
            return self.classifier(h), alpha

    return UpDnNet()


class UpDnModel(TorchModel):
    """Bottom-up top-down attention over object features; exposes attention and gradients."""

    name: ClassVar[str] = "updn"
    capabilities: ClassVar[Capabilities] = Capabilities(
        visual="objects", object_masking=True, attention=True, gradients=True
    )
    uses_objects: ClassVar[bool] = True
    defaults: ClassVar[dict[str, Any]] = {**TRAINING_DEFAULTS, "epochs": 12}

    @classmethod
    def build_net(
        cls, n_words: int, n_answers: int, feature_dim: int, options: Mapping[str, Any]
    ) -> Any:
        """See :func:`build_updn_net`."""
        return build_updn_net(n_words, n_answers, feature_dim, options)

    def object_gradients(
        self, batch: QuestionBatch, visual: ObjectInput, answer_index: np.ndarray
    ) -> np.ndarray:
        """``∂ logit[b, answer_index[b]] / ∂ features[b]`` → (B, N, D) float32, in eval mode
        (zero for masked objects: they never reach the network)."""
        import torch

        self.net.eval()
        feats, _, _ = self._object_tensors(visual)
        feats = feats.clone().requires_grad_(True)
        index = torch.as_tensor(np.asarray(answer_index, dtype=np.int64)).reshape(-1, 1)
        logits, _ = self.forward(batch, visual, feats=feats)
        chosen = logits.gather(1, index).sum()
        (grad,) = torch.autograd.grad(chosen, feats)
        return grad.numpy()
