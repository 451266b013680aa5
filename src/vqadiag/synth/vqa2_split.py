"""The VQA v2 files of one split of a synthetic world: questions, annotations, complementary
pairs and the pairs' candidate images (``vqa2/v2_OpenEnded_mscoco_{subtype}_questions.json``,
``v2_mscoco_{subtype}_annotations.json``, ``_complementary_pairs.json``,
``synth_{subtype}_pair_candidates.json``; docs/synth.md).

Each image gets up to :data:`VQA_SEEDS_PER_IMAGE` questions from the templates of
:mod:`vqadiag.synth.vqa2` (plus, with probability :data:`P_REASONING`, one reasoning
question); each seed question then looks for a complement among the image's 24 nearest
neighbours (Goyal et al.): the same question with another answer on a neighbour image,
picked with weight ``PICK_DECAY ** rank``. The reasoning questions also get their
VQA-introspect records (:mod:`vqadiag.synth.introspect`). Each question record carries,
beside the official ``image_id`` / ``question`` / ``question_id``, the program that
answers it (``semantic``, as in GQA's records; :mod:`vqadiag.synth.vqa2_programs`):
the symbolic model executes it, the other models do not read it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vqadiag.data.io.jsonio import write_json
from vqadiag.synth import neighbours as nn
from vqadiag.synth import vqa2
from vqadiag.synth.image_splits import vqa_image_id
from vqadiag.synth.introspect import introspect_record
from vqadiag.synth.scenes import Scenes
from vqadiag.synth.taxonomy import CLASSES, PLACES
from vqadiag.synth.vqa2_programs import program_of

if TYPE_CHECKING:
    from rich.progress import Progress

VQA_SEEDS_PER_IMAGE = 3
P_REASONING = 0.6

#: (template key, parameter, answer) of one question
Question = tuple[str, str, str]
#: (image index, position among that image's questions)
QuestionRef = tuple[int, int]


@dataclass
class ChosenQuestions:
    """The questions of a split as they are chosen: per image its questions, the position
    of each question text, and the seed questions that look for a complement."""

    per_image: dict[int, list[Question]]
    text_index: dict[int, dict[str, int]]
    seeds: list[QuestionRef]


@dataclass
class Pairing:
    """The complementary pairs of a split: each pair's two questions, the candidate images
    and the chosen complement image of each seed that found one, and how many seeds
    looked for one (``attempts``) and found none (``not_possible``)."""

    pairs: list[tuple[QuestionRef, QuestionRef]]
    candidates: dict[QuestionRef, tuple[list[int], int]]
    attempts: int
    not_possible: int


def vqa_split(
    subtype: str, images: list[int], facts: dict[int, vqa2.Facts], scenes: Scenes,
    rng: random.Random, bar: Progress,
) -> dict[str, Any]:  # fmt: skip
    """Questions, annotations, pairs and introspect records of one VQA v2 split.

    Returns ``{"questions", "annotations", "pairs", "candidates", "introspect",
    "attempts", "not_possible"}``; question ids are ``image_id · 1000 + k``.
    """
    chosen = _seed_questions(images, facts, rng)
    pairing = _complementary_pairs(subtype, images, chosen, facts, scenes, rng, bar)
    questions, annotations, introspect = _question_records(images, chosen, facts, rng)
    return {
        "questions": questions,
        "annotations": annotations,
        "pairs": [[_question_id(*a), _question_id(*b)] for a, b in pairing.pairs],
        "candidates": _pair_candidates(pairing),
        "introspect": introspect,
        "attempts": pairing.attempts,
        "not_possible": pairing.not_possible,
    }


def _seed_questions(
    images: list[int], facts: dict[int, vqa2.Facts], rng: random.Random
) -> ChosenQuestions:
    """Each image's first questions: up to :data:`VQA_SEEDS_PER_IMAGE` plain ones and, with
    probability :data:`P_REASONING`, one reasoning question, less those without an
    answer and repeated texts; all of them are seeds."""
    chosen = ChosenQuestions({}, {}, [])
    per_image, text_index, seeds = chosen.per_image, chosen.text_index, chosen.seeds
    for i in images:
        cands = vqa2.candidate_questions(facts[i], rng)
        plain = [c for c in cands if c[0] not in vqa2.REASONING][:VQA_SEEDS_PER_IMAGE]
        reasoning = [c for c in cands if c[0] in vqa2.REASONING][:1]
        picked = plain + (reasoning if rng.random() < P_REASONING else [])
        per_image[i] = []
        text_index[i] = {}
        for key, param in picked:
            ans = vqa2.answer_of(key, param, facts[i])
            if ans is None:
                continue
            text = vqa2.render(key, param)
            if text in text_index[i]:
                continue
            text_index[i][text] = len(per_image[i])
            seeds.append((i, len(per_image[i])))
            per_image[i].append((key, param, ans))
    return chosen


def _complementary_pairs(
    subtype: str, images: list[int], chosen: ChosenQuestions, facts: dict[int, vqa2.Facts],
    scenes: Scenes, rng: random.Random, bar: Progress,
) -> Pairing:  # fmt: skip
    """Pair each seed not yet paired with the same question on one of its image's nearest
    neighbours that answers it differently (and whose copy of it is not paired yet),
    adding that question to the neighbour when it lacks it."""
    per_image, text_index = chosen.per_image, chosen.text_index
    idx = np.array(images, dtype=np.int64)
    emb = nn.scene_embedding(scenes.cls, scenes.offsets, scenes.place, len(CLASSES), len(PLACES))[
        idx
    ]
    neighbours = nn.knn(emb)
    position = {img: p for p, img in enumerate(images)}
    paired: set[QuestionRef] = set()
    pairing = Pairing([], {}, 0, 0)
    task = bar.add_task(f"VQA v2 {subtype} pairs", total=len(chosen.seeds))
    for i, k in chosen.seeds:
        bar.advance(task, 1)
        if (i, k) in paired:
            continue
        pairing.attempts += 1
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
            pairing.not_possible += 1
            continue
        j, other = rng.choices(valid, weights)[0]
        kj = text_index[j].get(text)
        if kj is None:
            kj = len(per_image[j])
            text_index[j][text] = kj
            per_image[j].append((key, param, other))
        paired.update({(i, k), (j, kj)})
        pairing.pairs.append(((i, k), (j, kj)))
        pairing.candidates[(i, k)] = (near, j)
    return pairing


def _question_id(i: int, k: int) -> int:
    """VQA v2 question id of question ``k`` of image ``i``."""
    return vqa_image_id(i) * 1000 + k


def _question_records(
    images: list[int], chosen: ChosenQuestions, facts: dict[int, vqa2.Facts],
    rng: random.Random,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """The question and annotation records of every question (ten annotator answers
    each; the question record carries the question's program, ``semantic``, from
    :func:`vqadiag.synth.vqa2_programs.program_of`), and the VQA-introspect record of each
    reasoning question, by question id."""
    questions, annotations, introspect = [], [], {}
    for i in images:
        for k, (key, param, ans) in enumerate(chosen.per_image[i]):
            text = vqa2.render(key, param)
            q = _question_id(i, k)
            questions.append(
                {
                    "image_id": vqa_image_id(i),
                    "question": text,
                    "question_id": q,
                    "semantic": program_of(key, param),
                }
            )
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
    return questions, annotations, introspect


def _pair_candidates(pairing: Pairing) -> dict[str, Any]:
    """The ``synth_*_pair_candidates.json`` entries: per seed question id, its image, the
    neighbour images it could pair with and the one it did."""
    return {
        str(_question_id(*a)): {
            "image_id": vqa_image_id(a[0]),
            "candidates": [vqa_image_id(j) for j in near],
            "complement_image_id": vqa_image_id(j),
        }
        for a, (near, j) in pairing.candidates.items()
    }


def vqa_header(subtype: str) -> dict[str, Any]:
    """The ``info`` / ``license`` / ``data_subtype`` / ``data_type`` header of the VQA v2
    question and annotation files of ``subtype`` (e.g. ``train2014``)."""
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


def write_vqa2_split(
    out: Path, subtype: str, images: list[int], facts: dict[int, vqa2.Facts], scenes: Scenes,
    rng: random.Random, bar: Progress,
) -> tuple[list[str], dict[str, Any], dict[str, Any]]:  # fmt: skip
    """Write the four VQA v2 files of ``subtype`` (images ``images``) under ``out/vqa2``.

    Returns the files written (relative to ``out``), the split's entry of ``world.json``
    ``splits.vqa2`` and the split's VQA-introspect records (by question id).
    """
    v = vqa_split(subtype, images, facts, scenes, rng, bar)
    header = vqa_header(subtype)
    outputs = {
        f"v2_OpenEnded_mscoco_{subtype}_questions.json": {
            **header, "task_type": "Open-Ended", "questions": v["questions"]
        },
        f"v2_mscoco_{subtype}_annotations.json": {**header, "annotations": v["annotations"]},
        f"v2_mscoco_{subtype}_complementary_pairs.json": v["pairs"],
        f"synth_{subtype}_pair_candidates.json": v["candidates"],
    }  # fmt: skip
    files = []
    for name, obj in outputs.items():
        write_json(out / "vqa2" / name, obj)
        files.append(f"vqa2/{name}")
    stats = {
        "images": len(images),
        "questions": len(v["questions"]),
        "pairs": len(v["pairs"]),
        "pair_attempts": v["attempts"],
        "not_possible": v["not_possible"],
        "not_possible_rate": 100.0 * v["not_possible"] / max(1, v["attempts"]),
    }
    return files, stats, v["introspect"]
