"""Pixels for the synthetic world: one palette PNG per image, drawn from the scene arrays.

Every scene-graph object is drawn inside its box (``x, y, w, h`` in the image's own
pixels, as in the GQA scene graph), and its silhouette touches all four sides of the
box, so the box maps exactly to pixels: an object at ``x=10, w=20`` paints columns
10..29 and nothing outside. What the questions ask about is on the picture
(the full tables are in docs/synth.md, section "Images"):

* **class** → the silhouette of its category (:data:`CATEGORY_SHAPES`: ellipse for
  fruit, diamond for vegetables, T-shirt for clothing …) plus an inner mark in ink
  (:data:`MARKS`: bar, cross, ring, disc, square …) picked by the class's position
  within its category (:data:`CLASS_MARK`), so every class has its own (silhouette,
  mark) pair;
* **colour** → the fill colour, a fixed RGB per value (:data:`COLOR_RGB`; ``clear`` is a
  pale tint whose interior lets one pixel in four of what lies below show through);
  classes without colour (people) get :data:`NO_COLOR_RGB`;
* **material** → a texture drawn in the colour's shade (:data:`MATERIAL_PATTERN`: stripes,
  dots, grid, cross-hatch, bricks …), repeating about four times along each side of the
  box (more on sides over 256 px: periods stop at 64 px), so it looks alike on crops
  resized to one square size; no material, no texture;
* **state** → a badge at a fixed place of the silhouette (:data:`BADGE_AT`), 22 % of the
  box's width by 22 % of its height: shape (square, disc, triangle) × badge colour
  (:data:`STATE_BADGE`); no state, no badge;
* **size** → the box itself; objects with a side under 8 px are drawn as a plain
  silhouette in their fill colour (no texture, mark or badge).

The background is two-tone per place (:data:`PLACE_BACKGROUND`: wall / sky above a
horizon at 35 % of the height, floor / ground below with a light pattern). Objects are
drawn largest box first (ties by object order), so small objects stay visible.

Rendering is a pure function of the scene (no randomness), and PNGs are written with
fixed encoder options and no metadata, so the same scenes give byte-identical files.
Images are palette PNGs: ``Image.open(path).convert("RGB")`` gives the colours.
"""

from __future__ import annotations

import os
import sys
import threading
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import lru_cache
from multiprocessing import get_context
from pathlib import Path

import numpy as np
from PIL import Image, ImageChops, ImageDraw

from vqadiag.data.png import PALETTE as PNG_PALETTE_TYPE
from vqadiag.data.png import png_file
from vqadiag.synth.scenes import Scenes
from vqadiag.synth.taxonomy import CATEGORIES, CLASSES, COLORS, MATERIALS, PLACES, STATES

RGB = tuple[int, int, int]

#: fill colour of each COLORS value
COLOR_RGB: dict[str, RGB] = {
    "red": (210, 40, 40),
    "orange": (240, 140, 30),
    "yellow": (245, 215, 40),
    "green": (60, 160, 60),
    "blue": (45, 90, 200),
    "purple": (130, 60, 170),
    "pink": (240, 140, 180),
    "brown": (130, 80, 40),
    "black": (25, 25, 25),
    "white": (252, 252, 252),
    "gray": (128, 128, 128),
    "silver": (192, 198, 206),
    "clear": (214, 238, 246),
}
#: fill of objects without a colour (people)
NO_COLOR_RGB: RGB = (226, 184, 146)
INK_DARK: RGB = (16, 16, 16)
INK_LIGHT: RGB = (240, 240, 240)
#: fills darker than this luminance get light ink and a lighter shade
DARK_LUMA = 100

