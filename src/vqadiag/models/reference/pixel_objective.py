"""The pixel model's training objective with scene graphs (docs/models.md, "The pixel
model"; :mod:`vqadiag.models.reference.pixel` gives the formulas): answer cross-entropy,
the units' name and attribute labels, and the attention and token supervision from the
objects a question's GQA ``annotations`` name.

The units are grid cells or, with the box encoder, the detected boxes matched to the
scene graph's objects (:mod:`vqadiag.models.reference.pixel_boxes`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vqadiag.data.formats.gqa import object_corners
from vqadiag.data.model_inputs.geometry import best_matches
from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError
from vqadiag.models.base import QuestionBatch
from vqadiag.models.reference.pixel_boxes import MATCH_IOU, boxes_of_object
from vqadiag.models.vocab import tokenize

if TYPE_CHECKING:
    from vqadiag.models.training import TorchModel


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


def grid_vocab(data: GQAData, split: str, n_attrs: int) -> tuple[list[str], list[str]]:
    """Object names (index 0 = background) and the ``n_attrs`` most frequent attributes of
    the split's scene graphs; empty lists when the split has none."""
    try:
        scenes = data.scene_graphs(split)
    except DataError:
        return [], []
    return scene_vocab(scenes, n_attrs)


def scene_vocab(scenes: Mapping[str, Any], n_attrs: int) -> tuple[list[str], list[str]]:
    """Object names of ``scenes`` by frequency (index 0 = background, ties by name) and
    their ``n_attrs`` most frequent attributes (the pixel model's unit labels and the chat
    VLM's patch labels)."""
    from collections import Counter

    names: Counter[str] = Counter()
    attrs: Counter[str] = Counter()
    for scene in scenes.values():
        for obj in scene["objects"].values():
            names[str(obj["name"])] += 1
            attrs.update(str(a) for a in obj.get("attributes") or ())
    ranked = sorted(names, key=lambda n: (-names[n], n))
    top = sorted(attrs, key=lambda a: (-attrs[a], a))[:n_attrs]
    return ["<background>", *ranked], top


def attribute_row(obj: Mapping[str, Any], attrs: Mapping[str, int]) -> np.ndarray:
    """The indicator row of ``obj``'s attributes over the attribute index ``attrs``."""
    row = np.zeros(len(attrs), dtype=np.float32)
    for a in obj.get("attributes") or ():
        j = attrs.get(str(a))
        if j is not None:
            row[j] = 1.0
    return row


def cell_centres(width: float, height: float, grid: int) -> tuple[np.ndarray, np.ndarray]:
    """(G·G,) x and (G·G,) y: the centre of every cell of a ``grid`` × ``grid`` split of a
    ``width`` × ``height`` image, in its pixels, row-major."""
    centres = (np.arange(grid) + 0.5) / grid
    return np.tile(centres * width, grid), np.repeat(centres * height, grid)


def object_cells(
    obj: Mapping[str, Any], cx: np.ndarray, cy: np.ndarray, width: float, height: float,
    grid: int,
) -> np.ndarray:  # fmt: skip
    """(G·G,) bool: the cells (centres ``cx``, ``cy`` in the image's pixels, row-major)
    whose centre lies in the object's box, or the cell of the box's centre when none
    does."""
    x, y, w, h = (float(obj[k]) for k in ("x", "y", "w", "h"))
    inside = (cx >= x) & (cx < x + w) & (cy >= y) & (cy < y + h)
    if not inside.any():
        col = min(grid - 1, max(0, int((x + w / 2) / width * grid)))
        row = min(grid - 1, max(0, int((y + h / 2) / height * grid)))
        inside[row * grid + col] = True
    return inside


def point_labels(
    objects: Iterable[Mapping[str, Any]],
    cx: np.ndarray,
    cy: np.ndarray,
    names: Mapping[str, int],
    attrs: Mapping[str, int],
) -> tuple[np.ndarray, np.ndarray]:
    """Per point ``(cx, cy)``: the name index and the attribute indicator row of the object
    whose annotated box is the smallest that contains it (index 0, "background", and
    no attribute when none): the pixel model's cell labels and the chat VLM's patch
    labels."""

    def contains(x: float, y: float, w: float, h: float) -> np.ndarray:
        return (cx >= x) & (cx < x + w) & (cy >= y) & (cy < y + h)

    return smallest_box_labels(objects, len(cx), contains, names, attrs)


