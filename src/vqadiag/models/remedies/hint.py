"""HINT-style grounding loss for UpDn (Selvaraju et al. 2019, "Taking a HINT"; protocols.md §5).

HINT aligns the model's gradient-based importance of each object with human
importance. Here the human side is the question's annotated relevant objects
(FPVG's relevance, :func:`vqadiag.data.formats.relevance.compute_relevance`: detected boxes with
IoU > 0.5 with an object named in ``annotations``; irrelevant = boxes no annotated
object covers by more than 25 %), and the model side is GradCAM over objects as
docs/protocols.md §5 defines it (and :meth:`UpDnModel.object_gradients` computes):

    s_j = Σ_d ∂ z_y / ∂ f_jd          (z_y: logit of the gold answer, f_j: object j's features
                                        as the network reads them, after its feature_norm)

normalised per question over its visible objects, ``ŝ_j = s_j / Σ_i |s_i|`` (raw
gradients of a young model are ~1e-6, and the loss would vanish next to the
cross-entropy; normalised, it does not depend on the logit scale). The ranking loss
asks every relevant object to score above every irrelevant one:

    L_HINT = mean over questions with ≥ 1 relevant and ≥ 1 irrelevant visible box of
             mean over pairs (j relevant, k irrelevant) of max(0, margin − (ŝ_j − ŝ_k))

(``margin`` = option ``hint_margin``, default 0 as in HINT's ranking loss). The total
loss is ``L_base + λ · L_HINT`` with ``λ`` = option ``hint`` (0 = off). ``s`` is a
gradient, so training needs a second backward pass (``create_graph=True``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vqadiag.errors import DataError
from vqadiag.models.base import ObjectInput, QuestionBatch

if TYPE_CHECKING:
    import torch


def hint_ranking_loss(
    importance: torch.Tensor,
    relevant: torch.Tensor,
    irrelevant: torch.Tensor,
    margin: float = 0.0,
) -> torch.Tensor:
    """``mean_q mean_{j ∈ rel_q, k ∈ irrel_q} max(0, margin − (s_qj − s_qk))`` (module
    docstring); ``importance`` (B, N), ``relevant`` / ``irrelevant`` (B, N) bool. Questions
    without a relevant or without an irrelevant object are left out; none left → 0."""
    import torch

    rel = relevant.to(importance.dtype)
    irr = irrelevant.to(importance.dtype)
    diff = importance.unsqueeze(2) - importance.unsqueeze(1)  # (B, N_j, N_k): s_j − s_k
    hinge = torch.relu(margin - diff)
    pairs = rel.unsqueeze(2) * irr.unsqueeze(1)
    n_pairs = pairs.sum(dim=(1, 2))
    used = n_pairs > 0
    if not bool(used.any()):
        return importance.sum() * 0.0
    per_question = (hinge * pairs).sum(dim=(1, 2))[used] / n_pairs[used]
    return per_question.mean()


def normalized_importance(importance: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """``ŝ_j = s_j / Σ_i∈visible |s_i|`` per row (0 for invisible objects; a row whose
    importances are all 0 stays 0)."""
    s = importance * visible.to(importance.dtype)
    return s / s.abs().sum(dim=1, keepdim=True).clamp(min=1e-12)


def gradcam_importance(
    logits: torch.Tensor, feats: torch.Tensor, target: torch.Tensor, create_graph: bool = True
) -> torch.Tensor:
    """``s_bj = Σ_d ∂ z[b, y_b] / ∂ f[b, j, d]`` (B, N), differentiable when ``create_graph``;
    ``f``: the object features the network reads (after its ``feature_norm``)."""
    import torch

    chosen = logits.gather(1, target.reshape(-1, 1)).sum()
    (grad,) = torch.autograd.grad(chosen, feats, create_graph=create_graph)
    return grad.sum(dim=-1)


def relevance_masks(
    sets: Mapping[str, tuple[np.ndarray, np.ndarray]],
    question_ids: Sequence[str],
    visible: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """``(relevant, irrelevant)`` (B, N) bool of a batch from ``{qid: (rel idx, irrel idx)}``
    (box indices of the image's detections); boxes past N or not visible are dropped."""
    b, n = visible.shape
    rel = np.zeros((b, n), dtype=bool)
    irr = np.zeros((b, n), dtype=bool)
    for i, qid in enumerate(question_ids):
        hit = sets.get(qid)
        if hit is None:
            continue
        r, k = (np.asarray(x, dtype=np.int64) for x in hit)
        rel[i, r[r < n]] = True
        irr[i, k[k < n]] = True
    return rel & visible, irr & visible


class HintObjective:
    """``L_base + λ · L_HINT`` (module docstring) around a base objective."""

    def __init__(
        self,
        model: Any,
        base: Any,
        sets: Mapping[str, tuple[np.ndarray, np.ndarray]],
        weight: float,
        margin: float,
    ) -> None:
        self.model = model
        self.base = base
        self.sets = dict(sets)
        self.weight = weight
        self.margin = margin

    def __call__(
        self,
        batch: QuestionBatch,
        visual: ObjectInput | None,
        target: torch.Tensor,
        feats: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        from vqadiag.models.networks.updn import the_features_read

        if feats is None:
            feats, _, _ = self.model._object_tensors(visual)
            feats = feats.clone().requires_grad_(True)
        with self.model.net.features_read() as read:
            loss, logits = self.base(batch, visual, target, feats=feats)
        assert isinstance(visual, ObjectInput)
        rel, irr = relevance_masks(self.sets, batch.question_ids, visual.mask)
        if not (rel.any() and irr.any()):
            return loss, logits
        scores = gradcam_importance(logits, the_features_read(read), target)
        importance = normalized_importance(scores, torch.from_numpy(visual.mask))
        ranking = hint_ranking_loss(
            importance, torch.from_numpy(rel), torch.from_numpy(irr), self.margin
        )
        return loss + self.weight * ranking, logits


def training_relevance(
    data: Any, split: str, question_ids: Sequence[str]
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Relevant / irrelevant box indices of the training questions that have both
    (docs/protocols.md §5, official settings), from the split's scene graphs and the detections."""
    from vqadiag.data.formats.relevance import compute_relevance

    try:
        scenes = data.scene_graphs(split)
    except DataError as err:
        raise DataError(
            err.path, f"hint needs GQA scene graphs and annotations: {err.problem}", err.record
        ) from None
    questions = data.questions(split)
    wanted = {q: questions[q] for q in question_ids}
    result = compute_relevance(wanted, scenes, data.detections)
    return {q: (result.sets[q][0], result.sets[q][1]) for q in result.kept}


def hint_objective(
    model: Any, data: Any, split: str, question_ids: Sequence[str], base: Any
) -> HintObjective:
    """Wrap ``base`` with the HINT loss (weight ``hint``, margin ``hint_margin``)."""
    sets = training_relevance(data, split, question_ids)
    if not sets:
        raise DataError(
            data.questions_path(split),
            "hint: no training question has both relevant and irrelevant boxes",
        )
    return HintObjective(
        model, base, sets, float(model.options["hint"]), float(model.options["hint_margin"])
    )


def model_fpvg_answers(
    model: Any, data: Any, split: str, *, batch_size: int = 256, max_objects: int = 100
) -> dict[str, list[Any]]:
    """FPVG's three runs of ``model`` on ``split`` (docs/protocols.md §5): answers with all objects,
    only the relevant ones and only the irrelevant ones (the others masked), over the
    questions with both kinds of box among the first ``max_objects``.

    Returns ``{"ids", "all", "rel", "irrel", "gold"}`` (lists in question order), ready
    for :func:`vqadiag.protocols.fpvg.formulas.fpvg_rates`.
    """
    sets = training_relevance(data, split, list(data.questions(split)))
    questions = data.questions(split)
    ids = [q for q in questions if q in sets]
    out: dict[str, list[Any]] = {"ids": [], "all": [], "rel": [], "irrel": [], "gold": []}
    for start in range(0, len(ids), batch_size):
        batch = data.batch(split, ids[start : start + batch_size])
        visual = data.object_input(batch.image_ids, max_objects)
        rel, irr = relevance_masks(sets, batch.question_ids, visual.mask)
        keep = rel.any(axis=1) & irr.any(axis=1)
        views = (visual, visual.with_mask(rel), visual.with_mask(irr))
        answers = [model.predict(batch, v).answers for v in views]
        for i in np.flatnonzero(keep):
            out["ids"].append(batch.question_ids[i])
            out["gold"].append(batch.records[i]["answer"])
            for key, ans in zip(("all", "rel", "irrel"), answers, strict=True):
                out[key].append(ans[i])
    return out
