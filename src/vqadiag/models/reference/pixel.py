"""The pixel reference model (docs/models.md, "The pixel model"). By default it reads
crops of the detected boxes with a pre-trained, then frozen crop CNN, and answers with the
token-grounded head (``encoder`` ``boxes``, ``crop_pooling`` ``layout``,
``pretrain_epochs`` 6, ``freeze_encoder``, ``attribute_loss`` ``sum``, ``head``
``tokens``, ``lr_schedule`` ``cosine``; last paragraph). With
``encoder`` ``grid`` it is the first pixel model, described first: a small CNN grid
encoder, a GRU question encoder and top-down attention over grid cells.

* Image: resized to ``image_size`` × ``image_size`` (bilinear), scaled to [−1, 1]; four
  convolutions (5×5 stride 2, then 3×3 stride 2, 3×3 stride 2, 3×3 stride 1; ReLU,
  ``channels`` · (1, 2, 4, 4), batch norm after the first three) give a G × G grid
  (G = image_size / 8) of cell features v_c, each with its normalised centre appended.
* Question: word embeddings + GRU (the question-only model's encoder), state q.
* Attention: ``α = softmax_cells(wᵀ tanh(W_v v_c + W_q q))``; ``v̂ = Σ_c α_c v_c``;
  ``logits = MLP(ReLU(U_q q) ⊙ ReLU(U_v v̂))`` over the answer vocabulary.
* Per-box importance (for the report's attention figures and the importance suite):
  a detected box's score is ``Σ_c α_c · |cell_c ∩ box| / |cell_c|``, the attention mass
  on the part of the grid the box covers, in the input's pixel coordinates.

Training groups the questions of one image in the same batch, so each image goes
through the CNN once per batch (an image has about seven questions in the synthetic
world); everything else is :func:`vqadiag.models.training.fit`. When the training
split has scene graphs, two more signals come from them:

* the grid encoder is supervised the way a detector's features are pre-trained on
  Visual Genome (UpDn's bottom-up features): each cell predicts the name
  (cross-entropy) and the attributes (binary cross-entropy over the ``aux_attributes``
  most frequent) of the object whose annotated box is the smallest that contains its
  centre ("background" when none), weight ``aux_weight``;
* the attention is supervised by the objects the question's GQA ``annotations`` name
  (question, answer, full answer): ``L_att = −log Σ_{c ∈ T} α_c`` over the cells T whose
  centre lies in one of their boxes (the cell of a box's centre when none does), for
  the questions that name an object, weight ``attention_supervision`` (as HINT and
  similar grounding supervision do with human attention).

The loss is ``CE(answer) + aux_weight · (CE(names) + s · BCE(attributes)) +
attention_supervision · L_att``, BCE averaged over the units and the attributes; s = 1
(``attribute_loss`` ``mean``, the grid's) or the number of attributes (``sum``, the
default with the box encoder: each attribute weighs as one binary label of the unit).

``head`` ``tokens`` swaps the attention and fusion above for the token-grounded head
(:func:`build_token_net`): every question token attends over the cells. A token that
the question's ``annotations`` tie to objects is then supervised as well, by
``token_supervision · L_tok``, where ``L_tok = −log Σ_{c ∈ T_t} α_tc`` over the cells
``T_t`` of the token's objects, averaged over the tied tokens.

``encoder`` ``boxes`` replaces the grid by the detected boxes, each cut from the stored
image and encoded by a crop CNN (:mod:`vqadiag.models.reference.pixel_boxes`); the heads
then attend over boxes, and ``pretrain_epochs`` first trains the crop CNN on the boxes'
names and attributes (:func:`~vqadiag.models.reference.pixel_objective.pretrain_box_encoder`).
``crop_pooling`` ``layout`` flattens the crop CNN's last map instead of averaging it
(where a class's mark or a state's badge sits counts), and ``freeze_encoder`` keeps the
pre-trained crop CNN fixed for the rest of training, so each training box is encoded
once (bottom-up features are likewise trained on object labels first and then read by
the VQA model as they are).

Where the parts live: the networks in :mod:`vqadiag.models.networks.pixel`, the loss with
scene graphs in :mod:`vqadiag.models.reference.pixel_objective`, the box crops and the
crop CNN's pre-training in :mod:`vqadiag.models.reference.pixel_boxes`; this module holds
the options and :class:`PixelModel`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

import numpy as np

from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError
from vqadiag.models.base import Capabilities, PixelInput, QuestionBatch
from vqadiag.models.option_checks import COUNT, POSITIVE, WEIGHT, Number, check_numbers
from vqadiag.models.reference.pixel_boxes import (
    CROP_POOLINGS,
    ENCODERS,
    BoxCropInput,
    TrainingCrops,
    box_crops,
    crops_tensor,
)
from vqadiag.models.reference.pixel_objective import (
    GridObjective,
    grid_vocab,
    pretrain_box_encoder,
)
from vqadiag.models.run_configs import PIXEL_BEFORE_BOXES
from vqadiag.models.training import (
    LR_SCHEDULES,
    TRAINING_DEFAULTS,
    TorchModel,
    spatial_features,
)

NAME = "pixel"


def box_cell_overlap(boxes: np.ndarray, grid: int, size: int) -> np.ndarray:
    """``(B, N, G·G)``: the fraction of each grid cell covered by each box.

    ``boxes`` (B, N, 4) are corners in the pixels of a ``size`` × ``size`` input; cell
    (i, j) (row i, column j) spans ``[j·s, (j+1)·s) × [i·s, (i+1)·s)`` with s = size / G.
    """
    b = np.asarray(boxes, np.float64)
    step = size / grid
    edges = np.arange(grid + 1) * step
    lo, hi = edges[:-1], edges[1:]
    wx = np.clip(np.minimum(b[..., 2:3], hi) - np.maximum(b[..., 0:1], lo), 0, None) / step
    wy = np.clip(np.minimum(b[..., 3:4], hi) - np.maximum(b[..., 1:2], lo), 0, None) / step
    return (wy[..., :, None] * wx[..., None, :]).reshape(*b.shape[:2], grid * grid)


#: ``head`` option values: top-down attention over the cells, or token-grounded
HEADS = ("grid", "tokens")

#: What a config without these options means: it was saved before they existed, by a grid
#: run (the pixel model's :attr:`~PixelModel.omitted_options`; docs in ``run_configs``)
OPTIONS_BEFORE_BOXES: dict[str, Any] = PIXEL_BEFORE_BOXES
#: What ``encoder`` ``grid`` changes in the defaults, unless given: the grid's own head and
#: no pre-training (``-o encoder=grid`` is the pixel model as it was before the box encoder)
GRID_DEFAULTS: dict[str, Any] = {
    k: OPTIONS_BEFORE_BOXES[k]
    for k in (
        "head", "pretrain_epochs", "freeze_encoder", "crop_pooling", "attribute_loss",
        "lr_schedule",
    )
}  # fmt: skip
#: the box encoder's options that a grid run cannot use
BOX_ONLY = ("crop_pooling", "pretrain_epochs", "freeze_encoder")

#: the pixel model's own number options (the shared ones: ``TRAINING_NUMBERS``)
PIXEL_NUMBERS: dict[str, Number] = {
    "channels": POSITIVE,
    "attention_dim": POSITIVE,
    "aux_attributes": COUNT,
    "aux_weight": WEIGHT,
    "attention_supervision": WEIGHT,
    "token_supervision": WEIGHT,
    "crop_size": Number(low=4),
    "pretrain_epochs": COUNT,
}

#: ``attribute_loss`` values: the units' attribute BCE averaged over the attributes too,
#: or summed over them (each attribute one binary label of the unit)
ATTRIBUTE_LOSSES = ("mean", "sum")


def pixel_net_config(n_words: int, n_answers: int, options: Mapping[str, Any]) -> Any:
    """The :class:`~vqadiag.models.networks.pixel.PixelNetConfig` of the model's options."""
    from vqadiag.models.networks.pixel import PixelNetConfig

    return PixelNetConfig(
        n_words=n_words,
        n_answers=n_answers,
        embedding_dim=options["embedding_dim"],
        hidden_dim=options["hidden_dim"],
        attention_dim=int(options["attention_dim"]),
        dropout=options["dropout"],
        channels=int(options["channels"]),
        image_size=int(options["image_size"]),
        encoder=options.get("encoder", "grid"),
        crop_pooling=options.get("crop_pooling", "mean"),
        crop_size=int(options.get("crop_size", OPTIONS_BEFORE_BOXES["crop_size"])),
        aux_sizes=tuple(int(x) for x in options["aux_sizes"]),
    )


