"""The chat VLM's patch labels for many images at once, on the model's device
(docs/chat-vlm.md, "Training", step 1; "On a GPU").

:class:`BoxTable` holds every image's annotated boxes in one padded table (``(I, K)``
boxes, their name indices and attribute indicators) and labels all ``I`` images in a few
tensor operations, each mirrored and moved as the augmentation shows it: the same labels
as :func:`~vqadiag.models.reference.chat_vlm_data.scene_labeller` under the ``centre``
and ``overlap`` rules, which label one image and one box at a time in Python. A patch
takes the name and attributes of the smallest box (area ``w · h``) that contains its
centre (``centre``) or shares an area above 0 with it (``overlap``); of two boxes of the
same area, the one listed first in the scene graph; background (index 0, no attribute)
where none does. Coordinates stay in float64, so every comparison is the one the
per-image rule makes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vqadiag.models.reference.chat_vlm_data import check_label_rule
from vqadiag.models.reference.pixel_objective import attribute_row

if TYPE_CHECKING:
    import torch


class BoxTable:
    """Labels the patches of ``image_ids`` of ``scenes`` on a ``grid`` × ``grid`` split
    (module docstring), over the name and attribute indices ``names`` and ``attrs``, by
    ``rule``, on ``device``. Calling it with ``flips`` (``(I,)`` booleans) and ``shifts``
    (``(I, 2)`` x and y, fractions of the image), or with neither, gives ``(I, G·G)`` name
    indices (int64) and ``(I, G·G, A)`` attribute indicators (float32) on ``device``."""

    def __init__(
        self,
        scenes: Mapping[str, Any],
        image_ids: Sequence[str],
        grid: int,
        names: Mapping[str, int],
        attrs: Mapping[str, int],
        rule: str = "centre",
        device: Any = "cpu",
    ) -> None:
        import torch

        check_label_rule(rule)
        self.grid, self.rule, self.device = grid, rule, torch.device(device)
        chosen = [scenes.get(str(image_id)) for image_id in image_ids]
        objects = [list(s["objects"].values()) if s is not None else [] for s in chosen]
        width = max((len(o) for o in objects), default=0)
        # padding boxes have no area, so no rule counts them as covering a patch
        boxes = np.zeros((len(chosen), width, 4), dtype=np.float64)
        name = np.zeros((len(chosen), width), dtype=np.int64)
        attr = np.zeros((len(chosen), width, len(attrs)), dtype=bool)
        size = np.ones((len(chosen), 2), dtype=np.float64)
        for row, (scene, found) in enumerate(zip(chosen, objects, strict=True)):
            if scene is not None:
                size[row] = float(scene.get("width") or 1), float(scene.get("height") or 1)
            for k, obj in enumerate(found):
                boxes[row, k] = [float(obj[key]) for key in ("x", "y", "w", "h")]
                name[row, k] = names.get(str(obj["name"]), 0)
                attr[row, k] = attribute_row(obj, attrs) > 0
        self.boxes = torch.from_numpy(boxes).to(self.device)
        self.names = torch.from_numpy(name).to(self.device)
        self.attrs = torch.from_numpy(attr).to(self.device)
        self.size = torch.from_numpy(size).to(self.device)

    def __len__(self) -> int:
        return len(self.boxes)

    def __call__(
        self, flips: np.ndarray | None = None, shifts: np.ndarray | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        n = len(self)
        flip = torch.as_tensor(
            np.zeros(n, dtype=bool) if flips is None else np.asarray(flips, dtype=bool),
            device=self.device,
        )
        shift = torch.as_tensor(
            np.zeros((n, 2)) if shifts is None else np.asarray(shifts, dtype=np.float64),
            device=self.device,
        )
        parts = [
            self._label(slice(start, start + CHUNK), flip, shift) for start in range(0, n, CHUNK)
        ]
        if not parts:
            return self._label(slice(0, 0), flip, shift)
        return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])

    def _label(
        self, rows: slice, flip: torch.Tensor, shift: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The labels of the images ``rows``: the first of the smallest boxes that cover
        each patch (``(B, G·G, K)`` masks from :meth:`_centres` or :meth:`_touched`)."""
        import torch

        boxes, size, flip, shift = self.boxes[rows], self.size[rows], flip[rows], shift[rows]
        if self.rule == "centre":
            covers = self._centres(boxes, size, flip, shift)
        else:
            covers = self._touched(boxes, size, flip, shift)
        n, patches, k = covers.shape
        if not k:
            names = torch.zeros((n, patches), dtype=torch.int64, device=self.device)
            return names, torch.zeros((n, patches, self.attrs.shape[-1]), device=self.device)
        area = torch.where(covers, (boxes[..., 2] * boxes[..., 3])[:, None, :], torch.inf)
        least = area.min(-1, keepdim=True).values
        order = torch.arange(k, device=self.device)
        first = torch.where(area == least, order, k).min(-1).values.clamp(max=k - 1)
        found = torch.isfinite(least[..., 0])
        names = torch.where(found, torch.gather(self.names[rows], 1, first), 0)
        attrs = self.attrs[rows][torch.arange(n, device=self.device)[:, None], first]
        return names, (attrs & found[..., None]).float()

    def _centres(
        self, boxes: torch.Tensor, size: torch.Tensor, flip: torch.Tensor, shift: torch.Tensor
    ) -> torch.Tensor:
        """``(B, G·G, K)``: box k contains the point of the original image that patch p's
        centre shows (``patch_centres``: ``u = c − shift_x``, mirrored ``1 − u``)."""
        import torch

        grid = self.grid
        centres = (torch.arange(grid, dtype=torch.float64, device=self.device) + 0.5) / grid
        u = centres[None, :] - shift[:, :1]
        u = torch.where(flip[:, None], 1.0 - u, u)
        v = centres[None, :] - shift[:, 1:]
        cx, cy = _across(u * size[:, :1], grid), _down(v * size[:, 1:], grid)
        x, y, w, h = (boxes[:, None, :, i] for i in range(4))
        return (cx >= x) & (cx < x + w) & (cy >= y) & (cy < y + h)

    def _touched(
        self, boxes: torch.Tensor, size: torch.Tensor, flip: torch.Tensor, shift: torch.Tensor
    ) -> torch.Tensor:
        """``(B, G·G, K)``: box k (of positive width and height) shares an area above 0
        with the region of the original image that patch p shows."""
        import torch

        grid = self.grid
        edges = torch.arange(grid + 1, dtype=torch.float64, device=self.device) / grid
        u0, u1 = edges[None, :-1] - shift[:, :1], edges[None, 1:] - shift[:, :1]
        u0, u1 = torch.where(flip[:, None], 1.0 - u1, u0), torch.where(flip[:, None], 1.0 - u0, u1)
        v0, v1 = edges[None, :-1] - shift[:, 1:], edges[None, 1:] - shift[:, 1:]
        x0, x1 = _across(u0 * size[:, :1], grid), _across(u1 * size[:, :1], grid)
        y0, y1 = _down(v0 * size[:, 1:], grid), _down(v1 * size[:, 1:], grid)
        x, y, w, h = (boxes[:, None, :, i] for i in range(4))
        return (w > 0) & (h > 0) & (x < x1) & (x + w > x0) & (y < y1) & (y + h > y0)


#: images labelled together: bounds the ``(B, G·G, K)`` masks (64 patches × 40 boxes:
#: about 80 MB of float64 areas for 4,096 images)
CHUNK = 4096


def _across(x: torch.Tensor, grid: int) -> torch.Tensor:
    """``(B, G)`` x of each column → ``(B, G·G, 1)`` per patch, row-major."""
    return x[:, None, :].expand(-1, grid, -1).reshape(len(x), grid * grid, 1)


def _down(y: torch.Tensor, grid: int) -> torch.Tensor:
    """``(B, G)`` y of each row → ``(B, G·G, 1)`` per patch, row-major."""
    return y[:, :, None].expand(-1, -1, grid).reshape(len(y), grid * grid, 1)
