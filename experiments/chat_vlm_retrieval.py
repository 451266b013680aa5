"""Can the chat VLM's Llama learn to look an object up among its image tokens?
(docs/chat-vlm.md, "What limits it")

The chat VLM's answering stage (:func:`~vqadiag.models.reference.chat_vlm_fit.
train_language`, with the chat VLM's options) on the simplest question an image can
answer, with perfect features and (without ``--prior``) no prior to fall back on. Every
image is a grid of patch features (``(image_size / patch_size)²``, 64 by default);
``--objects`` of them, on distinct patches drawn at random, hold an object: ``E_name[n]
+ E_colour[c]``, a name drawn without replacement from ``--names`` and a colour drawn
evenly from ``--colours`` (``E`` fixed Gaussian embeddings of the tower's width; with
``--prior p`` an object's colour is, with probability p, its name's own colour instead:
colour ``n mod colours`` for name ``n``); every other patch holds ``E_name[0]``, the
background. Each question is ``What is the color of the NAME?`` about one object of its
image; its answer is that object's colour.

Asked with the text alone a model can do no better than chance (1 / colours) without
``--prior``. A model that reads every colour in the image but not which object has it
does no better than ``present_colours``: the share of val questions answered right by
the colour most of the image's objects have (a tie counted as its share). With
``--prior`` the text alone can answer ``name_colours``: the share of val questions whose
answer is the name's own colour. The script prints one JSON line: those, the val split's
exact match asked with the image and with the text alone
(:func:`~vqadiag.models.reference.chat_vlm_fit.answer_loss`; greedy decoding's answers),
``answers_present``: the share of val answers, asked with the image, that are a colour
of one of the image's objects, and the teacher-forced accuracy of each training epoch.

Four options, with ``--objects``, grow the task toward the world one difference at a
time (on the demo world's val images an image holds 14.5 objects, an object 2.8
attributes and, of those that own a patch of the 8 × 8 grid, 3.0 patches; about 40% of the
objects an attribute question asks about own none: ``experiments/world_patch_stats.py``).
``--object-patches K`` puts each object on K distinct patches. ``--hidden p`` leaves an
object out of the image (background on its patches) with probability p, though
questions still ask about it (``shown``: the share of val questions whose object the
image shows; ``val_exact_shown``: the exact match on those). ``--attributes K`` adds K
distinct further attributes (of ``EXTRA_ATTRIBUTES``, fixed random embeddings too) to
each object's feature. ``--kinds query,verify,choose`` asks each question in a kind
drawn evenly (:func:`ask`; ``val_exact_by_kind``; ``present_colours``,
``name_colours`` and ``answers_present`` then count the query questions alone).
``--reduce s`` re-points a share s of the training questions to a copy of their image
that shows only the object asked about and ``--reduce-to`` − 1 others
(:func:`reduce_images`), as a curriculum of fewer objects would.

``--embeddings`` lays the fixed embeddings out (:func:`~vqadiag.models.reference.
label_embeddings.label_embeddings`): ``gaussian`` (the default, as above), ``orthogonal``
(every name, colour and attribute its own direction, so the name is read back exactly
from a sum) or ``split`` (names and the rest in complementary halves of the width).

``--ground-answer`` (with ``-o ground_tokens=W -o ground_layer=L``) also teaches head 0
of Llama layer L where to look: the prompt's last position, which predicts the answer,
should put its attention on the image token of the object asked about (the grounding
term of :func:`~vqadiag.models.reference.chat_vlm_fit.answer_loss`, weight W); the line
then holds the last epoch's mean attention mass there (``ground_mass``).

Usage: ``python experiments/chat_vlm_retrieval.py [--epochs 12] [-o KEY=VALUE ...]``
(``-o`` as ``vqadiag train --model chat-vlm -o``, over batch 32, one thread and the
question first, the answering options of the best recipe of docs/chat-vlm.md). With the
defaults (8,400 training and 1,200 val questions) about 10 minutes on one core.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from vqadiag.cli.models import TRAIN_OWN_OPTIONS, parse_options
from vqadiag.models.reference import chat_vlm_build as build
from vqadiag.models.reference import chat_vlm_data as cdata
from vqadiag.models.reference import chat_vlm_fit as fit
from vqadiag.models.reference.chat_vlm import TrainedChatVLM
from vqadiag.models.reference.label_embeddings import (
    EMBEDDING_LAYOUTS,
    label_embeddings,
    needed_width,
)

#: the answering options of the best recipe (docs/chat-vlm.md, "What holds")
RECIPE = {"batch_size": 32, "threads": 1, "question_first": True}
#: questions per training image (half as many per val image), at most one per object
QUESTIONS_PER_IMAGE = 6
#: the object names and colours the questions use, the first ``--names`` and ``--colours``
NAMES = (
    "cup", "dog", "cat", "tree", "car", "bus", "chair", "table", "hat", "shoe", "bed", "cow",
    "pear", "kite", "lamp", "sign", "boat", "bird", "fork", "bowl", "horse", "plate", "train",
    "clock", "vase", "sheep", "bench", "apple", "bag", "door",
)  # fmt: skip
COLOURS = (
    "red", "blue", "green", "white", "black", "brown", "gray", "yellow", "orange", "pink",
    "purple", "silver",
)  # fmt: skip


#: the kinds of question ``--kinds`` can ask (:func:`ask`)
KINDS = ("query", "verify", "choose")
#: how many further attributes (``--attributes``) an object's feature may sum from
EXTRA_ATTRIBUTES = 48


@dataclass(frozen=True)
class Scene:
    """One image: its objects' name indices (into :data:`NAMES`), colour indices (into
    :data:`COLOURS`) and patch indices (one per object, or a row of ``--object-patches``
    per object); under ``--hidden``, which objects the image does not show, and under
    ``--attributes``, a row of further attribute indices (into ``EXTRA_ATTRIBUTES``) per
    object."""

    names: np.ndarray
    colours: np.ndarray
    patches: np.ndarray
    hidden: np.ndarray | None = None
    extra: np.ndarray | None = None

    def object_patches(self, j: int) -> np.ndarray:
        """The patch indices object ``j`` covers."""
        return self.patches.reshape(len(self.names), -1)[j]

    def shown(self) -> np.ndarray:
        """Whether each object is in the image (all of them without ``--hidden``)."""
        return ~self.hidden if self.hidden is not None else np.ones(len(self.names), bool)


def scenes(
    rng: np.random.Generator, count: int, objects: int, names: int, colours: int, patches: int,
    prior: float = 0.0, object_patches: int = 1, hidden: float = 0.0, attributes: int = 0,
) -> list[Scene]:  # fmt: skip
    """``count`` scenes of ``objects`` objects each (module docstring); with ``prior`` > 0
    each object's colour is its name's own (:func:`own_colour`) with that probability;
    each object covers ``object_patches`` distinct patches, is left out of the image with
    probability ``hidden`` and carries ``attributes`` further distinct attributes. An
    option left at its default draws nothing, so the other draws are as without it."""
    out = []
    for _ in range(count):
        drawn_names = rng.choice(names, objects, replace=False)
        drawn_colours = rng.integers(0, colours, objects)
        if prior > 0:
            own = rng.random(objects) < prior
            drawn_colours = np.where(own, own_colour(drawn_names, colours), drawn_colours)
        drawn_patches = rng.choice(patches, objects * object_patches, replace=False)
        if object_patches > 1:
            drawn_patches = drawn_patches.reshape(objects, object_patches)
        drawn_hidden = rng.random(objects) < hidden if hidden > 0 else None
        drawn_extra = (
            np.stack(
                [rng.choice(EXTRA_ATTRIBUTES, attributes, replace=False) for _ in range(objects)]
            )
            if attributes > 0
            else None
        )
        out.append(Scene(drawn_names, drawn_colours, drawn_patches, drawn_hidden, drawn_extra))
    return out


def own_colour(names: np.ndarray, colours: int) -> np.ndarray:
    """The colour index a name's objects take under ``--prior``: ``n mod colours``."""
    return names % colours