def region_labels(
    objects: Iterable[Mapping[str, Any]],
    x0: np.ndarray,
    y0: np.ndarray,
    x1: np.ndarray,
    y1: np.ndarray,
    names: Mapping[str, int],
    attrs: Mapping[str, int],
) -> tuple[np.ndarray, np.ndarray]:
    """Per rectangle ``[x0, x1) × [y0, y1)``: the name index and the attribute indicator
    row of the smallest annotated box that overlaps it (a shared area above 0; index 0,
    "background", and no attribute when none): the chat VLM's patch labels under the
    ``overlap`` rule, which give an object smaller than a patch, or covered at every
    patch centre by a smaller box, the patches it touches."""

    def touches(x: float, y: float, w: float, h: float) -> np.ndarray:
        if w <= 0 or h <= 0:
            return np.zeros(len(x0), dtype=bool)
        return (x < x1) & (x + w > x0) & (y < y1) & (y + h > y0)

    return smallest_box_labels(objects, len(x0), touches, names, attrs)


def smallest_box_labels(
    objects: Iterable[Mapping[str, Any]],
    count: int,
    covers: Callable[[float, float, float, float], np.ndarray],
    names: Mapping[str, int],
    attrs: Mapping[str, int],
) -> tuple[np.ndarray, np.ndarray]:
    """``(count,)`` name indices and ``(count, A)`` attribute indicator rows: at each of
    ``count`` places, those of the smallest annotated box (area ``w · h``) that ``covers``
    it (``covers(x, y, w, h)``: a boolean mask over the places); index 0, "background",
    and no attribute where none does."""
    name = np.zeros(count, dtype=np.int64)
    attr = np.zeros((count, len(attrs)), dtype=np.float32)
    best = np.full(count, np.inf)
    for obj in objects:
        x, y, w, h = (float(obj[k]) for k in ("x", "y", "w", "h"))
        hit = covers(x, y, w, h) & (w * h < best)
        if not hit.any():
            continue
        best[hit] = w * h
        name[hit] = names.get(str(obj["name"]), 0)
        attr[hit] = attribute_row(obj, attrs)
    return name, attr


