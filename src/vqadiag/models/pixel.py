"""The pixel reference model: a small CNN grid encoder, a GRU question encoder and
top-down attention over grid cells (docs/models.md, "The pixel model").

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
  most frequent) of the object on top at its centre (the smallest annotated box that
  contains it; "background" when none), weight ``aux_weight``;
* the attention is supervised by the objects the question's GQA ``annotations`` name
  (question, answer, full answer): ``L_att = −log Σ_{c ∈ T} α_c`` over the cells T whose
  centre lies in one of their boxes (the cell of a box's centre when none does), for
  the questions that name an object, weight ``attention_supervision`` (as HINT and
  similar grounding supervision do with human attention).

The loss is ``CE(answer) + aux_weight · (CE(names) + BCE(attributes)) +
attention_supervision · L_att``.

``head`` ``tokens`` swaps the attention and fusion above for the token-grounded head
(:func:`build_token_net`): every question token attends over the cells. A token that
the question's ``annotations`` tie to objects is then supervised as well, by
``token_supervision · L_tok``, where ``L_tok = −log Σ_{c ∈ T_t} α_tc`` over the cells
``T_t`` of the token's objects, averaged over the tied tokens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np

from vqadiag.data.gqa_data import GQAData
from vqadiag.errors import DataError
from vqadiag.models.base import Capabilities, PixelInput, QuestionBatch
from vqadiag.models.question_only import make_question_encoder
from vqadiag.models.training import TRAINING_DEFAULTS, TorchModel
from vqadiag.models.vocab import tokenize

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

#: What a config saved before ``attention_supervision`` existed means.
LEGACY_ATTENTION_SUPERVISION = 0.0


def grid_encoder(c: int) -> Any:
    """The CNN of the module docstring: (U, 3, S, S) → (U, 4c, S/8, S/8)."""
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, c, 5, stride=2, padding=2),
        nn.BatchNorm2d(c),
        nn.ReLU(),
        nn.Conv2d(c, 2 * c, 3, stride=2, padding=1),
        nn.BatchNorm2d(2 * c),
        nn.ReLU(),
        nn.Conv2d(2 * c, 4 * c, 3, stride=2, padding=1),
        nn.BatchNorm2d(4 * c),
        nn.ReLU(),
        nn.Conv2d(4 * c, 4 * c, 3, stride=1, padding=1),
        nn.ReLU(),
    )


def cell_centres(grid: int) -> Any:
    """(1, G·G, 2): each cell's normalised centre (x, y), row by row."""
    import torch

    ys, xs = torch.meshgrid(
        (torch.arange(grid) + 0.5) / grid, (torch.arange(grid) + 0.5) / grid, indexing="ij"
    )
    return torch.stack([xs, ys], -1).reshape(1, grid * grid, 2)


@lru_cache(maxsize=1)
def cell_network_base() -> Any:
    """The ``nn.Module`` base of both pixel networks: ``cells`` (the CNN's grid with each
    cell's centre appended) and ``forward`` = ``head(tokens, lengths, cells(images),
    image_of)``; a subclass sets ``cnn`` and ``coords`` and defines ``head``."""
    import torch
    from torch import nn

    class CellNetwork(nn.Module):
        def cells(self, images: torch.Tensor) -> torch.Tensor:
            """(U, 3, S, S) → (U, G·G, 4c + 2) cell features with their centres."""
            f = self.cnn(images).flatten(2).transpose(1, 2)
            return torch.cat([f, self.coords.expand(f.shape[0], -1, -1)], dim=2)

        def forward(
            self,
            tokens: torch.Tensor,
            lengths: torch.Tensor,
            images: torch.Tensor,
            image_of: torch.Tensor,
        ) -> tuple[torch.Tensor, torch.Tensor]:
            return self.head(tokens, lengths, self.cells(images), image_of)

    return CellNetwork