#: (upper, lower, pattern tone, pattern) per place; the horizon is at HORIZON · height
PLACE_BACKGROUND: dict[str, tuple[RGB, RGB, RGB, str]] = {
    "kitchen": ((236, 229, 207), (206, 197, 181), (191, 181, 164), "tiles"),
    "living room": ((227, 215, 197), (177, 149, 119), (161, 134, 105), "planks"),
    "bedroom": ((223, 219, 237), (191, 179, 201), (177, 165, 188), "dots"),
    "street": ((201, 223, 241), (171, 171, 177), (197, 197, 201), "lanes"),
    "farm": ((206, 229, 241), (191, 179, 121), (173, 161, 105), "furrows"),
    "market": ((241, 225, 201), (201, 187, 161), (186, 172, 147), "tiles"),
    "park": ((211, 233, 247), (151, 197, 121), (137, 181, 109), "dots"),
}
HORIZON = 0.35
#: badge colours; a state's badge is SHAPES[k // 8] in BADGE_RGB[k % 8] (k = state index)
BADGE_RGB: tuple[RGB, ...] = (
    (230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200),
    (245, 130, 48), (145, 30, 180), (70, 240, 240), (240, 50, 230),
)  # fmt: skip
BADGE_SHAPES: tuple[str, ...] = ("square", "disc", "triangle")

# A shape is a list of primitives (kind, "u,v u,v …") in unit coordinates (u → x, v → y
# over the box); every silhouette reaches u = 0, u = 1, v = 0 and v = 1 so it fills its box.
Primitive = tuple[str, tuple[float, ...]]


def _shape(*parts: tuple[str, str]) -> tuple[Primitive, ...]:
    return tuple(
        (kind, tuple(float(v) for pt in pts.split() for v in pt.split(","))) for kind, pts in parts
    )


CATEGORY_SHAPES: dict[str, tuple[Primitive, ...]] = {
    "fruit": _shape(("ellipse", "0,0 1,1")),
    "vegetable": _shape(("polygon", ".5,0 1,.5 .5,1 0,.5")),
    "animal": _shape(("polygon", "0,0 .3,0 .3,.25 1,.25 1,1 .8,1 .8,.7 .2,.7 .2,1 0,1")),
    "vehicle": _shape(("polygon", "0,.4 .2,.4 .3,0 .7,0 .8,.4 1,.4 1,1 0,1")),
    "furniture": _shape(("polygon", "0,0 1,0 1,1 .85,1 .85,.55 .15,.55 .15,1 0,1")),
    "clothing": _shape(
        ("polygon", "0,.15 .3,0 .7,0 1,.15 1,.45 .78,.45 .78,1 .22,1 .22,.45 0,.45")
    ),
    "kitchenware": _shape(("polygon", "0,0 1,0 .75,1 .25,1")),
    "person": _shape(
        ("ellipse", ".3,0 .7,.3"),
        ("polygon", ".2,.3 .8,.3 1,.75 .75,.75 .75,1 .25,1 .25,.75 0,.75"),
    ),
    "plant": _shape(("ellipse", "0,0 1,.7"), ("rectangle", ".38,.6 .62,1")),
    "structure": _shape(("polygon", ".5,0 1,.35 1,1 0,1 0,.35")),
}
#: where the class mark goes inside each silhouette (u0, v0, u1, v1)
MARK_BOX: dict[str, tuple[float, float, float, float]] = {
    "fruit": (0.25, 0.25, 0.75, 0.75),
    "vegetable": (0.3, 0.3, 0.7, 0.7),
    "animal": (0.35, 0.3, 0.9, 0.66),
    "vehicle": (0.25, 0.47, 0.75, 0.93),
    "furniture": (0.2, 0.08, 0.8, 0.48),
    "clothing": (0.3, 0.2, 0.7, 0.9),
    "kitchenware": (0.28, 0.08, 0.72, 0.7),
    "person": (0.3, 0.35, 0.7, 0.72),
    "plant": (0.25, 0.12, 0.75, 0.58),
    "structure": (0.2, 0.42, 0.8, 0.92),
}
#: where the state badge is centred inside each silhouette (u, v), away from the mark
BADGE_AT: dict[str, tuple[float, float]] = {
    "fruit": (0.5, 0.14),
    "vegetable": (0.5, 0.2),
    "animal": (0.15, 0.13),
    "vehicle": (0.5, 0.2),
    "furniture": (0.09, 0.27),
    "clothing": (0.11, 0.3),
    "kitchenware": (0.5, 0.86),
    "person": (0.5, 0.15),
    "plant": (0.5, 0.82),
    "structure": (0.5, 0.24),
}
#: inner marks, drawn in ink; a class's mark is its index among its category's classes
MARKS: tuple[str, ...] = (
    "hbar", "vbar", "cross", "ring", "disc", "triangle", "two dots", "diamond", "chevron",
    "square",
)  # fmt: skip
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
#: objects with a side below this are drawn as a plain silhouette (no texture, mark, badge)
MIN_DETAIL = 8
#: objects with a side below this get no state badge
BADGE_MIN = 10
#: the state badge's width and height, as fractions of the box's
BADGE_SIZE = 0.22
#: zlib level of the PNG data (1: fastest; flat colour compresses well anyway)
ZLIB_LEVEL = 1

