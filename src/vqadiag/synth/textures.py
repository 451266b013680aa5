"""Material textures of the synthetic world's objects (docs/synth.md, section "Images").

Each material has a pattern (:data:`MATERIAL_PATTERN`) drawn in the fill colour's
shade; its period follows each side of the box (:func:`period`), so it looks alike on
object crops resized to one square size. :func:`texture` draws one as a boolean mask;
:func:`plain_mask` gives the (cached) ``L`` mask the object drawing pastes through.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from PIL import Image

from vqadiag.synth.taxonomy import MATERIALS

#: texture of each material (drawn in the fill colour's shade)
MATERIAL_PATTERN: dict[str, str] = {
    "wood": "zigzag lines",
    "metal": "vertical lines",
    "glass": "diagonal lines /",
    "plastic": "dots",
    "fabric": "diagonal lines \\",
    "leather": "staggered dots",
    "stone": "grid",
    "cotton": "diagonal cross-hatch",
    "silk": "horizontal lines",
    "wool": "plus signs",
    "denim": "twill",
    "straw": "horizontal dashes",
    "rubber": "vertical dashes",
    "ceramic": "concentric rectangles",
    "paper": "broad bands",
    "brick": "bricks",
}
#: texture periods (px); each side of a box takes the largest one up to
#: side / PERIODS_PER_SIDE, so a texture repeats about that many times along each side
#: (fewer on sides under PERIODS_PER_SIDE × 4 px)
PERIODS: tuple[int, ...] = (4, 5, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64)
PERIODS_PER_SIDE = 4


def period(side: int) -> int:
    """Texture period along a box side of ``side`` px: the largest of :data:`PERIODS` up
    to side / :data:`PERIODS_PER_SIDE`."""
    target = side / PERIODS_PER_SIDE
    return max([p for p in PERIODS if p <= target], default=PERIODS[0])


def texture(material: int, w: int, h: int, periods: tuple[int, int] | None = None) -> np.ndarray:
    """Boolean (h, w) texture of ``MATERIALS[material]`` (see :data:`MATERIAL_PATTERN`).

    Each axis has its own period (``periods`` = (along x, along y); default
    :func:`period` of the box's width and height), so the pattern stretches with the box
    and looks alike on object crops resized to one square size, however elongated the
    box. The pattern is drawn in pattern coordinates ``(i', j) = (⌊i·p_x / p_y⌋, j)``,
    where both axes have the period ``p = p_x``, with lines ``t = max(1, round(p / 5))``
    thick; a pattern covers about a fifth of the box (13-40 % on sides of 8-400 px).
    """
    px, py = (period(w), period(h)) if periods is None else periods
    p = px
    t = max(1, round(p / 5))
    rows = np.arange(h)[:, None]
    i = rows * px // py
    j = np.arange(w)[None, :]
    kind = MATERIAL_PATTERN[MATERIALS[material]]
    if kind == "zigzag lines":
        tri = np.abs((j % (2 * p)) - p) // 2
        out = (i + tri) % p < t
    elif kind == "vertical lines":
        out = j % p < t
    elif kind == "horizontal lines":
        out = i % p < t
    elif kind == "diagonal lines /":
        out = (i + j) % p < t
    elif kind == "diagonal lines \\":
        out = (i - j) % p < t
    elif kind == "dots":
        out = (i % p < p // 2) & (j % p < p // 2)
    elif kind == "staggered dots":
        shift = (i // p) % 2 * (p // 2)
        out = (i % p < p // 2) & ((j + shift) % p < p // 2)
    elif kind == "grid":
        out = (i % (2 * p) < t) | (j % (2 * p) < t)
    elif kind == "diagonal cross-hatch":
        out = ((i + j) % (2 * p) < t) | ((i - j) % (2 * p) < t)
    elif kind == "plus signs":
        ci, cj = np.abs((i % (2 * p)) - p), np.abs((j % (2 * p)) - p)
        out = ((ci <= t) & (cj <= p // 2)) | ((cj <= t) & (ci <= p // 2))
    elif kind == "twill":
        out = (2 * i + j) % (2 * p) < 2 * t
    elif kind == "horizontal dashes":
        out = (i % p < 2 * t) & (j % (2 * p) < p)
    elif kind == "vertical dashes":
        out = (j % p < 2 * t) & (i % (2 * p) < p)
    elif kind == "concentric rectangles":
        edge_y = np.minimum(rows, h - 1 - rows) * px // py
        ring = np.minimum(edge_y, np.minimum(j, w - 1 - j))
        out = (ring + p - p // 2) % p < t  # first ring p // 2 inside the edge
    elif kind == "broad bands":
        out = i % (2 * p) < 2 * t
    elif kind == "bricks":
        row = _brick_row(p)
        shift = (i // row) % 2 * (3 * p // 2)
        out = (i % row < t) | ((j + shift) % (3 * p) < t)
    else:  # pragma: no cover
        raise AssertionError(kind)
    return np.broadcast_to(out, (h, w))


def _brick_row(p: int) -> int:
    """Height of one row of bricks at period ``p`` (pattern coordinates)."""
    return max(3, round(1.5 * p))


def _tile_shape(material: int, px: int, py: int) -> tuple[int, int]:
    """(height, width) of one tile of the texture: the pattern repeats after ``T_y`` rows
    and ``T_x`` columns of pattern coordinates (2p, or a brick row pair × 3p); pattern
    row i' = ⌊i·p_x / p_y⌋ advances by p_x every p_y pixel rows, so ``T_y`` pattern rows
    take T_y / gcd(T_y, p_x) · p_y pixel rows."""
    from math import gcd

    if MATERIAL_PATTERN[MATERIALS[material]] == "bricks":
        period_y, period_x = 2 * _brick_row(px), 3 * px
    else:
        period_y = period_x = 2 * px
    return period_y // gcd(period_y, px) * py, period_x


_BOX_DEPENDENT = frozenset({"concentric rectangles"})


@lru_cache(maxsize=512)
def _plain_tile(material: int, px: int, py: int) -> np.ndarray:
    """One tile of the texture (:func:`_tile_shape`; the pattern repeats over it): 255 off
    the texture."""
    h, w = _tile_shape(material, px, py)
    return np.where(texture(material, w, h, (px, py)), np.uint8(0), np.uint8(255))


def tiled(tile: np.ndarray, w: int, h: int) -> Image.Image:
    """An ``L`` image of ``tile`` repeated over w × h from the top-left corner."""
    reps = (-(-h // tile.shape[0]), -(-w // tile.shape[1]))
    return Image.fromarray(np.ascontiguousarray(np.tile(tile, reps)[:h, :w]), "L")


#: (material, x period, y period) → an ``L`` image, 255 off the texture, cropped for each
#: object
_PLAIN: dict[tuple[int, int, int], Image.Image] = {}


def plain_mask(material: int, w: int, h: int) -> Image.Image:
    """``L`` image (w × h): 255 where the texture of ``material`` leaves the fill colour."""
    periods = (period(w), period(h))
    if MATERIAL_PATTERN[MATERIALS[material]] in _BOX_DEPENDENT:
        return Image.fromarray(
            np.where(texture(material, w, h, periods), np.uint8(0), np.uint8(255))
        )
    key = (material, *periods)
    img = _PLAIN.get(key)
    if img is None or img.width < w or img.height < h:
        if len(_PLAIN) > 256:
            _PLAIN.clear()
        size = (w, h) if img is None else (max(w, img.width), max(h, img.height))
        img = tiled(_plain_tile(material, *periods), -(-size[0] // 64) * 64, -(-size[1] // 64) * 64)
        _PLAIN[key] = img
    return img.crop((0, 0, w, h))