def build_pixel_net(n_words: int, n_answers: int, options: Mapping[str, Any]) -> Any:
    """The network of the module docstring (``head`` ``grid``,
    :class:`~vqadiag.models.networks.pixel.PixelNet`), or the token-grounded one (``head``
    ``tokens``, :func:`build_token_net`)."""
    from vqadiag.models.networks.pixel import PixelNet

    if options.get("head", "grid") == "tokens":
        return build_token_net(n_words, n_answers, options)
    return PixelNet(pixel_net_config(n_words, n_answers, options))


def build_token_net(n_words: int, n_answers: int, options: Mapping[str, Any]) -> Any:
    """The token-grounded network (docs/models.md, "The pixel model";
    :class:`~vqadiag.models.networks.pixel.TokenPixelNet`): the same cells as the grid
    network; every question token queries them."""
    from vqadiag.models.networks.pixel import TokenPixelNet

    return TokenPixelNet(pixel_net_config(n_words, n_answers, options))


#: threads that cut one batch's box crops in :meth:`PixelModel.prepare_pixels` (2: the
#: runner's worker and the core the network leaves while it waits for the first batch)
CUT_THREADS = 2

#: crops per forward pass when a frozen encoder's features are computed
ENCODE_BATCH = 512


class PixelModel(TorchModel):
    """Reads pixels. Its attention gives per-box importance: over the boxes themselves
    (the box encoder, the default), or over grid cells, by overlap (``encoder`` ``grid``)."""

    name: ClassVar[str] = NAME
    capabilities: ClassVar[Capabilities] = Capabilities(
        visual="pixels", object_masking=False, attention=True, gradients=False
    )
    uses_objects: ClassVar[bool] = False
    reads_boxes: ClassVar[bool] = True
    defaults: ClassVar[dict[str, Any]] = {
        **TRAINING_DEFAULTS,
        "epochs": 8,
        "batch_size": 64,
        "image_size": 128,
        "channels": 24,
        "attention_dim": 128,
        "aux_weight": 1.0,
        "aux_attributes": 64,
        "aux_sizes": [0, 0],
        "dropout": 0.3,
        "weight_decay": 1e-3,
        "attention_supervision": 1.0,
        "head": "tokens",
        "token_supervision": 1.0,
        "encoder": "boxes",
        "crop_size": 24,
        "pretrain_epochs": 6,
        "freeze_encoder": True,
        "crop_pooling": "layout",
        "attribute_loss": "sum",
        "lr_schedule": "cosine",
    }
    #: runs saved before the token-grounded head or the box encoder existed are grid runs
    omitted_options: ClassVar[dict[str, Any]] = OPTIONS_BEFORE_BOXES

    @property
    def boxes(self) -> bool:
        """Whether the model reads crops of the detected boxes (``encoder`` ``boxes``)."""
        return self.options.get("encoder", "grid") == "boxes"

    @property
    def input_size(self) -> tuple[int, int] | None:
        """(width, height) the model reads; the data path resizes to it (None: the stored
        size, which the box encoder crops from)."""
        if self.boxes:
            return None
        size = int(self.options["image_size"])
        return size, size

    @property
    def grid(self) -> int:
        """Cells per side of the attention grid."""
        return int(self.options["image_size"]) // 8

    @classmethod
    def resolve_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overridden by ``options`` (with ``encoder`` ``grid``, the options not
        given come from :data:`GRID_DEFAULTS`); ``image_size`` must be a multiple of 8."""
        opts = super().resolve_options(options)
        check_numbers(opts, PIXEL_NUMBERS)
        size = opts["image_size"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 16 or size % 8:
            raise ValueError(f"image_size must be a multiple of 8 and at least 16, got {size!r}")
        if opts["encoder"] == "grid":
            given = [k for k in BOX_ONLY if k in options and options[k] != GRID_DEFAULTS[k]]
            if given:
                raise ValueError(f"{given[0]} needs encoder=boxes (the grid has no crop CNN)")
            opts.update({k: v for k, v in GRID_DEFAULTS.items() if k not in options})
        if opts["head"] not in HEADS:
            raise ValueError(f"head must be one of {', '.join(HEADS)}, got {opts['head']!r}")
        if opts["encoder"] not in ENCODERS:
            raise ValueError(
                f"encoder must be one of {', '.join(ENCODERS)}, got {opts['encoder']!r}"
            )
        pre = opts["pretrain_epochs"]
        pooling = opts["crop_pooling"]
        if pooling not in CROP_POOLINGS:
            choices = ", ".join(CROP_POOLINGS)
            raise ValueError(f"crop_pooling must be one of {choices}, got {pooling!r}")
        if opts["attribute_loss"] not in ATTRIBUTE_LOSSES:
            choices = ", ".join(ATTRIBUTE_LOSSES)
            raise ValueError(
                f"attribute_loss must be one of {choices}, got {opts['attribute_loss']!r}"
            )
        if opts["lr_schedule"] not in LR_SCHEDULES:
            choices = ", ".join(LR_SCHEDULES)
            raise ValueError(f"lr_schedule must be one of {choices}, got {opts['lr_schedule']!r}")
        if not pre and "freeze_encoder" not in options:
            opts["freeze_encoder"] = False  # nothing pre-trained to freeze
        frozen = opts["freeze_encoder"]
        if not isinstance(frozen, bool):
            raise ValueError(f"freeze_encoder must be true or false, got {frozen!r}")
        if frozen and not pre:
            raise ValueError("freeze_encoder needs pretrain_epochs > 0 (a pre-trained encoder)")
        return opts

    @classmethod
    def idle_option(cls, opts: Mapping[str, Any], given: Mapping[str, Any]) -> str | None:
        """Also an option away from its default that the chosen encoder or head never
        reads: ``crop_size`` with the grid encoder, ``token_supervision`` without the
        token-grounded head (docs/models.md, "Options that would do nothing").
        ``image_size`` is not among them: without scene graphs a run with the box
        encoder's defaults falls back to the grid, which reads it."""
        needs = (
            ("crop_size", opts["encoder"] == "boxes",
             "sizes the box encoder's crops: give encoder=boxes"),
            ("token_supervision", opts["head"] == "tokens",
             "weighs the token-grounded head's loss: give head=tokens"),
        )  # fmt: skip
        return cls.idle_among(needs, given, cls.defaults) or super().idle_option(opts, given)

    @classmethod
    def build_net(
        cls, n_words: int, n_answers: int, feature_dim: int, options: Mapping[str, Any]
    ) -> Any:
        """See :func:`build_pixel_net`."""
        return build_pixel_net(n_words, n_answers, options)

    @classmethod
    def batch_order(
        cls,
        qids: Sequence[str],
        questions: Mapping[str, Mapping[str, Any]],
        rng: np.random.Generator,
        batch_size: int,
    ) -> np.ndarray:
        """Images in random order, each image's questions together in random order."""
        by_image: dict[str, list[int]] = {}
        for i, q in enumerate(qids):
            by_image.setdefault(str(questions[q]["imageId"]), []).append(i)
        groups = list(by_image.values())
        order: list[int] = []
        for g in rng.permutation(len(groups)):
            order.extend(np.asarray(groups[g])[rng.permutation(len(groups[g]))].tolist())
        return np.asarray(order, dtype=np.int64)

    def training_input(self, data: GQAData, image_ids: Sequence[str]) -> PixelInput:
        """The batch's images at the model's input size (the data path caches them); the
        box encoder gets the crops of their detected boxes, cut once per image
        (:class:`~vqadiag.models.reference.pixel_boxes.TrainingCrops`)."""
        if self.boxes:
            return self._training_crops().batch(data, image_ids)
        return data.pixel_input(image_ids, size=self.input_size, max_objects=1)

    def _training_crops(self) -> TrainingCrops:
        """The training run's crop cache (made on first use, dropped after training)."""
        crops = self.__dict__.get("training_crops")
        if crops is None:
            crops = TrainingCrops(int(self.options["crop_size"]), int(self.options["max_objects"]))
            self.training_crops = crops
        return crops

    def _pixel_tensors(
        self, batch: QuestionBatch, visual: PixelInput | None, encode: bool = False
    ) -> tuple[Any, Any]:
        """The network's view of the batch's unique images and each question's image row.

        Grid: a (U, 3, S, S) tensor in [−1, 1]. Boxes: ``(crops, positions, mask)`` for
        :meth:`~vqadiag.models.networks.pixel.CellNetwork.cells`, the crops of each
        image's real boxes in [−1, 1]."""
        import torch

        cropped = self.boxes and isinstance(visual, BoxCropInput)
        if not cropped and not isinstance(visual, PixelInput):
            raise DataError(None, f"model {self.name!r} needs pixel input (images)")
        size = int(self.options["image_size"])
        rows: dict[str, int] = {}
        first_row: list[int] = []
        image_of = []
        arrays = visual.crops if cropped else visual.images
        for b, (image_id, image) in enumerate(zip(batch.image_ids, arrays, strict=True)):
            key = f"{image_id}:{id(image)}"  # a condition's changed copy is its own image
            if key not in rows:
                if not self.boxes and image.shape != (size, size, 3):
                    raise DataError(
                        None, f"pixel input is {image.shape}, the model reads {size}×{size}×3"
                    )
                rows[key] = len(first_row)
                first_row.append(b)
            image_of.append(rows[key])
        image_of_t = torch.as_tensor(image_of, dtype=torch.int64)
        if self.boxes:
            return self._box_view(visual, first_row, encode), image_of_t
        array = np.stack([visual.images[b] for b in first_row]).astype(np.float32) / 127.5 - 1.0
        images = torch.from_numpy(np.ascontiguousarray(array.transpose(0, 3, 1, 2)))
        return images, image_of_t

    def _box_view(
        self, visual: PixelInput | BoxCropInput, rows: Sequence[int], encode: bool = False
    ) -> tuple[Any, Any, Any]:
        """``(crops (K, 3, s, s), positions (U, N, 5), mask (U, N))`` of the images at
        ``rows`` of ``visual``: one crop per real box, image by image (images are cut here,
        in this thread: :meth:`_cut_crops`). With ``encode`` (inference: the weights are
        fixed), the crops' features (K, 4c) in their place, from the crop cache
        (:class:`~vqadiag.models.networks.crop_cache.CropFeatureCache`)."""
        import torch

        if isinstance(visual, PixelInput):
            visual = self._cut_crops(visual, threads=1)
        picked = list(rows)
        boxes = np.asarray(visual.boxes, np.float32)[picked]
        mask = np.asarray(visual.mask, dtype=bool)[picked]
        sizes = np.asarray(visual.image_sizes, np.float32)[picked]
        crops = np.concatenate([visual.crops[b] for b in picked])
        if visual.encoded:
            crops_t = torch.from_numpy(crops)
        elif encode:
            crops_t = torch.from_numpy(self.net.crop_cache.features(crops, self.encode_crops))
        else:
            crops_t = crops_tensor(crops)
        positions = torch.from_numpy(spatial_features(boxes, sizes))
        return crops_t, positions, torch.from_numpy(mask)

    def _cut_crops(self, visual: PixelInput, threads: int) -> BoxCropInput:
        """The box encoder's :class:`~vqadiag.models.reference.pixel_boxes.BoxCropInput` of
        ``visual``: each image's real boxes cut with
        :func:`~vqadiag.models.reference.pixel_boxes.box_crops` on ``threads`` threads (Pillow frees
        the GIL while it resizes); rows that share one image array and its boxes share one
        crops array. Without boxes, every image has none (one padding box, masked)."""
        n = len(visual.images)
        if visual.boxes is None:
            boxes = np.zeros((n, 1, 4), np.float32)
            mask = np.zeros((n, 1), dtype=bool)
        else:
            boxes = np.asarray(visual.boxes, np.float32)
            mask = (
                np.ones(boxes.shape[:2], dtype=bool)
                if visual.mask is None
                else np.asarray(visual.mask, dtype=bool)
            )
        crop = int(self.options["crop_size"])
        keys: list[tuple[int, bytes]] = []
        todo: dict[tuple[int, bytes], tuple[np.ndarray, np.ndarray]] = {}
        sizes = np.zeros((n, 2), np.float32)
        for b, image in enumerate(visual.images):
            real = boxes[b][mask[b]]
            keys.append((id(image), real.tobytes()))
            todo.setdefault(keys[-1], (image, real))
            sizes[b] = (image.shape[1], image.shape[0])
        if threads > 1:
            with ThreadPoolExecutor(max_workers=threads) as pool:
                cut_crops = list(pool.map(lambda job: box_crops(*job, crop), todo.values()))
        else:
            cut_crops = [box_crops(image, real, crop) for image, real in todo.values()]
        cut = dict(zip(todo, cut_crops, strict=True))
        return BoxCropInput([cut[k] for k in keys], boxes, mask, sizes)

    def prepare_pixels(self, visual: PixelInput) -> PixelInput | BoxCropInput:
        """The input as the model will read it, made where the data path runs (the probe
        runner calls this in its prefetch workers, docs/diagnose.md): the grid reads the
        images as they are; the box encoder gets each image's box crops
        (:meth:`_cut_crops`, exactly as its forward would cut them, on
        :data:`CUT_THREADS` threads), so the cutting overlaps the network's forward
        instead of adding to it."""
        if not self.boxes or visual.boxes is None:
            return visual
        return self._cut_crops(visual, CUT_THREADS)

    def forward(self, batch: QuestionBatch, visual: Any, feats: Any = None) -> tuple[Any, Any]:
        """``(logits (B, A), per-box importance (B, N) or None)``; N = the boxes of
        ``visual`` (None when it carries none). The box encoder's importance is its
        attention; the grid's is the attention on the cells a box covers."""
        import torch

        tokens, lengths = self._question_tensors(batch)
        view, image_of = self._pixel_tensors(batch, visual, encode=not self.net.training)
        logits, alpha = self.net(tokens, lengths, view, image_of)
        if visual.boxes is None or visual.boxes.shape[1] == 0:
            return logits, None
        if self.boxes:
            per_box = alpha.detach()
        else:
            overlap = box_cell_overlap(visual.boxes, self.grid, int(self.options["image_size"]))
            weights = torch.from_numpy(overlap.astype(np.float32))
            per_box = torch.bmm(weights, alpha[..., None].detach()).squeeze(-1)
        if visual.mask is not None:
            per_box = per_box * torch.from_numpy(visual.mask.astype(np.float32))
        return logits, per_box

    def training_objective(self, data: Any, split: str, question_ids: Sequence[str]) -> Any:
        """Answer cross-entropy plus, with scene graphs, the cell supervision (module doc)."""
        from vqadiag.models.training import CrossEntropyObjective

        supervised = (
            self.options["aux_weight"] > 0
            or self.options["attention_supervision"] > 0
            or (self.options["head"] == "tokens" and self.options["token_supervision"] > 0)
        )
        if not supervised or not self.options["aux_sizes"][0]:
            return CrossEntropyObjective(self)
        return GridObjective(self, data, split)

    def before_training(
        self,
        data: GQAData,
        split: str,
        question_ids: Sequence[str],
        objective: Any,
        *,
        seed: int,
        progress: bool,
    ) -> None:
        """With the box encoder and ``pretrain_epochs`` > 0, train the crop CNN and the
        name / attribute heads on the training images' matched boxes first
        (:func:`~vqadiag.models.reference.pixel_objective.pretrain_box_encoder`)."""
        epochs = int(self.options["pretrain_epochs"])
        if self.boxes and epochs:
            if not isinstance(objective, GridObjective):  # the answer loss alone: no labels
                objective = GridObjective(self, data, split)
            questions = data.questions(split)
            images = sorted({str(questions[q]["imageId"]) for q in question_ids})
            pretrain_box_encoder(self, objective, data, images, epochs, seed, progress)
            if self.options["freeze_encoder"]:
                self._freeze_encoder()

    def _freeze_encoder(self) -> None:
        """Fix the pre-trained crop CNN for the rest of training (no gradients, batch
        norm on its running statistics) and keep each training box's features in place
        of its crop, so the CNN runs once per box instead of once per box and epoch."""
        self.net.cnn.requires_grad_(False)
        self.net.frozen_encoder = True
        self.net.cnn.eval()
        self._training_crops().encode_with(self.encode_crops)

    def encode_crops(self, crops: np.ndarray) -> np.ndarray:
        """``(K, 4c)`` float32: the crop CNN's features of ``(K, s, s, 3)`` uint8 crops (no
        gradients; batch norm in whatever mode the CNN is in)."""
        import torch

        out = np.zeros((len(crops), self.net.crop_dim), np.float32)
        with torch.no_grad():
            for i in range(0, len(crops), ENCODE_BATCH):
                out[i : i + ENCODE_BATCH] = self.net.cnn(crops_tensor(crops[i : i + ENCODE_BATCH]))
        return out

    @classmethod
    def train(cls, data: GQAData, *, split: str = "train", **kwargs: Any) -> PixelModel:
        """:meth:`TorchModel.train`, with the sizes of the cell-label heads taken from the
        training split's scene graphs. Without scene graphs (VQA v2) there is nothing to
        pre-train a box encoder on or to supervise the units with: the options not given
        default to the grid encoder without pre-training, and asking for pre-training is
        refused."""
        n_attrs = int(kwargs.get("aux_attributes", cls.defaults["aux_attributes"]))
        names, attrs = grid_vocab(data, split, n_attrs)
        if not names:
            if kwargs.get("pretrain_epochs") or kwargs.get("freeze_encoder"):
                raise ValueError(
                    f"pretrain_epochs needs scene graphs of the {split!r} split (the box "
                    "names and attributes to pre-train on); this data has none"
                )
            kwargs = {"encoder": "grid", "pretrain_epochs": 0, **kwargs}
        model = super().train(data, split=split, aux_sizes=[len(names), len(attrs)], **kwargs)
        model.__dict__.pop("training_crops", None)  # the box encoder's training crops
        return model