#: inner mark of each class: MARKS[k] for the k-th class of its category (CLASSES order)
CLASS_MARK: dict[str, str] = {
    c.name: MARKS[[d.name for d in CLASSES if d.category == c.category].index(c.name)]
    for c in CLASSES
}
#: badge (shape, RGB) of each state
STATE_BADGE: dict[str, tuple[str, RGB]] = {
    s: (BADGE_SHAPES[k // len(BADGE_RGB)], BADGE_RGB[k % len(BADGE_RGB)])
    for k, s in enumerate(STATES)
}


def _luma(rgb: RGB) -> float:
    return 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]


def shade_of(rgb: RGB) -> RGB:
    """Texture / outline colour of a fill: 35 % darker, or 35 % lighter for dark fills."""
    if _luma(rgb) < DARK_LUMA:
        return tuple(round(c + 0.35 * (255 - c)) for c in rgb)  # type: ignore[return-value]
    return tuple(round(0.65 * c) for c in rgb)  # type: ignore[return-value]


def ink_of(rgb: RGB) -> RGB:
    """Ink of the class mark and badge border on a fill: dark on light fills, light on dark."""
    return INK_LIGHT if _luma(rgb) < DARK_LUMA else INK_DARK


class _Palette:
    """The image palette: fills, shades, inks, badges, backgrounds (≤ 256 entries)."""

    def __init__(self) -> None:
        self.rgb: list[RGB] = []
        fills = [*(COLOR_RGB[c] for c in COLORS), NO_COLOR_RGB]
        #: palette index of fill / shade / ink per colour index (last entry: no colour)
        self.fill = np.array([self.add(c) for c in fills], dtype=np.uint8)
        self.shade = np.array([self.add(shade_of(c)) for c in fills], dtype=np.uint8)
        self.ink = np.array([self.add(ink_of(c)) for c in fills], dtype=np.uint8)
        self.badge = [self.add(c) for c in BADGE_RGB]
        self.background = {p: tuple(self.add(c) for c in PLACE_BACKGROUND[p][:3]) for p in PLACES}
        if len(self.rgb) > 256:
            raise AssertionError("palette over 256 colours")
        flat = [v for c in self.rgb for v in c]
        self.bytes = bytes(flat + [0] * (768 - len(flat)))

    def add(self, rgb: RGB) -> int:
        if rgb not in self.rgb:
            self.rgb.append(rgb)
        return self.rgb.index(rgb)


PALETTE = _Palette()
_CATEGORY_OF = [CATEGORIES.index(c.category) for c in CLASSES]
_MARK_OF = [MARKS.index(CLASS_MARK[c.name]) for c in CLASSES]
_STATE_SHAPE = [BADGE_SHAPES.index(STATE_BADGE[s][0]) for s in STATES]
_STATE_COLOR = [PALETTE.badge[BADGE_RGB.index(STATE_BADGE[s][1])] for s in STATES]
_CLEAR = COLORS.index("clear")
_NO_COLOR = len(COLORS)


Parts = list[tuple[str, list[float]]]


def _parts(category: int, w: int, h: int, dx: int = 0, dy: int = 0) -> Parts:
    """The silhouette's primitives in pixels, for a w × h box with top-left (dx, dy)."""
    sx, sy = w - 1, h - 1
    out = []
    for kind, coords in CATEGORY_SHAPES[CATEGORIES[category]]:
        xy = [v * sx + dx if k % 2 == 0 else v * sy + dy for k, v in enumerate(coords)]
        out.append((kind, [round(v) for v in xy] if kind == "rectangle" else xy))
    return out


def _paint(draw: ImageDraw.ImageDraw, parts: Parts, fill: int | None,
           outline: int | None = None) -> None:  # fmt: skip
    """Fill the parts with ``fill``, then draw their 1 px outlines in ``outline``."""
    for paint, line in ((fill, None), (None, outline)):
        if paint is None and line is None:
            continue
        for kind, xy in parts:
            if kind == "polygon":
                draw.polygon(xy, fill=paint, outline=line)
            elif kind == "ellipse":
                draw.ellipse(xy, fill=paint, outline=line)
            else:
                draw.rectangle(xy, fill=paint, outline=line)


class _Scratch:
    """A reusable ``L`` image (and its drawer) to draw masks on, grown as needed."""

    def __init__(self) -> None:
        self.img = Image.new("L", (1024, 1024), 0)
        self.draw = ImageDraw.Draw(self.img)

    def clear(self, w: int, h: int) -> ImageDraw.ImageDraw:
        if w > self.img.width or h > self.img.height:
            size = (max(w, self.img.width), max(h, self.img.height))
            self.img = Image.new("L", size, 0)
            self.draw = ImageDraw.Draw(self.img)
        else:
            self.draw.rectangle((0, 0, w - 1, h - 1), fill=0)
        return self.draw


_SCRATCH = _Scratch()


@lru_cache(maxsize=1024)
def _mask(category: int, w: int, h: int, outline: bool = True) -> Image.Image:
    """``L`` image (w × h), 255 on the silhouette of a w × h box (with its outlines, or
    only the filled parts)."""
    _paint(_SCRATCH.clear(w, h), _parts(category, w, h), 255, 255 if outline else None)
    return _SCRATCH.img.crop((0, 0, w, h))


@lru_cache(maxsize=256)
def _outline(category: int, w: int, h: int) -> Image.Image:
    """``L`` image (w × h), 255 on the outlines of the silhouette's parts."""
    _paint(_SCRATCH.clear(w, h), _parts(category, w, h), None, 255)
    return _SCRATCH.img.crop((0, 0, w, h))


def silhouette(category: int, w: int, h: int) -> np.ndarray:
    """Boolean (h, w) mask of the silhouette of ``CATEGORIES[category]`` in a w × h box."""
    return np.asarray(_mask(category, w, h)) > 0


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


def _tiled(tile: np.ndarray, w: int, h: int) -> Image.Image:
    """An ``L`` image of ``tile`` repeated over w × h from the top-left corner."""
    reps = (-(-h // tile.shape[0]), -(-w // tile.shape[1]))
    return Image.fromarray(np.ascontiguousarray(np.tile(tile, reps)[:h, :w]), "L")


#: 0 on the pixels a clear object lets through (odd row and odd column)
_SEE_THROUGH = np.array([[255, 255], [255, 0]], dtype=np.uint8)
#: (material, x period, y period) → an ``L`` image, 255 off the texture, cropped for each
#: object
_PLAIN: dict[tuple[int, int, int], Image.Image] = {}


def _plain(material: int, w: int, h: int) -> Image.Image:
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
        img = _tiled(
            _plain_tile(material, *periods), -(-size[0] // 64) * 64, -(-size[1] // 64) * 64
        )
        _PLAIN[key] = img
    return img.crop((0, 0, w, h))


def _draw_mark(draw: ImageDraw.ImageDraw, mark: int, box: tuple[int, int, int, int],
               ink: int) -> None:  # fmt: skip
    x0, y0, x1, y1 = box
    side = min(x1 - x0, y1 - y0)
    lw = max(1 if side < 8 else 2, round(side / 5))
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    bar_y, bar_x = round(cy - lw / 2), round(cx - lw / 2)
    name = MARKS[mark]
    if name == "hbar":
        draw.rectangle([x0, bar_y, x1, bar_y + lw - 1], fill=ink)
    elif name == "vbar":
        draw.rectangle([bar_x, y0, bar_x + lw - 1, y1], fill=ink)
    elif name == "square":
        draw.rectangle([x0, y0, x1, y1], outline=ink, width=lw)
    elif name == "cross":
        draw.line([x0, y0, x1, y1], fill=ink, width=lw)
        draw.line([x0, y1, x1, y0], fill=ink, width=lw)
    elif name == "ring":
        draw.ellipse([x0, y0, x1, y1], outline=ink, width=lw)
    elif name == "disc":
        dx, dy = (x1 - x0) * 0.2, (y1 - y0) * 0.2
        draw.ellipse([x0 + dx, y0 + dy, x1 - dx, y1 - dy], fill=ink)
    elif name == "triangle":
        draw.polygon([cx, y0, x1, y1, x0, y1], outline=ink, width=lw)
    elif name == "two dots":  # top left and bottom right
        r = max(1.0, min(x1 - x0, y1 - y0) * 0.22)
        for px, py in ((x0 + r, y0 + r), (x1 - r, y1 - r)):
            draw.ellipse([px - r, py - r, px + r, py + r], fill=ink)
    elif name == "diamond":
        draw.polygon([cx, y0, x1, cy, cx, y1, x0, cy], outline=ink, width=lw)
    elif name == "chevron":
        draw.line([x0, y0, cx, y1, x1, y0], fill=ink, width=lw, joint="curve")


def _draw_badge(draw: ImageDraw.ImageDraw, shape: int, box: tuple[int, int, int, int],
                fill: int, border: int) -> None:  # fmt: skip
    x0, y0, x1, y1 = box
    width = 1 if min(x1 - x0, y1 - y0) >= 5 else 0
    outline = border if width else None
    if shape == 0:
        draw.rectangle(box, fill=fill, outline=outline, width=width)
    elif shape == 1:
        draw.ellipse(box, fill=fill, outline=outline, width=width)
    else:
        draw.polygon([(x0 + x1) / 2, y0, x1, y1, x0, y1], fill=fill, outline=outline,
                     width=width)  # fmt: skip


def _badge_box(category: int, w: int, h: int) -> tuple[int, int, int, int]:
    """Corners ``(x0, y0, x1, y1)`` (in the box, inclusive) of the state badge of a w × h
    object: :data:`BADGE_SIZE` of the box's width by that of its height (at least 4 px
    each), so that, like the texture, it looks alike on crops resized to one size."""
    bw, bh = (max(4, round(BADGE_SIZE * side)) for side in (w, h))
    u, v = BADGE_AT[CATEGORIES[category]]
    bx = min(max(0, round(u * (w - 1) - bw / 2)), w - bw)
    by = min(max(0, round(v * (h - 1) - bh / 2)), h - bh)
    return bx, by, bx + bw - 1, by + bh - 1


def _draw_object(
    img: Image.Image, draw: ImageDraw.ImageDraw, cls: int, color: int, material: int,
    state: int, x: int, y: int, w: int, h: int, owners: bool = False,
) -> Image.Image | None:  # fmt: skip
    """Draw one object into ``img`` (``draw`` draws on it); with ``owners``, returns the
    ``L`` mask (w × h) of the pixels it painted."""
    col = _NO_COLOR if color < 0 else color
    fill, shade, ink = int(PALETTE.fill[col]), int(PALETTE.shade[col]), int(PALETTE.ink[col])
    cat = _CATEGORY_OF[cls]
    parts = _parts(cat, w, h, x, y)
    if min(w, h) < MIN_DETAIL:
        _paint(draw, parts, fill)
        return _mask(cat, w, h, False) if owners else None
    box = (x, y, x + w, y + h)
    painted = None
    if color == _CLEAR:  # one pixel in four of the filled parts shows what lies below
        body = ImageChops.darker(_mask(cat, w, h, False), _tiled(_SEE_THROUGH, w, h))
        img.paste(fill, box, body)
        if owners:
            painted = ImageChops.lighter(body, _outline(cat, w, h))
    else:
        _paint(draw, parts, fill)
        body = None
        if owners:
            painted = _mask(cat, w, h)
    if material >= 0:  # the texture on the filled parts, under the outlines
        if body is None:
            body = _mask(cat, w, h, False)
        img.paste(shade, box, ImageChops.subtract(body, _plain(material, w, h)))
    _paint(draw, parts, None, shade)
    u0, v0, u1, v1 = MARK_BOX[CATEGORIES[cat]]
    mx0, my0 = x + round(u0 * (w - 1)), y + round(v0 * (h - 1))
    mbox = (mx0, my0, x + round(u1 * (w - 1)), y + round(v1 * (h - 1)))
    if min(mbox[2] - mbox[0], mbox[3] - mbox[1]) >= 3:
        _draw_mark(draw, _MARK_OF[cls], mbox, ink)
    if state >= 0 and min(w, h) >= BADGE_MIN:
        corners = _badge_box(cat, w, h)
        shifted = (x + corners[0], y + corners[1], x + corners[2], y + corners[3])
        _draw_badge(draw, _STATE_SHAPE[state], shifted, _STATE_COLOR[state], ink)
        if painted is not None:
            painted = painted.copy()
            _draw_badge(ImageDraw.Draw(painted), _STATE_SHAPE[state], corners, 255, 255)
    return painted if owners else None


@lru_cache(maxsize=64)
def _background(place: int, width: int, height: int) -> Image.Image:
    upper, lower, tone = PALETTE.background[PLACES[place]]
    kind = PLACE_BACKGROUND[PLACES[place]][3]
    horizon = round(HORIZON * height)
    canvas = np.full((height, width), upper, dtype=np.uint8)
    ground = canvas[horizon:]
    ground[:] = lower
    i = np.arange(height - horizon)[:, None]
    j = np.arange(width)[None, :]
    if kind == "tiles":
        pattern = (i % 40 == 0) | (j % 40 == 0)
    elif kind == "planks":
        pattern = (i % 24 == 0) | ((j + (i // 24) % 2 * 60) % 120 == 0)
    elif kind == "dots":
        pattern = (i % 16 == 8) & (j % 16 == 8)
    elif kind == "lanes":
        pattern = (i % 60 == 30) & (j % 48 < 24)
    else:  # furrows
        pattern = j % 20 == 0
    ground[np.broadcast_to(pattern, ground.shape)] = tone
    return Image.fromarray(canvas, "L")


def background(place: int, width: int, height: int) -> np.ndarray:
    """(height, width) palette indices of an empty image of ``PLACES[place]``."""
    return np.asarray(_background(place, width, height)).copy()


def _compose(scenes: Scenes, i: int, owners: bool) -> tuple[Image.Image, np.ndarray | None]:
    """Image ``i`` as an ``L`` image of palette indices (+ the owner map if ``owners``)."""
    lo, hi = int(scenes.offsets[i]), int(scenes.offsets[i + 1])
    place, width, height = int(scenes.place[i]), int(scenes.width[i]), int(scenes.height[i])
    img = _background(place, width, height).copy()
    draw = ImageDraw.Draw(img)
    owner = np.full((height, width), -1, dtype=np.int32) if owners else None
    boxes = scenes.box[lo:hi].tolist()
    cls = scenes.cls[lo:hi].tolist()
    color = scenes.color[lo:hi].tolist()
    material = scenes.material[lo:hi].tolist()
    state = scenes.state[lo:hi].tolist()
    for k in draw_order(boxes):
        x, y, w, h = boxes[k]
        painted = _draw_object(
            img, draw, cls[k], color[k], material[k], state[k], x, y, w, h, owners
        )
        if owner is not None and painted is not None:
            owner[y : y + h, x : x + w][np.asarray(painted) > 0] = k
    return img, owner


def draw_order(boxes: Sequence[Sequence[int]]) -> list[int]:
    """Local object indices in drawing order: largest box area first, ties by index."""
    return sorted(range(len(boxes)), key=lambda k: (-boxes[k][2] * boxes[k][3], k))


def render_image(scenes: Scenes, i: int) -> Image.Image:
    """Image ``i`` of ``scenes`` as a palette (mode ``P``) Pillow image."""
    img, _ = _compose(scenes, i, False)
    img.putpalette(PALETTE.bytes)
    return img


def render_indices(scenes: Scenes, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Image ``i`` as (height, width) palette indices, and the local index of the object
    that painted each pixel (−1: background). ``PALETTE.rgb[index]`` is the colour."""
    img, owner = _compose(scenes, i, True)
    assert owner is not None
    return np.asarray(img), owner


_PLTE = bytes(v for rgb in PALETTE.rgb for v in rgb)


def _deflate(data: np.ndarray) -> bytes:
    """zlib stream of ``data`` (level :data:`ZLIB_LEVEL`, run-length strategy)."""
    z = zlib.compressobj(ZLIB_LEVEL, zlib.DEFLATED, 15, 8, zlib.Z_RLE)
    return z.compress(memoryview(data).cast("B")) + z.flush()


def encode_png(img: Image.Image) -> bytes:
    """PNG bytes of a palette image (mode ``P`` or ``L`` of :data:`PALETTE` indices).

    An 8-bit palette PNG with IHDR, PLTE, one IDAT and IEND only (no metadata, no
    timestamps): every row uses the PNG "Up" filter, deflated at zlib level
    :data:`ZLIB_LEVEL` with the run-length strategy (the rows are flat colour), so the
    same pixels give the same bytes. Pillow, libpng and browsers read it.
    """
    index = np.asarray(img)
    h, w = index.shape
    rows = np.empty((h, w + 1), dtype=np.uint8)
    rows[:, 0] = 2  # filter type Up: each byte minus the byte above (modulo 256)
    rows[0, 1:] = index[0]
    np.subtract(index[1:], index[:-1], out=rows[1:, 1:])
    return png_file(w, h, PNG_PALETTE_TYPE, _deflate(rows), _PLTE)


def scenes_slice(scenes: Scenes, start: int, stop: int) -> Scenes:
    """The images ``start:stop`` of ``scenes`` as a Scenes of their own."""
    a, b = int(scenes.offsets[start]), int(scenes.offsets[stop])
    return Scenes(
        scenes.width[start:stop],
        scenes.height[start:stop],
        scenes.place[start:stop],
        scenes.offsets[start : stop + 1] - a,
        scenes.cls[a:b],
        scenes.color[a:b],
        scenes.material[a:b],
        scenes.state[a:b],
        scenes.size[a:b],
        scenes.box[a:b],
    )


def write_images(scenes: Scenes, folder: str | Path, names: Sequence[str]) -> int:
    """Write image ``k`` of ``scenes`` to ``folder/{names[k]}.png``; returns the count."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(names):
        (folder / f"{name}.png").write_bytes(encode_png(render_image(scenes, k)))
    return len(names)


#: worlds with fewer images are rendered in the calling process by default
POOL_MIN_IMAGES = 400


def idle_cpus() -> int:
    """CPUs this process may use, less one (for the caller) and less the 1-minute load
    average (other jobs), at most 8: the default number of render workers."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows
        busy = 0.0
    return max(0, min(8, int(cpus - 1 - busy)))


def _start_method() -> str:
    """``fork`` on Linux (no re-import of the caller's main module, fast start), else spawn."""
    return "fork" if sys.platform.startswith("linux") else "spawn"


class ImageWriter:
    """Render all images of ``scenes`` to ``folder/{names[i]}.png``.

    With ``workers`` > 0, :meth:`start` hands chunks of ``chunk`` images to that many
    worker processes (forked on Linux, spawned elsewhere), which draw them while the
    caller does other work; :meth:`finish` waits for them and draws the chunks they have
    not started yet. With 0 workers, :meth:`finish` draws everything here. ``None``
    picks 0 under :data:`POOL_MIN_IMAGES` images, otherwise :func:`idle_cpus` (the
    calling process keeps one CPU for its own work meanwhile). The bytes written do
    not depend on ``workers`` or ``chunk``. Use as a context manager (or call
    :meth:`close`) so the workers stop if the caller fails.
    """

    def __init__(self, scenes: Scenes, folder: str | Path, names: Sequence[str],
                 workers: int | None = None, chunk: int = 50) -> None:  # fmt: skip
        if len(names) != scenes.n_images:
            raise ValueError(f"{len(names)} names for {scenes.n_images} images")
        if workers is None:
            workers = 0 if scenes.n_images < POOL_MIN_IMAGES else idle_cpus()
        self.scenes, self.folder, self.names = scenes, Path(folder), list(names)
        self.workers, self.chunk = workers, max(1, chunk)
        self._pool: ProcessPoolExecutor | None = None
        self._futures: list[tuple[range, Future[int]]] = []
        self._lock = threading.Lock()
        self._done = 0
        self._advance: Callable[[int], None] | None = None

    def _chunks(self) -> list[range]:
        n = self.scenes.n_images
        return [range(lo, min(n, lo + self.chunk)) for lo in range(0, n, self.chunk)]

    def _write(self, part: range) -> int:
        sub = scenes_slice(self.scenes, part.start, part.stop)
        return write_images(sub, self.folder, self.names[part.start : part.stop])

    def start(self) -> None:
        """Start the workers on all chunks (call before starting threads of your own: on
        Linux the workers are forked). Nothing happens with 0 workers."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if not self.workers or self._pool is not None:
            return
        self._pool = ProcessPoolExecutor(self.workers, mp_context=get_context(_start_method()))
        for part in self._chunks():
            sub = scenes_slice(self.scenes, part.start, part.stop)
            names = self.names[part.start : part.stop]
            fut = self._pool.submit(write_images, sub, str(self.folder), names)
            fut.add_done_callback(self._on_done)
            self._futures.append((part, fut))

    def follow(self, advance: Callable[[int], None]) -> None:
        """Call ``advance(n)`` as images are written (at once for those already written)."""
        with self._lock:
            self._advance = advance
            done = self._done
        if done:
            advance(done)

    def _count(self, n: int) -> None:
        with self._lock:
            self._done += n
            advance = self._advance
        if advance is not None:
            advance(n)

    def _on_done(self, fut: Future[int]) -> None:
        if not fut.cancelled() and fut.exception() is None:
            self._count(fut.result())

    def finish(self) -> int:
        """Wait for the rendering, helping with it; returns the number of images written.

        Chunks no worker has started yet are drawn here (last first, while the workers
        go on from the front), so this process is not idle while it waits; chunks whose
        worker died are drawn here too.
        """
        try:
            if self._pool is None:
                for part in self._chunks():
                    self._count(self._write(part))
                return self.scenes.n_images
            n = 0
            for part, fut in reversed(self._futures):
                if fut.cancel():
                    n += self._write(part)
                    self._count(len(part))
                    continue
                try:
                    n += fut.result()
                except BrokenProcessPool:  # a worker died: draw its chunk here
                    n += self._write(part)
                    self._count(len(part))
            return n
        finally:
            self.close()

    def __enter__(self) -> ImageWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers (chunks not yet started are cancelled)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
