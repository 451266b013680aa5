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
in worker processes that run while the questions are generated.
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
from vqadiag.data.atomic import check_reusable, pid_alive, writable_folder
from vqadiag.data.faults import write_point
from vqadiag.data.jsonio import write_json
from vqadiag.progress import progress_bar
from vqadiag.synth import detector as det
from vqadiag.synth import gqa_questions as gq
from vqadiag.synth import neighbours as nn
from vqadiag.synth import vqa2
from vqadiag.synth.gqa_record import ImageContext, finalize
from vqadiag.synth.image_writer import ImageWriter
from vqadiag.synth.introspect import introspect_record
from vqadiag.synth.priors import Priors, build_priors
from vqadiag.synth.render import ZLIB_LEVEL
from vqadiag.synth.scenes import Scenes, sample_scenes, scene_relations
from vqadiag.synth.taxonomy import (
    CLASSES,
    COLORS,
    FAMILIES,
    MATERIALS,
    PLACES,
    RELATIONS,
    RULES_TEXT,
    SIZES,
    STATES,
)

if TYPE_CHECKING:
    from rich.progress import Progress

#: version of what a world is made of (2: textures and badges scale with each side of
#: the box, docs/synth.md "Images"); written to world.json
WORLD_VERSION = 2
SPLIT_FRACTIONS = {"train": 0.7, "val": 0.2, "testdev": 0.1}
GQA_IMAGE_BASE = 2300000
OBJECT_ID_BASE = 1000000
SPLIT_DIGIT = {"train": "0", "val": "1", "testdev": "2"}
BLOCK = 1000
VQA_SEEDS_PER_IMAGE = 3
P_REASONING = 0.6


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


class _Names:
    """String views of the scene arrays (computed once)."""

    def __init__(self, scenes: Scenes) -> None:
        def strings(values: tuple[str, ...], idx: np.ndarray) -> list[str | None]:
            table = np.array([*values, None], dtype=object)
            return table[idx].tolist()

        self.cls = scenes.cls.tolist()
        self.attrs = {
            "color": strings(COLORS, scenes.color),
            "material": strings(MATERIALS, scenes.material),
            "state": strings(STATES, scenes.state),
            "size": strings(SIZES, scenes.size),
        }
        self.box = scenes.box.tolist()
        self.offsets = scenes.offsets.tolist()
        self.place = [PLACES[p] for p in scenes.place.tolist()]
        self.width = scenes.width.tolist()
        self.height = scenes.height.tolist()


def _scene_graph(names: _Names, i: int, triples: list[tuple[int, int, int]]) -> dict[str, Any]:
    lo, hi = names.offsets[i], names.offsets[i + 1]
    oids = [str(OBJECT_ID_BASE + k) for k in range(lo, hi)]
    rels: list[list[dict[str, str]]] = [[] for _ in oids]
    for a, r, b in triples:
        rels[a].append({"name": RELATIONS[r], "object": oids[b]})
    objects = {}
    for j, k in enumerate(range(lo, hi)):
        x, y, w, h = names.box[k]
        attributes = [
            v
            for v in (names.attrs[f][k] for f in ("color", "material", "state", "size"))
            if v is not None
        ]
        objects[oids[j]] = {
            "name": CLASSES[names.cls[k]].name,
            "x": x,
            "y": y,
            "w": w,
            "h": h,
            "attributes": attributes,
            "relations": rels[j],
        }
    return {
        "width": names.width[i],
        "height": names.height[i],
        "location": names.place[i],
        "objects": objects,
    }


def _facts(names: _Names, i: int, triples: list[tuple[int, int, int]]) -> vqa2.Facts:
    lo, hi = names.offsets[i], names.offsets[i + 1]
    on = RELATIONS.index("on")
    return vqa2.Facts(
        place=names.place[i],
        names=[CLASSES[c].name for c in names.cls[lo:hi]],
        cls=names.cls[lo:hi],
        attrs={f: names.attrs[f][lo:hi] for f in FAMILIES},
        on=[(a, b) for a, r, b in triples if r == on],
    )


