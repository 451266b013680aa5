"""What limits the chat VLM: its tower's perception or its answering? (docs/chat-vlm.md,
"What limits it")

Runs the chat VLM's answering stage (:func:`~vqadiag.models.reference.chat_vlm_fit.
train_language`, the recipe's options) on one of two kinds of image features, then prints
one JSON line with the val split's exact match, asked with the image and with the text
alone:

* ``--features tower``: the features the trained model reads, from the vision tower
  pre-trained on the scene graphs (:func:`~vqadiag.models.reference.chat_vlm_fit.
  pretrain_vision`), with the pre-training figures;
* ``--features oracle``: perfect patch perception, no pixels: each patch's feature is
  ``E_name[n] + Σ_a E_attr[a]``, the scene-graph name ``n`` and attributes ``a`` of the
  patch's object (the labels the tower is pre-trained on, every attribute of the
  training split), ``E`` fixed Gaussian embeddings of the tower's width; a name or
  attribute the training split lacks is background / nothing. ``-o patch_labels=overlap``
  labels a patch by the smallest box that overlaps it, for the oracle and the tower alike.
  ``--embeddings orthogonal`` or ``split`` lays ``E`` out otherwise
  (:func:`~vqadiag.models.reference.label_embeddings.label_embeddings`; orthogonal needs
  ``vision_dim`` at least the number of names and attributes: 122 on the demo world).
  ``--name-noise p`` gives each object patch, with probability p, another object's name
  instead of its own (:func:`mislabel_names`; the train and the val features alike,
  attributes and background untouched): a perception that names a share 1 − p of the
  object patches right, as the pre-trained tower names some of them. ``--attr-noise p``
  gives each object patch, with probability p, the attributes of another object patch
  drawn at random (:func:`mislabel_attributes`; names and background untouched).
  ``--attributes colour,material`` keeps only the attributes of those categories
  (``colour``, ``material``, ``state``, ``size`` of ``vqadiag.synth.taxonomy``) in the
  oracle's features (:func:`kept_attributes`); with the tower, in the patch labels it is
  pre-trained on, and so in what its attribute head predicts.
* ``--features predicted``: the tower pre-trained as for ``tower``, read through its
  pre-training heads: each patch's feature is the oracle's ``E_name[n] + Σ_a E_attr[a]``
  of the name ``n`` the name head ranks first and the attributes ``a`` the attribute
  head gives a logit above 0 (:func:`predicted_labels`): the tower's perception in the
  oracle's clean form. ``perception`` reports it on the val images against their
  scene-graph labels (:func:`perception`), over all object patches and by the size of
  the object a patch shows at the model's input (``by_side``: under 12, 12 to 24, and
  24 pixels and up, the groups of ``val_exact_by_side``), and each val object read
  whole, its heads on the mean of its patches' hidden states (``as_objects``,
  :func:`object_perception`; what ``-o pretrain_object_loss=W`` trains; ``--features
  tower`` reports that figure too).

``--visible-owner`` labels each patch, for the tower's pre-training, its held-out
figures and the oracle alike, by the object the world's renderer painted at the patch's
centre pixel rather than by the smallest box that contains the centre (a world written
by ``vqadiag synth``; ``experiments/world_owners.py``).

``--pretrain-world WORLD2`` pre-trains the tower on every image of another world's train
split (``vqadiag synth --out WORLD2 --images N --seed S``: a larger world from the same
generator, another seed so that it shares no image with WORLD), labelled over that
split's names and attributes (:func:`pretraining_images`); the answering stage, the
held-out figures and the scores stay on WORLD (``pretrain.images`` counts the
pre-training images).

With ``--features oracle``, ``--reduce s`` re-points a share s of the training questions
(drawn at random, among those whose program names an object) to a copy of their scene
graph that keeps only the objects the question's program names and, up to
``--reduce-to`` objects in all, others drawn at random (:func:`reduce_scenes`): the
oracle features of an image that shows few objects, as a curriculum of fewer objects
would give (``reduced`` counts them).

Exact match is the share of val answers whose every token, and the end-of-sequence
token, is the argmax under teacher forcing: the answers greedy decoding gives exactly,
before any normalisation (the accuracy ``vqadiag train`` prints compares normalised
answers, so it can be a little higher). ``val_exact_by_side`` splits it, and the
difference the image makes, by how large the objects a question asks about are at the
model's input (:func:`exact_by_side`: the shorter side of the smallest object its
annotations name, under 12, 12 to 24, and 24 pixels and up), from the same per-question
scores.

Usage: ``python experiments/chat_vlm_ceiling.py WORLD --features oracle [--epochs 12]
[-o KEY=VALUE ...]`` (WORLD as ``--data`` takes it; ``-o`` as ``vqadiag train -o``,
over the best recipe of docs/chat-vlm.md: 40 augmented pre-training epochs, batch 32,
one thread, the question first; ``-o scene_questions=K`` adds the scene questions
``vqadiag train`` adds, and ``train_questions`` counts them in; ``--epochs 0`` stops
after the tower's pre-training).
On the demo world about 14 minutes (oracle) and 19 (tower) on a core shared with
another run.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch

from chat_vlm_retrieval import exact_rows, percent
from vqadiag.cli.models import TRAIN_OWN_OPTIONS, parse_options
from vqadiag.data.formats.gqa_program import parse_argument
from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.metrics.bootstrap import paired_bootstrap
from vqadiag.models.reference import chat_vlm_build as build
from vqadiag.models.reference import chat_vlm_data as cdata
from vqadiag.models.reference import chat_vlm_fit as fit
from vqadiag.models.reference.chat_vlm import (
    TrainedChatVLM,
    held_out_patches,
    pretraining_source,
    training_device,
)
from vqadiag.models.reference.chat_vlm_box_labels import BoxTable
from vqadiag.models.reference.chat_vlm_scene_questions import scene_questions
from vqadiag.models.reference.label_embeddings import (
    EMBEDDING_LAYOUTS,
    label_embeddings,
    needed_width,
)
from vqadiag.synth import taxonomy
from world_owners import VisibleOwners, visible_image_labels
from world_patch_stats import NO_OBJECT, SIDE_GROUPS, patch_sides, side_group, smallest_side

RECIPE = {
    "pretrain_epochs": 40,
    "pretrain_augment": True,
    "batch_size": 32,
    "threads": 1,
    "question_first": True,
}
#: every attribute of the training split labels an oracle patch
ALL_ATTRIBUTES = 1_000_000


def answered(data: GQAData, split: str) -> list[dict[str, Any]]:
    """The split's questions that have an answer."""
    return [r for r in data.questions(split).values() if r.get("answer") is not None]


