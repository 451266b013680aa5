"""What the chat VLM is trained on (docs/chat-vlm.md, "Training"): the token sequences of
the world's questions in the chat template, the images as the processor prepares them,
and the per-patch labels the scene graphs give.

* A question becomes the user turn of :class:`~vqadiag.models.adapters.chat_vlm.ChatVLM`
  (the image and ``Generation().ask(question)``), rendered by the processor's chat
  template with the generation prompt (the image first, or the text first with
  ``question_first``), tokenised as the processor tokenises it (the
  ``<image>`` token repeated once per patch); the target is ``" " + answer`` and the
  end-of-sequence token. The same question without its image is the text alone.
* A patch's labels are the name and the attributes of the object whose annotated box is
  the smallest that contains the patch's centre (as the pixel model's grid cells;
  docs/models.md, "The pixel model"); index 0 ("background") when none. That object is
  drawn on top there only where its silhouette covers the centre (docs/chat-vlm.md,
  "What limits it"). Under the
  ``overlap`` rule (``-o patch_labels=overlap``) they are those of the smallest annotated
  box that overlaps the patch at all (docs/chat-vlm.md, "Training").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vqadiag.data.formats.relevance import annotated_object_ids
from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError
from vqadiag.models.adapters.chat_vlm import user_turn
from vqadiag.models.adapters.generated_answer import Generation
from vqadiag.models.reference.chat_vlm_build import EOS, IMAGE
from vqadiag.models.reference.pixel_objective import (
    cell_centres,
    object_cells,
    point_labels,
    region_labels,
    scene_vocab,
)

#: the rules a patch is labelled by (:func:`patch_labels`)
LABEL_RULES = ("centre", "overlap")


@dataclass(frozen=True)
class Example:
    """One question: its image's row in the image table, the prompt's token ids with the
    image and without it (empty: never asked without it), the answer's token ids (ending
    with EOS), and the attention its annotations ask for (:func:`grounding`: pairs of a
    query position in ``with_image`` and the key positions it should look at)."""

    image: int
    with_image: tuple[int, ...]
    text_only: tuple[int, ...]
    answer: tuple[int, ...]
    grounded: tuple[tuple[int, tuple[int, ...]], ...] = ()


def user_prompt(processor: Any, question: str, *, image: bool) -> str:
    """The chat-template text of one user turn (the image and the question's prompt, in
    the order of the processor's chat template), with the generation prompt: what the
    ``hf:`` adapter sends."""
    return user_turn(processor, Generation().ask(question), image=image)


def prompt_ids(processor: Any, question: str, *, image: bool, n_image_tokens: int) -> list[int]:
    """The token ids the processor gives for :func:`user_prompt` (``<image>`` expanded)."""
    return turn_ids(processor, user_prompt(processor, question, image=image), n_image_tokens)


def turn_ids(processor: Any, turn: str, n_image_tokens: int) -> list[int]:
    """The token ids the processor gives for the rendered ``turn``, each ``<image>``
    token repeated once per patch."""
    ids = processor.tokenizer(turn)["input_ids"]
    out: list[int] = []
    for i in ids:
        out.extend([IMAGE] * n_image_tokens if i == IMAGE else [i])
    return out


def question_words(question: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` character spans, in ``question`` as given, of the words GQA
    ``annotations`` index: the question stripped of surrounding whitespace and a final
    ``?`` / ``.``, split on spaces (``"Is it red?"`` → [(0, 2), (3, 5), (6, 9)];
    ``" Is it red?"`` → [(1, 3), (4, 6), (7, 10)]), the words the pixel model's
    :func:`~vqadiag.models.reference.pixel_objective.word_token_starts` counts."""
    text = question.rstrip()
    if text.endswith(("?", ".")):
        text = text[:-1]
    start = len(text) - len(text.lstrip())
    spans = []
    for word in text[start:].split(" "):
        spans.append((start, start + len(word)))
        start += len(word) + 1
    return spans


def annotation_span(key: Any) -> tuple[int, int] | None:
    """The words ``(first, stop)`` a GQA ``annotations`` key ties: ``"3"`` → (3, 4),
    ``"3:5"`` → (3, 5); None for any other key (``"x"``, ``"1:2:3"``)."""
    bounds = str(key).split(":")
    if len(bounds) > 2 or not all(b.isdecimal() for b in bounds):
        return None
    first = int(bounds[0])
    return first, int(bounds[1]) if len(bounds) == 2 else first + 1


def object_patches(obj: Mapping[str, Any], scene: Mapping[str, Any], grid: int) -> list[int]:
    """The patches (row-major, of a ``grid`` × ``grid`` split of the whole image) whose
    centre lies in the object's box, or the patch of the box's centre when none does (the
    pixel model's cells, :func:`~vqadiag.models.reference.pixel_objective.object_cells`;
    docs/models.md)."""
    width, height = float(scene.get("width") or 1), float(scene.get("height") or 1)
    cx, cy = cell_centres(width, height, grid)
    return [int(i) for i in np.flatnonzero(object_cells(obj, cx, cy, width, height, grid))]


def grounding(
    processor: Any, record: Mapping[str, Any], scene: Mapping[str, Any] | None, grid: int
) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """The attention the record's ``annotations`` ask for, as pairs ``(q, K_q)`` of
    positions in the prompt with the image (:func:`prompt_ids`): the query position q
    should put its attention on the key positions K_q.

    Each annotation ties question words to an object of ``scene``: the words' tokens W
    (a token is tied to a word when their characters overlap) and the image tokens P of
    the object's patches (:func:`object_patches`). In a causal model only the later part
    can look at the earlier one: with the image first each token of W is a query with
    keys P; with the question first each token of P is a query with keys W. Empty
    without a scene graph or annotations."""
    tied = (record.get("annotations") or {}).get("question") or {}
    if scene is None or not isinstance(tied, Mapping) or not tied:
        return ()
    question = str(record["question"])
    turn = user_prompt(processor, question, image=True)
    base, image_first = _question_place(processor)
    encoded = processor.tokenizer(turn, return_offsets_mapping=True)
    ids, offsets = encoded["input_ids"], encoded["offset_mapping"]
    if IMAGE not in ids or turn[base : base + len(question)] != question:
        return ()
    image_at, n_image = ids.index(IMAGE), grid * grid
    words = question_words(question)
    out = []
    for span, object_id in tied.items():
        obj = scene["objects"].get(str(object_id))
        words_tied = annotation_span(span)
        if obj is None or words_tied is None:
            continue
        first, stop = words_tied
        patches = tuple(image_at + p for p in object_patches(obj, scene, grid))
        chars = [(base + start, base + end) for start, end in words[first:stop]]
        tokens = tuple(
            position + (n_image - 1 if position > image_at else 0)
            for position, (s, e) in enumerate(offsets)
            if position != image_at and any(s < hi and e > lo for lo, hi in chars)
        )
        if not tokens:
            continue
        if image_first:
            out.extend((token, patches) for token in tokens)
        else:
            out.extend((patch, tokens) for patch in patches)
    return tuple(out)


#: what ``-o ground_from`` supervises: question tokens ↔ image tokens (:func:`grounding`),
#: or the answer's position → image tokens (:func:`answer_grounding`)
GROUND_FROM = ("question", "answer")


def answer_pair(
    with_image: Sequence[int], patches: Iterable[int]
) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """The one pair ``(q, K)`` of answer grounding: the prompt's last position q (the one
    whose output predicts the answer's first token) and, as K, the image tokens of
    ``patches`` (each once, ascending) in ``with_image`` (the prompt's token ids). Empty
    without patches or an image token."""
    if IMAGE not in with_image:
        return ()
    image_at = list(with_image).index(IMAGE)
    keys = tuple(sorted({image_at + int(p) for p in patches}))
    return ((len(with_image) - 1, keys),) if keys else ()


def answer_grounding(
    record: Mapping[str, Any], scene: Mapping[str, Any] | None, with_image: Sequence[int],
    grid: int,
) -> tuple[tuple[int, tuple[int, ...]], ...]:  # fmt: skip
    """The :func:`answer_pair` of the patches (:func:`object_patches`) of every object
    the record's annotations name (question, answer and full answer:
    :func:`~vqadiag.data.formats.relevance.annotated_object_ids`, which refuses
    malformed annotations). Empty without a scene graph, an image in ``with_image`` or
    an annotated object the scene has."""
    if scene is None:
        return ()
    objects = [scene["objects"].get(i) for i in annotated_object_ids(record)]
    patches = (p for obj in objects if obj is not None for p in object_patches(obj, scene, grid))
    return answer_pair(with_image, patches)


def _question_place(processor: Any) -> tuple[int, bool]:
    """Where the chat template puts the question in a user turn with the image: its first
    character's index, and whether the image comes before it."""
    marker = "\x00"
    turn = user_prompt(processor, marker, image=True)
    return turn.index(marker), turn.index("<image>") < turn.index(marker)


def training_texts(records: Sequence[Mapping[str, Any]], captions: Sequence[str] = ()) -> list[str]:
    """What the tokenizer is trained on: each question's prompt and its answer, and with
    ``captions`` (:func:`caption`) the caption request and the captions."""
    texts = ["USER: ASSISTANT:", Generation().ask("")]
    for r in records:
        texts.append(Generation().ask(str(r["question"])))
        texts.append(" " + str(r["answer"]))
    if captions:
        texts.append(CAPTION_REQUEST)
        texts.extend(" " + c for c in captions)
    return texts


#: the user turn's text of a caption example
CAPTION_REQUEST = "List the largest objects from left to right."


def caption(scene: Mapping[str, Any], k: int) -> str:
    """The caption of one scene: its ``k`` largest annotated objects (box area; ties by
    object id), from left to right (box centre; ties top to bottom), each its attributes
    in the scene graph's order then its name, joined by ", "."""
    objects = sorted(
        scene["objects"].items(), key=lambda kv: (-float(kv[1]["w"]) * float(kv[1]["h"]), kv[0])
    )[:k]

    def centre(obj: Mapping[str, Any]) -> tuple[float, float]:
        return float(obj["x"]) + float(obj["w"]) / 2, float(obj["y"]) + float(obj["h"]) / 2

    ordered = sorted((obj for _, obj in objects), key=centre)
    return ", ".join(
        " ".join([*(str(a) for a in obj.get("attributes") or ()), str(obj["name"])])
        for obj in ordered
    )


def caption_examples(
    processor: Any, captions: Mapping[str, str], image_rows: Mapping[str, int],
    n_image_tokens: int,
) -> list[Example]:  # fmt: skip
    """One :class:`Example` per image of ``captions`` (image id → :func:`caption`): the
    image, then :data:`CAPTION_REQUEST`; never asked without its image (``text_only``
    empty)."""
    turn = turn_ids(processor, user_turn(processor, CAPTION_REQUEST, image=True), n_image_tokens)
    out = []
    for image_id, text in captions.items():
        answer = processor.tokenizer(" " + text)["input_ids"]
        out.append(Example(image_rows[image_id], tuple(turn), (), (*answer, EOS)))
    return out


def examples(
    processor: Any, records: Sequence[Mapping[str, Any]], image_rows: Mapping[str, int],
    n_image_tokens: int, scenes: Mapping[str, Any] | None = None,
    ground_from: str = "question",
) -> list[Example]:  # fmt: skip
    """One :class:`Example` per record (``question``, ``answer``, ``imageId``); with
    ``scenes`` (image id → scene graph) each with its :func:`grounding`, or with
    ``ground_from="answer"`` its :func:`answer_grounding`."""
    grid = round(n_image_tokens**0.5)
    out = []
    for r in records:
        question = str(r["question"])
        answer = processor.tokenizer(" " + str(r["answer"]))["input_ids"]
        with_image = prompt_ids(processor, question, image=True, n_image_tokens=n_image_tokens)
        tied: tuple[tuple[int, tuple[int, ...]], ...] = ()
        if scenes is not None:
            scene = scenes.get(str(r["imageId"]))
            if ground_from == "answer":
                tied = answer_grounding(r, scene, with_image, grid)
            else:
                tied = grounding(processor, r, scene, grid)
        out.append(
            Example(
                image_rows[str(r["imageId"])],
                tuple(with_image),
                tuple(prompt_ids(processor, question, image=False, n_image_tokens=0)),
                (*answer, EOS),
                tied,
            )
        )
    return out


def pixel_values(processor: Any, data: GQAData, image_ids: Sequence[str], chunk: int = 64) -> Any:
    """``(I, 3, S, S)`` float tensor: the stored images as the processor prepares them."""
    import torch

    parts = []
    for start in range(0, len(image_ids), chunk):
        ids = list(image_ids[start : start + chunk])
        images = data.pixel_input(ids, keep=False).images
        parts.append(processor.image_processor(images=images, return_tensors="pt")["pixel_values"])
    return torch.cat(parts) if parts else torch.zeros(0)


def patch_labels(
    scene: Mapping[str, Any],
    grid: int,
    names: Mapping[str, int],
    attrs: Mapping[str, int],
    *,
    flip: bool = False,
    shift: tuple[float, float] = (0.0, 0.0),
    rule: str = "centre",
) -> tuple[np.ndarray, np.ndarray]:
    """``(G·G,)`` name indices and ``(G·G, A)`` attribute indicators of the patches of a
    ``grid`` × ``grid`` split of the whole image (module docstring; row-major), by the
    smallest annotated box that contains the patch's centre (``rule`` ``centre``) or the
    smallest box that overlaps the patch (``overlap``).

    ``flip`` and ``shift`` (x, y, in fractions of the image) label the image mirrored left
    to right, then moved by ``shift`` (:func:`augment`): a patch point at ``u`` reads the
    original at ``1 − (u − shift_x)`` (mirrored) or ``u − shift_x``; outside it,
    background."""
    width, height = float(scene.get("width") or 1), float(scene.get("height") or 1)
    objects = scene["objects"].values()
    if rule == "overlap":
        edges = np.arange(grid + 1) / grid
        u0, u1 = edges[:-1] - shift[0], edges[1:] - shift[0]
        if flip:
            u0, u1 = 1.0 - u1, 1.0 - u0
        v0, v1 = edges[:-1] - shift[1], edges[1:] - shift[1]
        y0, x0 = np.meshgrid(v0 * height, u0 * width, indexing="ij")
        y1, x1 = np.meshgrid(v1 * height, u1 * width, indexing="ij")
        return region_labels(objects, x0.ravel(), y0.ravel(), x1.ravel(), y1.ravel(), names, attrs)
    check_label_rule(rule)
    cx, cy = patch_centres(width, height, grid, flip=flip, shift=shift)
    return point_labels(objects, cx, cy, names, attrs)


def check_label_rule(rule: str) -> None:
    """A ValueError for a patch label rule not in :data:`LABEL_RULES`."""
    if rule not in LABEL_RULES:
        raise ValueError(f"patch label rule must be one of {', '.join(LABEL_RULES)}, not {rule!r}")


def patch_centres(
    width: float, height: float, grid: int, *, flip: bool = False,
    shift: tuple[float, float] = (0.0, 0.0),
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``(G·G,)`` x and ``(G·G,)`` y, row-major, in a ``width`` × ``height`` image's
    pixels: the point of the original image that each patch centre of a ``grid`` ×
    ``grid`` split reads once the image is mirrored (``flip``) and moved by ``shift``
    (:func:`patch_labels`); points outside the image are returned as they fall."""
    centres = (np.arange(grid) + 0.5) / grid
    u, v = centres - shift[0], centres - shift[1]
    if flip:
        u = 1.0 - u
    cy, cx = np.meshgrid(v * height, u * width, indexing="ij")
    return cx.ravel(), cy.ravel()


def patch_vocabulary(
    data: GQAData, split: str, n_attrs: int
) -> tuple[dict[str, Any], dict[str, int], dict[str, int]]:
    """``split``'s scene graphs and the name and attribute indices their patches are
    labelled with (names by frequency, index 0 background; the ``n_attrs`` most frequent
    attributes); a DataError without scene graphs."""
    try:
        scenes = data.scene_graphs(split)
    except DataError as err:
        raise DataError(
            err.path, f"the chat VLM's vision pre-training needs them: {err.problem}"
        ) from None
    name_list, attr_list = scene_vocab(scenes, n_attrs)
    return (
        scenes,
        {n: i for i, n in enumerate(name_list)},
        {a: i for i, a in enumerate(attr_list)},
    )


#: labels one image: ``(image_id, scene, flip, shift) → ((G·G,) names, (G·G, A) attributes)``
ImageLabels = Callable[
    [str, Mapping[str, Any], bool, tuple[float, float]], tuple[np.ndarray, np.ndarray]
]


def scene_labeller(
    scenes: Mapping[str, Any],
    image_ids: Sequence[str],
    grid: int,
    names: Mapping[str, int],
    attrs: Mapping[str, int],
    rule: str = "centre",
    label_image: ImageLabels | None = None,
) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """A function ``(flips=None, shifts=None) → ((I, G·G) names, (I, G·G, A) attributes)``
    labelling the images ``image_ids`` of ``scenes`` over the indices ``names`` and
    ``attrs`` (:func:`patch_vocabulary`; the training split's, for held-out images too),
    each mirrored (``flips[i]``) and moved (``shifts[i]``, fractions of the image) as
    :func:`patch_labels` says, by the label ``rule`` it names, or by ``label_image``
    where given (an image without a scene graph stays background either way)."""

    def by_rule(
        image_id: str, scene: Mapping[str, Any], flip: bool, shift: tuple[float, float]
    ) -> tuple[np.ndarray, np.ndarray]:
        return patch_labels(scene, grid, names, attrs, flip=flip, shift=shift, rule=rule)

    label_one = label_image or by_rule
    chosen = [(str(image_id), scenes.get(str(image_id))) for image_id in image_ids]

    def label(
        flips: np.ndarray | None = None, shifts: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        out_names = np.zeros((len(chosen), grid * grid), dtype=np.int64)
        out_attrs = np.zeros((len(chosen), grid * grid, len(attrs)), dtype=np.float32)
        for row, (image_id, scene) in enumerate(chosen):
            if scene is None:
                continue
            flip = bool(flips[row]) if flips is not None else False
            dx, dy = (float(v) for v in shifts[row]) if shifts is not None else (0.0, 0.0)
            out_names[row], out_attrs[row] = label_one(image_id, scene, flip, (dx, dy))
        return out_names, out_attrs

    return label


def augment(pixels: Any, flips: np.ndarray, shifts: np.ndarray) -> Any:
    """``pixels`` (``(B, 3, S, S)``, the processor's values) mirrored left to right where
    ``flips``, then moved by ``shifts`` (``(B, 2)`` whole pixels, x then y), the uncovered
    border 0 (the processor's mean colour); what :func:`patch_labels` labels. Output
    pixel ``(y, x)`` of image b is pixel ``(y − dy, x − dx)`` of the mirrored image. On
    the CPU each image is copied by slices (:func:`moved_by_slices`); on another device
    the batch is moved by two gathers (:func:`moved_by_gathers`), not one copy an
    image: the same values either way."""
    if pixels.device.type == "cpu":
        return moved_by_slices(pixels, flips, shifts)
    return moved_by_gathers(pixels, flips, shifts)


def moved_by_slices(pixels: Any, flips: np.ndarray, shifts: np.ndarray) -> Any:
    """:func:`augment`, one image at a time: each mirrored, then its overlap with the
    moved frame copied by slices into a batch of zeros."""
    import torch

    out = torch.zeros_like(pixels)
    size = pixels.shape[-1]
    for i in range(len(pixels)):
        image = pixels[i].flip(-1) if flips[i] else pixels[i]
        dx, dy = (min(max(int(v), -size), size) for v in shifts[i])  # past the edge: none
        src_x, dst_x = slice(max(0, -dx), size - max(0, dx)), slice(max(0, dx), size - max(0, -dx))
        src_y, dst_y = slice(max(0, -dy), size - max(0, dy)), slice(max(0, dy), size - max(0, -dy))
        out[i, :, dst_y, dst_x] = image[:, src_y, src_x]
    return out


def moved_by_gathers(pixels: Any, flips: np.ndarray, shifts: np.ndarray) -> Any:
    """:func:`augment` for the whole batch at once: the mirrored images padded with
    zeros by the largest move, then their columns and rows gathered at ``x − dx`` and
    ``y − dy``, on the pixels' device."""
    import torch

    device, (b, c, size) = pixels.device, pixels.shape[:3]
    flip = torch.as_tensor(np.asarray(flips, dtype=bool), device=device)
    move = np.asarray(shifts, dtype=np.int64).reshape(-1, 2)
    pad = int(min(np.abs(move).max(initial=0), size))
    shown = torch.where(flip[:, None, None, None], pixels.flip(-1), pixels)
    shown = torch.nn.functional.pad(shown, (pad, pad, pad, pad))
    move_t = torch.as_tensor(move, device=device).clamp(-pad, pad)
    at = torch.arange(size, device=device)
    cols = (at[None, :] + pad - move_t[:, :1])[:, None, None, :]
    shown = shown.gather(3, cols.expand(b, c, size + 2 * pad, size))
    rows = (at[None, :] + pad - move_t[:, 1:])[:, None, :, None]
    return shown.gather(2, rows.expand(b, c, size, size))