def questions(
    rng: np.random.Generator, drawn: Sequence[Scene], per_image: int, prefix: str,
    kinds: Sequence[str] = ("query",), colours: int = len(COLOURS),
) -> list[dict[str, Any]]:  # fmt: skip
    """``per_image`` records (``imageId``, ``question``, ``answer``, the ``object`` asked
    about and the question's ``kind``) per scene, about distinct objects, each of a kind
    drawn evenly from ``kinds`` (:func:`ask`; with one kind nothing is drawn for it)."""
    out = []
    for row, scene in enumerate(drawn):
        for j in rng.choice(len(scene.names), per_image, replace=False):
            kind = kinds[rng.integers(len(kinds))] if len(kinds) > 1 else kinds[0]
            question, answer = ask(rng, kind, NAMES[scene.names[j]], int(scene.colours[j]), colours)
            out.append(
                {
                    "imageId": f"{prefix}{row}",
                    "question": question,
                    "answer": answer,
                    "object": int(j),
                    "kind": kind,
                }
            )
    return out


def ask(
    rng: np.random.Generator, kind: str, name: str, colour: int, colours: int
) -> tuple[str, str]:
    """The question and answer of one ``kind`` about an object ``name`` of ``colour``:
    ``query`` (What is the color of the NAME? → its colour), ``verify`` (Is the NAME C? →
    yes for its own colour or no for another, each half the time) or ``choose`` (Is the
    NAME C1 or C2? → its colour, the other one drawn among the rest, the order at
    random), as the world's queryAttr, verifyAttr and chooseAttr questions ask."""
    if kind == "query":
        return f"What is the color of the {name}?", COLOURS[colour]
    other = COLOURS[(colour + 1 + rng.integers(colours - 1)) % colours]
    if kind == "verify":
        shown = COLOURS[colour] if rng.random() < 0.5 else other
        return f"Is the {name} {shown}?", "yes" if shown == COLOURS[colour] else "no"
    first, second = (COLOURS[colour], other) if rng.random() < 0.5 else (other, COLOURS[colour])
    return f"Is the {name} {first} or {second}?", COLOURS[colour]