def reduce_scenes(
    rng: np.random.Generator, records: list[dict[str, Any]], scenes: dict[str, Any],
    image_ids: list[str], share: float, keep: int,
) -> int:  # fmt: skip
    """Re-point a ``share`` of ``records`` (drawn at random; those whose program names an
    object and whose image has a scene graph) to a copy of that scene graph, added to
    ``scenes`` and ``image_ids`` as ``IMAGE#ROW``, that keeps the objects the program
    names (:func:`program_objects`) and others drawn at random up to ``keep`` objects in
    all; the number re-pointed."""
    moved = 0
    for row in np.flatnonzero(rng.random(len(records)) < share):
        r = records[row]
        named = program_objects(r)
        scene = scenes.get(str(r["imageId"]))
        if not named or scene is None:
            continue
        others = [i for i in scene["objects"] if i not in named]
        drawn = rng.choice(others, min(max(0, keep - len(named)), len(others)), replace=False)
        kept = named | {str(i) for i in drawn}
        copy = f"{r['imageId']}#{row}"
        scenes[copy] = {
            **scene,
            "objects": {i: o for i, o in scene["objects"].items() if i in kept},
        }
        image_ids.append(copy)
        records[row] = {**r, "imageId": copy}
        moved += 1
    return moved


def program_objects(record: Mapping[str, Any]) -> set[str]:
    """The object ids the question's program (``semantic``) names: the ids of its
    operations' arguments (``select: cup (12,13)``), as the program runner reads them
    (:func:`~vqadiag.data.formats.gqa_program.parse_argument`)."""
    return {
        found
        for step in record.get("semantic") or ()
        for found in parse_argument(str(step.get("argument", "")))[1]
    }


