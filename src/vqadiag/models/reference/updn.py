"""UpDn: bottom-up top-down attention over detector objects (Anderson et al. 2018).

Per question, with ``q = GRU(words)`` (last state) and object features
``v_i = [N(f_i) ; x1/W, y1/H, x2/W, y2/H, area/(W·H)]`` (features, normalised by
``N`` = option ``feature_norm``, + normalised box):

* top-down attention ``a_i = w_a · Dropout(ReLU(W_v v_i) ⊙ ReLU(W_q q))``,
  ``α = softmax(a)`` **restricted to the visible objects**: masked objects get
  exactly zero weight (logit −∞) and their features are replaced by zeros before
  any layer, so they have no influence at all on the output (a row with no visible
  object attends to nothing: ``α = 0``, ``v̂ = 0``);
* option ``pooling`` (default ``"answers"``) says where the attention pools:

  - ``"features"`` (Anderson et al.'s UpDn): ``v̂ = Σ_i α_i v_i``; fusion
    ``h = ReLU(U_q q) ⊙ ReLU(U_v v̂)`` (element-wise product); classifier
    ``C = Linear(H, 2H) → ReLU → Dropout → Linear(2H, A)``; logits ``C(h)``;
  - ``"answers"``: every object answers on its own and the attention mixes the
    answers, ``p(a) = Σ_i α_i softmax(C(h_i))[a]`` with ``h_i = ReLU(U_q q) ⊙
    (1 + ReLU(U_v v_i))`` (the ``1 +`` lets the question through when no object
    helps); the logits are ``log p`` centred over the answers (so
    ``softmax(logits) = p``). A row with no visible object uses the
    answer of an empty object (``v = 0``) alone. The dropout masks are drawn per
    question, the same for all its objects (attention:
    ``w_a · (ReLU(W_v v_i) ⊙ Dropout(ReLU(W_q q)))``). The loss ``−log Σ_i α_i p_i(y)``
    rewards attention on the objects whose own answer is right. On the demo's world
    (~9,900 training questions) this attention learns where to look; with pooled
    features it barely does (docs/models.md, "UpDn pooling").

``feature_norm`` (default ``"layer"``): ``"layer"`` = LayerNorm over the feature
dimension (learned scale and shift), ``"l2"`` = ``f / ‖f‖₂``, ``"none"`` = raw
features (what runs saved before this option existed use; their configs lack the
key and load as ``"none"``). Likewise a config without ``pooling`` loads as
``"features"``.

The network is :class:`vqadiag.models.networks.updn.UpDnNet`. ``ModelOutput.attention``
is ``α`` (B, N); :meth:`UpDnModel.object_gradients` gives
``∂ logit_a / ∂ f`` for GradCAM-style importance (docs/protocols.md §5).

Remedy options (docs/remedies.md): ``debias`` = ``rubi`` / ``rubi+qb`` / ``bp`` /
``lmh`` (:mod:`vqadiag.models.remedies.debias`) and ``hint`` > 0
(:mod:`vqadiag.models.remedies.hint`) change the training loss; ``rubi+qb`` also keeps
RUBi's question-only mask at test time. The network exposes its parts (:meth:`encode`,
:meth:`attend`, :meth:`answer`) so those losses and SQuINT fine-tuning
(:mod:`vqadiag.models.remedies.finetune`) can recombine them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from vqadiag.models.base import Capabilities, ObjectInput, QuestionBatch
from vqadiag.models.option_checks import WEIGHT, check_numbers
from vqadiag.models.run_configs import UPDN_BEFORE_NORM_AND_POOLING
from vqadiag.models.training import TRAINING_DEFAULTS, TorchModel

FEATURE_NORMS = ("none", "layer", "l2")
POOLINGS = ("features", "answers")

#: The remedy options of UpDn and their "off" values. An option at its "off" value (and
#: ``feature_norm="none"``) is left out of the architecture, so of ``config.json`` and the
#: fingerprint: runs saved before these options existed load and keep their fingerprints.
OPTIONAL_DEFAULTS: dict[str, Any] = {
    "debias": "none",
    "debias_groups": "global",
    "lmh_entropy": 0.36,
    "hint": 0.0,
    "hint_margin": 0.0,
}
#: What a config without ``feature_norm`` / ``pooling`` (saved before they existed) means.
LEGACY_FEATURE_NORM = UPDN_BEFORE_NORM_AND_POOLING["feature_norm"]
LEGACY_POOLING = UPDN_BEFORE_NORM_AND_POOLING["pooling"]


def build_updn_net(
    n_words: int, n_answers: int, feature_dim: int, options: Mapping[str, Any]
) -> Any:
    """The UpDn network (:class:`~vqadiag.models.networks.updn.UpDnNet`);
    ``forward(tokens, lengths, feats, spatial, mask)`` → ``(logits (B, A), attention
    (B, N))``, with parts ``encode`` / ``objects`` / ``attend`` / ``answer`` for the
    remedy losses."""
    from vqadiag.models.networks.updn import UpDnNet, UpDnNetConfig

    norm = options.get("feature_norm", LEGACY_FEATURE_NORM)
    if norm not in FEATURE_NORMS:
        raise ValueError(f"feature_norm must be one of {FEATURE_NORMS}, got {norm!r}")
    pooling = options.get("pooling", LEGACY_POOLING)
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    config = UpDnNetConfig(
        n_words=n_words,
        n_answers=n_answers,
        feature_dim=feature_dim,
        embedding_dim=options["embedding_dim"],
        hidden_dim=options["hidden_dim"],
        dropout=options["dropout"],
        feature_norm=norm,
        pooling=pooling,
        debias=options.get("debias", "none"),
    )
    return UpDnNet(config)


class UpDnModel(TorchModel):
    """Bottom-up top-down attention over object features; exposes attention and gradients."""

    name: ClassVar[str] = "updn"
    capabilities: ClassVar[Capabilities] = Capabilities(
        visual="objects", object_masking=True, attention=True, gradients=True
    )
    uses_objects: ClassVar[bool] = True
    defaults: ClassVar[dict[str, Any]] = {
        **TRAINING_DEFAULTS,
        "epochs": 12,
        "hidden_dim": 128,
        "dropout": 0.5,
        "feature_norm": "layer",
        "pooling": "answers",
        **OPTIONAL_DEFAULTS,
    }
    omitted_options: ClassVar[dict[str, Any]] = {
        **OPTIONAL_DEFAULTS,
        "feature_norm": LEGACY_FEATURE_NORM,
        "pooling": LEGACY_POOLING,
    }

    @classmethod
    def build_net(
        cls, n_words: int, n_answers: int, feature_dim: int, options: Mapping[str, Any]
    ) -> Any:
        """See :func:`build_updn_net`."""
        return build_updn_net(n_words, n_answers, feature_dim, options)

    @classmethod
    def resolve_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overridden by ``options``, validated (unknown names and bad remedy
        values raise ``ValueError``)."""
        from vqadiag.models.remedies.debias import DEBIAS_METHODS, GROUPINGS

        opts = super().resolve_options(options)
        if opts["debias"] not in DEBIAS_METHODS:
            raise ValueError(f"debias must be one of {DEBIAS_METHODS}, got {opts['debias']!r}")
        if opts["debias_groups"] not in GROUPINGS:
            raise ValueError(
                f"debias_groups must be one of {GROUPINGS}, got {opts['debias_groups']!r}"
            )
        if opts["feature_norm"] not in FEATURE_NORMS:
            raise ValueError(
                f"feature_norm must be one of {FEATURE_NORMS}, got {opts['feature_norm']!r}"
            )
        if opts["pooling"] not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {opts['pooling']!r}")
        remedy_weights = ("hint", "hint_margin", "lmh_entropy")
        check_numbers(opts, dict.fromkeys(remedy_weights, WEIGHT))
        for key in remedy_weights:
            opts[key] = float(opts[key])
        return opts

    @classmethod
    def idle_option(cls, opts: Mapping[str, Any], given: Mapping[str, Any]) -> str | None:
        """Also a remedy option set away from its default for a remedy the options leave
        off: ``hint_margin`` without ``hint``, ``lmh_entropy`` without ``debias=lmh``,
        ``debias_groups`` without ``debias=bp`` or ``lmh``, the two that count a prior
        by group (docs/remedies.md)."""
        needs = (
            ("hint_margin", opts["hint"] > 0, "shapes the HINT loss: give hint above 0 with it"),
            ("lmh_entropy", opts["debias"] == "lmh", "weighs LMH's entropy: give debias=lmh"),
            ("debias_groups", opts["debias"] in ("bp", "lmh"),
             "groups the prior of debias=bp or lmh: give one of them"),
        )  # fmt: skip
        return cls.idle_among(needs, given, OPTIONAL_DEFAULTS) or super().idle_option(opts, given)

    def training_objective(self, data: Any, split: str, question_ids: Sequence[str]) -> Any:
        """Cross-entropy, or the remedy losses the options ask for (docs/remedies.md)."""
        from vqadiag.models.remedies.debias import debias_objective
        from vqadiag.models.remedies.hint import hint_objective

        objective = debias_objective(self, data, split, question_ids)
        if self.options["hint"] > 0:
            objective = hint_objective(self, data, split, question_ids, objective)
        return objective

    def object_gradients(
        self, batch: QuestionBatch, visual: ObjectInput, answer_index: np.ndarray
    ) -> np.ndarray:
        """``∂ logit[b, answer_index[b]] / ∂ f[b]`` → (B, N, D) float32, in eval mode, with
        ``f`` the object features the network reads, after ``feature_norm``
        (:meth:`UpDnNet.features_read`; zero for masked objects: they never reach the
        network)."""
        import torch

        from vqadiag.models.networks.updn import the_features_read

        self.net.eval()
        feats, _, _ = self._object_tensors(visual)
        feats = feats.clone().requires_grad_(True)
        index = torch.as_tensor(np.asarray(answer_index, dtype=np.int64)).reshape(-1, 1)
        with self.net.features_read() as read:
            logits, _ = self.forward(batch, visual, feats=feats)
        chosen = logits.gather(1, index).sum()
        (grad,) = torch.autograd.grad(chosen, the_features_read(read))
        return grad.numpy()
