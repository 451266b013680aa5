"""The two training stages of the chat VLM (docs/chat-vlm.md, "Training").

1. :func:`pretrain_vision`: the CLIP vision tower learns, patch by patch, the name
   (cross-entropy) and the attributes (binary cross-entropy summed over the attributes)
   of the object the scene graph puts under each patch
   (:func:`~vqadiag.models.reference.chat_vlm_data.patch_labels`), through two linear
   heads on the hidden states LLaVA reads (the last layer's, class token dropped); the
   heads are thrown away afterwards. With ``pretrain_object_loss`` w > 0 the loss adds
   w × the same two terms on each object's mean feature: the mean of the hidden states
   of the patches labelled with that object (:func:`object_groups`, :func:`object_loss`),
   as an attention head that spreads over an object's patches reads them; the ``loss``
   the stage reports includes that term.
2. :func:`train_language`: the tower is frozen (all but its last ``tune_tower_layers``
   layers), each training image is encoded once (up to those layers), and the projector
   and the Llama learn to generate the answer after the prompt (teacher forcing;
   cross-entropy on the answer's tokens and the end-of-sequence token only), with
   ``ground_tokens`` also where one attention head looks (:func:`answer_loss`).
   A seeded fraction ``text_only`` of the questions of each epoch is asked without its
   image (the text alone, as the no-image condition asks it), so the model has a
   question-only answer of its own.

The forward pass of stage 2 is LLaVA's own: the projected patch features replace the
``<image>`` tokens' embeddings, then the Llama and its head. Both stages use AdamW with
a linear warm-up over the first 5% of steps and a cosine decay to 0, one generator seeded
with the run's seed for the order and the text-only draws.

Both run on the model's device (:func:`model_device`). Stage 1 moves every image's pixels
there once, and labels, mirrors and moves them there; stage 2 builds its batches on the
CPU and moves them there a batch at a time, next to the encoded features.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vqadiag.models.reference import chat_vlm_data as cdata
from vqadiag.models.reference.chat_vlm_build import IMAGE, PAD
from vqadiag.models.reference.chat_vlm_data import Example
from vqadiag.progress import progress_bar

if TYPE_CHECKING:
    import torch


def _schedule(optimizer: Any, total: int) -> Any:
    """Linear warm-up over 5% of ``total`` steps, then a cosine decay to 0."""
    import math

    import torch

    warm = max(1, total // 20)

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, (step - warm) / max(1, total - warm))))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def model_device(model: Any) -> torch.device:
    """The device the model's weights are on."""
    return next(model.parameters()).device


def tower_features(model: Any, pixels: torch.Tensor) -> torch.Tensor:
    """The hidden states LLaVA reads: the tower's last layer, class token dropped."""
    out = model.model.vision_tower(pixels, output_hidden_states=True)
    return out.hidden_states[-1][:, 1:]


