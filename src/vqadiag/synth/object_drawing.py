"""How one object of the synthetic world is drawn inside its box (docs/synth.md, "Images").

The class is the silhouette of its category (:data:`CATEGORY_SHAPES`) with an inner mark
(:data:`MARKS`, :data:`CLASS_MARK`); the colour is the fill (:mod:`vqadiag.synth.palette`);
the material a texture (:mod:`vqadiag.synth.textures`); the state a badge
(:data:`STATE_BADGE`, placed at :data:`BADGE_AT`). :func:`draw_object` draws one object;
:func:`silhouette` and :func:`badge_box` give its masks and badge corners.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from PIL import Image, ImageChops, ImageDraw

from vqadiag.synth.palette import BADGE_RGB, PALETTE, RGB
from vqadiag.synth.taxonomy import CATEGORIES, CLASSES, COLORS, STATES
from vqadiag.synth.textures import plain_mask, tiled

#: badge shapes; a state's badge is BADGE_SHAPES[k // 8] in palette.BADGE_RGB[k % 8]
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
#: objects with a side below this are drawn as a plain silhouette (no texture, mark, badge)
MIN_DETAIL = 8
#: objects with a side below this get no state badge
BADGE_MIN = 10
#: the state badge's width and height, as fractions of the box's
BADGE_SIZE = 0.22

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


#: 0 on the pixels a clear object lets through (odd row and odd column)
_SEE_THROUGH = np.array([[255, 255], [255, 0]], dtype=np.uint8)


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


def badge_box(category: int, w: int, h: int) -> tuple[int, int, int, int]:
    """Corners ``(x0, y0, x1, y1)`` (in the box, inclusive) of the state badge of a w × h
    object: :data:`BADGE_SIZE` of the box's width by that of its height (at least 4 px
    each), so that, like the texture, it looks alike on crops resized to one size."""
    bw, bh = (max(4, round(BADGE_SIZE * side)) for side in (w, h))
    u, v = BADGE_AT[CATEGORIES[category]]
    bx = min(max(0, round(u * (w - 1) - bw / 2)), w - bw)
    by = min(max(0, round(v * (h - 1) - bh / 2)), h - bh)
    return bx, by, bx + bw - 1, by + bh - 1


def draw_object(
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
        body = ImageChops.darker(_mask(cat, w, h, False), tiled(_SEE_THROUGH, w, h))
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
        img.paste(shade, box, ImageChops.subtract(body, plain_mask(material, w, h)))
    _paint(draw, parts, None, shade)
    u0, v0, u1, v1 = MARK_BOX[CATEGORIES[cat]]
    mx0, my0 = x + round(u0 * (w - 1)), y + round(v0 * (h - 1))
    mbox = (mx0, my0, x + round(u1 * (w - 1)), y + round(v1 * (h - 1)))
    if min(mbox[2] - mbox[0], mbox[3] - mbox[1]) >= 3:
        _draw_mark(draw, _MARK_OF[cls], mbox, ink)
    if state >= 0 and min(w, h) >= BADGE_MIN:
        corners = badge_box(cat, w, h)
        shifted = (x + corners[0], y + corners[1], x + corners[2], y + corners[3])
        _draw_badge(draw, _STATE_SHAPE[state], shifted, _STATE_COLOR[state], ink)
        if painted is not None:
            painted = painted.copy()
            _draw_badge(ImageDraw.Draw(painted), _STATE_SHAPE[state], corners, 255, 255)
    return painted if owners else None