def add_output_heads(net: Any, dim: int, n_answers: int, options: Mapping[str, Any]) -> None:
    """Give ``net`` the cell-label heads (``aux_name``, ``aux_attr``: ``aux_sizes`` outputs
    from the ``dim``-wide cells) and the answer classifier (``Dropout → Linear(H, 2H) →
    ReLU → Dropout → Linear(2H, A)``), in that order (saved weights keep their names)."""
    from torch import nn

    hidden, dropout = options["hidden_dim"], options["dropout"]
    n_names, n_attrs = (int(x) for x in options["aux_sizes"])
    net.aux_name = nn.Linear(dim, max(1, n_names))
    net.aux_attr = nn.Linear(dim, max(1, n_attrs))
    net.classifier = nn.Sequential(
        nn.Dropout(dropout), nn.Linear(hidden, 2 * hidden), nn.ReLU(),
        nn.Dropout(dropout), nn.Linear(2 * hidden, n_answers),
    )  # fmt: skip


def build_pixel_net(n_words: int, n_answers: int, options: Mapping[str, Any]) -> Any:
    """The network of the module docstring (``head`` ``grid``), or the token-grounded one
    (``head`` ``tokens``, :func:`build_token_net`)."""
    import torch
    from torch import nn

    if options.get("head", "grid") == "tokens":
        return build_token_net(n_words, n_answers, options)

    emb, hidden = options["embedding_dim"], options["hidden_dim"]
    c = int(options["channels"])
    size = int(options["image_size"])
    grid = size // 8
    dim = 4 * c + 2
    att = int(options["attention_dim"])

    class PixelNet(cell_network_base()):
        def __init__(self) -> None:
            super().__init__()
            self.cnn = grid_encoder(c)
            self.register_buffer("coords", cell_centres(grid))
            self.question = make_question_encoder(n_words, emb, hidden)
            self.att_v = nn.Linear(dim, att)
            self.att_q = nn.Linear(hidden, att)
            self.att_w = nn.Linear(att, 1)
            self.joint_q = nn.Linear(hidden, hidden)
            self.joint_v = nn.Linear(dim, hidden)
            add_output_heads(self, dim, n_answers, options)

        def head(
            self,
            tokens: torch.Tensor,
            lengths: torch.Tensor,
            cells: torch.Tensor,
            image_of: torch.Tensor,
        ) -> tuple[torch.Tensor, torch.Tensor]:
            """Answer logits and cell attention from the unique images' cells (U, G·G, dim)."""
            q = self.question(tokens, lengths)
            keys = self.att_v(cells)[image_of]  # (B, G·G, att)
            scores = self.att_w(torch.tanh(keys + self.att_q(q)[:, None, :]))
            alpha = torch.softmax(scores.squeeze(-1), dim=1)
            pooled = torch.bmm(alpha[:, None, :], cells[image_of]).squeeze(1)
            joint = torch.relu(self.joint_q(q)) * torch.relu(self.joint_v(pooled))
            return self.classifier(joint), alpha

    return PixelNet()


