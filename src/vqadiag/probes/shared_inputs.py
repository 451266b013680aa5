"""No request asked twice: probes whose model input is the same share one answer
(docs/diagnose.md, "No request asked twice").

Two probes give a deterministic model the same input when they have the same question
text and model-readable record fields, the same image, and the same visual input after
their condition. :func:`input_signature` names that input without building it:

* a blind model sees no image: every condition of a question is one input;
* an objects model sees the set of objects left visible (and, where some are removed,
  the replacement policy and the donor image): relevant-only when every object is
  relevant, or irrelevant-only when none is, is the plain input;
* a pixel model sees the image with some pixels replaced: the pixels whose centre lies in
  the removed boxes (or outside the kept ones), exactly as
  :func:`~vqadiag.probes.conditions.apply_pixel_condition` replaces them, at the model's
  input size. A probe that replaces no pixel (a box no pixel centre lies in, kept boxes
  that cover the image) is the plain input; the ``noise`` fill is drawn per question and
  never shared;
* the no-image condition is one input per question and variant; GradCAM is not an
  answer and is never shared.

A probe whose signature was answered in this diagnosis (computed, or read from the store)
by a probe asking its record's own question takes that answer when it carries what the
probe needs (:func:`reused_answer`): the probability of the probe's reference answer,
and the attention a plain condition keeps. A condition that rewrites the question (the
basic-question noise) asks texts no other condition asks: its answers are not kept for
later conditions, though probes of that condition with the same input still share one
answer, computed or stored.
Answers are those of a run without the reuse for every model whose answer depends only
on its input (``deterministic``, true unless a model says otherwise).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from vqadiag.probes.conditions import Condition, Probe, box_rectangles, visible_mask
from vqadiag.probes.fingerprints import data_fingerprint, stable_hash
from vqadiag.probes.no_image import NO_IMAGE
from vqadiag.probes.store import Answer

INTACT = "intact"


def input_signature(
    ctx: Any, probe: Probe, condition: Condition, bases: dict[tuple[str, str], str] | None = None
) -> str | None:
    """The model input of ``probe`` under ``condition`` (module docstring), or None when
    it is never shared. ``bases``: the question-and-image part already made, by (question
    id, text) (one question's record is one record in a probe context)."""
    if condition.kind == "gradcam":
        return None
    known = (probe.qid, probe.question)
    base = None if bases is None else bases.get(known)
    if base is None:
        base = data_fingerprint(probe.record, probe.question, ctx.image_digest(probe.image_id))
        if bases is not None and own_text(probe):
            bases[known] = base
    if condition.kind == NO_IMAGE:  # a noise-filled blank image is drawn per question
        seeded = probe.qid if condition.params.get("fill") == "noise" else ""
        return stable_hash([base, NO_IMAGE, dict(condition.params), seeded])
    if ctx.blind or condition.kind != "objects" or (probe.keep is None and probe.remove is None):
        return stable_hash([base, INTACT])
    visual = (
        _pixel_part(ctx, probe, condition) if ctx.pixels else _object_part(ctx, probe, condition)
    )
    return stable_hash([base, visual])


def own_text(probe: Probe) -> bool:
    """Whether ``probe`` asks its record's own question: only such inputs are kept for
    later conditions (a condition that rewrites the text, such as the basic-question
    noise, asks texts no other condition asks)."""
    return probe.question == probe.record.get("question")


def _object_part(ctx: Any, probe: Probe, condition: Condition) -> Any:
    present = np.ones(ctx.n_objects(probe.image_id), dtype=bool)
    visible = visible_mask(probe, present)
    if visible.all():
        return INTACT
    donor = ""
    if condition.replacement == "other-images":
        donor = ctx.image_digest(ctx.donors.get(probe.image_id, probe.image_id))
    return ["objects", np.flatnonzero(visible).tolist(), condition.replacement, donor]


def _pixel_part(ctx: Any, probe: Probe, condition: Condition) -> Any:
    height, width, boxes = ctx.pixel_geometry(probe.image_id)
    chosen = probe.keep if probe.keep is not None else probe.remove or ()
    chosen = [i for i in chosen if 0 <= i < len(boxes)]
    replaced = np.zeros((height, width), dtype=bool)
    for r0, r1, c0, c1 in box_rectangles(height, width, boxes[chosen]):
        replaced[r0:r1, c0:c1] = True
    if probe.keep is not None:
        replaced = ~replaced
    if not replaced.any():
        return INTACT
    seeded = probe.qid if condition.fill == "noise" else ""
    return ["pixels", stable_hash(np.packbits(replaced).tobytes().hex()), condition.fill, seeded]


def reused_answer(source: Answer, probe: Probe, want_vector: bool) -> Answer | None:
    """``source`` as the answer of ``probe``: its reference answer's probability from
    ``source`` (its own reference, its answer, or its top answers), and the attention a
    plain condition keeps; None when ``source`` does not carry them."""
    if want_vector and source.vector is None:
        return None
    p_ref = None
    gives_probabilities = source.top is not None or source.p_answer is not None
    if probe.ref is not None and gives_probabilities:
        if probe.ref == source.ref and source.p_ref is not None:
            p_ref = source.p_ref
        elif probe.ref == source.answer and source.p_answer is not None:
            p_ref = source.p_answer
        elif source.top is not None and probe.ref in source.top:
            p_ref = source.top[probe.ref]
        else:  # the probability the probe needs was not kept: ask
            return None
    return replace(
        source, ref=probe.ref, p_ref=p_ref, vector=source.vector if want_vector else None
    )


class SharedAnswers:
    """The reuse step of one condition's run (module docstring): ``answered`` is the
    diagnosis' ``{signature: answer}`` of one probe context, shared by its conditions,
    ``bases`` its questions' signature parts (:func:`input_signature`)."""

    def __init__(
        self,
        ctx: Any,
        condition: Condition,
        probes: list[Probe] | tuple[Probe, ...],
        want_vector: bool,
        answered: dict[str, Answer],
        bases: dict[tuple[str, str], str],
    ) -> None:
        self.probes = probes
        self.want_vector = want_vector
        self.answered = answered
        self.signatures = [input_signature(ctx, p, condition, bases) for p in probes]
        #: a probe to send → the probes of this condition that take its answer
        self.followers: dict[int, list[int]] = {}
        #: answers of this condition's probes that rewrite their question, by signature:
        #: shared within the condition only (:meth:`remember`)
        self.local: dict[str, Answer] = {}

    def fill(self, answers: list[Answer | None]) -> list[int]:
        """Fill the missing answers whose input was answered before; group the others
        that share one input (and reference answer) behind the first of them. Returns the
        positions filled."""
        self.remember(answers)
        filled: list[int] = []
        leader: dict[tuple[str, str | None], int] = {}
        for i, (answer, signature) in enumerate(zip(answers, self.signatures, strict=True)):
            if answer is not None or signature is None:
                continue
            source = self.answered.get(signature)
            if source is None:
                source = self.local.get(signature)
            got = reused_answer(source, self.probes[i], self.want_vector) if source else None
            if got is not None:
                answers[i] = got
                filled.append(i)
                continue
            first = leader.setdefault((signature, self.probes[i].ref), i)
            if first != i:
                self.followers.setdefault(first, []).append(i)
        return filled

    def following(self) -> set[int]:
        """The probes that take another probe's answer of this condition."""
        return {i for group in self.followers.values() for i in group}

    def fill_followers(self, answers: list[Answer | None]) -> list[int]:
        """Give each follower its leader's answer (same input, same reference answer)."""
        filled = []
        for first, group in self.followers.items():
            for i in group:
                answers[i] = replace(answers[first], ref=self.probes[i].ref)  # type: ignore[arg-type]
                filled.append(i)
        return filled

    def remember(self, answers: list[Answer | None]) -> None:
        """Record every known answer under its input's signature (the first one wins): for
        the diagnosis when its probe asks its record's own question (:func:`own_text`),
        else for this condition only."""
        for answer, signature, probe in zip(answers, self.signatures, self.probes, strict=True):
            if answer is not None and signature is not None:
                kept = self.answered if own_text(probe) else self.local
                kept.setdefault(signature, answer)