def oracle_features(
    scenes: Mapping[str, Any],
    image_ids: Sequence[str],
    grid: int,
    names: Mapping[str, int],
    attrs: Mapping[str, int],
    embeddings: Sequence[torch.Tensor],
    rule: str = "centre",
    noise: Noise | None = None,
    owners: VisibleOwners | None = None,
) -> torch.Tensor:
    """``(I, G·G, D)``: per patch ``E_name[n] + Σ_a E_attr[a]`` of its labels (by the
    label ``rule``, or by the visible owner with ``owners``; ``noise``: the shares and the
    draws of :func:`mislabel_names` and :func:`mislabel_attributes`)."""
    label_names, label_attrs = labeller(scenes, image_ids, grid, names, attrs, rule, owners)()
    if noise is not None and noise.names > 0:
        label_names = mislabel_names(label_names, noise.names, len(names), noise.name_draws)
    if noise is not None and noise.attributes > 0:
        label_attrs = mislabel_attributes(
            label_names, label_attrs, noise.attributes, noise.attribute_draws
        )
    return clean_features((label_names, label_attrs), embeddings)


def fixed_embeddings(
    names: Mapping[str, int], attrs: Mapping[str, int], opts: Mapping[str, Any], layout: str,
    seed: int,
) -> list[torch.Tensor]:  # fmt: skip
    """``E_name`` and ``E_attr`` of :func:`clean_features`: one fixed row of the tower's
    width (``vision_dim``) per name and per attribute, laid out as ``layout`` says
    (:func:`~vqadiag.models.reference.label_embeddings.label_embeddings`), drawn from
    ``seed + 1``, so that the oracle and the tower's predictions get the same rows."""
    draw = torch.Generator().manual_seed(seed + 1)
    return label_embeddings([len(names), len(attrs)], int(opts["vision_dim"]), layout, draw)


def clean_features(
    labels: tuple[np.ndarray, np.ndarray], embeddings: Sequence[torch.Tensor]
) -> torch.Tensor:
    """``(I, P, D)``: ``E_name[n] + Σ_a E_attr[a]`` of each patch's name index ``n``
    (``labels[0]``, ``(I, P)``) and attributes ``a`` (``labels[1]``, ``(I, P, A)`` 0/1)."""
    by_name, by_attr = embeddings
    return by_name[torch.from_numpy(labels[0])] + torch.from_numpy(labels[1]) @ by_attr


class Noise(NamedTuple):
    """How the oracle's labels are corrupted: the shares of object patches renamed
    (:func:`mislabel_names`) and re-attributed (:func:`mislabel_attributes`), each with
    its own draws, so that one share does not change the other's."""

    names: float
    attributes: float
    name_draws: np.random.Generator
    attribute_draws: np.random.Generator


def mislabel_attributes(
    names: np.ndarray, attrs: np.ndarray, share: float, rng: np.random.Generator
) -> np.ndarray:
    """``attrs`` (``(I, P, A)``) with each object patch's (name ≠ 0) attributes replaced,
    with probability ``share``, by those of another object patch drawn evenly among all
    of them (it may hold the same attributes): a perception that keeps every name and
    gets the attributes of a share ``share`` of the object patches from elsewhere."""
    out = attrs.copy()
    flat = out.reshape(-1, attrs.shape[-1])  # a view: writing it writes ``out``
    objects = np.flatnonzero(names.reshape(-1) > 0)
    if len(objects) < 2 or share <= 0:
        return out
    wrong = objects[rng.random(len(objects)) < share]
    # a draw among the other object patches: an index past the patch itself moves up one
    other = rng.integers(0, len(objects) - 1, len(wrong))
    other += other >= np.searchsorted(objects, wrong)
    flat[wrong] = attrs.reshape(-1, attrs.shape[-1])[objects[other]]
    return out


#: the attribute categories of a world ``vqadiag synth`` writes (its taxonomy's families,
#: ``color`` spelt as the docs spell it)
ATTRIBUTE_CATEGORIES = {
    ("colour" if family == "color" else family): values
    for family, values in taxonomy.FAMILY_VALUES.items()
}


def kept_attributes(attrs: Mapping[str, int], kept: Sequence[str]) -> dict[str, int]:
    """The attribute index ``attrs`` narrowed to the attributes of the categories
    ``kept`` (:data:`ATTRIBUTE_CATEGORIES`), re-numbered from 0 in ``attrs``' order."""
    allowed = {a for category in kept for a in ATTRIBUTE_CATEGORIES[category]}
    chosen = sorted((i, a) for a, i in attrs.items() if a in allowed)
    return {a: row for row, (_, a) in enumerate(chosen)}