def build_token_net(n_words: int, n_answers: int, options: Mapping[str, Any]) -> Any:
    """The token-grounded network (docs/models.md, "The pixel model"): the same cells as
    the grid network; every question token t queries them.

    * ``h_t``: bidirectional GRU state; ``u_t = W_u [h_t; e_t]`` (``e_t`` the embedding);
      ``s_tc = u_t · W_k v_c / √d``; ``α_tc = softmax_c(s_tc)``; ``r_t = Σ_c α_tc W_r v_c``;
      the evidence ``(logmeanexp_c s_tc, max_c s_tc)`` says whether what t names is there.
    * A second GRU reads ``[h_t; r_t; evidence_t]``; its last state → the classifier.
    * Reported cell attention ``α_c = Σ_t g_t α_tc``, ``g = softmax_t(w_g · h_t)`` over the
      question's tokens; the per-token ``α_tc`` are kept in ``token_attention`` for
      their supervision (:class:`GridObjective`).
    """
    import math

    import torch
    from torch import nn

    emb, hidden = options["embedding_dim"], options["hidden_dim"]
    c = int(options["channels"])
    grid = int(options["image_size"]) // 8
    dim = 4 * c + 2
    att = int(options["attention_dim"])

    def run_gru(gru: nn.GRU, x: torch.Tensor, lengths: torch.Tensor) -> tuple[Any, Any]:
        packed = nn.utils.rnn.pack_padded_sequence(
            x, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False
        )
        states, last = gru(packed)
        states, _ = nn.utils.rnn.pad_packed_sequence(
            states, batch_first=True, total_length=x.shape[1]
        )
        return states, last

    class TokenPixelNet(cell_network_base()):
        def __init__(self) -> None:
            super().__init__()
            self.cnn = grid_encoder(c)
            self.register_buffer("coords", cell_centres(grid))
            self.embedding = nn.Embedding(n_words, emb, padding_idx=0)
            self.encoder = nn.GRU(emb, hidden // 2, batch_first=True, bidirectional=True)
            self.query = nn.Linear(2 * (hidden // 2) + emb, att)
            self.key = nn.Linear(dim, att)
            self.read = nn.Linear(dim, att)
            self.reader = nn.GRU(2 * (hidden // 2) + att + 2, hidden, batch_first=True)
            self.gate = nn.Linear(2 * (hidden // 2), 1)
            add_output_heads(self, dim, n_answers, options)
            self.token_attention: torch.Tensor | None = None

        def head(
            self,
            tokens: torch.Tensor,
            lengths: torch.Tensor,
            cells: torch.Tensor,
            image_of: torch.Tensor,
        ) -> tuple[torch.Tensor, torch.Tensor]:
            """Answer logits and cell attention (B, G·G); per-token attention (B, T, G·G)
            in ``token_attention``."""
            words = self.embedding(tokens)
            states, _ = run_gru(self.encoder, words, lengths)
            queries = self.query(torch.cat([states, words], dim=2))
            keys = self.key(cells)[image_of]
            scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[2])
            alpha = torch.softmax(scores, dim=2)
            read = torch.bmm(alpha, self.read(cells)[image_of])
            evidence = torch.stack(
                [torch.logsumexp(scores, 2) - math.log(scores.shape[2]), scores.amax(2)], dim=2
            )
            _, last = run_gru(self.reader, torch.cat([states, read, evidence], dim=2), lengths)
            valid = torch.arange(tokens.shape[1])[None, :] < lengths[:, None]
            gate = self.gate(states).squeeze(2).masked_fill(~valid, float("-inf"))
            cell_alpha = torch.bmm(torch.softmax(gate, 1)[:, None, :], alpha).squeeze(1)
            self.token_attention = alpha
            return self.classifier(last[0]), cell_alpha

    return TokenPixelNet()


class PixelModel(TorchModel):
    """Reads pixels; attention over grid cells gives per-box importance by overlap."""

    name: ClassVar[str] = NAME
    capabilities: ClassVar[Capabilities] = Capabilities(
        visual="pixels", object_masking=False, attention=True, gradients=False
    )
    uses_objects: ClassVar[bool] = False
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
        "head": "grid",
        "token_supervision": 1.0,
    }
    #: runs saved before the token-grounded head existed are grid runs
    omitted_options: ClassVar[dict[str, Any]] = {"head": "grid", "token_supervision": 1.0}

    @property
    def input_size(self) -> tuple[int, int]:
        """(width, height) the model reads; the data path resizes to it."""
        size = int(self.options["image_size"])
        return size, size

    @property
    def grid(self) -> int:
        """Cells per side of the attention grid."""
        return int(self.options["image_size"]) // 8

    @classmethod
    def resolve_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overridden by ``options``; ``image_size`` must be a multiple of 8."""
        opts = super().resolve_options(options)
        size = opts["image_size"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 16 or size % 8:
            raise ValueError(f"image_size must be a multiple of 8 and at least 16, got {size!r}")
        if opts["head"] not in HEADS:
            raise ValueError(f"head must be one of {', '.join(HEADS)}, got {opts['head']!r}")
        return opts

    @classmethod
    def legacy_options(cls, config_options: Mapping[str, Any]) -> dict[str, Any]:
        """A config saved before ``attention_supervision`` existed was trained without it."""
        return {"attention_supervision": LEGACY_ATTENTION_SUPERVISION, **config_options}

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
        """The batch's images at the model's input size (the data path caches them)."""
        return data.pixel_input(image_ids, size=self.input_size, max_objects=1)

    def _pixel_tensors(self, batch: QuestionBatch, visual: PixelInput | None) -> tuple[Any, Any]:
        """Unique images as a (U, 3, S, S) tensor in [−1, 1] and each question's image row."""
        import torch

        if not isinstance(visual, PixelInput):
            raise DataError(None, f"model {self.name!r} needs pixel input (images)")
        size = int(self.options["image_size"])
        rows: dict[str, int] = {}
        unique: list[np.ndarray] = []
        image_of = []
        for image_id, image in zip(batch.image_ids, visual.images, strict=True):
            key = f"{image_id}:{id(image)}"  # a condition's changed copy is its own image
            if key not in rows:
                if image.shape != (size, size, 3):
                    raise DataError(
                        None, f"pixel input is {image.shape}, the model reads {size}×{size}×3"
                    )
                rows[key] = len(unique)
                unique.append(image)
            image_of.append(rows[key])
        array = np.stack(unique).astype(np.float32) / 127.5 - 1.0
        images = torch.from_numpy(np.ascontiguousarray(array.transpose(0, 3, 1, 2)))
        return images, torch.as_tensor(image_of, dtype=torch.int64)

    def forward(self, batch: QuestionBatch, visual: Any, feats: Any = None) -> tuple[Any, Any]:
        """``(logits (B, A), per-box importance (B, N) or None)``; N = the boxes of
        ``visual`` (None when it carries none)."""
        import torch

        tokens, lengths = self._question_tensors(batch)
        images, image_of = self._pixel_tensors(batch, visual)
        logits, alpha = self.net(tokens, lengths, images, image_of)
        if visual.boxes is None or visual.boxes.shape[1] == 0:
            return logits, None
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

    @classmethod
    def train(cls, data: GQAData, *, split: str = "train", **kwargs: Any) -> PixelModel:
        """:meth:`TorchModel.train`, with the sizes of the cell-label heads taken from the
        training split's scene graphs (none: no cell supervision)."""
        n_attrs = int(kwargs.get("aux_attributes", cls.defaults["aux_attributes"]))
        names, attrs = _grid_vocab(data, split, n_attrs)
        return super().train(data, split=split, aux_sizes=[len(names), len(attrs)], **kwargs)


def word_token_starts(question: str) -> list[int]:
    """For each word of ``question`` split on spaces after removing a final ``?`` / ``.``
    (the words GQA ``annotations`` index), the index of its first model token
    (:func:`vqadiag.models.vocab.tokenize`): ``"Is the cup, or the plate, red?"`` →
    [0, 1, 2, 4, 5, 6, 8]."""
    text = question.strip()
    if text.endswith(("?", ".")):
        text = text[:-1]
    starts, position = [], 0
    for word in text.split(" "):
        starts.append(position)
        position += len(tokenize(word))
    return starts


def _grid_vocab(data: GQAData, split: str, n_attrs: int) -> tuple[list[str], list[str]]:
    """Object names (index 0 = background) and the ``n_attrs`` most frequent attributes of
    the split's scene graphs; empty lists when the split has none."""
    from collections import Counter

    try:
        scenes = data.scene_graphs(split)
    except DataError:
        return [], []
    names: Counter[str] = Counter()
    attrs: Counter[str] = Counter()
    for scene in scenes.values():
        for obj in scene["objects"].values():
            names[str(obj["name"])] += 1
            attrs.update(str(a) for a in obj.get("attributes") or ())
    ranked = sorted(names, key=lambda n: (-names[n], n))
    top = sorted(attrs, key=lambda a: (-attrs[a], a))[:n_attrs]
    return ["<background>", *ranked], top


class GridObjective:
    """``CE(answer) + w · (CE(cell names) + BCE(cell attributes)) + w_att · L_att``
    (module docstring)."""

    def __init__(self, model: PixelModel, data: GQAData, split: str) -> None:
        import torch

        self.model = model
        self.scenes = data.scene_graphs(split)
        names, attrs = _grid_vocab(data, split, int(model.options["aux_attributes"]))
        self.name_index = {n: i for i, n in enumerate(names)}
        self.attr_index = {a: i for i, a in enumerate(attrs)}
        self.n_attrs = len(attrs)
        self.weight = float(model.options["aux_weight"])
        self.attention_weight = float(model.options["attention_supervision"])
        tokens = model.options["head"] == "tokens"
        self.token_weight = float(model.options["token_supervision"]) if tokens else 0.0
        self.ce = torch.nn.CrossEntropyLoss()
        self.bce = torch.nn.BCEWithLogitsLoss()
        self._targets: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        grid = model.grid
        self._centres = (np.arange(grid) + 0.5) / grid

    def _scene_frame(
        self, image_id: str
    ) -> tuple[dict[str, Any], np.ndarray, np.ndarray, float, float]:
        """The scene, every cell's centre (x, y) in the stored image's pixels, and the
        image's width and height."""
        grid = self.model.grid
        scene = self.scenes.get(image_id) or {"objects": {}}
        width = float(scene.get("width") or 1.0)
        height = float(scene.get("height") or 1.0)
        cx = np.tile(self._centres * width, grid)
        return scene, cx, np.repeat(self._centres * height, grid), width, height

    def targets(self, image_id: str) -> tuple[np.ndarray, np.ndarray]:
        """Per cell (G·G): the name index and the attribute indicator row of the object on
        top at the cell's centre (in the stored image's coordinates)."""
        hit = self._targets.get(image_id)
        if hit is not None:
            return hit
        grid = self.model.grid
        scene, cx, cy, _, _ = self._scene_frame(image_id)
        name = np.zeros(grid * grid, dtype=np.int64)
        attr = np.zeros((grid * grid, self.n_attrs), dtype=np.float32)
        best = np.full(grid * grid, np.inf)
        for obj in scene["objects"].values():
            x, y, w, h = (float(obj[k]) for k in ("x", "y", "w", "h"))
            inside = (cx >= x) & (cx < x + w) & (cy >= y) & (cy < y + h) & (w * h < best)
            if not inside.any():
                continue
            best[inside] = w * h
            name[inside] = self.name_index.get(str(obj["name"]), 0)
            row = np.zeros(self.n_attrs, dtype=np.float32)
            for a in obj.get("attributes") or ():
                j = self.attr_index.get(str(a))
                if j is not None:
                    row[j] = 1.0
            attr[inside] = row
        self._targets[image_id] = (name, attr)
        return name, attr

    def attention_target(self, record: Mapping[str, Any]) -> np.ndarray:
        """(G·G,) bool: the cells of the objects the question's annotations name (GQA
        ``annotations`` of the question, answer and full answer): cells whose centre lies
        in an object's box, or the cell of its box's centre when none does."""
        grid = self.model.grid
        scene, cx, cy, width, height = self._scene_frame(str(record.get("imageId")))
        out = np.zeros(grid * grid, dtype=bool)
        objects = scene["objects"]
        annotations = record.get("annotations") or {}
        parts = [part for part in annotations.values() if isinstance(part, Mapping)]
        ids = {str(o) for part in parts for o in part.values()}
        for object_id in ids:
            obj = objects.get(object_id)
            if obj is not None:
                out |= self._object_cells(obj, cx, cy, width, height)
        return out

    def _object_cells(
        self, obj: Mapping[str, Any], cx: np.ndarray, cy: np.ndarray, width: float, height: float
    ) -> np.ndarray:
        """(G·G,) bool: the cells whose centre lies in the object's box, or the cell of the
        box's centre when none does."""
        grid = self.model.grid
        x, y, w, h = (float(obj[k]) for k in ("x", "y", "w", "h"))
        inside = (cx >= x) & (cx < x + w) & (cy >= y) & (cy < y + h)
        if not inside.any():
            col = min(grid - 1, max(0, int((x + w / 2) / width * grid)))
            row = min(grid - 1, max(0, int((y + h / 2) / height * grid)))
            inside[row * grid + col] = True
        return inside

    def token_attention_target(self, record: Mapping[str, Any], n_tokens: int) -> np.ndarray:
        """(T, G·G) bool: for each of the first ``n_tokens`` model tokens that the question's
        ``annotations`` tie to objects, the cells of those objects (rows of other tokens
        are all False). Annotation keys index the question's words split on spaces after
        removing the final ``?`` / ``.`` (``"3"``, or ``"3:5"`` for words 3 and 4)."""
        scene, cx, cy, width, height = self._scene_frame(str(record.get("imageId")))
        out = np.zeros((n_tokens, self.model.grid**2), dtype=bool)
        tied = (record.get("annotations") or {}).get("question") or {}
        if not isinstance(tied, Mapping):
            return out
        starts = word_token_starts(str(record.get("question", "")))
        for span, object_id in tied.items():
            obj = scene["objects"].get(str(object_id))
            bounds = str(span).split(":")
            if obj is None or not all(b.isdigit() for b in bounds):
                continue
            first = int(bounds[0])
            stop = int(bounds[1]) if len(bounds) == 2 else first + 1
            cells = self._object_cells(obj, cx, cy, width, height)
            for word in range(first, min(stop, len(starts))):
                if starts[word] < n_tokens:
                    out[starts[word]] |= cells
        return out

    def __call__(self, batch: QuestionBatch, visual: Any, target: Any, feats: Any = None):
        import torch

        model = self.model
        tokens, lengths = model._question_tensors(batch)
        images, image_of = model._pixel_tensors(batch, visual)
        net = model.net
        cells = net.cells(images)
        logits, alpha = net.head(tokens, lengths, cells, image_of)
        loss = self.ce(logits, target)
        first: dict[int, str] = {}
        for image_id, row in zip(batch.image_ids, image_of.tolist(), strict=True):
            first.setdefault(row, str(image_id))
        names = np.stack([self.targets(first[r])[0] for r in range(len(first))])
        attrs = np.stack([self.targets(first[r])[1] for r in range(len(first))])
        aux = self.ce(net.aux_name(cells).flatten(0, 1), torch.from_numpy(names).flatten())
        if self.n_attrs:
            aux = aux + self.bce(net.aux_attr(cells), torch.from_numpy(attrs))
        loss = loss + self.weight * aux
        token_alpha = getattr(net, "token_attention", None)
        if self.token_weight > 0 and token_alpha is not None:
            on = np.stack(
                [self.token_attention_target(r, token_alpha.shape[1]) for r in batch.records]
            )
            tied = on.any(axis=2)
            if tied.any():
                mass = (token_alpha * torch.from_numpy(on.astype(np.float32))).sum(dim=2)
                on_target = -torch.log(mass[torch.from_numpy(tied)] + 1e-6).mean()
                loss = loss + self.token_weight * on_target
        if self.attention_weight > 0:
            on = np.stack([self.attention_target(r) for r in batch.records])
            has = on.any(axis=1)
            if has.any():
                mass = (alpha * torch.from_numpy(on.astype(np.float32))).sum(dim=1)
                on_target = -torch.log(mass[torch.from_numpy(has)] + 1e-6).mean()
                loss = loss + self.attention_weight * on_target
        return loss, logits