class GridObjective:
    """``CE(answer) + w · (CE(unit names) + s · BCE(unit attributes)) + w_att · L_att``
    (the pixel model's module docstring); the units are grid cells, or with the box
    encoder the detected boxes, matched to the scene graph's objects by IoU
    (:mod:`vqadiag.models.reference.pixel_boxes`). With a frozen encoder the unit term is
    left out: the units no longer learn from it."""

    def __init__(self, model: TorchModel, data: GQAData, split: str) -> None:
        import torch

        self.model = model
        self.data = data
        self.scenes = data.scene_graphs(split)
        names, attrs = grid_vocab(data, split, int(model.options["aux_attributes"]))
        self.name_index = {n: i for i, n in enumerate(names)}
        self.attr_index = {a: i for i, a in enumerate(attrs)}
        self.n_attrs = len(attrs)
        summed = model.options.get("attribute_loss", "mean") == "sum"
        self.attribute_scale = float(self.n_attrs) if summed else 1.0
        self.weight = float(model.options["aux_weight"])
        self.attention_weight = float(model.options["attention_supervision"])
        tokens = model.options["head"] == "tokens"
        self.token_weight = float(model.options["token_supervision"]) if tokens else 0.0
        self.ce = torch.nn.CrossEntropyLoss()
        self.bce = torch.nn.BCEWithLogitsLoss()
        self._targets: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._image_boxes: dict[str, np.ndarray] = {}

    def _scene_frame(
        self, image_id: str
    ) -> tuple[dict[str, Any], np.ndarray, np.ndarray, float, float]:
        """The scene, every cell's centre (x, y) in the stored image's pixels, and the
        image's width and height."""
        scene = self.scenes.get(image_id) or {"objects": {}}
        width = float(scene.get("width") or 1.0)
        height = float(scene.get("height") or 1.0)
        cx, cy = cell_centres(width, height, self.model.grid)
        return scene, cx, cy, width, height

    def _boxes(self, image_id: str) -> np.ndarray:
        """The image's detected boxes as the box encoder reads them (stored pixels; read
        once per image)."""
        hit = self._image_boxes.get(image_id)
        if hit is None:
            try:
                hit = self.data.image_boxes(image_id)[: int(self.model.options["max_objects"])]
            except DataError:
                hit = np.zeros((0, 4), np.float32)
            self._image_boxes[image_id] = hit
        return hit

    def targets(self, image_id: str) -> tuple[np.ndarray, np.ndarray]:
        """Per unit: the name index and the attribute indicator row of its object. A cell's
        object is the smallest annotated box containing its centre (in the stored image's
        coordinates); a box's is the object it matches (IoU ≥ ``MATCH_IOU``,
        :func:`~vqadiag.data.model_inputs.geometry.best_matches`); index 0 ("background")
        when none."""
        hit = self._targets.get(image_id)
        if hit is not None:
            return hit
        boxes = self.model.boxes
        hit = self._box_targets(image_id) if boxes else self._cell_targets(image_id)
        self._targets[image_id] = hit
        return hit

    def _box_targets(self, image_id: str) -> tuple[np.ndarray, np.ndarray]:
        scene = self.scenes.get(image_id) or {"objects": {}}
        objects = list(scene["objects"].values())
        match = best_matches(
            self._boxes(image_id), object_corners(objects), MATCH_IOU, inclusive=True
        )
        name = np.zeros(len(match), dtype=np.int64)
        attr = np.zeros((len(match), self.n_attrs), dtype=np.float32)
        for k, m in enumerate(match.tolist()):
            if m >= 0:
                name[k] = self.name_index.get(str(objects[m]["name"]), 0)
                attr[k] = attribute_row(objects[m], self.attr_index)
        return name, attr

    def _cell_targets(self, image_id: str) -> tuple[np.ndarray, np.ndarray]:
        scene, cx, cy, _, _ = self._scene_frame(image_id)
        return point_labels(scene["objects"].values(), cx, cy, self.name_index, self.attr_index)

    def _units_of(self, image_id: str) -> tuple[dict[str, Any], Any, int]:
        """The scene, a function from one of its objects to its units ((n,) bool), and
        the image's number of units n."""
        if self.model.boxes:
            boxes = self._boxes(image_id)
            scene = self.scenes.get(image_id) or {"objects": {}}
            return scene, lambda obj: boxes_of_object(boxes, obj), len(boxes)
        scene, cx, cy, width, height = self._scene_frame(image_id)
        return (
            scene,
            lambda obj: object_cells(obj, cx, cy, width, height, self.model.grid),
            self.model.grid**2,
        )

    def attention_target(self, record: Mapping[str, Any]) -> np.ndarray:
        """(n,) bool over the image's units: those of the objects the question's
        annotations name (GQA ``annotations`` of the question, answer and full answer).
        A cell belongs to an object when its centre lies in the object's box (the cell
        of the box's centre when none does); boxes: :func:`boxes_of_object`."""
        scene, units_of, n = self._units_of(str(record.get("imageId")))
        out = np.zeros(n, dtype=bool)
        objects = scene["objects"]
        annotations = record.get("annotations") or {}
        parts = [part for part in annotations.values() if isinstance(part, Mapping)]
        ids = {str(o) for part in parts for o in part.values()}
        for object_id in ids:
            obj = objects.get(object_id)
            if obj is not None:
                out |= units_of(obj)
        return out

    def token_attention_target(self, record: Mapping[str, Any], n_tokens: int) -> np.ndarray:
        """(T, n) bool: for each of the first ``n_tokens`` model tokens that the question's
        ``annotations`` tie to objects, the units of those objects (rows of other tokens
        are all False). Annotation keys index the question's words split on spaces after
        removing the final ``?`` / ``.`` (``"3"``, or ``"3:5"`` for words 3 and 4)."""
        scene, units_of, n = self._units_of(str(record.get("imageId")))
        out = np.zeros((n_tokens, n), dtype=bool)
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
            units = units_of(obj)
            for word in range(first, min(stop, len(starts))):
                if starts[word] < n_tokens:
                    out[starts[word]] |= units
        return out

    def unit_label_loss(
        self, cells: Any, mask: Any, image_ids: Sequence[str]
    ) -> tuple[Any, Any, Any]:
        """``CE(names) + s · BCE(attributes)`` of the units of ``image_ids`` (one per row of
        ``cells`` (U, N, dim); only the real units when ``mask`` (U, N) is given), with the
        name logits and targets of those units (:meth:`targets`). Both are means over the
        units; BCE is also a mean over the attributes, and s = 1 (``attribute_loss``
        ``mean``) or the number of attributes (``sum``: summed over them instead)."""
        import torch

        net = self.model.net
        n_units = cells.shape[1]
        per_image = [self.targets(i) for i in image_ids]
        names = np.stack([_padded(t[0], n_units) for t in per_image])
        real = slice(None) if mask is None else mask
        logits = net.aux_name(cells[real]).reshape(-1, net.aux_name.out_features)
        name_targets = torch.from_numpy(names)[real].flatten()
        loss = self.ce(logits, name_targets)
        if self.n_attrs:
            attrs = np.stack([_padded(t[1], n_units) for t in per_image])
            attr_loss = self.bce(net.aux_attr(cells[real]), torch.from_numpy(attrs)[real])
            loss = loss + self.attribute_scale * attr_loss
        return loss, logits, name_targets

    def __call__(self, batch: QuestionBatch, visual: Any, target: Any, feats: Any = None):
        import torch

        model = self.model
        tokens, lengths = model._question_tensors(batch)
        view, image_of = model._pixel_tensors(batch, visual)
        net = model.net
        cells, mask = net.cells(view)
        logits, alpha = net.head(tokens, lengths, cells, image_of, mask)
        loss = self.ce(logits, target)
        n_units = cells.shape[1]
        if not net.frozen_encoder:  # a frozen encoder's units no longer learn from labels
            first: dict[int, str] = {}
            for image_id, row in zip(batch.image_ids, image_of.tolist(), strict=True):
                first.setdefault(row, str(image_id))
            aux, _, _ = self.unit_label_loss(cells, mask, [first[r] for r in range(len(first))])
            loss = loss + self.weight * aux
        token_alpha = getattr(net, "token_attention", None)
        if self.token_weight > 0 and token_alpha is not None:
            on = np.stack(
                [
                    _padded(self.token_attention_target(r, token_alpha.shape[1]).T, n_units).T
                    for r in batch.records
                ]
            )
            tied = on.any(axis=2)
            if tied.any():
                mass = (token_alpha * torch.from_numpy(on.astype(np.float32))).sum(dim=2)
                on_target = -torch.log(mass[torch.from_numpy(tied)] + 1e-6).mean()
                loss = loss + self.token_weight * on_target
        if self.attention_weight > 0:
            on = np.stack([_padded(self.attention_target(r), n_units) for r in batch.records])
            has = on.any(axis=1)
            if has.any():
                mass = (alpha * torch.from_numpy(on.astype(np.float32))).sum(dim=1)
                on_target = -torch.log(mass[torch.from_numpy(has)] + 1e-6).mean()
                loss = loss + self.attention_weight * on_target
        return loss, logits


