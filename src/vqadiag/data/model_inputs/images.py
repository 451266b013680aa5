"""Images of a data folder: where each image file is, its bytes' digest, and its pixels.

Where an image is looked up (first hit wins; docs/diagnose.md, "Images"):

1. ``--images DIR`` when given: ``DIR/{imageId}.{jpg,png,jpeg}``;
2. a GQA folder: ``images/{imageId}.jpg`` next to the question files or one level up
   (the real GQA download), ``images/{imageId}.png`` (the synthetic world);
3. VQA v2 / COCO: ``{split}2014/COCO_{split}2014_{id:012d}.jpg`` for val, train and
   test (``test2015``), under the VQA folder or the data root.

Pixels are decoded with Pillow, converted to RGB, **without** EXIF rotation (boxes
are in the stored image's pixel coordinates, as GQA's and COCO's annotations are),
lazily and kept in a bounded LRU cache; a copy resized to a model's input size is
cached separately (small). A missing or undecodable file is a :class:`DataError`
naming the file (and the question, when the caller knows it).

An image id is a name, never a path: one with a path separator, ``.`` / ``..`` or a
drive is a :class:`DataError` naming the question (:func:`check_image_name`), and no
path tried leaves its folder (docs/reliability.md, "Hostile and malformed inputs").
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.data.io.lru import ByteLRU
from vqadiag.errors import DataError, excerpt

EXTENSIONS = (".jpg", ".png", ".jpeg")
COCO_SPLITS = ("val2014", "train2014", "test2015")
DEFAULT_CACHE_BYTES = 96 << 20
#: resized copies (the model's input size) kept: 1 GiB is ~20,000 images at 128 × 128
RESIZED_CACHE_BYTES = 1 << 30


def _nbytes(array: np.ndarray) -> int:
    return array.nbytes


_DRIVE = re.compile(r"^[A-Za-z]:")


def name_problem(image_id: str) -> str | None:
    """Why ``image_id`` cannot be an image's file name (it would name a path: a path
    separator, ``.`` or ``..``, a drive, a NUL byte, nothing), or None when it can."""
    if not image_id:
        return "is empty"
    if any(sep in image_id for sep in ("/", "\\", "\0")):
        return "holds a path separator or a NUL byte"
    if image_id in (".", ".."):
        return f"is {image_id!r}"
    if _DRIVE.match(image_id):
        return "starts with a drive"
    return None


def check_image_name(image_id: str, question: str | None = None) -> None:
    """Refuse an image id that would name a path instead of a file in the images folder:
    one :class:`DataError` naming the id and the question (docs/reliability.md,
    "Hostile and malformed inputs")."""
    problem = name_problem(image_id)
    if problem is not None:
        label = f"question {excerpt(question)}" if question else None
        raise DataError(
            None, f"image id {excerpt(image_id)} {problem}: an image id is a name, not a path",
            label,
        )  # fmt: skip


def _within(folder: Path, path: Path) -> bool:
    """Whether ``path`` lies under ``folder`` once ``.`` and ``..`` are resolved."""
    inside = os.path.abspath(folder)
    return os.path.commonpath([inside, os.path.abspath(path)]) == inside


def _coco_name(split: str, image_id: str) -> str | None:
    if not image_id.isdigit():
        return None
    return f"{split}/COCO_{split}_{int(image_id):012d}.jpg"


class ImageFiles:
    """Finds, digests and decodes the images of one data folder (module docstring)."""

    def __init__(
        self,
        roots: Sequence[Path],
        *,
        images_dir: str | Path | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self.images_dir = None if images_dir is None else Path(images_dir)
        if self.images_dir is not None and not self.images_dir.is_dir():
            raise DataError(self.images_dir, "images folder not found")
        self.roots = [Path(r) for r in dict.fromkeys(roots)]
        self._paths: dict[str, Path | None] = {}
        self._digests: dict[str, str] = {}
        self._pixels: ByteLRU[str, np.ndarray] = ByteLRU(cache_bytes, _nbytes)
        self._resized: ByteLRU[tuple[str, int, int], np.ndarray] = ByteLRU(
            RESIZED_CACHE_BYTES, _nbytes
        )
        self._sizes: dict[str, tuple[int, int]] = {}

    # -- where ---------------------------------------------------------------------------
    def candidates(self, image_id: str) -> list[Path]:
        """Every path tried for ``image_id``, in order, each inside its folder (an id that
        is not a file name: :func:`check_image_name`'s error)."""
        check_image_name(image_id)
        out: list[tuple[Path, Path]] = []
        if self.images_dir is not None:
            out += [(self.images_dir, self.images_dir / f"{image_id}{ext}") for ext in EXTENSIONS]
        for root in self.roots:
            for folder in (root / "images", root.parent / "images"):
                out += [(folder, folder / f"{image_id}{ext}") for ext in EXTENSIONS]
            for split in COCO_SPLITS:
                name = _coco_name(split, image_id)
                if name is not None:
                    out.append((root, root / name))
        return list(dict.fromkeys(path for folder, path in out if _within(folder, path)))

    def find(self, image_id: str, question: str | None = None) -> Path | None:
        """The file of ``image_id`` or None when there is none; an id that is not a file
        name is one :class:`DataError` naming ``question`` (:func:`check_image_name`)."""
        if image_id not in self._paths:
            check_image_name(image_id, question)
            found = (p for p in self.candidates(image_id) if p.is_file())
            self._paths[image_id] = next(found, None)
        return self._paths[image_id]

    def path(self, image_id: str, question: str | None = None) -> Path:
        """The file of ``image_id``; a missing image is one :class:`DataError`."""
        found = self.find(image_id, question)
        if found is None:
            where = self.images_dir or (self.roots[0] / "images" if self.roots else Path("."))
            label = f"question {question}" if question else None
            raise DataError(
                where / f"{image_id}.*", f"no image file for image {excerpt(image_id)}", label
            )
        return found

    def available(self) -> bool:
        """Whether the folder has any image at all (cheap: looks for the folders)."""
        if self.images_dir is not None:
            return True
        return any(
            (r / "images").is_dir() or (r.parent / "images").is_dir() or (r / s).is_dir()
            for r in self.roots
            for s in COCO_SPLITS
        )

    # -- bytes and pixels ------------------------------------------------------------------
    def digest(self, image_id: str, question: str | None = None) -> str:
        """BLAKE2b (16 hex chars) of the image file's bytes."""
        hit = self._digests.get(image_id)
        if hit is None:
            path = self.path(image_id, question)
            try:
                data = path.read_bytes()
            except OSError as err:
                raise DataError(path, f"cannot read the image: {err.strerror or err}") from None
            hit = self._digests[image_id] = hashlib.blake2b(data, digest_size=8).hexdigest()
        return hit

    def pixels(
        self, image_id: str, question: str | None = None, *, keep: bool = True
    ) -> np.ndarray:
        """``(H, W, 3)`` uint8 RGB of the stored image (no EXIF rotation), cached unless
        ``keep`` is False: a caller that reads each image once (the box encoder's training
        crops) then does not evict the images that other callers read again."""
        hit = self._pixels.get(image_id)
        if hit is not None:
            return hit
        array = decode(self.path(image_id, question), question)
        array.setflags(write=False)
        if not keep:
            return array
        return self._pixels.put(image_id, array)  # another thread's, if it decoded it first

    def resized(
        self, image_id: str, size: tuple[int, int], question: str | None = None
    ) -> tuple[np.ndarray, tuple[int, int]]:
        """The image resized to ``size`` = (width, height) (bilinear), and its original
        (width, height); resized copies are small and kept."""
        key = (image_id, int(size[0]), int(size[1]))
        hit = self._resized.get(key)
        if hit is not None:
            return hit, self._sizes[image_id]
        from PIL import Image

        full = self._pixels.get(image_id, touch=False)
        # a model that reads resized copies never needs the full-size array: decode and
        # resize in Pillow (the same pixels as resizing the cached array), keep the copy
        if full is not None:
            image = Image.fromarray(full)
        else:
            image = open_rgb(self.path(image_id, question), question)
        original = image.size
        small = np.asarray(image.resize(key[1:], Image.BILINEAR), np.uint8)
        small.setflags(write=False)
        self._sizes[image_id] = original  # before the copy is visible to other threads
        return self._resized.put(key, small), original


def decode(path: Path, question: str | None = None) -> np.ndarray:
    """Decode an image file to ``(H, W, 3)`` uint8 RGB; problems are one :class:`DataError`."""
    return np.asarray(open_rgb(path, question), dtype=np.uint8)


def open_rgb(path: Path, question: str | None = None) -> Any:
    """The image file decoded as a Pillow RGB image (no EXIF rotation); problems are one
    :class:`DataError` naming the file (and ``question``)."""
    from PIL import Image, UnidentifiedImageError

    label = f"question {question}" if question else None
    try:
        with Image.open(path) as img:
            img.load()
            rgb = img.convert("RGB")
    except FileNotFoundError:
        raise DataError(path, "image file not found", label) from None
    except PermissionError:
        raise DataError(path, "permission denied", label) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        raise DataError(path, f"cannot decode the image: {err}", label) from None
    return rgb
