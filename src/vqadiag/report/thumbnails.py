"""Small JPEG thumbnails of the drill-down rows' images (docs/report.md, "Drill-down tables").

For each example row shown (and only those), the row's image is read from the data
folder the results name (``data.root``; ``config.images`` when the run was given
one), scaled so its larger side is :data:`MAX_SIDE` pixels, and drawn with the
row's FPVG boxes: relevant ones green, irrelevant ones red (detected boxes of the
image, by index). A row whose image cannot be found gets no thumbnail; the report
never fails for it. Thumbnails go into ``report.html`` only (base64 JPEG, quality
:data:`QUALITY`), not into ``report.json``.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import Any

from vqadiag.errors import DataError
from vqadiag.report.results import ResultSet

MAX_SIDE = 160
QUALITY = 70
GREEN, RED = (0, 200, 0), (230, 0, 0)


def _data_of(sets: Sequence[ResultSet]) -> Any:
    from vqadiag.data.model_inputs.gqa_data import GQAData

    for rs in sets:
        root = rs.data_root
        if root is None or not root.is_dir():
            continue
        try:
            return GQAData(root, images=rs.images_dir)
        except DataError:
            continue
    return None


def thumbnail(
    image: Any, boxes: Sequence[Sequence[float]] = (), colors: Sequence[tuple] = ()
) -> str:
    """Base64 JPEG of ``image`` ((H, W, 3) uint8) scaled to ``MAX_SIDE``, with ``boxes``
    (corners in the image's pixels) outlined in ``colors``."""
    from PIL import Image, ImageDraw

    img = Image.fromarray(image)
    scale = MAX_SIDE / max(img.size)
    small = img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))))
    draw = ImageDraw.Draw(small)
    for (x1, y1, x2, y2), color in zip(boxes, colors, strict=True):
        draw.rectangle([x1 * scale, y1 * scale, x2 * scale, y2 * scale], outline=color, width=2)
    buf = io.BytesIO()
    small.save(buf, "JPEG", quality=QUALITY, optimize=True)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def drilldown_thumbnails(
    sets: Sequence[ResultSet], drilldown: Mapping[str, Mapping[str, Any]]
) -> dict[str, str]:
    """``{"suite|unit": base64 JPEG}`` for every drill-down row whose image is found."""
    data = _data_of(sets)
    if data is None:
        return {}
    out: dict[str, str] = {}
    for suite, table in drilldown.items():
        for row in table["rows"]:
            image_id = row.get("image_id")
            if not isinstance(image_id, str):
                continue
            try:  # an id that is a path, not a name, is refused like a missing image
                if data.images.find(image_id) is None:
                    continue
                pixels = data.images.pixels(image_id)
                boxes = data.image_boxes(image_id) if "relevant" in row else []
            except DataError:
                continue
            chosen, colors = [], []
            for key, color in (("irrelevant", RED), ("relevant", GREEN)):
                for i in row.get(key, ()):
                    if 0 <= i < len(boxes):
                        chosen.append(boxes[i].tolist())
                        colors.append(color)
            out[f"{suite}|{row['id']}"] = thumbnail(pixels, chosen, colors)
    return out