def reduce_images(
    rng: np.random.Generator, drawn: list[Scene], records: list[dict[str, Any]], share: float,
    keep: int,
) -> None:  # fmt: skip
    """Re-point a ``share`` of ``records`` (drawn at random) to a copy of their image, added
    to ``drawn``, that shows only the object asked about and ``keep`` − 1 other objects
    drawn at random (those it showed); the others are background there."""
    for i in np.flatnonzero(rng.random(len(records)) < share):
        r = records[i]
        scene = scene_of(drawn, r)
        others = [j for j in np.flatnonzero(scene.shown()) if j != r["object"]]
        kept = [r["object"], *rng.choice(others, min(keep - 1, len(others)), replace=False)]
        hidden = np.ones(len(scene.names), bool)
        hidden[kept] = False
        drawn.append(replace(scene, hidden=hidden))
        records[i] = {**r, "imageId": f"{r['imageId'][0]}{len(drawn) - 1}"}


def scene_of(drawn: Sequence[Scene], record: Mapping[str, Any]) -> Scene:
    """The scene a record of :func:`questions` asks about (its ``imageId`` is the prefix
    and the scene's row)."""
    return drawn[int(str(record["imageId"])[1:])]


def features(
    drawn: Sequence[Scene], patches: int, embeddings: Sequence[torch.Tensor]
) -> torch.Tensor:
    """``(I, patches, D)``: ``E_name[n + 1] + E_colour[c]`` (``+ Σ_a E_extra[a]`` under
    ``--attributes``, ``embeddings`` then holding ``E_extra`` third) on every patch of an
    object the image shows, ``E_name[0]`` elsewhere."""
    by_name, by_colour = embeddings[:2]
    out = by_name[0].repeat(len(drawn), patches, 1)
    for row, scene in enumerate(drawn):
        for j in np.flatnonzero(scene.shown()):
            feature = by_name[scene.names[j] + 1] + by_colour[scene.colours[j]]
            if scene.extra is not None:
                feature = feature + embeddings[2][torch.from_numpy(scene.extra[j])].sum(0)
            out[row, torch.from_numpy(scene.object_patches(j))] = feature
    return out