def _gqa_split(
    split: str, images: range, scenes: Scenes, names: _Names, maker: gq.QuestionMaker,
    facts: dict[int, vqa2.Facts], balance_rng: random.Random, bar: Progress,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:  # fmt: skip
    graphs: dict[str, Any] = {}
    questions: dict[str, Any] = {}
    counter = 0
    task = bar.add_task(f"GQA {split}", total=len(images))
    for lo in range(images.start, images.stop, BLOCK):
        hi = min(images.stop, lo + BLOCK)
        relations = scene_relations(scenes, lo, hi)
        for i in range(lo, hi):
            triples = relations[i - lo]
            image_id = gqa_image_id(i)
            graph = _scene_graph(names, i, triples)
            graphs[image_id] = graph
            a, b = names.offsets[i], names.offsets[i + 1]
            ctx = ImageContext(
                image_id,
                names.place[i],
                list(graph["objects"]),
                names.cls[a:b],
                {f: names.attrs[f][a:b] for f in FAMILIES},
                [w * h for _, _, w, h in names.box[a:b]],
                triples,
            )
            records = maker.image_questions(ctx)
            qids = [f"{SPLIT_DIGIT[split]}{counter + k:07d}" for k in range(len(records))]
            counter += len(records)
            finalize(records, qids)
            questions.update(zip(qids, records, strict=True))
            facts[i] = _facts(names, i, triples)
        bar.advance(task, hi - lo)
    gq.mark_balanced(questions, balance_rng)
    return questions, graphs, _choices(questions)


YES_NO = ["no", "yes"]


def _choices(questions: dict[str, Any]) -> dict[str, Any]:
    """GQA-style choices (docs/synth.md): ``valid`` = every answer of the question's kind
    (the generator's answer family: yes / no, all colours, both options …); ``plausible``
    = the valid answers that some question of the same local group (same question kind
    about the same kind of object) has as its answer in this split, and the gold answer
    (both for a yes / no question).
    Pops each record's ``_plausible`` (the family the generator drew the answer from)."""
    by_group: dict[Any, set[str]] = {}
    for rec in questions.values():
        by_group.setdefault(rec["groups"]["local"], set()).add(rec["answer"])
    choices = {}
    for qid, rec in questions.items():
        valid = sorted(set(rec.pop("_plausible")) | {rec["answer"]})
        local = rec["groups"]["local"]
        seen = by_group[local] if local is not None and valid != YES_NO else set(valid)
        plausible = sorted((seen & set(valid)) | {rec["answer"]})
        choices[qid] = {"valid": valid, "plausible": plausible}
    return choices


def _vqa_split(
    subtype: str, images: list[int], facts: dict[int, vqa2.Facts], scenes: Scenes,
    rng: random.Random, bar: Progress,
) -> dict[str, Any]:  # fmt: skip
    """Questions, annotations, pairs and introspect records of one VQA v2 split."""
    per_image: dict[int, list[tuple[str, str, str]]] = {}
    text_index: dict[int, dict[str, int]] = {}
    seeds: list[tuple[int, int]] = []
    for i in images:
        cands = vqa2.candidate_questions(facts[i], rng)
        plain = [c for c in cands if c[0] not in vqa2.REASONING][:VQA_SEEDS_PER_IMAGE]
        reasoning = [c for c in cands if c[0] in vqa2.REASONING][:1]
        chosen = plain + (reasoning if rng.random() < P_REASONING else [])
        per_image[i] = []
        text_index[i] = {}
        for key, param in chosen:
            ans = vqa2.answer_of(key, param, facts[i])
            if ans is None:
                continue
            text = vqa2.render(key, param)
            if text in text_index[i]:
                continue
            text_index[i][text] = len(per_image[i])
            seeds.append((i, len(per_image[i])))
            per_image[i].append((key, param, ans))

    # complementary pairs among the 24 nearest neighbours (Goyal et al.)
    idx = np.array(images, dtype=np.int64)
    emb = nn.scene_embedding(scenes.cls, scenes.offsets, scenes.place, len(CLASSES), len(PLACES))[
        idx
    ]
    neighbours = nn.knn(emb)
    position = {img: p for p, img in enumerate(images)}
    paired: set[tuple[int, int]] = set()
    pairs: list[tuple[tuple[int, int], tuple[int, int]]] = []
    candidates: dict[tuple[int, int], tuple[list[int], int]] = {}
    attempts = impossible = 0
    task = bar.add_task(f"VQA v2 {subtype} pairs", total=len(seeds))
    for i, k in seeds:
        bar.advance(task, 1)
        if (i, k) in paired:
            continue
        attempts += 1
        key, param, ans = per_image[i][k]
        text = vqa2.render(key, param)
        near = [images[j] for j in neighbours[position[i]].tolist()]
        valid, weights = [], []
        for rank, j in enumerate(near):
            other = vqa2.answer_of(key, param, facts[j])
            if other is None or other == ans:
                continue
            existing = text_index[j].get(text)
            if existing is not None and (j, existing) in paired:
                continue
            valid.append((j, other))
            weights.append(vqa2.PICK_DECAY**rank)
        if not valid:
            impossible += 1
            continue
        j, other = rng.choices(valid, weights)[0]
        kj = text_index[j].get(text)
        if kj is None:
            kj = len(per_image[j])
            text_index[j][text] = kj
            per_image[j].append((key, param, other))
        paired.update({(i, k), (j, kj)})
        pairs.append(((i, k), (j, kj)))
        candidates[(i, k)] = (near, j)

    def qid(i: int, k: int) -> int:
        return vqa_image_id(i) * 1000 + k

    questions, annotations, introspect = [], [], {}
    for i in images:
        for k, (key, param, ans) in enumerate(per_image[i]):
            text = vqa2.render(key, param)
            q = qid(i, k)
            questions.append({"image_id": vqa_image_id(i), "question": text, "question_id": q})
            answer_type = vqa2.TEMPLATES[key][1]
            annotations.append(
                {
                    "question_type": vqa2.question_type(text),
                    "multiple_choice_answer": ans,
                    "answers": vqa2.annotator_answers(ans, answer_type, rng),
                    "image_id": vqa_image_id(i),
                    "answer_type": answer_type,
                    "question_id": q,
                }
            )
            if key in vqa2.REASONING:
                introspect[str(q)] = introspect_record(
                    key, param, text, ans, vqa_image_id(i), facts[i], rng
                )
    pair_list = [[qid(*a), qid(*b)] for a, b in pairs]
    cand_out = {
        str(qid(*a)): {
            "image_id": vqa_image_id(a[0]),
            "candidates": [vqa_image_id(j) for j in near],
            "complement_image_id": vqa_image_id(j),
        }
        for a, (near, j) in candidates.items()
    }
    return {
        "questions": questions,
        "annotations": annotations,
        "pairs": pair_list,
        "candidates": cand_out,
        "introspect": introspect,
        "attempts": attempts,
        "not_possible": impossible,
    }


def _vqa_header(subtype: str) -> dict[str, Any]:
    return {
        "info": {
            "description": "vqadiag synthetic world in the VQA v2 format",
            "version": "2.0",
            "year": 2017,
        },
        "license": {"name": "CC0 (synthetic)", "url": ""},
        "data_subtype": subtype,
        "data_type": "mscoco",
    }


def _write_detections(
    out: Path, scenes: Scenes, feature_dim: int, rng: np.random.Generator, bar: Progress
) -> dict[str, Any]:
    folder = out / "gqa" / "objects"
    space = det.FeatureSpace.draw(feature_dim, rng)
    writer = det.FeatureWriter(folder, scenes.n_images, feature_dim)
    info: dict[str, Any] = {}
    boxes = 0
    task = bar.add_task("detections", total=scenes.n_images)
    try:
        for lo in range(0, scenes.n_images, 2 * BLOCK):
            hi = min(scenes.n_images, lo + 2 * BLOCK)
            d = det.simulate_detections(scenes, lo, hi, space, rng)
            where = writer.write(lo, d)
            nums = d.num.tolist()
            boxes += sum(nums)
            for j, (k, idx) in enumerate(where):
                i = lo + j
                info[gqa_image_id(i)] = {
                    "width": int(scenes.width[i]),
                    "height": int(scenes.height[i]),
                    "objectsNum": nums[j],
                    "file": k,
                    "idx": idx,
                }
            bar.advance(task, hi - lo)
    finally:
        writer.close()
    write_json(folder / "gqa_objects_info.json", info)
    return {"boxes": boxes, "files": len(writer.files)}


_RENDERING = {
    "folder": "gqa/images",
    "file": "{imageId}.png",
    "format": f"PNG, 8-bit palette, Up filter, zlib level {ZLIB_LEVEL} (Z_RLE)",
    "encoding": "vqadiag.synth.render; docs/synth.md, section Images",
}


def _world_json(
    seed: int, images: int, bias: float, feature_dim: int, priors: Priors,
    splits: dict[str, Any], image_ids: dict[str, str], rendered: bool,
) -> dict[str, Any]:  # fmt: skip
    return {
        "generator": "vqadiag.synth",
        "version": WORLD_VERSION,
        "vqadiag_version": __version__,
        "seed": seed,
        "images": images,
        "bias": bias,
        "feature_dim": feature_dim,
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
) -> dict[str, Any]:
    """Generate a world under ``out_dir`` (layout in the module docstring) and summarise it.

    ``render=False`` skips the images (``gqa/images``) for callers that need only the
    files and features. ``render_workers`` is the number of worker processes that draw
    the images while the questions are made (0: all in this process at the end; None:
    0 under :data:`vqadiag.synth.image_writer.POOL_MIN_IMAGES` images, else the idle CPUs
    less one, see :func:`vqadiag.synth.image_writer.idle_cpus`); the bytes written do not
    depend on it.

    Returns ``{"out", "seed", "images", "bias", "feature_dim", "splits", "files",
    "render_workers", "questions_per_second", "seconds"}`` (``splits`` as in
    ``world.json``; with ``render``, ``splits["images"]`` counts the PNGs and ``files``
    lists them; ``render_workers`` is the number of worker processes used, None
    without ``render``).
    """
    if images < 3:
        raise ValueError(f"images must be at least 3, got {images}")
    if feature_dim < 1:
        raise ValueError(f"feature_dim must be positive, got {feature_dim}")
    if render_workers is not None and render_workers < 0:
        raise ValueError(f"render_workers must be at least 0, got {render_workers}")
    started = time.perf_counter()
    final = Path(out_dir)
    out = _partial_folder(final)  # the world is built here and renamed when complete
    try:
        result = _generate_into(
            out, seed, images, bias, feature_dim, render, render_workers, progress, started
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
) -> dict[str, Any]:
    """:func:`generate_world` into the folder ``out``."""
    streams = np.random.SeedSequence(seed).spawn(6)
    priors = build_priors(bias, np.random.default_rng(streams[0]))
    scenes = sample_scenes(images, priors, np.random.default_rng(streams[1]))
    names = _Names(scenes)
    py_seeds = np.random.default_rng(streams[2]).integers(0, 2**63, 4).tolist()
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
    maker = gq.QuestionMaker(random.Random(py_seeds[0]), attr_priors, place_classes)
    balance_rng = random.Random(py_seeds[1])
    ranges = split_ranges(images)
    splits: dict[str, Any] = {"gqa": {}, "vqa2": {}, "introspect": {}}
    facts: dict[int, vqa2.Facts] = {}
    files: list[str] = []
    n_questions = 0
    writer = None
    if render:
        image_names = [gqa_image_id(i) for i in range(images)]
        writer = ImageWriter(scenes, out / "gqa" / "images", image_names, render_workers)
        writer.start()  # workers draw the images while the questions are made
    with writer or nullcontext(), progress_bar(progress) as bar:
        if writer is not None:
            task = bar.add_task("images", total=images)
            writer.follow(lambda n: bar.advance(task, n))
        for split, rng_images in ranges.items():
            questions, graphs, choices = _gqa_split(
                split, rng_images, scenes, names, maker, facts, balance_rng, bar
            )
            for name, obj in (
                (f"{split}_balanced_questions.json", questions),
                (f"{split}_sceneGraphs.json", graphs),
                (f"{split}_choices.json", choices),
            ):
                write_json(out / "gqa" / name, obj)
                files.append(f"gqa/{name}")
            n_questions += len(questions)
            splits["gqa"][split] = {
                "images": len(rng_images),
                "objects": int(scenes.offsets[rng_images.stop] - scenes.offsets[rng_images.start]),
                "questions": len(questions),
                "balanced": sum(rec["isBalanced"] for rec in questions.values()),
            }
            del questions, graphs, choices
        detections = _write_detections(
            out, scenes, feature_dim, np.random.default_rng(streams[3]), bar
        )
        files.append("gqa/objects/gqa_objects_info.json")
        files += [f"gqa/objects/gqa_objects_{k}.h5" for k in range(detections["files"])]
        vqa_rng = random.Random(py_seeds[2])
        for subtype, members in (
            ("train2014", list(ranges["train"])),
            ("val2014", list(ranges["val"]) + list(ranges["testdev"])),
        ):
            v = _vqa_split(subtype, members, facts, scenes, vqa_rng, bar)
            header = _vqa_header(subtype)
            base = out / "vqa2"
            outputs = {
                f"v2_OpenEnded_mscoco_{subtype}_questions.json": {
                    **header, "task_type": "Open-Ended", "questions": v["questions"]
                },
                f"v2_mscoco_{subtype}_annotations.json": {
                    **header, "annotations": v["annotations"]
                },
                f"v2_mscoco_{subtype}_complementary_pairs.json": v["pairs"],
                f"synth_{subtype}_pair_candidates.json": v["candidates"],
            }  # fmt: skip
            for name, obj in outputs.items():
                write_json(base / name, obj)
                files.append(f"vqa2/{name}")
            short = subtype.removesuffix("2014")
            intro_name = f"VQAIntrospect_{short}v1.0.json"
            write_json(out / "introspect" / intro_name, v["introspect"])
            files.append(f"introspect/{intro_name}")
            n_questions += len(v["questions"])
            splits["vqa2"][short] = {
                "images": len(members),
                "questions": len(v["questions"]),
                "pairs": len(v["pairs"]),
                "pair_attempts": v["attempts"],
                "not_possible": v["not_possible"],
                "not_possible_rate": 100.0 * v["not_possible"] / max(1, v["attempts"]),
            }
            splits["introspect"][short] = {
                "questions": len(v["introspect"]),
                "sub_questions": sum(
                    len(e["sub_qa"]) for r in v["introspect"].values() for e in r["introspect"]
                ),
            }
        if writer is not None:
            splits["images"] = {"images": writer.finish(), "folder": "gqa/images"}
            files += [f"gqa/images/{name}.png" for name in image_names]
    splits["detections"] = {"images": images, **detections}
    image_ids = {
        "gqa": f"str({GQA_IMAGE_BASE} + index)",
        "vqa2": "index + 1",
        "vqa_to_gqa": {str(vqa_image_id(i)): gqa_image_id(i) for i in range(images)},
    }
    write_json(
        out / "world.json",
        _world_json(seed, images, bias, feature_dim, priors, splits, image_ids, render),
        indent=True,
    )
    files.insert(0, "world.json")
    seconds = time.perf_counter() - started
    return {
        "out": str(out),
        "seed": seed,
        "images": images,
        "bias": bias,
        "feature_dim": feature_dim,
        "splits": splits,
        "files": files,
        "render_workers": None if writer is None else writer.workers,
        "questions": n_questions,
        "seconds": seconds,
        "questions_per_second": n_questions / seconds if seconds > 0 else float("nan"),
    }


def _values(family: str) -> tuple[str, ...]:
    return {"color": COLORS, "material": MATERIALS, "state": STATES}[family]
