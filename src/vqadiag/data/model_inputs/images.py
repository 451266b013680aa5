"""Images of a data folder: where each image file is, its bytes' digest, and its pixels.

Where an image is looked up (first hit wins; docs/diagnose.md, "Images"):

1. ``--images DIR`` when given: ``DIR/{imageId}.{jpg,png,jpeg}``;
2. a GQA folder: ``images/{imageId}.jpg`` next to the question files or one level up
   (the real GQA download), ``images/{imageId}.png`` (the synthetic world);
3. VQA v2 / COCO: ``{split}2014/COCO_{split}2014_{id:012d}.jpg`` for val, train and
   test (``test2015``), under the VQA folder or the data root;

and, for a prepared copy of a Hugging Face dataset or a VLMEvalKit TSV, before 2. and
3.: the image's cell in the copy (``images.index.json``,
:mod:`vqadiag.data.sources.embedded_images`), whose bytes are those of the file.

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
import io
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vqadiag.data.io.lru import ByteLRU
from vqadiag.data.sources.embedded_images import EmbeddedImages
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
        embedded: EmbeddedImages | None = None,
    ) -> None:
        self.images_dir = None if images_dir is None else Path(images_dir)
        self.embedded = embedded
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
        if self.images_dir is not None:  # the images given, and no others
            out += [(self.images_dir, self.images_dir / f"{image_id}{ext}") for ext in EXTENSIONS]
            return list(dict.fromkeys(path for _, path in out if _within(self.images_dir, path)))
        for root in self.roots:
            for folder in (root / "images", root.parent / "images"):
                out += [(folder, folder / f"{image_id}{ext}") for ext in EXTENSIONS]
            for split in COCO_SPLITS:
                name = _coco_name(split, image_id)
                if name is not None:
                    out.append((root, root / name))
        return list(dict.fromkeys(path for folder, path in out if _within(folder, path)))

    def find(self, image_id: str, question: str | None = None) -> Path | None:
        """The file of ``image_id`` (for an image inside a dataset copy: the file whose
        cell holds it) or None when there is none; an id that is not a file name is one
        :class:`DataError` naming ``question`` (:func:`check_image_name`)."""
        if image_id not in self._paths:
            check_image_name(image_id, question)
            self._paths[image_id] = self._located(image_id)
        return self._paths[image_id]

    def _located(self, image_id: str) -> Path | None:
        """``--images DIR`` alone when given (a copy of the images is never mixed with
        the data folder's: an image the copy lacks is missing); else the dataset copy's
        cell, then the data folders."""
        tried = self.candidates(image_id)
        if self.images_dir is not None:
            return next((p for p in tried if p.is_file()), None)
        if self.embedded is not None and image_id in self.embedded:
            return self.embedded.container(image_id)
        return next((p for p in tried if p.is_file()), None)

    def _inside_copy(self, image_id: str, question: str | None) -> bool:
        """Whether ``image_id`` is read from a dataset copy's cell, not a file."""
        found = self.find(image_id, question)
        return (
            self.embedded is not None
            and image_id in self.embedded
            and found == self.embedded.container(image_id)
        )

    def read_bytes(self, image_id: str, question: str | None = None) -> bytes:
        """The bytes of ``image_id``'s image file (or of its cell in a dataset copy)."""
        if self._inside_copy(image_id, question):
            assert self.embedded is not None
            return self.embedded.read(image_id, question)
        path = self.path(image_id, question)
        try:
            return path.read_bytes()
        except OSError as err:
            raise DataError(path, f"cannot read the image: {err.strerror or err}") from None

    def _open(self, image_id: str, question: str | None) -> Any:
        """The image as a Pillow RGB image (file or dataset cell)."""
        if self._inside_copy(image_id, question):
            return open_rgb(io.BytesIO(self.read_bytes(image_id, question)), question,
                            shown=self.path(image_id, question))  # fmt: skip
        return open_rgb(self.path(image_id, question), question)

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
        if self.images_dir is not None or self.embedded:
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
            data = self.read_bytes(image_id, question)
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
        array = np.asarray(self._open(image_id, question), dtype=np.uint8)
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
        image = Image.fromarray(full) if full is not None else self._open(image_id, question)
        original = image.size
        small = np.asarray(image.resize(key[1:], Image.BILINEAR), np.uint8)
        small.setflags(write=False)
        self._sizes[image_id] = original  # before the copy is visible to other threads
        return self._resized.put(key, small), original


def decode(path: Path, question: str | None = None) -> np.ndarray:
    """Decode an image file to ``(H, W, 3)`` uint8 RGB; problems are one :class:`DataError`."""
    return np.asarray(open_rgb(path, question), dtype=np.uint8)


def open_rgb(
    path: Path | io.BytesIO, question: str | None = None, shown: Path | None = None
) -> Any:
    """The image file (or its bytes, ``shown`` naming where they are) decoded as a Pillow
    RGB image (no EXIF rotation); problems are one :class:`DataError` naming the file
    (and ``question``)."""
    from PIL import Image, UnidentifiedImageError

    label = f"question {question}" if question else None
    named = shown if shown is not None else path
    try:
        with Image.open(path) as img:
            img.load()
            rgb = _as_rgb(img, named, label)
    except DataError:
        raise
    except FileNotFoundError:
        raise DataError(named, "image file not found", label) from None
    except PermissionError:
        raise DataError(named, "permission denied", label) from None
    except Image.DecompressionBombError as err:
        raise DataError(named, f"image too large to decode safely: {err}", label) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        raise DataError(named, f"cannot decode the image: {err}", label) from None
    return rgb


#: Pillow's modes of one channel of whole numbers wider than 8 bits (16-bit PNGs)
WIDE_INTEGER_MODES = ("I", "I;16", "I;16B", "I;16L", "I;16N")


def _as_rgb(img: Any, named: Path | io.BytesIO, label: str | None) -> Any:
    """``img`` as 8-bit RGB. Pillow's own conversion clips a 16-bit grey image to 255
    (white); its values are scaled to 8 bits instead (``v / 257``), and a float image,
    whose range is unknown, is refused."""
    from PIL import Image

    if img.mode in WIDE_INTEGER_MODES:
        values = np.asarray(img, dtype=np.float64)
        if values.size and (values.min() < 0 or values.max() > 65535):
            raise DataError(named, f"{img.mode} image values outside 0-65535", label)
        grey = np.rint(values / 257.0).astype(np.uint8)
        return Image.fromarray(grey).convert("RGB")
    if img.mode == "F":
        raise DataError(
            named, "a 32-bit float image: its range is unknown; save it with 8 or 16 bits", label
        )
    return img.convert("RGB")
