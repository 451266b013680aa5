"""The colours of the synthetic world's images and the PNG palette that holds them.

Fills per colour value (:data:`COLOR_RGB`), their shades (texture and outlines) and inks
(class mark, badge border) (:func:`shade_of`, :func:`ink_of`), the state badge colours
and the two-tone place backgrounds; :data:`PALETTE` gives each its palette index
(docs/synth.md, section "Images").
"""

from __future__ import annotations

import numpy as np

from vqadiag.synth.taxonomy import COLORS, PLACES

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

#: (upper, lower, pattern tone, pattern) per place; the horizon is at
#: :data:`vqadiag.synth.render.HORIZON` · height
PLACE_BACKGROUND: dict[str, tuple[RGB, RGB, RGB, str]] = {
    "kitchen": ((236, 229, 207), (206, 197, 181), (191, 181, 164), "tiles"),
    "living room": ((227, 215, 197), (177, 149, 119), (161, 134, 105), "planks"),
    "bedroom": ((223, 219, 237), (191, 179, 201), (177, 165, 188), "dots"),
    "street": ((201, 223, 241), (171, 171, 177), (197, 197, 201), "lanes"),
    "farm": ((206, 229, 241), (191, 179, 121), (173, 161, 105), "furrows"),
    "market": ((241, 225, 201), (201, 187, 161), (186, 172, 147), "tiles"),
    "park": ((211, 233, 247), (151, 197, 121), (137, 181, 109), "dots"),
}
#: badge colours; a state's badge is BADGE_SHAPES[k // 8] in BADGE_RGB[k % 8] (k = state
#: index, see :data:`vqadiag.synth.object_drawing.STATE_BADGE`)
BADGE_RGB: tuple[RGB, ...] = (
    (230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200),
    (245, 130, 48), (145, 30, 180), (70, 240, 240), (240, 50, 230),
)  # fmt: skip


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