def _padded(values: np.ndarray, n: int) -> np.ndarray:
    """``values`` with its first axis cut or zero-padded to ``n`` (units of the batch)."""
    if values.shape[0] >= n:
        return values[:n]
    pad = np.zeros((n - values.shape[0], *values.shape[1:]), dtype=values.dtype)
    return np.concatenate([values, pad])


#: images per pre-training step and the step size of the box encoder's pre-training
PRETRAIN_IMAGES, PRETRAIN_LR = 16, 1e-3


def pretrain_box_encoder(
    model: TorchModel,
    objective: GridObjective,
    data: GQAData,
    image_ids: Sequence[str],
    epochs: int,
    seed: int,
    progress: bool,
) -> list[float]:
    """Train the pixel model's crop CNN and the name / attribute heads alone on the boxes
    of ``image_ids``:
    ``CE(names) + s · BCE(attributes)`` over the real boxes (targets:
    :meth:`~vqadiag.models.reference.pixel_objective.GridObjective.targets`), Adam (step
    :data:`PRETRAIN_LR`), the images in fixed groups of :data:`PRETRAIN_IMAGES` visited in
    a new random order each epoch (seeded by ``seed``), as bottom-up features are trained
    on object labels before VQA. Returns the name accuracy on the matched boxes of each
    epoch (measured while training)."""
    import torch

    from vqadiag.progress import progress_bar

    net = model.net
    groups = [image_ids[i : i + PRETRAIN_IMAGES] for i in range(0, len(image_ids), PRETRAIN_IMAGES)]
    params = [*net.cnn.parameters(), *net.aux_name.parameters(), *net.aux_attr.parameters()]
    optimizer = torch.optim.Adam(params, lr=PRETRAIN_LR)
    rng = np.random.default_rng(seed)
    accuracies: list[float] = []
    net.train()
    with progress_bar(progress, metrics="acc {task.fields[acc]:.1f}%") as bar:
        task = bar.add_task("pixel: pre-training boxes", total=epochs * len(groups), acc=0.0)
        for _ in range(epochs):
            right = named = 0
            for g in rng.permutation(len(groups)):
                ids = groups[g]
                view = model._box_view(model.training_input(data, ids), range(len(ids)))
                cells, mask = net.cells(view)
                loss, logits, names = objective.unit_label_loss(cells, mask, ids)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                matched = names > 0
                right += int((logits.argmax(1)[matched] == names[matched]).sum())
                named += int(matched.sum())
                bar.update(task, advance=1, acc=100.0 * right / max(1, named))
            accuracies.append(right / max(1, named))
    return accuracies
