"""Sub-question fine-tuning and SQuINT (Selvaraju et al. 2020, §6; docs/protocols.md §6).

Both start from an attention model trained on VQA v2 (UpDn, ``vqadiag train --model
updn --dataset vqa2``) and fine-tune it on the VQA-introspect training pairs
(main Reasoning question, Perception sub-question, same image):

* ``subq`` — plain fine-tuning: ``L = ½ (CE(o_main, gt_main) + CE(o_sub, gt_sub))``
  (the paper's "averaged … loss for the main question and the sub question").
* ``squint`` — ``L = MSE(α_main, α_sub) + λ1 · CE(o_main | α_sub, gt_main)
  + λ2 · CE(o_sub, gt_sub)``, λ1 = 0.1, λ2 = 1 (paper §6.2). ``o_main | α_sub`` is the
  main question answered from the objects pooled with the *sub-question's*
  attention (``answer(q_main, Σ_i α_sub,i v_i)``). The MSE is the mean squared
  difference over the image's visible objects, averaged over pairs, with ``α_sub``
  as a fixed target (detached), so it moves the main question's attention toward the
  sub-question's and not the reverse.

To avoid forgetting, every batch also carries ``mix`` × (pairs in the batch) questions
drawn at random from the original VQA v2 training questions, with their own
cross-entropy added to the loss (paper §6.1; applied to both methods).

The paper (Pythia) uses binary cross-entropy, Pythia's own training loss; UpDn here
trains with softmax cross-entropy, so both methods use that (CE) to keep the output's
meaning. Optimiser: SGD with momentum 0.9 at the paper's learning rate 0.01 (an
adaptive optimiser at 0.01 wrecks a model trained at 2e-3 within a few steps).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vqadiag.data.formats.introspect import Introspect
from vqadiag.errors import DataError
from vqadiag.metrics.vqa_normalize import canonical_answer
from vqadiag.models.base import QuestionBatch
from vqadiag.models.option_checks import POSITIVE, RATE, WEIGHT, Number, check_numbers
from vqadiag.progress import progress_bar

if TYPE_CHECKING:
    import torch

METHODS = ("squint", "subq")
FINETUNE_DEFAULTS: dict[str, Any] = {
    "epochs": 3,
    "lr": 0.01,
    "momentum": 0.9,
    "batch_size": 32,
    "lambda1": 0.1,
    "lambda2": 1.0,
    "mix": 1.0,
}


#: the values each fine-tuning option takes (a learning rate above 0, SGD's momentum
#: below 1, the loss weights and the mixed-in share 0 or more)
FINETUNE_NUMBERS = {
    "epochs": POSITIVE,
    "lr": RATE,
    "momentum": Number(whole=False, low=0, high=1, high_open=True),
    "batch_size": POSITIVE,
    "lambda1": WEIGHT,
    "lambda2": WEIGHT,
    "mix": WEIGHT,
}


#: options only SQuINT's loss reads (``subq`` weighs its two terms equally)
SQUINT_ONLY = ("lambda1", "lambda2")


def check_finetune_options(options: Mapping[str, Any], method: str) -> dict[str, Any]:
    """``options`` as given, each a known fine-tuning option of ``method`` in its range
    (:data:`FINETUNE_NUMBERS`; ``ValueError`` naming the first that is not: a batch size
    of 0 divided by zero, ``lambda1=nan`` failed deep in training, and SQuINT's weights
    given to ``subq`` did nothing)."""
    unknown = sorted(set(options) - set(FINETUNE_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown fine-tuning option(s) {unknown}")
    unused = [name for name in SQUINT_ONLY if name in options and method != "squint"]
    if unused:
        raise ValueError(
            f"option(s) {unused} weigh SQuINT's loss terms; --method {method} does not use "
            "them (its loss averages the main and sub-question cross-entropies)"
        )
    check_numbers(options, FINETUNE_NUMBERS)
    return dict(options)


@dataclass(frozen=True)
class Pair:
    """One (main, sub) training pair on one image, with answer indices (−100 = unknown)."""

    main_id: str
    sub_id: str
    main_question: str
    sub_question: str
    image_id: str
    main_target: int
    sub_target: int


def answer_index(vocab: Mapping[str, int], answer: str) -> int:
    """Index of ``answer`` in the vocabulary, trying the official VQA normalization when
    the raw text is unknown; −100 (ignored by the loss) when neither is known."""
    hit = vocab.get(answer)
    if hit is None:
        hit = vocab.get(canonical_answer(answer))
    return -100 if hit is None else hit


def introspect_pairs(
    intro: Introspect,
    questions: Mapping[str, Mapping[str, Any]],
    vocab: Mapping[str, int],
    image_of: Any,
) -> list[Pair]:
    """Every (main, sub) pair of ``intro``; the main's answer and image come from its VQA
    v2 record in ``questions`` when present (else the introspect file's
    ``reasoning_answer_most_common`` and ``image_id`` through ``image_of``)."""
    pairs: list[Pair] = []
    for main in intro.mains.values():
        record = questions.get(main.main_id)
        if record is not None:
            image, gold = str(record["imageId"]), str(record.get("answer", main.answer))
        else:
            image, gold = image_of(str(main.image_id), main.main_id), main.answer
        target = answer_index(vocab, gold)
        for sub in main.subs:
            pairs.append(
                Pair(
                    main.main_id,
                    sub.sub_id,
                    main.question,
                    sub.question,
                    image,
                    target,
                    answer_index(vocab, sub.answer),
                )
            )
    return pairs


def masked_mse(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``mean_p Σ_i∈vis(p) (a_pi − b_pi)² / |vis(p)|`` over rows with a visible object."""
    m = mask.to(a.dtype)
    count = m.sum(dim=1)
    used = count > 0
    per_row = (((a - b) ** 2) * m).sum(dim=1)[used] / count[used]
    return per_row.mean() if bool(used.any()) else a.sum() * 0.0


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean CE over targets ≠ −100; 0 (not NaN) when every target is unknown."""
    import torch.nn.functional as F

    if not bool((target != -100).any()):
        return logits.sum() * 0.0
    return F.cross_entropy(logits, target, ignore_index=-100)


def squint_loss(
    att_main: torch.Tensor,
    att_sub: torch.Tensor,
    mask: torch.Tensor,
    logits_main_given_sub: torch.Tensor,
    target_main: torch.Tensor,
    logits_sub: torch.Tensor,
    target_sub: torch.Tensor,
    lambda1: float = 0.1,
    lambda2: float = 1.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """``MSE(α_main, α_sub) + λ1 · CE(o_main | α_sub, gt_main) + λ2 · CE(o_sub, gt_sub)``
    (docs/protocols.md §6); ``α_sub`` is detached in the MSE. Returns ``(loss, {term: value})``."""
    att = masked_mse(att_main, att_sub.detach(), mask)
    main = cross_entropy(logits_main_given_sub, target_main)
    sub = cross_entropy(logits_sub, target_sub)
    total = att + lambda1 * main + lambda2 * sub
    return total, {"attention": att.item(), "main": main.item(), "sub": sub.item()}


def subq_loss(
    logits_main: torch.Tensor,
    target_main: torch.Tensor,
    logits_sub: torch.Tensor,
    target_sub: torch.Tensor,
) -> tuple[torch.Tensor, dict[str, float]]:
    """``½ (CE(o_main, gt_main) + CE(o_sub, gt_sub))`` (paper §6.1)."""
    main = cross_entropy(logits_main, target_main)
    sub = cross_entropy(logits_sub, target_sub)
    return 0.5 * (main + sub), {"main": main.item(), "sub": sub.item()}


def _batch(ids: Sequence[str], texts: Sequence[str], images: Sequence[str]) -> QuestionBatch:
    return QuestionBatch(list(ids), list(texts), list(images))


def pair_loss(
    model: Any, data: Any, pairs: Sequence[Pair], method: str, options: Mapping[str, Any]
) -> tuple[torch.Tensor, dict[str, float]]:
    """The method's loss on a batch of pairs (main and sub share the image's objects)."""
    import torch

    net = model.net
    images = [p.image_id for p in pairs]
    visual = data.object_input(images, model.options["max_objects"])
    feats, spatial, mask = model._object_tensors(visual)
    v = net.objects(feats, spatial, mask)
    mains = _batch([p.main_id for p in pairs], [p.main_question for p in pairs], images)
    subs = _batch([p.sub_id for p in pairs], [p.sub_question for p in pairs], images)
    q_main = net.encode(*model._question_tensors(mains))
    q_sub = net.encode(*model._question_tensors(subs))
    att_main = net.attend(q_main, v, mask)
    att_sub = net.attend(q_sub, v, mask)
    y_main = torch.tensor([p.main_target for p in pairs], dtype=torch.int64)
    y_sub = torch.tensor([p.sub_target for p in pairs], dtype=torch.int64)
    logits_sub, _ = net.answer(q_sub, v, att_sub)
    if method == "squint":
        logits_main_sub, _ = net.answer(q_main, v, att_sub)
        return squint_loss(
            att_main,
            att_sub,
            mask,
            logits_main_sub,
            y_main,
            logits_sub,
            y_sub,
            options["lambda1"],
            options["lambda2"],
        )
    logits_main, _ = net.answer(q_main, v, att_main)
    return subq_loss(logits_main, y_main, logits_sub, y_sub)


def finetune_model(
    model: Any,
    data: Any,
    intro: Introspect,
    method: str,
    *,
    split: str = "train",
    seed: int = 0,
    progress: bool = True,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Fine-tune ``model`` (in place) with ``method`` on the pairs of ``intro`` (module
    docstring), mixing in questions of ``split`` of ``data`` (VQA v2). Returns the log:
    ``{method, options, pairs, pairs_left_out, history: [{epoch, loss, ...terms}],
    seconds}``; a pair whose main and sub answers are both outside the model's answer
    vocabulary teaches nothing and is left out (``pairs_left_out``)."""
    import torch

    from vqadiag.models.training import torch_training_settings

    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    for needed in ("encode", "objects", "attend", "answer"):
        if not hasattr(model.net, needed):
            raise DataError(
                "--model", f"model {model.name!r} has no attention to fine-tune (needs updn)"
            )
    opts = {**FINETUNE_DEFAULTS, **check_finetune_options(options or {}, method)}
    if method != "squint":  # the log records what the loss reads
        opts = {k: v for k, v in opts.items() if k not in SQUINT_ONLY}
    start = time.perf_counter()
    questions = data.questions(split)
    vocab = {a: i for i, a in enumerate(model.answer_vocab)}
    questions_path = data.questions_path(split)

    def image_of(vqa_image: str, qid: str) -> str:
        return data.feature_image_id(vqa_image, questions_path, qid)

    every_pair = introspect_pairs(intro, questions, vocab, image_of)
    pairs = [p for p in every_pair if p.main_target >= 0 or p.sub_target >= 0]
    if not pairs:
        raise DataError(None, "no introspect pair has an answer the model knows")
    original = [q for q in questions if questions[q].get("answer") in vocab]
    original_targets = np.array([vocab[questions[q]["answer"]] for q in original], np.int64)
    history: list[dict[str, Any]] = []
    with torch_training_settings(model.options.get("threads")):
        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        net = model.net
        optimizer = torch.optim.SGD(net.parameters(), lr=opts["lr"], momentum=opts["momentum"])
        bs = int(opts["batch_size"])
        epochs = int(opts["epochs"])
        n_batches = (len(pairs) + bs - 1) // bs
        bar = progress_bar(progress, metrics="loss {task.fields[loss]:.3f}")
        with bar:
            task = bar.add_task(f"{method} epoch 1/{epochs}", total=epochs * n_batches, loss=0.0)
            for epoch in range(1, epochs + 1):
                bar.update(task, description=f"{method} epoch {epoch}/{epochs}")
                net.train()
                order = rng.permutation(len(pairs))
                sums: dict[str, float] = {}
                seen = 0
                for b in range(n_batches):
                    chunk = [pairs[i] for i in order[b * bs : (b + 1) * bs]]
                    loss, terms = pair_loss(model, data, chunk, method, opts)
                    n_mix = round(opts["mix"] * len(chunk))
                    if n_mix and original:
                        pick = rng.integers(0, len(original), size=n_mix)
                        mixed = data.batch(split, [original[i] for i in pick])
                        visual = data.object_input(mixed.image_ids, model.options["max_objects"])
                        logits, _ = model.forward(mixed, visual)
                        orig = cross_entropy(logits, torch.from_numpy(original_targets[pick]))
                        loss = loss + orig
                        terms["original"] = orig.item()
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    if model.options.get("grad_clip"):
                        torch.nn.utils.clip_grad_norm_(net.parameters(), model.options["grad_clip"])
                    optimizer.step()
                    terms["loss"] = loss.item()
                    for key, value in terms.items():
                        sums[key] = sums.get(key, 0.0) + value * len(chunk)
                    seen += len(chunk)
                    bar.update(task, advance=1, loss=sums["loss"] / seen)
                history.append(
                    {
                        "epoch": epoch,
                        **{k: v / seen for k, v in sums.items()},
                        "seconds": time.perf_counter() - start,
                    }
                )
    net.eval()
    model._fingerprint = None
    return {
        "method": method,
        "options": opts,
        "pairs": len(pairs),
        "pairs_left_out": len(every_pair) - len(pairs),  # neither answer in the vocabulary
        "history": history,
        "seconds": time.perf_counter() - start,
        "seed": seed,
    }
