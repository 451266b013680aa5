"""Bias-reduction training losses for UpDn: RUBi, RUBi+QB, BP and LMH (docs/protocols.md §3).

GQA-OOD (Kervadec et al. 2021, §4 "bias-reduction methods") compares these with the
same base model; here they are training options of UpDn (``-o debias=...``). With
``z`` the base model's logits (B, A), ``y`` the gold answer index and CE the mean
softmax cross-entropy:

* **RUBi** (Cadene et al. 2019): a question-only branch ``NN_q`` reads the question
  vector (detached, so its loss never trains the shared question encoder) and gives
  mask logits ``m``; ``L = CE(z ⊙ σ(m), y) + CE(c_q(m), y)`` with ``c_q`` a linear
  question-only classifier. Test time: ``z`` alone.
* **RUBi+QB** (GQA-OOD's variant): trained as RUBi, but the question-only branch is
  kept at test time: the prediction is ``z ⊙ σ(m)``.
* **BP**, bias product (Clark et al. 2019): a product of experts with the training
  set's per-group answer prior ``p_g`` (counts of each answer among the training
  questions of the question's group, ÷ their number, floored at
  :data:`PRIOR_FLOOR`): ``L = CE(log softmax(z) + log p_g, y)``. Test time: ``z``.
* **LMH**, learned mixin + H: ``L = CE(log softmax(z) + g(x) · log p_g, y) +
  w · H(softmax(g(x) · log p_g))`` with ``g(x) = softplus(w_g · h + b_g) ≥ 0`` learned
  from the fused representation ``h`` and H the entropy (mean over the batch).
  ``w`` = option ``lmh_entropy``, default 0.36 (Clark et al.'s VQA-CP value; GQA-OOD's
  supplementary reports GQA results are better with ``w = 0``). Test time: ``z``.

Groups (option ``debias_groups``): ``"global"`` = GQA ``groups.global`` (the
question-prior grouping of :mod:`vqadiag.models.reference.prior`), ``"local"`` = ``groups.local``
(GQA-OOD's footnote: on GQA its BP used local groups). Records without GQA groups
(VQA v2) fall back to their ``question_type`` (the question-type bias of Clark et al.);
records with neither form one group.

Clark et al. and GQA-OOD train with binary cross-entropy over soft VQA scores; the
built-in models train with softmax cross-entropy, so the losses above use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vqadiag.models.base import ObjectInput, QuestionBatch

if TYPE_CHECKING:
    import torch

DEBIAS_METHODS = ("none", "rubi", "rubi+qb", "bp", "lmh")
GROUPINGS = ("global", "local")
PRIOR_FLOOR = 1e-6
"""Smallest prior probability: ``log p`` stays finite (and ``0 · log p`` defined)."""


def bias_group(record: Mapping[str, Any], grouping: str = "global") -> str | None:
    """The group of a question for the answer prior: ``groups.<grouping>``, else the
    VQA ``question_type``, else ``None`` (one group of its own)."""
    groups = record.get("groups")
    if isinstance(groups, Mapping) and groups.get(grouping) is not None:
        return f"{grouping}:{groups[grouping]}"
    qtype = record.get("question_type")
    return None if qtype is None else f"type:{qtype}"


def group_log_prior(
    records: Iterable[Mapping[str, Any]],
    answer_index: Mapping[str, int],
    grouping: str = "global",
) -> tuple[dict[str | None, int], np.ndarray]:
    """Per-group answer prior of the training questions, as logs.

    ``log p_g(a) = log max(c_g(a) / Σ_a' c_g(a'), PRIOR_FLOOR)`` where ``c_g(a)`` counts the
    training questions of group ``g`` answered ``a`` (answers outside ``answer_index``
    are not counted). Returns ``({group: row}, log_prior (G, A) float32)``; rows follow
    first appearance.
    """
    rows: dict[str | None, int] = {}
    counts: list[np.ndarray] = []
    n_answers = len(answer_index)
    for record in records:
        key = bias_group(record, grouping)
        row = rows.get(key)
        if row is None:
            row = rows[key] = len(counts)
            counts.append(np.zeros(n_answers, dtype=np.float64))
        a = answer_index.get(record.get("answer"))  # type: ignore[arg-type]
        if a is not None:
            counts[row][a] += 1.0
    table = np.stack(counts) if counts else np.zeros((0, n_answers))
    totals = np.maximum(table.sum(axis=1, keepdims=True), 1.0)
    return rows, np.log(np.maximum(table / totals, PRIOR_FLOOR)).astype(np.float32)


def rubi_loss(
    logits: torch.Tensor, mask_logits: torch.Tensor, question_logits: torch.Tensor, target: Any
) -> torch.Tensor:
    """RUBi: ``CE(z ⊙ σ(m), y) + CE(c_q(m), y)`` (Cadene et al. 2019, Eq. 3–5)."""
    import torch.nn.functional as F

    return F.cross_entropy(logits * mask_logits.sigmoid(), target) + F.cross_entropy(
        question_logits, target
    )


def bias_product_loss(logits: torch.Tensor, log_prior: torch.Tensor, target: Any) -> torch.Tensor:
    """BP: ``CE(log softmax(z) + log p_g, y)`` — the product of experts renormalised by
    the softmax inside CE (Clark et al. 2019, §3.2.1)."""
    import torch.nn.functional as F

    return F.cross_entropy(F.log_softmax(logits, dim=1) + log_prior, target)


def learned_mixin_loss(
    logits: torch.Tensor,
    log_prior: torch.Tensor,
    gate: torch.Tensor,
    target: Any,
    entropy_weight: float,
) -> torch.Tensor:
    """LMH: ``CE(log softmax(z) + g · log p_g, y) + w · mean_b H(softmax(g · log p_g))``
    with ``g = softplus(gate)`` (B, 1) (Clark et al. 2019, §3.2.2–3.2.3)."""
    import torch.nn.functional as F

    scaled = F.softplus(gate).reshape(-1, 1) * log_prior
    loss = F.cross_entropy(F.log_softmax(logits, dim=1) + scaled, target)
    if entropy_weight > 0:
        p = F.softmax(scaled, dim=1)
        entropy = -(p * F.log_softmax(scaled, dim=1)).sum(dim=1).mean()
        loss = loss + entropy_weight * entropy
    return loss


class _Parts:
    """Runs the UpDn network part by part (question, objects, attention, answer)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.net = model.net

    def run(
        self, batch: QuestionBatch, visual: ObjectInput | None, feats: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(q, logits z, fused h)`` of a batch (``feats`` replaces the feature tensor)."""
        tokens, lengths = self.model._question_tensors(batch)
        f, spatial, mask = self.model._object_tensors(visual)
        q = self.net.encode(tokens, lengths)
        v = self.net.objects(f if feats is None else feats, spatial, mask)
        logits, h = self.net.answer(q, v, self.net.attend(q, v, mask))
        return q, logits, h


class RUBiObjective(_Parts):
    """Training loss of ``debias=rubi`` / ``rubi+qb`` (:func:`rubi_loss`); the logits it
    returns are the test-time ones (``z``, or ``z ⊙ σ(m)`` for RUBi+QB)."""

    def __call__(
        self,
        batch: QuestionBatch,
        visual: ObjectInput | None,
        target: torch.Tensor,
        feats: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        q, logits, _ = self.run(batch, visual, feats)
        mask_logits = self.net.question_mask(q)
        loss = rubi_loss(logits, mask_logits, self.net.rubi_out(mask_logits), target)
        shown = logits * mask_logits.sigmoid() if self.net.keep_question_branch else logits
        return loss, shown


class PriorObjective(_Parts):
    """Training loss of ``debias=bp`` / ``lmh`` against the per-group training prior."""

    def __init__(self, model: Any, rows: Mapping[str | None, int], log_prior: np.ndarray) -> None:
        import torch

        super().__init__(model)
        self.rows = dict(rows)
        self.log_prior = torch.from_numpy(log_prior)
        self.method = model.options["debias"]
        self.grouping = model.options["debias_groups"]
        self.entropy_weight = float(model.options["lmh_entropy"])

    def batch_prior(self, batch: QuestionBatch) -> torch.Tensor:
        """``log p_g`` (B, A) of each question's group (an unseen group: uniform)."""
        import torch

        out = torch.full((len(batch), self.log_prior.shape[1]), 0.0)
        for i in range(len(batch)):
            row = self.rows.get(bias_group(batch.record(i), self.grouping))
            if row is not None:
                out[i] = self.log_prior[row]
        return out

    def __call__(
        self,
        batch: QuestionBatch,
        visual: ObjectInput | None,
        target: torch.Tensor,
        feats: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        _, logits, h = self.run(batch, visual, feats)
        prior = self.batch_prior(batch)
        if self.method == "bp":
            return bias_product_loss(logits, prior, target), logits
        gate = self.net.lmh_gate(h)
        return learned_mixin_loss(logits, prior, gate, target, self.entropy_weight), logits


def debias_objective(model: Any, data: Any, split: str, question_ids: Sequence[str]) -> Any:
    """The training objective of ``model.options["debias"]`` (plain cross-entropy for
    ``"none"``); BP / LMH count their prior over ``question_ids`` of ``split``."""
    from vqadiag.models.training import CrossEntropyObjective

    method = model.options.get("debias", "none")
    if method == "none":
        return CrossEntropyObjective(model)
    if method in ("rubi", "rubi+qb"):
        return RUBiObjective(model)
    questions = data.questions(split)
    index = {a: i for i, a in enumerate(model.answer_vocab)}
    rows, log_prior = group_log_prior(
        (questions[q] for q in question_ids), index, model.options["debias_groups"]
    )
    return PriorObjective(model, rows, log_prior)
