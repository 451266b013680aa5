"""GQA's grounding score, as the official ``eval.py --grounding`` computes it
(docs/gqa.md, "Grounding").

For a question, the gold regions are the boxes of every object its ``annotations``
point at — ``annotations.question`` and then ``annotations.fullAnswer``, each box
``(x/W, y/H, (x+w)/W, (y+h)/H)`` in the image's ``width`` W and ``height`` H (an object
named in both lists counts twice) — plus the whole image ``(0, 0, 1, 1)`` when some entry
``c`` of ``semantic`` satisfies ``"scene" in c`` (for the dict entries of GQA's files
that tests the dict's *keys*, so it never holds: the official quirk is kept). The
attention is either a ``map_size × map_size`` spatial map, cell ``(i, j)`` covering
``(i/s, j/s, (i+1)/s, (j+1)/s)`` (``i`` along x), or a list of object boxes
``[x0, y0, x1, y1, weight]`` in the same 0–1 coordinates. The score is

    g = Σ_regions Σ_cells attention(cell) · |cell ∩ region| / |cell|

(so it can exceed 1 when regions overlap or repeat), and ``grounding`` = 100 · mean g
over the scored questions. Cells of zero area add nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Box = tuple[float, float, float, float]


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def intersection_rate(cell: Box, region: Box) -> float:
    """``|cell ∩ region| / |cell|`` (0 for a cell of zero area)."""
    area = (cell[2] - cell[0]) * (cell[3] - cell[1])
    if area <= 0:
        return 0.0
    inter = _overlap(cell[0], cell[2], region[0], region[2]) * _overlap(
        cell[1], cell[3], region[1], region[3]
    )
    return inter / area


def gold_regions(question: Mapping[str, Any], scene: Mapping[str, Any]) -> list[Box]:
    """The regions of the module docstring, normalised by the image size."""
    width, height = float(scene["width"]), float(scene["height"])
    objects = scene["objects"]
    regions: list[Box] = []
    annotations = question.get("annotations") or {}
    for part in ("question", "fullAnswer"):
        for pointer in (annotations.get(part) or {}).values():
            obj = objects[pointer]
            regions.append(
                (
                    float(obj["x"]) / width,
                    float(obj["y"]) / height,
                    float(obj["x"] + obj["w"]) / width,
                    float(obj["y"] + obj["h"]) / height,
                )
            )
    if any("scene" in step for step in question.get("semantic") or ()):
        regions.append((0.0, 0.0, 1.0, 1.0))
    return regions


def attention_cells(
    attention: Sequence[Any], map_size: int, object_boxes: bool
) -> list[tuple[Box, float]]:
    """``(cell, weight)`` pairs of a spatial map or of object boxes (module docstring)."""
    if object_boxes:
        return [
            ((float(a[0]), float(a[1]), float(a[2]), float(a[3])), float(a[4])) for a in attention
        ]
    edge = 1.0 / map_size
    return [
        ((edge * i, edge * j, edge * (i + 1), edge * (j + 1)), float(attention[i][j]))
        for i in range(map_size)
        for j in range(map_size)
    ]


#: the side of eval.py's spatial attention grid (its ``--mapSize``)
DEFAULT_MAP_SIZE = 7


def grounding_score(
    question: Mapping[str, Any],
    scene: Mapping[str, Any],
    attention: Sequence[Any],
    *,
    map_size: int = DEFAULT_MAP_SIZE,
    object_boxes: bool = False,
) -> float:
    """g of one question (module docstring)."""
    cells = attention_cells(attention, map_size, object_boxes)
    return sum(
        weight * intersection_rate(cell, region)
        for region in gold_regions(question, scene)
        for cell, weight in cells
    )
