"""``generate_world``: write a synthetic world in the GQA, VQA v2 and VQA-introspect formats.

Layout under ``out_dir``::

    world.json                                   rules, biases, sizes, seed, split sizes
    gqa/{train,val,testdev}_balanced_questions.json
    gqa/{train,val,testdev}_sceneGraphs.json
    gqa/{train,val,testdev}_choices.json
    gqa/objects/gqa_objects_info.json + gqa_objects_<k>.h5   (bboxes, features)
    gqa/images/{imageId}.png                     the rendered images (unless render=False)
    vqa2/v2_OpenEnded_mscoco_{train,val}2014_questions.json
    vqa2/v2_mscoco_{train,val}2014_annotations.json
    vqa2/v2_mscoco_{train,val}2014_complementary_pairs.json
    vqa2/synth_{train,val}2014_pair_candidates.json          the 24 neighbours of each pair
    introspect/VQAIntrospect_{train,val}v1.0.json

Images are split 70% / 20% / 10% into GQA train / val / testdev; VQA v2 train
uses the GQA train images and VQA v2 val the val and testdev images. Image ids:
GQA ``str(2300000 + i)``, VQA ``i + 1`` for image index ``i`` (the map is in
``world.json``); VQA question ids are ``image_id · 1000 + k``. All randomness
derives from ``seed``: the same seed and options give byte-identical files.
Images are drawn by :mod:`vqadiag.synth.render` (encodings: docs/synth.md, "Images"),
in worker processes that run while the questions are generated
(:mod:`vqadiag.synth.image_writer`).

This module runs the steps in order and writes ``world.json``; each kind of file has
its own module: :mod:`vqadiag.synth.gqa_split` (GQA scene graphs, questions, choices),
:func:`vqadiag.synth.detector.write_detections` (``gqa/objects``),
:mod:`vqadiag.synth.vqa2_split` (VQA v2 questions, annotations, pairs) and
:func:`vqadiag.synth.introspect.write_introspect_split` (VQA-introspect). Image ids and
splits: :mod:`vqadiag.synth.image_splits`.
"""

from __future__ import annotations

import os
import random
import secrets
import shutil
import time
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vqadiag import __version__
from vqadiag.data.io.atomic import check_reusable, pid_alive, writable_folder
from vqadiag.data.io.faults import write_point
from vqadiag.data.io.jsonio import write_json
from vqadiag.progress import progress_bar
from vqadiag.synth import detector as det
from vqadiag.synth import gqa_questions as gq
from vqadiag.synth import neighbours as nn
from vqadiag.synth import vqa2
from vqadiag.synth.gqa_split import SceneNames, write_gqa_split
from vqadiag.synth.image_splits import GQA_IMAGE_BASE, gqa_image_id, split_ranges, vqa_image_id
from vqadiag.synth.image_writer import ImageWriter
from vqadiag.synth.introspect import write_introspect_split
from vqadiag.synth.priors import Priors, build_priors
from vqadiag.synth.render import ZLIB_LEVEL
from vqadiag.synth.scenes import (
    MAX_OBJECTS,
    MIN_OBJECTS,
    Scenes,
    check_object_range,
    sample_scenes,
)
from vqadiag.synth.taxonomy import (
    CLASSES,
    COLORS,
    FAMILIES,
    MATERIALS,
    PLACES,
    RELATIONS,
    RULES_TEXT,
    STATES,
)
from vqadiag.synth.vqa2_split import write_vqa2_split

if TYPE_CHECKING:
    from rich.progress import Progress

#: version of what a world is made of (2: textures and badges scale with each side of
#: the box, docs/synth.md "Images"); written to world.json
WORLD_VERSION = 2


_RENDERING = {
    "folder": "gqa/images",
    "file": "{imageId}.png",
    "format": f"PNG, 8-bit palette, Up filter, zlib level {ZLIB_LEVEL} (Z_RLE)",
    "encoding": "vqadiag.synth.render; docs/synth.md, section Images",
}