def predicted_labels(
    heads: torch.nn.ModuleList, features: torch.Tensor
) -> tuple[np.ndarray, np.ndarray]:
    """What the pre-trained tower perceives in each patch of the images whose hidden
    states are ``features`` (``(I, P, D)``, :func:`~vqadiag.models.reference.chat_vlm_fit.
    encode_images`): the name its name head ranks first (``(I, P)``) and, as 0/1, the
    attributes its attribute head gives a logit above 0 (``(I, P, A)``)."""
    with torch.no_grad():
        names = heads[0](features).argmax(-1)
        attrs = (heads[1](features) > 0).to(torch.float32)
    return names.cpu().numpy(), attrs.cpu().numpy()


def object_perception(
    heads: torch.nn.ModuleList, states: torch.Tensor, truth: tuple[np.ndarray, np.ndarray],
    sides: np.ndarray | None,
) -> dict[str, Any]:  # fmt: skip
    """What the pre-trained tower perceives of each val object read as a whole: its name
    head's first name and its attribute head's attributes (logit above 0) on the mean of
    the hidden states ``states`` (``(I, P, D)``) of the object's patches (the objects of
    :func:`~vqadiag.models.reference.chat_vlm_fit.object_groups` on the ``truth``
    labels, as ``pretrain_object_loss`` pools them). Percent of those objects named right
    (``object_name_acc``) and with every attribute right (``object_attributes_exact``),
    and with ``sides`` the same by the size of the object (``by_side``; two objects of
    one image with the same name and attributes are one, of the size its first patch
    shows)."""
    with torch.no_grad():
        pooled, first = fit.object_means(states, fit.object_groups(*truth))
        where = first.cpu().numpy()
        named = heads[0](pooled).argmax(-1).cpu().numpy()
        said = (heads[1](pooled) > 0).cpu().numpy()
    right = named == truth[0].reshape(-1)[where]
    exact = (said == (truth[1].reshape(-1, truth[1].shape[-1])[where] > 0)).all(-1)

    def figures(chosen: np.ndarray) -> dict[str, Any]:
        n = float(chosen.sum())
        return {
            "objects": int(n),
            "object_name_acc": _share(float(right[chosen].sum()), n),
            "object_attributes_exact": _share(float(exact[chosen].sum()), n),
        }

    out = figures(np.ones(len(named), dtype=bool))
    if sides is not None:
        side = sides.reshape(-1)[where]
        out["by_side"] = {
            name: figures(side == g) for g, (_, name) in enumerate(SIDE_GROUPS) if (side == g).any()
        }
    return out


def _share(part: float, whole: float) -> float:
    return round(100.0 * part / max(1.0, whole), 2)


def _patch_figures(
    seen: tuple[np.ndarray, np.ndarray], truth: tuple[np.ndarray, np.ndarray], on: np.ndarray
) -> dict[str, Any]:
    """:func:`perception`'s five figures over the patches ``on`` selects."""
    said, true = seen[1][on] > 0, truth[1][on] > 0
    hits, n = float((said & true).sum()), float(on.sum())
    return {
        "object_patches": int(n),
        "object_name_acc": _share(float((seen[0][on] == truth[0][on]).sum()), n),
        "object_attributes_exact": _share(float((said == true).all(-1).sum()), n),
        "attribute_precision": _share(hits, float(said.sum())),
        "attribute_recall": _share(hits, float(true.sum())),
    }


def perception(
    seen: tuple[np.ndarray, np.ndarray],
    truth: tuple[np.ndarray, np.ndarray],
    attrs: Mapping[str, int] | None = None,
    sides: np.ndarray | None = None,
) -> dict[str, Any]:
    """Percent, over the patches whose true name is an object (``truth[0] > 0``): named
    right (``object_name_acc``), every attribute right (``object_attributes_exact``), and
    the attributes perceived that are true (``attribute_precision``) and true ones
    perceived (``attribute_recall``), counted over all those patches' attributes. With
    ``attrs`` (the attribute index), ``by_attribute`` gives each attribute's count of
    object patches that have it (``patches``), its recall and its precision, the most
    frequent first. With ``sides`` (``(I, P)`` indices into ``SIDE_GROUPS`` of the
    object each patch shows, :func:`world_patch_stats.patch_sides`), ``by_side`` gives
    the five figures over the object patches of each group that has any."""
    on = truth[0] > 0
    out = _patch_figures(seen, truth, on)
    if sides is not None:
        out["by_side"] = {
            name: _patch_figures(seen, truth, on & (sides == g))
            for g, (_, name) in enumerate(SIDE_GROUPS)
            if (on & (sides == g)).any()
        }
    if attrs is not None:
        said, true = seen[1][on] > 0, truth[1][on] > 0
        both, has, says = (said & true).sum(0), true.sum(0), said.sum(0)
        ranked = sorted(attrs.items(), key=lambda item: (-int(has[item[1]]), item[0]))
        out["by_attribute"] = {
            name: {
                "patches": int(has[i]),
                "recall": _share(float(both[i]), float(has[i])),
                "precision": _share(float(both[i]), float(says[i])),
            }
            for name, i in ranked
        }
    return out