def percent(hits: Sequence[float]) -> float:
    """100 · Σ hits / len(hits) (a hit may be a share of one), 0 for none."""
    return 100.0 * float(sum(hits)) / max(1, len(hits))


def present_colours(
    drawn: Sequence[Scene], records: Sequence[Mapping[str, Any]], colours: int
) -> float:
    """Percent of ``records`` answered right by the colour most of the objects the image
    shows have, a tie of k colours counted as 1/k (a guess among ``colours`` when it
    shows none)."""
    hits = []
    for r in records:
        scene = scene_of(drawn, r)
        counts = np.bincount(scene.colours[scene.shown()], minlength=colours)
        top = np.flatnonzero(counts == counts.max())
        hits.append(float(scene.colours[r["object"]] in top) / len(top))
    return percent(hits)


def name_colours(
    drawn: Sequence[Scene], records: Sequence[Mapping[str, Any]], colours: int
) -> float:
    """Percent of ``records`` whose answer is the name's own colour (:func:`own_colour`):
    what the text alone can answer under ``--prior``."""
    hits = []
    for r in records:
        scene = scene_of(drawn, r)
        j = r["object"]
        hits.append(float(scene.colours[j] == own_colour(scene.names[j], colours)))
    return percent(hits)


def exact_rows(
    model: Any, image_features: torch.Tensor, examples: Sequence[cdata.Example], text_only: bool,
    batch: int = 64,
) -> list[bool]:  # fmt: skip
    """Whether each example's answer is exact (every answer token the argmax under teacher
    forcing, :func:`~vqadiag.models.reference.chat_vlm_fit.answer_loss`), ``batch``
    examples at a time (right padding leaves the earlier positions as they are)."""
    out: list[bool] = []
    with torch.no_grad():
        for start in range(0, len(examples), batch):
            chosen = examples[start : start + batch]
            hits = fit.answer_loss(model, image_features, chosen, [text_only] * len(chosen))[1]
            out += [bool(h) for h in hits.tolist()]
    return out


def answered_colours(
    model: Any, processor: Any, image_features: torch.Tensor, examples: Sequence[cdata.Example],
    colours: int,
) -> list[int | None]:  # fmt: skip
    """The colour index each example is answered with when asked with its image (the one
    colour whose answer is exact: greedy decoding gives at most one), None when no
    colour is."""
    out: list[int | None] = [None] * len(examples)
    for c in range(colours):
        answer = (*processor.tokenizer(" " + COLOURS[c])["input_ids"], build.EOS)
        asked = [cdata.Example(ex.image, ex.with_image, ex.text_only, answer) for ex in examples]
        for row, hit in enumerate(exact_rows(model, image_features, asked, False)):
            if hit:
                out[row] = c
    return out