def _world_json(
    seed: int, images: int, bias: float, feature_dim: int, priors: Priors,
    splits: dict[str, Any], image_ids: dict[str, str], rendered: bool, objects: tuple[int, int],
) -> dict[str, Any]:  # fmt: skip
    return {
        "generator": "vqadiag.synth",
        "version": WORLD_VERSION,
        "vqadiag_version": __version__,
        "seed": seed,
        "images": images,
        "bias": bias,
        "feature_dim": feature_dim,
        "objects_per_image": list(objects),
        "splits": splits,
        "taxonomy": {
            "classes": [
                {
                    "name": c.name,
                    "plural": c.plural,
                    "category": c.category,
                    "typical_size": list(c.size),
                    "colors": list(c.colors),
                    "materials": list(c.materials),
                    "states": list(c.states),
                    "support": c.support,
                    "placeable": c.placeable,
                }
                for c in CLASSES
            ],
            "places": list(PLACES),
            "relations": list(RELATIONS),
        },
        "rules": {
            **RULES_TEXT,
            "relations": "see vqadiag.synth.scenes.relation_tensor: on / under, left / right, "
            "behind / in front of and near are derived from the boxes",
        },
        "priors": priors.to_dict(),
        "gqa": {
            "balance_ratio": gq.BALANCE_RATIO,
            "question_id": "split digit (train 0, val 1, testdev 2) + 7-digit counter",
        },
        "detector": {
            "max_boxes": det.MAX_BOXES,
            "p_detect": det.P_DETECT,
            "p_detect_small": det.P_DETECT_SMALL,
            "small_area": det.SMALL_AREA,
            "p_poor_localization": det.P_POOR,
            "sigma": det.SIGMA,
            "sigma_poor": det.SIGMA_POOR,
            "p_duplicate": det.P_DUPLICATE,
            "false_positives_per_image": det.FALSE_POSITIVES,
            "attribute_weight": det.ATTR_WEIGHT,
            "feature_noise": det.NOISE,
        },
        "vqa2": {
            "k_neighbours": nn.K_NEIGHBOURS,
            "embedding": "class-count histogram + 4 x one-hot(place)",
            "pick_decay": vqa2.PICK_DECAY,
            "annotator_noise_max": vqa2.NOISE_MAX,
            "question_id": "image_id * 1000 + k",
        },
        "image_ids": image_ids,
        "rendering": _RENDERING if rendered else None,
    }


def generate_world(
    out_dir: str | Path,
    images: int = 2000,
    seed: int = 0,
    bias: float = 0.8,
    feature_dim: int = 64,
    progress: bool = False,
    render: bool = True,
    render_workers: int | None = None,
    objects: tuple[int, int] = (MIN_OBJECTS, MAX_OBJECTS),
) -> dict[str, Any]:
    """Generate a world under ``out_dir`` (layout in the module docstring) and summarise it.

    ``objects`` is the range of objects per image (``(lo, hi)``, default 5–40,
    :func:`~vqadiag.synth.scenes.sample_scenes`); a sparser range gives scenes a small
    model perceives sooner (docs/synth.md, "The world").

    ``render=False`` skips the images (``gqa/images``) for callers that need only the
    files and features. ``render_workers`` is the number of worker processes that draw
    the images while the questions are made (0: all in this process at the end; None:
    0 under :data:`vqadiag.synth.image_writer.POOL_MIN_IMAGES` images, else the idle CPUs
    less one, see :func:`vqadiag.synth.image_writer.idle_cpus`); the bytes written do not
    depend on it.

    Returns ``{"out", "seed", "images", "bias", "feature_dim", "objects_per_image",
    "splits", "files", "render_workers", "questions_per_second", "seconds"}`` (``splits`` as in
    ``world.json``; with ``render``, ``splits["images"]`` counts the PNGs and ``files``
    lists them; ``render_workers`` is the number of worker processes used, None
    without ``render``).
    """
    if isinstance(images, bool) or not isinstance(images, int) or images < 3:
        raise ValueError(f"images must be a whole number of 3 or more, got {images!r}")
    if feature_dim < 1:
        raise ValueError(f"feature_dim must be positive, got {feature_dim}")
    if render_workers is not None and render_workers < 0:
        raise ValueError(f"render_workers must be at least 0, got {render_workers}")
    objects = check_object_range(objects)
    started = time.perf_counter()
    final = Path(out_dir)
    out = _partial_folder(final)  # the world is built here and renamed when complete
    try:
        result = _generate_into(
            out,
            seed,
            images,
            bias,
            feature_dim,
            render,
            render_workers,
            progress,
            started,
            objects,
        )
        _commit_world(out, final)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return {**result, "out": str(final)}