def val_sides(
    scenes: Mapping[str, Any], image_ids: Sequence[str], grid: int, opts: Mapping[str, Any]
) -> np.ndarray:
    """``(I, G·G)`` :func:`world_patch_stats.patch_sides` of ``image_ids`` under the
    run's label rule and input size (an image without a scene graph: background)."""
    out = np.full((len(image_ids), grid * grid), -1, dtype=np.int64)
    for row, image_id in enumerate(image_ids):
        scene = scenes.get(str(image_id))
        if scene is not None:
            out[row] = patch_sides(scene, grid, str(opts["patch_labels"]), int(opts["image_size"]))
    return out


def labeller(
    scenes: Mapping[str, Any], image_ids: Sequence[str], grid: int, names: Mapping[str, int],
    attrs: Mapping[str, int], rule: str, owners: VisibleOwners | None,
) -> Callable[..., tuple[np.ndarray, np.ndarray]]:  # fmt: skip
    """The patch labeller of ``image_ids``
    (:func:`~vqadiag.models.reference.chat_vlm_data.scene_labeller`): by the label
    ``rule``, or by the visible owner with ``owners``
    (:func:`world_owners.visible_image_labels`)."""
    by_owner = None if owners is None else visible_image_labels(owners, grid, names, attrs)
    return cdata.scene_labeller(scenes, image_ids, grid, names, attrs, rule, by_owner)


def pretraining_images(
    data: GQAData, pretrain_data: GQAData | None, scenes: Mapping[str, Any],
    train_ids: Sequence[str], names: dict[str, int], attrs: dict[str, int], n_attrs: int,
    kept: Sequence[str] | None = None,
) -> tuple[GQAData, Mapping[str, Any], list[str], dict[str, int], dict[str, int]]:  # fmt: skip
    """Where the tower pre-trains: the world, its scene graphs, the image ids and the name
    and attribute indices the patches are labelled with. Without ``pretrain_data`` the
    answering world's training images (``scenes``, ``train_ids``, ``names``, ``attrs``);
    with it, every image of ``pretrain_data``'s train split that has a scene graph,
    labelled over that split's own indices (:func:`~vqadiag.models.reference.
    chat_vlm_data.patch_vocabulary`), its attributes narrowed to the categories ``kept``
    as ``attrs`` already are (:func:`kept_attributes`; the held-out figures label a name
    those lack as background, as ``vqadiag train`` labels a name its training split
    lacks)."""
    if pretrain_data is None:
        return data, scenes, list(train_ids), names, attrs
    shown, shown_ids, shown_names, shown_attrs = pretraining_source(pretrain_data, n_attrs)
    if kept is not None:
        shown_attrs = kept_attributes(shown_attrs, kept)
    return pretrain_data, shown, shown_ids, shown_names, shown_attrs


def held_out(
    data: GQAData, processor: Any, grid: int, names: Mapping[str, int], rule: str,
    owners: VisibleOwners | None,
) -> tuple[Any, np.ndarray] | None:  # fmt: skip
    """The held-out pixels and patch names ``vqadiag train`` measures the tower on
    (:func:`~vqadiag.models.reference.chat_vlm.held_out_patches`), labelled as
    :func:`labeller` labels; None where that function gives none."""
    by_owner = None if owners is None else visible_image_labels(owners, grid, names, {})
    return held_out_patches(data, "train", processor, grid, names, rule, by_owner)


def mislabel_names(
    labels: np.ndarray, share: float, n_names: int, rng: np.random.Generator
) -> np.ndarray:
    """``labels`` (name indices, 0 background) with each object patch's name replaced,
    with probability ``share``, by one of the other ``n_names − 2`` object names drawn
    evenly: a perception that names a share ``1 − share`` of the object patches right
    and never mistakes an object for the background or the background for one."""
    out = labels.copy()
    flat = out.reshape(-1)  # a view: writing it writes ``out``
    objects = np.flatnonzero(flat > 0)
    if n_names < 3 or share <= 0 or not len(objects):
        return out
    wrong = objects[rng.random(len(objects)) < share]
    # a draw among 1..n_names−2, moved up by one past the true name, is any other name
    other = rng.integers(1, n_names - 1, len(wrong))
    flat[wrong] = other + (other >= flat[wrong])
    return out


