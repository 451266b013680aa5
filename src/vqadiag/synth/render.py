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

The tables live with the code that uses them: shapes, marks and badges in
:mod:`vqadiag.synth.object_drawing`, colours and the palette in
:mod:`vqadiag.synth.palette`, textures in :mod:`vqadiag.synth.textures`. This module
lays out a whole image (background, then the objects) and encodes it as a PNG;
:mod:`vqadiag.synth.image_writer` writes the files, in worker processes.

Rendering is a pure function of the scene (no randomness), and PNGs are written with
fixed encoder options and no metadata, so the same scenes give byte-identical files.
Images are palette PNGs: ``Image.open(path).convert("RGB")`` gives the colours.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw

from vqadiag.data.io.png import PALETTE as PNG_PALETTE_TYPE
from vqadiag.data.io.png import png_file
from vqadiag.synth.object_drawing import draw_object
from vqadiag.synth.palette import PALETTE, PLACE_BACKGROUND
from vqadiag.synth.scenes import Scenes
from vqadiag.synth.taxonomy import PLACES

#: the horizon between the two tones of a background, as a fraction of the height
HORIZON = 0.35
#: zlib level of the PNG data (1: fastest; flat colour compresses well anyway)
ZLIB_LEVEL = 1


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
        painted = draw_object(
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