def answer_grounded(
    train: Sequence[cdata.Example], records: Sequence[Mapping[str, Any]], drawn: Sequence[Scene]
) -> list[cdata.Example]:
    """The examples with one grounding pair each: the prompt's last position (the one
    that predicts the answer's first token) should look at the image token of the
    object asked about (:func:`~vqadiag.models.reference.chat_vlm_data.answer_pair`;
    :func:`~vqadiag.models.reference.chat_vlm_fit.answer_loss`)."""
    out = []
    for ex, r in zip(train, records, strict=True):
        patches = scene_of(drawn, r).object_patches(r["object"])
        out.append(replace(ex, grounded=cdata.answer_pair(ex.with_image, patches)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=12, help="answering epochs")
    parser.add_argument("--train-images", type=int, default=1400)
    parser.add_argument("--val-images", type=int, default=400)
    parser.add_argument("--objects", type=int, default=6, help="objects per image")
    parser.add_argument("--names", type=int, default=20, help=f"at most {len(NAMES)}")
    parser.add_argument("--colours", type=int, default=8, help=f"at most {len(COLOURS)}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--prior", type=float, default=0.0,
        help="probability that an object has its name's own colour (0: colours drawn evenly)",
    )  # fmt: skip
    parser.add_argument("--object-patches", type=int, default=1, help="patches each object covers")
    parser.add_argument(
        "--hidden", type=float, default=0.0,
        help="probability that an object asked about is not in the image (background there)",
    )  # fmt: skip
    parser.add_argument(
        "--attributes", type=int, default=0,
        help=f"further attributes (of {EXTRA_ATTRIBUTES}) summed into each object's feature",
    )  # fmt: skip
    parser.add_argument(
        "--embeddings", choices=EMBEDDING_LAYOUTS, default="gaussian",
        help="how the names', colours' and attributes' embeddings overlap (label_embeddings)",
    )  # fmt: skip
    parser.add_argument(
        "--reduce", type=float, default=0.0,
        help="share of training questions asked about a copy of their image that shows "
        "only --reduce-to objects, the one asked about among them",
    )  # fmt: skip
    parser.add_argument("--reduce-to", type=int, default=3, help="objects a reduced image shows")
    parser.add_argument(
        "--kinds", type=lambda text: tuple(text.split(",")), default=("query",),
        help="the kinds of question asked, drawn evenly: query, verify, choose (comma-separated)",
    )  # fmt: skip
    parser.add_argument(
        "--ground-answer", action="store_true",
        help="supervise where the answer looks (with -o ground_tokens=W -o ground_layer=L)",
    )  # fmt: skip
    parser.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    if not (0 < args.objects <= args.names <= len(NAMES)) or not 0 < args.colours <= len(COLOURS):
        parser.error(f"need 0 < objects <= names <= {len(NAMES)}, 0 < colours <= {len(COLOURS)}")
    if not 0.0 <= args.prior < 1.0:
        parser.error(f"--prior must be in [0, 1), not {args.prior}")
    if not 0.0 <= args.reduce <= 1.0 or args.reduce_to < 1:
        parser.error(
            f"need 0 <= --reduce <= 1 and --reduce-to >= 1, not {args.reduce}, {args.reduce_to}"
        )
    if not 0.0 <= args.hidden < 1.0:
        parser.error(f"--hidden must be in [0, 1), not {args.hidden}")
    if not 0 <= args.attributes <= EXTRA_ATTRIBUTES or args.object_patches < 1:
        parser.error(f"need 0 <= --attributes <= {EXTRA_ATTRIBUTES} and --object-patches >= 1")
    if not set(args.kinds) <= set(KINDS) or len(set(args.kinds)) < len(args.kinds):
        parser.error(f"--kinds takes distinct kinds among {', '.join(KINDS)}, not {args.kinds}")
    if args.kinds != ("query",) and args.colours < 2:
        parser.error("verify and choose questions need at least 2 colours")
    given = parse_options(args.option, TRAIN_OWN_OPTIONS)
    opts = TrainedChatVLM.resolve_options({**RECIPE, **given}, args.epochs)
    width = needed_width(embedding_sizes(args), args.embeddings)
    if width > int(opts["vision_dim"]):
        parser.error(f"{width} orthogonal embeddings need -o vision_dim={width} or more")
    if args.ground_answer and not float(opts["ground_tokens"]) > 0:
        parser.error("--ground-answer needs a weight: -o ground_tokens=W (W > 0)")
    if args.objects * args.object_patches > build.image_tokens(opts):
        parser.error(
            f"{args.objects} objects × {args.object_patches} patches each do not fit "
            f"the image's {build.image_tokens(opts)} patches"
        )
    torch.set_num_threads(int(opts["threads"]))
    began = time.perf_counter()
    out = run(args, opts)
    out = {
        "options": {k: opts[k] for k in sorted(given)},
        "epochs": args.epochs,
        "embeddings": args.embeddings,
        **out,
    }
    print(json.dumps({**out, "seconds": round(time.perf_counter() - began)}))


def embedding_sizes(args: argparse.Namespace) -> list[int]:
    """The groups of fixed embeddings: the names and the background, the colours, and
    under ``--attributes`` the extra attributes, drawn last so that the others are as
    without it."""
    return [args.names + 1, args.colours] + ([EXTRA_ATTRIBUTES] if args.attributes else [])


def run(args: argparse.Namespace, opts: Mapping[str, Any]) -> dict[str, Any]:
    """Draw the scenes and questions, train the answering stage, measure (module
    docstring)."""
    rng = np.random.default_rng(args.seed)
    patches = build.image_tokens(opts)
    per_image = min(QUESTIONS_PER_IMAGE, args.objects)
    shape = (args.objects, args.names, args.colours, patches, args.prior)
    layout = {
        "object_patches": args.object_patches,
        "hidden": args.hidden,
        "attributes": args.attributes,
    }
    train_scenes = scenes(rng, args.train_images, *shape, **layout)
    val_scenes = scenes(rng, args.val_images, *shape, **layout)
    asking = (args.kinds, args.colours)
    train_records = questions(rng, train_scenes, per_image, "t", *asking)
    val_records = questions(rng, val_scenes, max(1, per_image // 2), "v", *asking)
    if args.reduce > 0:  # its own draws, so the others are as without --reduce
        reduce_images(
            np.random.default_rng(args.seed + 2),
            train_scenes,
            train_records,
            args.reduce,
            args.reduce_to,
        )
    draw = torch.Generator().manual_seed(args.seed + 1)
    dim = int(opts["vision_dim"])
    embeddings = label_embeddings(embedding_sizes(args), dim, args.embeddings, draw)
    tokenizer = build.train_tokenizer(cdata.training_texts(train_records), int(opts["vocab_size"]))
    processor = build.build_processor(tokenizer, opts)
    model = build.build_llava(len(tokenizer), opts, args.seed)
    train = cdata.examples(
        processor, train_records, {f"t{i}": i for i in range(len(train_scenes))}, patches
    )
    val = cdata.examples(
        processor, val_records, {f"v{i}": i for i in range(len(val_scenes))}, patches
    )
    if args.ground_answer:
        train = answer_grounded(train, train_records, train_scenes)
        model.set_attn_implementation("eager")  # attention weights come out of eager only
    history = fit.train_language(
        model, features(train_scenes, patches, embeddings), train, opts, rng
    )
    val_features = features(val_scenes, patches, embeddings)
    queried = [i for i, r in enumerate(val_records) if r["kind"] == "query"]
    answers = answered_colours(
        model, processor, val_features, [val[i] for i in queried], args.colours
    )
    asked = [scene_of(val_scenes, r) for r in val_records]
    # a query's own answer is one of the colours tried, so it is exact exactly when it is
    # the colour answered; the other kinds are scored as they are asked
    right = [0.0] * len(val)
    for a, i in zip(answers, queried, strict=True):
        right[i] = float(a == asked[i].colours[val_records[i]["object"]])
    others = [i for i, r in enumerate(val_records) if r["kind"] != "query"]
    scored = exact_rows(model, val_features, [val[i] for i in others], False)
    for i, hit in zip(others, scored, strict=True):
        right[i] = float(hit)
    present = [
        float(a is not None and a in asked[i].colours[asked[i].shown()])
        for a, i in zip(answers, queried, strict=True)
    ]
    shown = [bool(scene.shown()[r["object"]]) for scene, r in zip(asked, val_records, strict=True)]
    query_records = [val_records[i] for i in queried]
    of_kind: dict[str, list[float]] = {kind: [] for kind in args.kinds}
    for hit, r in zip(right, val_records, strict=True):
        of_kind[r["kind"]].append(hit)
    return {
        "train_questions": len(train),
        "val_questions": len(val),
        "chance": round(100.0 / args.colours, 2),
        "present_colours": round(present_colours(val_scenes, query_records, args.colours), 2),
        "name_colours": round(name_colours(val_scenes, query_records, args.colours), 2),
        "val_exact": round(percent(right), 2),
        "val_exact_by_kind": {kind: round(percent(of_kind[kind]), 2) for kind in args.kinds},
        "shown": round(percent(shown), 2),
        "val_exact_shown": round(percent([h for h, s in zip(right, shown, strict=True) if s]), 2),
        "val_exact_text_only": round(percent(exact_rows(model, val_features, val, True)), 2),
        "answers_present": round(percent(present), 2),
        "epoch_acc": [round(h["acc"], 1) for h in history],
        "ground_mass": history[-1].get("ground_mass"),
    }


if __name__ == "__main__":
    main()