def _partial_folder(final: Path) -> Path:
    """A fresh hidden sibling of ``final`` to build the world in, after checking ``final``
    can take a world: missing, empty, or an earlier world (it has ``world.json``); a
    non-empty folder of other files is refused before any work. Partial folders left by
    killed runs (their pid is gone) are removed; a world such a run had moved aside to
    put its new one in place is put back when nothing took its place, removed otherwise."""
    check_reusable(final, ("world.json",), "synthetic world (world.json)")
    parent = writable_folder(final.parent)
    for pattern in (f".{final.name}.old-*", f".{final.name}.partial-*"):
        for stale in parent.glob(pattern):
            pid = stale.name.rsplit("-", 2)[-2]
            if not pid.isdigit() or pid_alive(int(pid)):
                continue
            if pattern.endswith(".old-*") and not final.exists():
                stale.rename(final)  # killed while swapping worlds: put the old one back
            else:
                shutil.rmtree(stale, ignore_errors=True)
    out = parent / f".{final.name}.partial-{os.getpid()}-{secrets.token_hex(4)}"
    out.mkdir()
    return out


def _commit_world(out: Path, final: Path) -> None:
    """Put the complete world ``out`` at ``final`` (an earlier world there is replaced)."""
    if final.is_dir():
        old = final.with_name(f".{final.name}.old-{os.getpid()}-{secrets.token_hex(4)}")
        final.rename(old)
        write_point(f"world {final.name} moved aside")
        out.rename(final)
        write_point(f"world {final.name} renamed into place")
        shutil.rmtree(old, ignore_errors=True)
    else:
        out.rename(final)
        write_point(f"world {final.name} renamed into place")


def _generate_into(
    out: Path,
    seed: int,
    images: int,
    bias: float,
    feature_dim: int,
    render: bool,
    render_workers: int | None,
    progress: bool,
    started: float,
    objects: tuple[int, int],
) -> dict[str, Any]:
    """:func:`generate_world` into the folder ``out``.

    Six random streams derive from ``seed``: the priors, the scenes, the Python seeds
    of the GQA questions, the balancing and the VQA v2 questions, and the detector.
    """
    streams = np.random.SeedSequence(seed).spawn(6)
    priors = build_priors(bias, np.random.default_rng(streams[0]))
    scenes = sample_scenes(images, priors, np.random.default_rng(streams[1]), objects)
    py_seeds = np.random.default_rng(streams[2]).integers(0, 2**63, 4).tolist()
    maker = _question_maker(priors, random.Random(py_seeds[0]))
    splits: dict[str, Any] = {"gqa": {}, "vqa2": {}, "introspect": {}}
    files: list[str] = []
    writer = None
    if render:
        image_names = [gqa_image_id(i) for i in range(images)]
        writer = ImageWriter(scenes, out / "gqa" / "images", image_names, render_workers)
        writer.start()  # workers draw the images while the questions are made
    with writer or nullcontext(), progress_bar(progress) as bar:
        if writer is not None:
            task = bar.add_task("images", total=images)
            writer.follow(lambda n: bar.advance(task, n))
        facts: dict[int, vqa2.Facts] = {}
        n_questions = _write_gqa(
            out, scenes, maker, random.Random(py_seeds[1]), facts, splits, files, bar
        )
        det_files, detections = det.write_detections(
            out, scenes, feature_dim, np.random.default_rng(streams[3]), bar
        )
        files += det_files
        n_questions += _write_vqa2_and_introspect(
            out, scenes, facts, random.Random(py_seeds[2]), splits, files, bar
        )
        if writer is not None:
            splits["images"] = {"images": writer.finish(), "folder": "gqa/images"}
            files += [f"gqa/images/{name}.png" for name in image_names]
    splits["detections"] = {"images": images, **detections}
    _write_world_json(out, seed, images, bias, feature_dim, priors, splits, render, objects)
    files.insert(0, "world.json")
    seconds = time.perf_counter() - started
    return {
        "out": str(out),
        "seed": seed,
        "images": images,
        "bias": bias,
        "feature_dim": feature_dim,
        "objects_per_image": list(objects),
        "splits": splits,
        "files": files,
        "render_workers": None if writer is None else writer.workers,
        "questions": n_questions,
        "seconds": seconds,
        "questions_per_second": n_questions / seconds if seconds > 0 else float("nan"),
    }


