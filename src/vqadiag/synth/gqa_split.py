"""The GQA files of one split of a synthetic world: scene graphs, balanced questions and
choices (``gqa/{split}_sceneGraphs.json``, ``_balanced_questions.json``, ``_choices.json``;
docs/synth.md).

One pass over the split's images, in blocks of :data:`BLOCK`, derives each image's
relations, writes its scene graph, draws its questions (:mod:`vqadiag.synth.gqa_questions`)
and records the facts the VQA v2 questions are later asked about
(:mod:`vqadiag.synth.vqa2_split`).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vqadiag.data.io.jsonio import write_json
from vqadiag.synth import vqa2
from vqadiag.synth.gqa_questions import QuestionMaker, mark_balanced
from vqadiag.synth.gqa_record import ImageContext, finalize
from vqadiag.synth.image_splits import gqa_image_id
from vqadiag.synth.scenes import Scenes, scene_relations
from vqadiag.synth.taxonomy import (
    CLASSES,
    COLORS,
    FAMILIES,
    MATERIALS,
    PLACES,
    RELATIONS,
    SIZES,
    STATES,
)

if TYPE_CHECKING:
    from rich.progress import Progress

OBJECT_ID_BASE = 1000000
SPLIT_DIGIT = {"train": "0", "val": "1", "testdev": "2"}
#: images whose relations are derived at once
BLOCK = 1000


class SceneNames:
    """String views of the scene arrays (computed once per world): per object its class
    index, attribute values (None where it has none) and box; per image its place,
    size and object offsets."""

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


def scene_graph(names: SceneNames, i: int, triples: list[tuple[int, int, int]]) -> dict[str, Any]:
    """GQA scene graph of image ``i`` (objects with boxes, attributes and relations ``triples``
    of local object indices); object ids are ``str(OBJECT_ID_BASE + global index)``."""
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


def vqa_facts(names: SceneNames, i: int, triples: list[tuple[int, int, int]]) -> vqa2.Facts:
    """What the VQA v2 questions of image ``i`` may ask about (place, objects, attributes,
    which object is on which)."""
    lo, hi = names.offsets[i], names.offsets[i + 1]
    on = RELATIONS.index("on")
    return vqa2.Facts(
        place=names.place[i],
        names=[CLASSES[c].name for c in names.cls[lo:hi]],
        cls=names.cls[lo:hi],
        attrs={f: names.attrs[f][lo:hi] for f in FAMILIES},
        on=[(a, b) for a, r, b in triples if r == on],
    )


def gqa_split(
    split: str, images: range, scenes: Scenes, names: SceneNames, maker: QuestionMaker,
    facts: dict[int, vqa2.Facts], balance_rng: random.Random, bar: Progress,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:  # fmt: skip
    """Questions, scene graphs and choices of GQA split ``split`` (images ``images``):
    ``maker`` draws each image's questions, numbered ``<split digit><7-digit counter>``;
    ``facts`` gets each image's :func:`vqa_facts`; then the split is balanced
    (:func:`vqadiag.synth.gqa_questions.mark_balanced` with ``balance_rng``)."""
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
            graph = scene_graph(names, i, triples)
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
            facts[i] = vqa_facts(names, i, triples)
        bar.advance(task, hi - lo)
    mark_balanced(questions, balance_rng)
    return questions, graphs, choices(questions)


YES_NO = ["no", "yes"]


def choices(questions: dict[str, Any]) -> dict[str, Any]:
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


def write_gqa_split(
    out: Path, split: str, images: range, scenes: Scenes, names: SceneNames,
    maker: QuestionMaker, facts: dict[int, vqa2.Facts], balance_rng: random.Random,
    bar: Progress,
) -> tuple[list[str], dict[str, Any]]:  # fmt: skip
    """Write the three GQA files of ``split`` (images ``images``) under ``out/gqa``; fill
    ``facts`` with the VQA v2 facts of its images. Returns the files written (relative to
    ``out``) and the split's entry of ``world.json`` ``splits.gqa``."""
    questions, graphs, split_choices = gqa_split(
        split, images, scenes, names, maker, facts, balance_rng, bar
    )
    files = []
    for name, obj in (
        (f"{split}_balanced_questions.json", questions),
        (f"{split}_sceneGraphs.json", graphs),
        (f"{split}_choices.json", split_choices),
    ):
        write_json(out / "gqa" / name, obj)
        files.append(f"gqa/{name}")
    stats = {
        "images": len(images),
        "objects": int(scenes.offsets[images.stop] - scenes.offsets[images.start]),
        "questions": len(questions),
        "balanced": sum(rec["isBalanced"] for rec in questions.values()),
    }
    return files, stats