def pretrain_vision(
    model: Any,
    pixels: torch.Tensor,
    labeller: Callable[..., tuple[np.ndarray, np.ndarray]],
    n_names: int,
    options: Mapping[str, Any],
    rng: np.random.Generator,
    progress: bool = False,
    held_out: tuple[torch.Tensor, np.ndarray] | None = None,
    heads: torch.nn.ModuleList | None = None,
    checkpoint: tuple[str, Mapping[str, str]] | None = None,
) -> dict[str, float]:
    """Stage 1 (module docstring); returns the last epoch's ``{loss, name_acc,
    object_name_acc}`` and, with ``held_out`` (pixels and their patch names over the
    same name index), ``held_out_name_acc`` and ``held_out_object_name_acc`` after the
    last epoch (:func:`name_accuracy`). ``heads``: the name and attribute heads to train
    (:func:`pretraining_heads`; fresh ones, thrown away after, when None).

    ``labeller`` (``(flips, shifts) → (names, attrs)``, arrays or tensors: a
    :class:`~vqadiag.models.reference.chat_vlm_box_labels.BoxTable` on the model's
    device, or :func:`~vqadiag.models.reference.chat_vlm_data.scene_labeller`) labels the
    patches of every image; the pixels move to the model's device once;
    with ``pretrain_augment`` each epoch shows every image mirrored left to right with
    probability ½ and moved by up to half a patch each way (drawn from ``rng``), labelled
    as it is shown. ``checkpoint`` (a file and the digests of the pixels and labels,
    :func:`~vqadiag.models.reference.chat_vlm_pretrain_checkpoint.key_parts`): the state
    is written there after every epoch and a run of the same pre-training goes on from
    it; ``resumed_epochs`` then says how many epochs it read."""
    import torch

    from vqadiag.models.reference import chat_vlm_pretrain_checkpoint as saved_state

    epochs, batch = int(options["pretrain_epochs"]), int(options["pretrain_batch_size"])
    device = model_device(model)
    pixels = pixels.to(device)
    labels = _labels_on(labeller(), device)
    heads = pretraining_heads(model, n_names, labels[1].shape[-1]) if heads is None else heads
    tower = model.model.vision_tower
    params = [p for p in tower.parameters() if p.requires_grad] + list(heads.parameters())
    optimizer = torch.optim.AdamW(params, lr=float(options["pretrain_lr"]), weight_decay=0.01)
    per_epoch = -(-len(pixels) // batch)
    scheduler = _schedule(optimizer, epochs * per_epoch)
    stats = {"loss": 0.0, "name_acc": 0.0, "object_name_acc": 0.0}
    saver, done = None, 0
    if checkpoint is not None:
        parts = saved_state.key_parts(
            checkpoint[1], [tower, heads], model.config.vision_config, options, rng, device
        )
        saver = saved_state.PretrainCheckpoint(checkpoint[0], parts)
        saved = saver.load()
        if saved is not None:
            trained = (tower, heads, optimizer, scheduler)
            done, stats = saved_state.restore(saver, saved, trained, rng)
    run = _EpochRun(model, heads, optimizer, scheduler, options, labeller, labels)
    tower.train()
    with progress_bar(progress, metrics="acc {task.fields[acc]:.1f}%") as bar:
        task = bar.add_task(
            "chat-vlm: pre-training the vision tower", total=epochs * per_epoch,
            completed=done * per_epoch, acc=stats["name_acc"],
        )  # fmt: skip

        def tick(hits: _NameHits | None) -> None:  # reading the counts waits for the device
            fields = {} if hits is None or bar.disable else {"acc": hits.rates()[0]}
            bar.update(task, advance=1, **fields)

        for epoch in range(done, epochs):
            stats = run.epoch(pixels, rng, tick)
            if saver is not None:
                trained = (tower, heads, optimizer, scheduler)
                saver.save(saved_state.training_state(epoch + 1, trained, rng, stats))
    tower.eval()
    if checkpoint is not None:
        stats = {**stats, "resumed_epochs": done}
    if held_out is not None:
        stats.update(name_accuracy(model, heads[0], *held_out).stats("held_out_"))
    return stats


class _EpochRun:
    """One pre-training epoch at a time (:func:`pretrain_vision`)."""

    def __init__(
        self, model: Any, heads: torch.nn.ModuleList, optimizer: Any, scheduler: Any,
        options: Mapping[str, Any], labeller: Callable[..., tuple[Any, Any]],
        labels: tuple[torch.Tensor, torch.Tensor],
    ) -> None:  # fmt: skip
        self.model, self.heads = model, heads
        self.optimizer, self.scheduler = optimizer, scheduler
        self.batch = int(options["pretrain_batch_size"])
        self.augment = bool(options.get("pretrain_augment"))
        self.reach = int(options["patch_size"]) // 2
        self.object_weight = float(options.get("pretrain_object_loss") or 0.0)
        self.labeller = labeller
        self.device = model_device(model)
        self.labels = labels  # the unmoved images' (the augmented ones are relabelled)

    def epoch(
        self, pixels: torch.Tensor, rng: np.random.Generator,
        tick: Callable[[_NameHits | None], None],
    ) -> dict[str, float]:  # fmt: skip
        """Every image once, in an order (and with moves) drawn from ``rng``; returns the
        epoch's ``{loss, name_acc, object_name_acc}``. ``tick(hits)`` after each step
        (the running counts every 16 steps, else None)."""
        import torch

        order = rng.permutation(len(pixels))
        name_t, attr_t = self.labels
        if self.augment:
            size = pixels.shape[-1]
            flips = rng.random(len(pixels)) < 0.5
            shifts = rng.integers(-self.reach, self.reach + 1, size=(len(pixels), 2))
            name_t, attr_t = _labels_on(self.labeller(flips, shifts / size), self.device)
        total, hits = pixels.new_zeros((), dtype=torch.float64), _NameHits()
        for step, start in enumerate(range(0, len(order), self.batch)):
            chosen = order[start : start + self.batch]
            idx = torch.from_numpy(chosen).to(self.device)
            shown = pixels[idx]
            if self.augment:
                shown = cdata.augment(shown, flips[chosen], shifts[chosen])
            feats = tower_features(self.model, shown)
            names, attrs = name_t[idx], attr_t[idx]
            loss, logits = label_loss(self.heads, feats, names, attrs)
            if self.object_weight > 0:
                groups = object_groups(names, attrs)
                loss = loss + self.object_weight * object_loss(
                    self.heads, feats, names, attrs, groups
                )
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.scheduler.step()
            total += loss.detach().double() * len(idx)
            hits.add(logits.argmax(-1), names)
            tick(hits if step % 16 == 0 else None)
        return {"loss": float(total) / len(order), **hits.stats("")}


def _labels_on(labels: tuple[Any, Any], device: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """A labeller's names and attribute indicators (arrays, or tensors anywhere) as
    tensors on ``device``."""
    import torch

    names, attrs = labels
    return torch.as_tensor(names, device=device), torch.as_tensor(attrs, device=device)


def object_groups(names: Any, attrs: Any) -> torch.Tensor:
    """``(B, P)`` object ids of patches labelled with ``names`` (``(B, P)``) and ``attrs``
    (``(B, P, A)`` attribute indicators), arrays or tensors: within an image, the object
    patches (name > 0) with the same name and the same attributes share an id, numbered
    from 0 across the batch in image order, within an image in the order of the sorted
    (name, attribute indicators) keys; background patches get −1. Two objects of one image
    with the same name and attributes share an id, and their labels, too. A tensor on the
    labels' device (the CPU for arrays)."""
    import torch

    names = torch.as_tensor(names)
    attrs = torch.as_tensor(attrs, device=names.device)
    out = torch.full(names.shape, -1, dtype=torch.int64, device=names.device)
    on = names > 0
    if on.any():
        image = torch.arange(len(names), device=names.device)[:, None].expand_as(names)
        keys = torch.cat([image[on, None], names[on, None], (attrs[on] > 0).long()], dim=1)
        out[on] = torch.unique(keys, dim=0, return_inverse=True)[1]
    return out


def object_means(feats: torch.Tensor, groups: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean of ``feats`` (``(B, P, D)``) over the patches of each object of ``groups``
    (:func:`object_groups`; ``(O, D)``, by id), and for each object the position of its
    first patch among all ``B·P`` patches, row-major (``(O,)``, on ``feats``' device:
    where its labels are read). None of them is an object: ``(0, D)`` and ``(0,)``."""
    import torch

    flat = torch.as_tensor(groups, device=feats.device).reshape(-1)
    on = torch.nonzero(flat >= 0).reshape(-1)
    ids = flat[on]
    count = int(ids.max()) + 1 if len(ids) else 0  # ids run 0 … O − 1
    states = feats.flatten(0, 1)[on]
    sums = states.new_zeros(count, states.shape[-1]).index_add(0, ids, states)
    sizes = states.new_zeros(count).index_add(0, ids, states.new_ones(len(ids)))
    first = torch.full((count,), flat.numel(), dtype=torch.int64, device=feats.device)
    first = first.scatter_reduce(0, ids, on, reduce="amin")
    return sums / sizes[:, None], first


def object_loss(
    heads: torch.nn.ModuleList,
    feats: torch.Tensor,
    names: torch.Tensor,
    attrs: torch.Tensor,
    groups: Any,
) -> torch.Tensor:
    """The pre-training loss on objects (module docstring, stage 1): each object of
    ``groups`` (:func:`object_groups`) read through the heads at the mean of its patches'
    ``feats`` (:func:`object_means`), the cross-entropy on its name plus the binary
    cross-entropy summed over its attributes (``names`` ``(B, P)``, ``attrs`` ``(B, P,
    A)``, read at one of its patches), averaged over the objects; 0 when the batch has
    none."""
    pooled, first = object_means(feats, groups)
    if not len(pooled):
        return feats.new_zeros(())
    return label_loss(heads, pooled, names.flatten()[first], attrs.flatten(0, 1)[first])[0]


def label_loss(
    heads: torch.nn.ModuleList, feats: torch.Tensor, names: torch.Tensor, attrs: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Stage 1's loss on ``feats`` (``(..., D)``: patches or objects) labelled ``names``
    (``(...)``) and ``attrs`` (``(..., A)``): the name head's cross-entropy plus the
    attribute head's binary cross-entropy summed over the attributes, each averaged over
    the rows; and the name head's logits."""
    import torch

    logits = heads[0](feats)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, -2), names.flatten())
    bce = torch.nn.functional.binary_cross_entropy_with_logits(
        heads[1](feats), attrs, reduction="none"
    )
    return loss + bce.sum(-1).mean(), logits


def pretraining_heads(model: Any, n_names: int, n_attrs: int) -> torch.nn.ModuleList:
    """The two linear heads stage 1 trains on the tower's features, on its device: the
    patch's name (``n_names`` logits) and its attributes (``n_attrs`` logits)."""
    import torch

    dim = model.config.vision_config.hidden_size
    return torch.nn.ModuleList([torch.nn.Linear(dim, n_names), torch.nn.Linear(dim, n_attrs)]).to(
        model_device(model)
    )


class _NameHits:
    """Patches named right, over all patches and over those with an object (name ≠ 0)."""

    def __init__(self) -> None:
        self.count = 0
        self.right: Any = 0  # counts on the device, read only by rates()
        self.object_right: Any = 0
        self.objects: Any = 0

    def add(self, predicted: torch.Tensor, truth: torch.Tensor) -> None:
        hit, on_object = predicted == truth, truth > 0
        self.right = self.right + hit.sum()
        self.count += hit.numel()
        self.object_right = self.object_right + (hit & on_object).sum()
        self.objects = self.objects + on_object.sum()

    def rates(self) -> tuple[float, float]:
        """Percent right over all patches, and over the patches with an object."""
        right, object_right, objects = (
            int(v) for v in (self.right, self.object_right, self.objects)
        )
        return 100.0 * right / max(1, self.count), 100.0 * object_right / max(1, objects)

    def stats(self, prefix: str) -> dict[str, float]:
        both = self.rates()
        return {f"{prefix}name_acc": both[0], f"{prefix}object_name_acc": both[1]}


def name_accuracy(
    model: Any, head: torch.nn.Module, pixels: torch.Tensor, names: np.ndarray
) -> _NameHits:
    """How often the pre-trained tower and its name head name each patch of ``pixels``
    right (``names``: ``(I, P)`` indices over the training split's name index)."""
    import torch

    hits = _NameHits()
    if len(pixels):
        with torch.no_grad():
            predicted = head(encode_images(model, pixels)).argmax(-1)
        hits.add(predicted, torch.from_numpy(names).to(predicted.device))
    return hits


def encode_images(
    model: Any, pixels: torch.Tensor, chunk: int = 128, tuned: int = 0
) -> torch.Tensor:
    """``(I, P, D)`` tower features of every image, computed once (the tower is frozen),
    on the model's device; with ``tuned`` K > 0 the hidden states that enter the tower's
    last K layers instead, class token kept (``(I, P + 1, D)``; :func:`image_features`
    finishes them)."""
    import torch

    device = model_device(model)

    def encode(part: torch.Tensor) -> torch.Tensor:
        part = part.to(device)
        if not tuned:
            return tower_features(model, part)
        out = model.model.vision_tower(part, output_hidden_states=True)
        return out.hidden_states[-1 - tuned]

    with torch.no_grad():
        parts = [encode(pixels[s : s + chunk]) for s in range(0, len(pixels), chunk)]
    return torch.cat(parts)


def image_features(model: Any, states: torch.Tensor, tuned: int) -> torch.Tensor:
    """The features LLaVA reads from :func:`encode_images`' ``states``: as they are, or
    through the tower's last ``tuned`` layers (which then learn), class token dropped."""
    if not tuned:
        return states
    for layer in model.model.vision_tower.encoder.layers[-tuned:]:
        states = layer(states, None)
    return states[:, 1:]


def _batch_tensors(
    chosen: Sequence[Example], text_only: Sequence[bool]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``labels`` (−100 outside the
    answer; position t holds the token to predict after t)."""
    import torch

    seqs = []
    for ex, blind in zip(chosen, text_only, strict=True):
        prompt = ex.text_only if blind else ex.with_image
        seqs.append((prompt, ex.answer))
    length = max(len(p) + len(a) for p, a in seqs)
    ids = torch.full((len(seqs), length), PAD, dtype=torch.long)
    mask = torch.zeros((len(seqs), length), dtype=torch.long)
    labels = torch.full((len(seqs), length), -100, dtype=torch.long)
    for row, (prompt, answer) in enumerate(seqs):
        full = (*prompt, *answer)
        ids[row, : len(full)] = torch.tensor(full)
        mask[row, : len(full)] = 1
        labels[row, len(prompt) - 1 : len(full) - 1] = torch.tensor(answer)
    return ids, mask, labels


def answer_loss(
    model: Any,
    features: torch.Tensor,
    chosen: Sequence[Example],
    text_only: Sequence[bool],
    ground: tuple[float, int, int] | None = None,
    tuned: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, float | None]:
    """Cross-entropy of the answers' tokens, whether each answer's every token is the
    argmax under teacher forcing (``(B,)`` booleans, on the model's device: the answers
    greedy decoding gives exactly) and, with ``ground``, the mean attention mass
    Σ_{k ∈ K_q} α_qk of the pairs (None without them), for one batch.

    With ``ground`` (weight λ, layer, head) the loss adds λ · L_ground, where
    ``L_ground = mean over the batch's pairs (q, K_q) of −log(Σ_{k ∈ K_q} α_qk + 10⁻⁶)``:
    α the attention of that head of that Llama layer (eager attention), the pairs those
    the question's annotations ask for
    (:func:`~vqadiag.models.reference.chat_vlm_data.grounding`: a tied question token
    and its object's image tokens, or the other way round with the question first; a
    token in two annotations, or a patch in two annotated boxes, counts once per pair;
    with ``ground_from=answer``
    :func:`~vqadiag.models.reference.chat_vlm_data.answer_grounding`: the prompt's last
    position and the image tokens of every annotated object; docs/chat-vlm.md,
    "Training"); questions asked without their image have none."""
    import torch

    device = model_device(model)
    ids, mask, labels = (t.to(device) for t in _batch_tensors(chosen, text_only))
    inner = model.model
    embeds = inner.language_model.get_input_embeddings()(ids)
    rows = [ex.image for ex, blind in zip(chosen, text_only, strict=True) if not blind]
    if rows:
        shown = image_features(model, features[torch.tensor(rows)].to(device), tuned)
        projected = inner.multi_modal_projector(shown)
        slots = (ids == IMAGE).unsqueeze(-1).expand_as(embeds)
        embeds = embeds.masked_scatter(slots, projected.to(embeds.dtype))
    tied = _grounding_pairs(chosen, text_only, ids.shape[1]) if ground else None
    if tied is not None:
        tied = tuple(t.to(device) for t in tied)
    out = inner.language_model(
        inputs_embeds=embeds, attention_mask=mask, output_attentions=tied is not None
    )
    hidden = out.last_hidden_state
    where = labels != -100
    logits = model.lm_head(hidden[where])
    target = labels[where]
    loss = torch.nn.functional.cross_entropy(logits, target)
    mass = None
    if tied is not None:
        weight, layer, head = ground
        batch_rows, positions, on = tied
        alpha = out.attentions[layer][batch_rows, head, positions]
        mass = (alpha * on).sum(-1)
        loss = loss + weight * -torch.log(mass + 1e-6).mean()
        mass = float(mass.detach().mean())
    hit = torch.zeros_like(labels, dtype=torch.bool)
    hit[where] = logits.argmax(-1) == target
    return loss, (hit | ~where).all(-1).detach(), mass


def _grounding_pairs(
    chosen: Sequence[Example], text_only: Sequence[bool], length: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """The batch rows and query positions of the grounding pairs of the questions asked
    with their image, and a ``(n, length)`` 0/1 mask of each query's key positions; None
    when there are none."""
    import torch

    pairs = [
        (row, query, keys)
        for row, (ex, blind) in enumerate(zip(chosen, text_only, strict=True))
        if not blind
        for query, keys in ex.grounded
    ]
    if not pairs:
        return None
    on = torch.zeros((len(pairs), length))
    for i, (_, _, keys) in enumerate(pairs):
        on[i, list(keys)] = 1.0
    rows = torch.tensor([p[0] for p in pairs])
    positions = torch.tensor([p[1] for p in pairs])
    return rows, positions, on


def train_language(
    model: Any,
    features: torch.Tensor,
    train: Sequence[Example],
    options: Mapping[str, Any],
    rng: np.random.Generator,
    progress: bool = False,
) -> list[dict[str, float]]:
    """Stage 2 (module docstring); returns ``[{epoch, loss, acc, seconds}]`` (acc: answers right
    under teacher forcing, percent), with ``ground_tokens`` (not ``blind``) also
    ``ground_mass``: the mean over the epoch's batches of the batch's mean attention mass
    of the pairs (:func:`answer_loss`)."""
    import torch

    tuned = int(options["tune_tower_layers"])
    tower = model.model.vision_tower
    tower.requires_grad_(False)
    if tuned:
        tower.encoder.layers[-tuned:].requires_grad_(True)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        params, lr=float(options["lr"]), weight_decay=float(options["weight_decay"])
    )
    epochs, batch = int(options["epochs"]), int(options["batch_size"])
    steps = epochs * -(-len(train) // batch)
    scheduler = _schedule(optimizer, steps)
    share = float(options["text_only"])
    weight = float(options["ground_tokens"])
    grounded = weight > 0 and not options.get("blind")
    ground = (weight, int(options["ground_layer"]), 0) if grounded else None
    history = []
    model.train()
    with progress_bar(
        progress, metrics="loss {task.fields[loss]:.3f}  acc {task.fields[acc]:.1f}%"
    ) as bar:
        task = bar.add_task("chat-vlm: training", total=steps, loss=0.0, acc=0.0)
        for epoch in range(epochs):
            began = time.perf_counter()
            order = rng.permutation(len(train))
            blind = rng.random(len(train)) < share
            total = right = count = 0.0
            masses: list[float] = []
            for start in range(0, len(order), batch):
                idx = order[start : start + batch]
                chosen = [train[i] for i in idx]
                asked_blind = [bool(blind[i]) and bool(train[i].text_only) for i in idx]
                loss, exact, mass = answer_loss(model, features, chosen, asked_blind, ground, tuned)
                if mass is not None:
                    masses.append(mass)
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, float(options["grad_clip"]))
                optimizer.step()
                scheduler.step()
                total += float(loss.detach()) * len(idx)
                right += int(exact.sum())
                count += len(idx)
                bar.update(task, advance=1, loss=total / count, acc=100.0 * right / count)
            seconds = time.perf_counter() - began
            history.append(
                {"epoch": epoch + 1, "loss": total / count, "acc": 100.0 * right / count,
                 "seconds": round(seconds, 1)}
            )  # fmt: skip
            if ground:
                history[-1]["ground_mass"] = float(np.mean(masses)) if masses else None
    model.eval()
    return history