def exact_by_side(
    records: Sequence[Mapping[str, Any]], scenes: Mapping[str, Any], size: int,
    with_image: Sequence[bool], text_only: Sequence[bool],
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Per :func:`side_group` of the records (in :data:`SIDE_GROUPS` order, then
    :data:`NO_OBJECT`; empty groups left out): the number of questions, the percent
    answered exactly with the image and with the text alone (``with_image``,
    ``text_only``: per record), their difference and its 95% paired bootstrap interval
    (:func:`~vqadiag.metrics.bootstrap.paired_bootstrap`, docs/protocols.md §9)."""
    groups = [side_group(smallest_side(r, scenes.get(str(r["imageId"])), size)) for r in records]
    image_hits = np.asarray(with_image, dtype=np.float64)
    text_hits = np.asarray(text_only, dtype=np.float64)
    out: dict[str, dict[str, Any]] = {}
    for name in (*(n for _, n in SIDE_GROUPS), NO_OBJECT):
        rows = [i for i, g in enumerate(groups) if g == name]
        if not rows:
            continue
        gain = paired_bootstrap(image_hits[rows], text_hits[rows]).difference
        out[name] = {
            "questions": len(rows),
            "val_exact": round(100.0 * float(image_hits[rows].mean()), 2),
            "val_exact_text_only": round(100.0 * float(text_hits[rows].mean()), 2),
            "gain": round(gain.value, 2),
            "gain_interval": [round(gain.ci_low, 2), round(gain.ci_high, 2)],
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("world")
    parser.add_argument("--features", choices=("tower", "oracle", "predicted"), required=True)
    parser.add_argument("--epochs", type=int, default=12, help="answering epochs; 0: none")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--reduce", type=float, default=0.0,
        help="share of training questions on a copy of their scene keeping few objects (oracle)",
    )  # fmt: skip
    parser.add_argument("--reduce-to", type=int, default=3, help="objects a reduced copy keeps")
    parser.add_argument(
        "--embeddings", choices=EMBEDDING_LAYOUTS, default="gaussian",
        help="how the oracle's name and attribute embeddings overlap (label_embeddings)",
    )  # fmt: skip
    parser.add_argument(
        "--name-noise", type=float, default=0.0,
        help="share of the oracle's object patches given another object's name (oracle)",
    )  # fmt: skip
    parser.add_argument(
        "--attr-noise", type=float, default=0.0,
        help="share of the oracle's object patches given another patch's attributes (oracle)",
    )  # fmt: skip
    parser.add_argument(
        "--attributes", metavar="CATEGORIES",
        help="comma-separated attribute categories the patches carry, the oracle's or the "
        "tower's pre-training labels (colour,material,state,size)",
    )  # fmt: skip
    parser.add_argument(
        "--visible-owner", action="store_true",
        help="label a patch by the object painted at its centre pixel (a vqadiag synth world)",
    )  # fmt: skip
    parser.add_argument(
        "--pretrain-world", metavar="WORLD",
        help="pre-train the tower on this world's train split instead (a larger world)",
    )  # fmt: skip
    parser.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    if not 0.0 <= args.reduce <= 1.0 or args.reduce_to < 1:
        parser.error(
            f"need 0 <= --reduce <= 1 and --reduce-to >= 1, not {args.reduce}, {args.reduce_to}"
        )
    if args.reduce > 0 and args.visible_owner:
        parser.error("--reduce drops objects the renderer painted; leave --visible-owner out")
    if args.reduce > 0 and args.features != "oracle":
        parser.error("--reduce needs --features oracle (the tower reads the stored images)")
    for flag, share in (("--name-noise", args.name_noise), ("--attr-noise", args.attr_noise)):
        if not 0.0 <= share <= 1.0:
            parser.error(f"need 0 <= {flag} <= 1, not {share}")
        if share > 0 and args.features != "oracle":
            parser.error(f"{flag} needs --features oracle (the tower labels patches itself)")
    kept = None
    if args.attributes is not None:
        kept = tuple(args.attributes.split(","))
        unknown = sorted(set(kept) - set(ATTRIBUTE_CATEGORIES))
        if unknown:
            parser.error(f"--attributes takes colour, material, state or size; not {unknown}")
    if args.embeddings != "gaussian" and args.features == "tower":
        parser.error("--embeddings needs --features oracle or predicted (not the tower's own)")
    given = parse_options(args.option, TRAIN_OWN_OPTIONS)  # as `vqadiag train -o` reads them
    opts = TrainedChatVLM.resolve_options({**RECIPE, **given}, args.epochs)
    if args.pretrain_world and args.features == "oracle":
        parser.error("--pretrain-world needs --features tower or predicted (the oracle has none)")
    if args.pretrain_world and args.visible_owner:
        parser.error("--visible-owner reads the answering world's renderer; leave one out")
    if args.visible_owner and opts["patch_labels"] != "centre":
        parser.error("--visible-owner replaces the centre rule; leave -o patch_labels out")
    owners = VisibleOwners(args.world) if args.visible_owner else None
    torch.set_num_threads(int(opts["threads"]))
    began = time.perf_counter()
    out = run(
        GQAData(args.world), args.features, opts, args.seed, (args.reduce, args.reduce_to),
        args.embeddings, (args.name_noise, args.attr_noise), owners,
        GQAData(args.pretrain_world) if args.pretrain_world else None, kept,
    )  # fmt: skip
    print(
        json.dumps(
            {
                "features": args.features,
                "options": {k: opts[k] for k in sorted(given)},
                "epochs": args.epochs,
                "embeddings": args.embeddings,
                **({"name_noise": args.name_noise} if args.name_noise else {}),
                **({"attr_noise": args.attr_noise} if args.attr_noise else {}),
                **({"attributes": list(kept)} if kept else {}),
                **({"visible_owner": True} if args.visible_owner else {}),
                **({"pretrain_world": args.pretrain_world} if args.pretrain_world else {}),
                **out,
                "seconds": round(time.perf_counter() - began),
            }
        )
    )


def run(
    data: GQAData, kind: str, opts: Mapping[str, Any], seed: int,
    reduce: tuple[float, int] = (0.0, 0), layout: str = "gaussian",
    noise: tuple[float, float] = (0.0, 0.0), owners: VisibleOwners | None = None,
    pretrain_data: GQAData | None = None, kept: Sequence[str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Features of ``kind`` for the train and val images (``reduce``: the share and the
    objects of :func:`reduce_scenes`; ``layout``: the oracle's
    :func:`~vqadiag.models.reference.label_embeddings.label_embeddings`; ``noise``: the
    shares of the oracle's object patches :func:`mislabel_names` renames and
    :func:`mislabel_attributes` re-attributes; ``owners``:
    patches labelled by their visible owner, :func:`labeller`; ``pretrain_data``: the
    world whose train split the tower pre-trains on, :func:`pretraining_images`; ``kept``:
    the attribute categories the patches carry, :func:`kept_attributes`), then
    ``opts["epochs"]`` answering epochs; the figures :func:`main` prints."""
    train_records, val_records = answered(data, "train"), answered(data, "val")
    train_ids = sorted({str(r["imageId"]) for r in train_records})
    val_ids = sorted({str(r["imageId"]) for r in val_records})
    oracle = kind == "oracle"
    n_attrs = ALL_ATTRIBUTES if oracle else int(opts["aux_attributes"])
    scenes, names, attrs = cdata.patch_vocabulary(data, "train", n_attrs)
    if kept is not None:
        attrs = kept_attributes(attrs, kept)
    tower_images = None  # where the tower pre-trains; its indices are those it predicts
    if not oracle:
        tower_images = pretraining_images(
            data, pretrain_data, scenes, train_ids, names, attrs, n_attrs, kept
        )
    sizes = [len(names), len(attrs)] if tower_images is None else list(map(len, tower_images[3:]))
    whose = "the pre-training world's " if pretrain_data is not None and not oracle else ""
    width = needed_width(sizes, layout)
    if kind != "tower" and width > int(opts["vision_dim"]):
        raise SystemExit(  # checked before the training starts
            f"{whose}{sizes[0]} names and {sizes[1]} attributes need -o vision_dim={width} "
            f"or more for --embeddings {layout}"
        )
    k = int(opts["scene_questions"])  # as `vqadiag train` adds them
    train_records += scene_questions(train_records, scenes, train_ids, k, seed)
    reduced = 0
    if reduce[0] > 0:  # its own draws, so the others are as without --reduce
        scenes = dict(scenes)
        reduced = reduce_scenes(
            np.random.default_rng(seed + 2), train_records, scenes, train_ids, *reduce
        )
    tokenizer = build.train_tokenizer(cdata.training_texts(train_records), int(opts["vocab_size"]))
    processor = build.build_processor(tokenizer, opts)
    model = build.build_llava(len(tokenizer), opts, seed).to(training_device(opts))
    grid = int(opts["image_size"]) // int(opts["patch_size"])
    rng = np.random.default_rng(seed)
    pretrain: dict[str, float] = {}
    rule = str(opts["patch_labels"])
    if oracle:
        embeddings = fixed_embeddings(names, attrs, opts, layout, seed)
        draws = Noise(*noise, np.random.default_rng(seed + 3), np.random.default_rng(seed + 4))
        train_features = oracle_features(
            scenes, train_ids, grid, names, attrs, embeddings, rule, draws, owners
        )
        val_scenes = data.scene_graphs("val")
        val_features = oracle_features(
            val_scenes, val_ids, grid, names, attrs, embeddings, rule, draws, owners
        )
    else:
        source, shown, shown_ids, names, attrs = tower_images
        pixels = cdata.pixel_values(processor, source, shown_ids)
        if owners is None:  # labelled on the model's device, as `vqadiag train` does
            label = BoxTable(shown, shown_ids, grid, names, attrs, rule, fit.model_device(model))
        else:
            label = labeller(shown, shown_ids, grid, names, attrs, rule, owners)
        # measured on held-out images as `vqadiag train` measures them
        measured = held_out(data, processor, grid, names, rule, owners)
        heads = fit.pretraining_heads(model, len(names), len(attrs))
        pretrain = fit.pretrain_vision(
            model, pixels, label, len(names), opts, rng, False, measured, heads
        )
        if pretrain_data is not None:
            pretrain["images"] = len(shown_ids)
            pixels = cdata.pixel_values(processor, data, train_ids)
        del measured
        val_pixels = cdata.pixel_values(processor, data, val_ids)
        val_scenes = data.scene_graphs("val")
        truth = labeller(val_scenes, val_ids, grid, names, attrs, rule, owners)()
        # by the size of the object a patch shows, where the rule labels the patches
        sides = None if owners is not None else val_sides(val_scenes, val_ids, grid, opts)
        val_states = fit.encode_images(model, val_pixels)
        as_objects = object_perception(heads, val_states, truth, sides)
        if kind == "predicted":
            embeddings = fixed_embeddings(names, attrs, opts, layout, seed)
            train_seen = predicted_labels(heads, fit.encode_images(model, pixels))
            train_features = clean_features(train_seen, embeddings)
            del pixels
            seen = predicted_labels(heads, val_states)
            perceived = {**perception(seen, truth, attrs, sides), "as_objects": as_objects}
            val_features = clean_features(seen, embeddings)
        else:
            train_features = fit.encode_images(model, pixels)
            del pixels
            val_features = val_states
            perceived = {"as_objects": as_objects}
        del val_pixels
    out: dict[str, Any] = {"pretrain": {k: round(v, 2) for k, v in pretrain.items()}}
    if kind != "oracle":
        out["perception"] = perceived
    if reduced:
        out["reduced"] = reduced
    if not int(opts["epochs"]):
        return out
    tokens = build.image_tokens(opts)
    train_rows = {image_id: row for row, image_id in enumerate(train_ids)}
    val_rows = {image_id: row for row, image_id in enumerate(val_ids)}
    grounded = scenes if float(opts["ground_tokens"]) > 0 else None
    train = cdata.examples(
        processor, train_records, train_rows, tokens, grounded, str(opts["ground_from"])
    )
    val = cdata.examples(processor, val_records, val_rows, tokens)
    if grounded is not None:  # attention weights come out of the eager implementation only
        model.set_attn_implementation("eager")
    history = fit.train_language(model, train_features, train, opts, rng)
    with_image = exact_rows(model, val_features, val, False)
    text_alone = exact_rows(model, val_features, val, True)
    by_side = exact_by_side(
        val_records, data.scene_graphs("val"), int(opts["image_size"]), with_image, text_alone
    )
    return {
        **out,
        "last_epoch": {k: round(v, 3) for k, v in history[-1].items() if v is not None},
        "epoch_acc": [round(h["acc"], 1) for h in history],
        "val_exact": round(percent(with_image), 2),
        "val_exact_text_only": round(percent(text_alone), 2),
        "val_exact_by_side": by_side,
        "val_questions": len(val),
        "train_questions": len(train),
    }


if __name__ == "__main__":
    main()
