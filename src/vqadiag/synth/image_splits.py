"""Which images each split of a synthetic world holds, and the ids they go by.

Images are split 70% / 20% / 10% into GQA train / val / testdev; VQA v2 train uses the
GQA train images and VQA v2 val the val and testdev images. Image ``i`` is GQA image
``str(2300000 + i)`` and VQA v2 image ``i + 1`` (docs/synth.md).
"""

from __future__ import annotations

SPLIT_FRACTIONS = {"train": 0.7, "val": 0.2, "testdev": 0.1}
GQA_IMAGE_BASE = 2300000


def gqa_image_id(index: int) -> str:
    """GQA image id of image ``index``."""
    return str(GQA_IMAGE_BASE + index)


def vqa_image_id(index: int) -> int:
    """VQA v2 (COCO-style integer) image id of image ``index``."""
    return index + 1


def split_ranges(n: int) -> dict[str, range]:
    """Image index ranges of the GQA splits (70/20/10, each non-empty when n ≥ 3)."""
    n_train = max(1, round(n * SPLIT_FRACTIONS["train"])) if n >= 3 else n
    n_val = max(1, round(n * SPLIT_FRACTIONS["val"])) if n >= 3 else 0
    n_train = min(n_train, n - n_val - (1 if n >= 3 else 0))
    return {
        "train": range(0, n_train),
        "val": range(n_train, n_train + n_val),
        "testdev": range(n_train + n_val, n),
    }
