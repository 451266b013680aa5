"""``vqadiag train --model chat-vlm``: a small LLaVA trained on the world, saved as a
plain ``save_pretrained`` folder (docs/chat-vlm.md).

The run folder holds ``model/`` — weights, ``config.json``, the processor, its tokenizer
and chat template, loaded by ``AutoModelForImageTextToText`` + ``AutoProcessor`` with
no vqadiag code (``--model hf:RUN/model``, ``transformers serve RUN/model``) — and a
``config.json`` that points at it, so the run folder itself is a ``--model`` too (the
``hf:`` adapter's :class:`~vqadiag.models.adapters.chat_vlm.ChatVLM`, batch size 8).

Recipe (parts: :mod:`~vqadiag.models.reference.chat_vlm_build`,
:mod:`~vqadiag.models.reference.chat_vlm_data`,
:mod:`~vqadiag.models.reference.chat_vlm_fit`): a BPE tokenizer trained on the training
questions; a CLIP tower pre-trained on the scene graphs' per-patch labels, then frozen;
the projector and the Llama trained to generate the answers of the training questions in
the chat template, a seeded share of them asked without the image; ``question_sets``
adds the split's VQA v2 and VQA-introspect questions
(:mod:`~vqadiag.models.reference.chat_vlm_questions`). ``scene_questions``
(``-o scene_questions=K``) adds up to K questions per training image written from its
scene graph (:mod:`~vqadiag.models.reference.chat_vlm_scene_questions`); the tokenizer
is trained on them too. ``pretrain_world`` (``-o pretrain_world=DIR``) pre-trains the
tower on every train image of another world folder instead, labelled over that world's
own name and attribute indices (:func:`pretraining_source`); the answers are still
learned on the training split's images. ``pretrain_checkpoint``
(``-o pretrain_checkpoint=FILE``) writes the pre-training's state there after every epoch
and goes on from it when the same pre-training is asked again
(:mod:`~vqadiag.models.reference.chat_vlm_pretrain_checkpoint`).

``blind`` (``-o blind=true``) is the blind twin: the same recipe with every image blank —
every pixel the processor's mean colour, i.e. zero pixel values — and the tower's patch
embedding set to zero, so whatever image it is later shown reaches it as the blank one
did (its answers cannot depend on the image).

Seeded and deterministic: one seed initialises the weights and draws the order, the
text-only questions and the scene questions; deterministic algorithms and ``threads``
intra-op threads.

``device`` (``-o device=cuda``; default ``cpu``) trains on that PyTorch device, and the
trained model answers there (the run folder's ``config.json`` names it; ``hf:RUN/model``
with ``--device`` answers anywhere). On CUDA too the deterministic algorithms are asked
for (docs/chat-vlm.md, "On a GPU").
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError, option_errors
from vqadiag.models.adapters.chat_vlm import ChatVLM
from vqadiag.models.checkpoint import folder_digest, save_checkpoint
from vqadiag.models.option_checks import (
    COUNT,
    POSITIVE,
    RATE,
    SHARE,
    WEIGHT,
    Number,
    check_divides,
    check_numbers,
    names_path,
)

if TYPE_CHECKING:
    from vqadiag.models.reference.chat_vlm_data import ImageLabels

NAME = "chat-vlm"
#: the ``save_pretrained`` folder inside a run folder
MODEL_DIR = "model"

#: the number options that count things (at least one of each)
_SIZES = (
    "batch_size", "image_size", "patch_size", "vision_dim", "vision_layers",
    "vision_heads", "text_dim", "text_layers", "text_heads", "vocab_size",
    "pretrain_batch_size",
)  # fmt: skip
#: the number options that may be 0
_COUNTS = (
    "epochs", "pretrain_epochs", "aux_attributes", "threads", "caption_objects",
    "scene_questions",
)  # fmt: skip
#: the number options' values (:func:`~vqadiag.models.option_checks.check_numbers`); the
#: answers' gradients are always clipped, so ``grad_clip`` is above 0
CHAT_NUMBERS: dict[str, Number] = {
    **dict.fromkeys(_SIZES, POSITIVE),
    **dict.fromkeys(("lr", "pretrain_lr", "grad_clip"), RATE),
    # epochs 0: no answering stage (experiments/chat_vlm_ceiling.py --epochs 0);
    # `vqadiag train --epochs` takes 1 or more
    **dict.fromkeys(_COUNTS, COUNT),
    **dict.fromkeys(("weight_decay", "pretrain_object_loss", "ground_tokens"), WEIGHT),
    "text_only": SHARE,
}


def layer_numbers(opts: Mapping[str, Any]) -> dict[str, Number]:
    """The options that name layers, checked once ``CHAT_NUMBERS`` has checked the
    numbers of layers: ``tune_tower_layers`` from 0 to ``vision_layers``, and
    ``ground_layer`` a layer of the Llama, from 0 to ``text_layers`` − 1."""
    return {
        "tune_tower_layers": Number(low=0, high=int(opts["vision_layers"])),
        "ground_layer": Number(low=0, high=int(opts["text_layers"]) - 1),
    }


class TrainedChatVLM(ChatVLM):
    """The chat VLM vqadiag trains (module docstring); answers as ``hf:`` does."""

    #: options that name paths (``vqadiag train`` keeps them apart from ``--out`` and the
    #: data): a folder the training reads whole, and a file it writes and reads back
    read_options: ClassVar[tuple[str, ...]] = ("pretrain_world",)
    written_options: ClassVar[tuple[str, ...]] = ("pretrain_checkpoint",)

    defaults: ClassVar[dict[str, Any]] = {
        "epochs": 3,
        "batch_size": 16,
        "lr": 1e-3,
        "weight_decay": 0.01,
        "grad_clip": 1.0,
        "image_size": 128,
        "patch_size": 16,
        "vision_dim": 128,
        "vision_layers": 3,
        "vision_heads": 4,
        "text_dim": 128,
        "text_layers": 2,
        "text_heads": 4,
        "vocab_size": 1024,
        "pretrain_epochs": 12,
        "pretrain_batch_size": 32,
        "pretrain_lr": 1e-3,
        "aux_attributes": 64,
        "patch_labels": "centre",
        "pretrain_augment": False,
        "pretrain_object_loss": 0.0,
        "text_only": 0.2,
        "question_first": False,
        "caption_objects": 0,
        "scene_questions": 0,
        "question_sets": "gqa",
        "ground_tokens": 0.0,
        "ground_layer": 0,
        "ground_from": "question",
        "tune_tower_layers": 0,
        "pretrain_world": "",
        "pretrain_checkpoint": "",
        "blind": False,
        "threads": 2,
        "device": "cpu",
    }

    training_log: dict[str, Any]
    options: dict[str, Any]

    @classmethod
    def resolve_options(cls, options: Mapping[str, Any], epochs: int | None) -> dict[str, Any]:
        """The defaults with ``options`` and ``epochs`` applied; unknown keys are errors."""
        unknown = sorted(set(options) - set(cls.defaults))
        if unknown:
            known = ", ".join(sorted(cls.defaults))
            raise DataError("--option", f"unknown chat-vlm option(s) {unknown} (known: {known})")
        out = {**cls.defaults, **options, **({} if epochs is None else {"epochs": epochs})}
        with option_errors(ValueError):
            check_numbers(out, CHAT_NUMBERS)
            check_numbers(out, layer_numbers(out))
            check_divides(out, "vision_dim", "vision_heads")
            check_divides(out, "text_dim", "text_heads")
        if int(out["image_size"]) % int(out["patch_size"]):
            raise DataError("--option", "image_size must be a multiple of patch_size")
        for key in ("blind", "pretrain_augment", "question_first"):
            out[key] = _switch(key, out[key])
        from vqadiag.models.reference.chat_vlm_data import LABEL_RULES
        from vqadiag.models.reference.chat_vlm_questions import parse_question_sets

        out["question_sets"] = ",".join(parse_question_sets(out["question_sets"]))

        rule = out["patch_labels"]
        if rule not in LABEL_RULES:
            raise DataError(
                "--option", f"patch_labels must be {' or '.join(LABEL_RULES)}, not {rule!r}"
            )
        _check_grounding(out)
        out["pretrain_world"] = _pretrain_world(out)
        out["pretrain_checkpoint"] = _pretrain_checkpoint(out)
        training_device(out)
        return out

    @classmethod
    def train(
        cls,
        data: GQAData,
        *,
        split: str = "train",
        epochs: int | None = None,
        seed: int = 0,
        progress: bool = True,
        **options: Any,
    ) -> TrainedChatVLM:
        """Train on ``split`` (module docstring) and return the model, loaded back from
        its ``save_pretrained`` folder as ``hf:`` loads it."""
        import transformers

        from vqadiag.models.training import torch_training_settings

        opts = cls.resolve_options(options, epochs)
        start = time.perf_counter()
        with torch_training_settings(int(opts["threads"])):
            model, processor, log = _fit(data, split, seed, opts, progress)
        folder = Path(tempfile.mkdtemp(prefix="vqadiag-chat-vlm-"))
        transformers.utils.logging.disable_progress_bar()  # vqadiag draws its own bars
        model.save_pretrained(folder)
        processor.save_pretrained(folder)
        trained = cls(folder, device=str(opts["device"]))
        weakref.finalize(trained, shutil.rmtree, folder, True)
        trained.options = opts
        trained.training_log = {**log, "seconds": time.perf_counter() - start}
        return trained

    def save(self, run_dir: Path) -> None:
        """``run_dir/model`` (the ``save_pretrained`` folder) and a ``config.json`` that
        points at it (``model`` ``hf-chat``), with the options, the history, the vision
        pre-training's figures, the number of training questions of each question set
        (``training_questions``), the number of scene questions (with
        ``scene_questions``) and the model folder's digest (so the run's fingerprint
        covers the weights)."""
        target = Path(run_dir) / MODEL_DIR
        if target.resolve() != self.model_dir:
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(self.model_dir, target)
        config = {
            **self.run_config(),
            "path": MODEL_DIR,
            "trained_as": NAME,
            "model_digest": folder_digest(target, {}),
            "options": getattr(self, "options", {}),
            "history": getattr(self, "training_log", {}).get("history", []),
            "pretrain": getattr(self, "training_log", {}).get("pretrain", {}),
        }
        for key in ("scene_questions", "training_questions"):
            if key in getattr(self, "training_log", {}):
                config[key] = self.training_log[key]
        save_checkpoint(Path(run_dir), config, {}, [])


def _switch(key: str, value: Any) -> bool:
    """An on/off option: true, false, 1 or 0; anything else (``no``, ``False`` as a
    string) is refused rather than read as on."""
    if value in (True, False):  # 1 and 0 compare equal to them
        return bool(value)
    raise DataError("--option", f"{key} must be true or false, not {value!r}")


def _pretrain_world(opts: Mapping[str, Any]) -> str:
    """``pretrain_world``: empty (the tower pre-trains on the training split's images) or
    the path of a folder, as given; a value that is not a path, or a path that is not a
    folder, refused in one line. The blind twin takes it too: its tower pre-trains on
    that world's labels over blank images, as the twin of any recipe does."""
    value = _path_option(opts, "pretrain_world", "a world folder")
    if not value:
        return ""
    folder = Path(value)
    if not folder.is_dir():
        problem = "is not a folder" if folder.exists() else "does not exist"
        raise DataError(folder, f"pretrain_world {problem}")
    return value


def _pretrain_checkpoint(opts: Mapping[str, Any]) -> str:
    """``pretrain_checkpoint``: empty (none) or the path of a file, as given; a folder
    there, a new file in a folder vqadiag cannot write, or a value that is not a path,
    refused in one line before the work starts. An existing file may lie in a folder
    vqadiag cannot write: whether it is written to is known once it is read
    (:func:`_check_checkpoint`)."""
    from vqadiag.data.io.atomic import writable_file

    value = _path_option(opts, "pretrain_checkpoint", "a file path")
    if value and not Path(value).is_file():
        writable_file(Path(value))
    return value


def _path_option(opts: Mapping[str, Any], key: str, kind: str) -> str:
    """``opts[key]``, an option naming a path, as text: empty when unset (None or ""),
    one line saying it must be ``kind`` when it names no path (:func:`names_path`)."""
    value = opts[key]
    if value is None or value == "":
        return ""
    if not names_path(value):
        raise DataError("--option", f"{key} must be {kind}, not {value!r}")
    return str(value)


def pretraining_source(
    data: GQAData, n_attrs: int
) -> tuple[dict[str, Any], list[str], dict[str, int], dict[str, int]]:
    """What the tower pre-trains on in another world ``data`` (``pretrain_world``): the
    scene graphs of its train split, the ids of every image that has one (sorted), and
    the name and attribute indices its patches are labelled with
    (:func:`~vqadiag.models.reference.chat_vlm_data.patch_vocabulary`); a DataError
    naming the file without scene graphs."""
    from vqadiag.models.reference import chat_vlm_data as cdata

    scenes, names, attrs = cdata.patch_vocabulary(data, "train", n_attrs)
    return scenes, sorted(scenes), names, attrs


def _check_grounding(opts: Mapping[str, Any]) -> None:
    """``ground_from`` is one of ``GROUND_FROM`` (the weight and the layer are number
    options)."""
    from vqadiag.models.reference.chat_vlm_data import GROUND_FROM

    if opts["ground_from"] not in GROUND_FROM:
        raise DataError(
            "--option",
            f"ground_from must be {' or '.join(GROUND_FROM)}, not {opts['ground_from']!r}",
        )


def training_device(opts: Mapping[str, Any], option: str = "--option") -> Any:
    """The ``torch.device`` of ``opts["device"]``, refused in one line naming ``option``
    when it is not a device name or this machine lacks it. Before a CUDA device's first
    use it sets ``CUBLAS_WORKSPACE_CONFIG`` (unless set), which cuBLAS needs to be
    deterministic."""
    import torch

    name = opts["device"]
    try:
        device = torch.device(str(name))
    except (RuntimeError, ValueError):
        raise DataError(
            option, f"device must be a PyTorch device (cpu, cuda …), not {name!r}"
        ) from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DataError(option, f"device {name!r}: this machine's PyTorch has no CUDA")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DataError(option, f"device {name!r}: only {torch.cuda.device_count()} GPU(s)")
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    elif device.type != "cpu":
        raise DataError(option, f"device {name!r}: chat-vlm trains on cpu or cuda")
    return device


def _fit(
    data: GQAData, split: str, seed: int, opts: Mapping[str, Any], progress: bool
) -> tuple[Any, Any, dict[str, Any]]:
    """Build, pre-train and train (:mod:`~vqadiag.models.reference.chat_vlm_fit`)."""
    from vqadiag.models.reference import chat_vlm_build as build
    from vqadiag.models.reference import chat_vlm_data as cdata
    from vqadiag.models.reference import chat_vlm_fit as fit
    from vqadiag.models.reference.chat_vlm_questions import parse_question_sets, training_records
    from vqadiag.models.reference.chat_vlm_scene_questions import scene_questions

    sets = training_records(data, split, parse_question_sets(opts["question_sets"]))
    records = [r for rows in sets.values() for r in rows]
    image_ids = sorted({str(r["imageId"]) for r in records})
    scenes, names, attrs = cdata.patch_vocabulary(data, split, int(opts["aux_attributes"]))
    shown = _pretraining_images(data, opts, scenes, image_ids, names, attrs)
    extra = scene_questions(sets["gqa"], scenes, image_ids, int(opts["scene_questions"]), seed)
    records += extra
    k = int(opts["caption_objects"])
    captions = {i: cdata.caption(scenes[i], k) for i in image_ids if k and i in scenes}
    texts = cdata.training_texts(records, list(captions.values()))
    tokenizer = build.train_tokenizer(texts, int(opts["vocab_size"]))
    processor = build.build_processor(tokenizer, opts)
    model = build.build_llava(len(tokenizer), opts, seed).to(training_device(opts))
    rng = np.random.default_rng(seed)
    clock = _Clock()
    pixels, pre = _pretrain_tower(model, processor, (data, split), shown, image_ids, opts, rng,
                                  progress, clock)  # fmt: skip
    features = fit.encode_images(model, pixels, tuned=int(opts["tune_tower_layers"]))
    rows = {image_id: i for i, image_id in enumerate(image_ids)}
    grounded = float(opts["ground_tokens"]) > 0 and not opts["blind"]
    tied = scenes if grounded else None
    tokens = build.image_tokens(opts)
    train = cdata.examples(processor, records, rows, tokens, tied, str(opts["ground_from"]))
    train += cdata.caption_examples(processor, captions, rows, tokens)
    clock.lap("examples")
    attention = model.config._attn_implementation
    if grounded:  # attention weights come out of the eager implementation only
        model.set_attn_implementation("eager")
    try:
        history = fit.train_language(model, features, train, opts, rng, progress)
    finally:
        model.set_attn_implementation(attention)
    clock.lap("language")
    model.model.vision_tower.requires_grad_(True)
    log = {"pretrain": pre, "history": history, "stage_seconds": clock.laps}
    if int(opts["scene_questions"]):
        log["scene_questions"] = len(extra)
    log["training_questions"] = {name: len(rows) for name, rows in sets.items()}
    return model, processor, log


#: where the tower pre-trains: the world, its scene graphs, the image ids, and the name
#: and attribute indices their patches are labelled with
_Pretraining = tuple[GQAData, Mapping[str, Any], list[str], dict[str, int], dict[str, int]]


def _pretraining_images(
    data: GQAData, opts: Mapping[str, Any], scenes: Mapping[str, Any], image_ids: list[str],
    names: dict[str, int], attrs: dict[str, int],
) -> _Pretraining:  # fmt: skip
    """The training split's images (``scenes``, ``image_ids``, ``names``, ``attrs``), or
    with ``pretrain_world`` every train image of that world (:func:`pretraining_source`;
    a folder without scene graphs is refused here, before the model is built)."""
    if not opts["pretrain_world"]:
        return data, scenes, image_ids, names, attrs
    source = GQAData(opts["pretrain_world"])
    return (source, *pretraining_source(source, int(opts["aux_attributes"])))


def _check_checkpoint(model: Any, opts: Mapping[str, Any]) -> None:
    """Before any image is read: a ``pretrain_checkpoint`` file of other settings is
    refused (:func:`~vqadiag.models.reference.chat_vlm_pretrain_checkpoint.settings_parts`),
    and so is its folder when vqadiag cannot write there and epochs are left to run. A
    file that holds every epoch is only read: it may be shared from a read-only
    folder."""
    from vqadiag.data.io.atomic import writable_file
    from vqadiag.models.reference import chat_vlm_fit as fit
    from vqadiag.models.reference import chat_vlm_pretrain_checkpoint as saved_state

    path = str(opts["pretrain_checkpoint"])
    settings = saved_state.settings_parts(model.config.vision_config, opts, fit.model_device(model))
    saved = saved_state.PretrainCheckpoint(path, settings).load()
    if not saved_state.finished(saved, int(opts["pretrain_epochs"])):
        writable_file(path)


def _pretrain_tower(
    model: Any, processor: Any, training: tuple[GQAData, str], shown: _Pretraining,
    image_ids: list[str], opts: Mapping[str, Any], rng: np.random.Generator, progress: bool,
    clock: _Clock,
) -> tuple[Any, dict[str, Any]]:  # fmt: skip
    """Stage 1 on the images ``shown`` (:func:`_pretraining_images`), measured on the
    held-out images of the ``training`` world and split; returns the pixels of the
    training images ``image_ids`` the answers are learned on, and the pre-training's
    figures. The blind twin's patch embedding is zeroed and frozen first, and its images
    are blank."""
    import torch

    from vqadiag.models.reference import chat_vlm_data as cdata
    from vqadiag.models.reference import chat_vlm_fit as fit
    from vqadiag.models.reference import chat_vlm_pretrain_checkpoint as saved_state
    from vqadiag.models.reference.chat_vlm_box_labels import BoxTable

    data, split = training
    source, scenes, shown_ids, names, attrs = shown
    size = int(opts["image_size"])

    def images(world: GQAData, ids: list[str]) -> Any:
        if opts["blind"]:  # every pixel the processor's mean colour
            return torch.zeros((len(ids), 3, size, size))
        return cdata.pixel_values(processor, world, ids)

    if opts["blind"]:
        patch = model.model.vision_tower.embeddings.patch_embedding
        with torch.no_grad():
            patch.weight.zero_()
        patch.weight.requires_grad_(False)
    if opts["pretrain_checkpoint"]:
        _check_checkpoint(model, opts)
    pixels = images(source, shown_ids)
    clock.lap("images")
    grid, rule = size // int(opts["patch_size"]), str(opts["patch_labels"])
    labeller = BoxTable(scenes, shown_ids, grid, names, attrs, rule, fit.model_device(model))
    held_out = (
        None if opts["blind"] else held_out_patches(data, split, processor, grid, names, rule)
    )
    checkpoint = None
    if opts["pretrain_checkpoint"]:
        digests = {
            "pixels": saved_state.pixels_digest(pixels),
            "labels": saved_state.labels_digest(scenes, shown_ids, names, attrs),
        }
        checkpoint = (str(opts["pretrain_checkpoint"]), digests)
    pre = fit.pretrain_vision(
        model, pixels, labeller, len(names), opts, rng, progress, held_out, checkpoint=checkpoint
    )
    pre["images"] = len(shown_ids)
    clock.lap("pretrain")
    if source is not data:  # the answers are learned on the training split's own images
        del pixels, labeller
        pixels = images(data, image_ids)
        clock.lap("answer_images")
    return pixels, pre


#: at most this many held-out images measure the pre-trained tower's patch names
HELD_OUT_IMAGES = 500


def held_out_images(data: GQAData, split: str) -> tuple[dict[str, Any], list[str]] | None:
    """The scene graphs of the first split other than ``split`` with questions and scene
    graphs (val, then testdev) and the ids of its first :data:`HELD_OUT_IMAGES` images
    (by id) with both; None when there is none."""
    for other in ("val", "testdev"):
        if other == split:
            continue
        try:
            scenes = data.scene_graphs(other)
            ids = sorted({str(r["imageId"]) for r in data.questions(other).values()})
        except DataError:
            continue
        ids = [i for i in ids if i in scenes][:HELD_OUT_IMAGES]
        if ids:
            return scenes, ids
    return None


def held_out_patches(
    data: GQAData, split: str, processor: Any, grid: int, names: Mapping[str, int],
    rule: str = "centre", label_image: ImageLabels | None = None,
) -> tuple[Any, np.ndarray] | None:  # fmt: skip
    """The pixels of the :func:`held_out_images` and their patch names over the name
    index the tower's head learns, ``names`` (the training split's, or with
    ``pretrain_world`` that world's), by the label ``rule``, or by ``label_image`` where
    given (:func:`~vqadiag.models.reference.chat_vlm_data.scene_labeller`); None when
    there are none or one of the images is missing."""
    from vqadiag.models.reference import chat_vlm_data as cdata

    held_out = held_out_images(data, split)
    if held_out is None:
        return None
    scenes, ids = held_out
    labels, _ = cdata.scene_labeller(scenes, ids, grid, names, {}, rule, label_image)()
    try:
        return cdata.pixel_values(processor, data, ids), labels
    except DataError:  # a missing held-out image: no measure, training goes on
        return None


class _Clock:
    """Seconds spent in each stage of :func:`_fit` (the training log's ``stage_seconds``)."""

    def __init__(self) -> None:
        self.last = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(now - self.last, 1)
        self.last = now