def _question_maker(priors: Priors, rng: random.Random) -> gq.QuestionMaker:
    """The GQA question maker of a world: ``rng`` and the priors it draws false values and
    absent classes from (attribute values per class, classes per place)."""
    attr_priors = {
        f: [
            {FAMILY: float(p) for FAMILY, p in zip(_values(f), row, strict=True) if p > 0}
            for row in priors.attr[f]
        ]
        for f in FAMILIES
    }
    place_classes = {
        place: [(CLASSES[k].name, float(w)) for k, w in enumerate(row) if w > 0]
        for place, row in zip(PLACES, priors.class_given_place, strict=True)
    }
    return gq.QuestionMaker(rng, attr_priors, place_classes)


def _values(family: str) -> tuple[str, ...]:
    """The values of attribute ``family`` that the priors list (colour, material, state)."""
    return {"color": COLORS, "material": MATERIALS, "state": STATES}[family]


def _write_gqa(
    out: Path, scenes: Scenes, maker: gq.QuestionMaker, balance_rng: random.Random,
    facts: dict[int, vqa2.Facts], splits: dict[str, Any], files: list[str], bar: Progress,
) -> int:  # fmt: skip
    """Write the GQA files of the train, val and testdev splits (adding them to ``files``
    and their entries to ``splits["gqa"]``) and fill ``facts``; returns the number of
    questions."""
    names = SceneNames(scenes)
    n_questions = 0
    for split, members in split_ranges(scenes.n_images).items():
        split_files, stats = write_gqa_split(
            out, split, members, scenes, names, maker, facts, balance_rng, bar
        )
        files += split_files
        splits["gqa"][split] = stats
        n_questions += stats["questions"]
    return n_questions


def _write_vqa2_and_introspect(
    out: Path, scenes: Scenes, facts: dict[int, vqa2.Facts], rng: random.Random,
    splits: dict[str, Any], files: list[str], bar: Progress,
) -> int:  # fmt: skip
    """Write the VQA v2 and VQA-introspect files of train2014 (the GQA train images) and
    val2014 (the val and testdev images), adding them to ``files`` and their entries to
    ``splits["vqa2"]`` and ``splits["introspect"]``; returns the number of questions."""
    ranges = split_ranges(scenes.n_images)
    n_questions = 0
    for subtype, members in (
        ("train2014", list(ranges["train"])),
        ("val2014", list(ranges["val"]) + list(ranges["testdev"])),
    ):
        split_files, stats, introspect = write_vqa2_split(
            out, subtype, members, facts, scenes, rng, bar
        )
        short = subtype.removesuffix("2014")
        introspect_file, introspect_stats = write_introspect_split(out, short, introspect)
        files += [*split_files, introspect_file]
        splits["vqa2"][short] = stats
        splits["introspect"][short] = introspect_stats
        n_questions += stats["questions"]
    return n_questions


def _write_world_json(
    out: Path, seed: int, images: int, bias: float, feature_dim: int, priors: Priors,
    splits: dict[str, Any], rendered: bool, objects: tuple[int, int],
) -> None:  # fmt: skip
    """Write ``out/world.json`` (:func:`_world_json`, with the map of image ids)."""
    image_ids = {
        "gqa": f"str({GQA_IMAGE_BASE} + index)",
        "vqa2": "index + 1",
        "vqa_to_gqa": {str(vqa_image_id(i)): gqa_image_id(i) for i in range(images)},
    }
    write_json(
        out / "world.json",
        _world_json(seed, images, bias, feature_dim, priors, splits, image_ids, rendered, objects),
        indent=True,
    )
