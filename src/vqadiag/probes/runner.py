"""Run a model over the probes of one condition, in batches, through the prediction store.

:func:`run_condition` keys every probe by (model, data, condition, qid)
fingerprints, reads what the store already holds and runs the model only on
the rest. The batch plan is fixed (consecutive ``batch_size`` slices of the
probe list): a batch is computed only when one of its probes is missing, and is
committed as a whole, so a run killed at any point and restarted computes
exactly the batches an uninterrupted run would have, with the same inputs, and
ends with the same numbers. A model with ``predict_stream`` (a served model, whose
answers do not depend on the batch) hands its answers over one at a time and each is
committed as it arrives, so a killed run asks again only for the answers it never got.
``workers`` threads build the object inputs of the
next batches (detector features from h5, masks, replacements) while the model
runs on the current one.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError
from vqadiag.models.base import ModelOutput, ObjectInput, QuestionBatch, VQAModel, check_output
from vqadiag.probes.conditions import (
    Condition,
    Probe,
    apply_pixel_condition,
    apply_replacement,
    visible_mask,
)
from vqadiag.probes.fingerprints import (
    condition_fingerprint,
    data_fingerprint,
    object_digest,
    stable_hash,
)
from vqadiag.probes.no_image import (
    BLANK,
    NO_IMAGE,
    TEXT_ONLY,
    blank_pixels,
    condition_variant,
    no_objects,
)
from vqadiag.probes.shared_inputs import SharedAnswers
from vqadiag.probes.store import Answer, Key, PlanningStore, PredictionStore
from vqadiag.progress import progress_bar

TOP_K = 5


@contextmanager
def single_torch_thread() -> Iterator[None]:
    """One intra-op torch thread while the model runs (when torch is loaded at all).

    The reference networks are small: on a busy 2-core machine one thread is
    ~20× faster than two fighting over the cores, and answers never depend on
    the machine's core count.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


@dataclass
class ConditionRun:
    """Answers of one condition, in probe order, and how many were computed / cached."""

    condition: Condition
    fingerprint: str
    answers: list[Answer]
    data_fingerprints: list[str]
    computed: int
    cached: int
    seconds: float
    #: answers taken from a probe with the same model input (docs/diagnose.md, "No
    #: request asked twice")
    reused: int = 0
    #: the images of the probes a planned run would send (``diagnose --plan``)
    planned_images: frozenset[str] = frozenset()

    def counts(self) -> dict[str, Any]:
        """``{questions, computed, cached, reused}`` (what ``results.json`` reports per
        condition: ``computed`` the model's calls, ``reused`` the answers taken from a
        probe with the same model input), with the ``variant`` (and ``fill``) of a
        no-image condition."""
        out: dict[str, Any] = {
            "questions": len(self.answers), "computed": self.computed, "cached": self.cached,
            "reused": self.reused,
        }  # fmt: skip
        if self.condition.kind == NO_IMAGE:
            out |= condition_variant(self.condition)
        return out


class ProbeContext:
    """What every condition of a run shares: model, data, store, batching options."""

    def __init__(
        self,
        model: VQAModel,
        data: GQAData,
        store: PredictionStore,
        *,
        batch_size: int = 256,
        max_objects: int = 100,
        workers: int = 1,
        progress: bool = False,
        donors: Mapping[str, str] | None = None,
        plan_only: bool = False,
        share_inputs: bool = True,
    ) -> None:
        self.model = model
        #: reuse an answer for a probe with the same model input (a deterministic model)
        self.share_inputs = share_inputs and bool(getattr(model, "deterministic", True))
        self._answered: dict[str, Answer] = {}
        self._bases: dict[tuple[str, str], str] = {}
        self._geometry: dict[str, tuple[int, int, np.ndarray]] = {}
        #: count the calls a run would send instead of sending them (``diagnose --plan``)
        self.plan_only = plan_only
        self.data = data
        self.store = store
        self.batch_size = max(1, int(batch_size))
        self.max_objects = int(max_objects)
        self.workers = max(0, int(workers))
        self.progress = progress
        self.donors = dict(donors or {})
        self.model_fp = model.fingerprint()
        self.blind = model.capabilities.blind
        self.pixels = model.capabilities.pixel_input
        #: (width, height) a pixel model reads (None: the stored size)
        self.input_size = getattr(model, "input_size", None)
        self.vocab = list(model.answer_vocab)
        self.index = {a: i for i, a in enumerate(self.vocab)}
        self._digests: dict[str, str] = {}
        self._lock = threading.Lock()

    # -- data ------------------------------------------------------------------------
    def _pixel_boxes(self, image_id: str) -> np.ndarray:
        """A pixel model's view of the image's detected boxes (none without detections)."""
        try:
            return self.data.image_boxes(image_id)[: self.max_objects]
        except DataError:
            return np.zeros((0, 4), np.float32)

    def image_digest(self, image_id: str, question: str | None = None) -> str:
        """Digest of what the model reads of an image: its objects' features and boxes, or
        for a pixel model the image file's bytes, its boxes and the input size (``"blind"``
        for models that never see the image)."""
        if self.blind:
            return "blind"
        hit = self._digests.get(image_id)
        if hit is None:
            with self._lock:
                if self.pixels:
                    boxes = self._pixel_boxes(image_id)
                    hit = stable_hash(
                        [
                            self.data.images.digest(image_id, question),
                            object_digest(np.zeros((0, 0), np.float32), boxes),
                            list(self.input_size or ()),
                        ]
                    )
                else:
                    feats, boxes = self.data.image_objects(image_id)
                    hit = object_digest(feats[: self.max_objects], boxes[: self.max_objects])
            self._digests[image_id] = hit
        return hit

    def pixel_geometry(self, image_id: str) -> tuple[int, int, np.ndarray]:
        """``(height, width, boxes)`` of the image as a pixel model reads it: at its input
        size, with the boxes scaled to it (what the pixel conditions replace)."""
        hit = self._geometry.get(image_id)
        if hit is None:
            pixels = self.data.pixel_input([image_id], self.input_size, self.max_objects)
            height, width = pixels.images[0].shape[:2]
            boxes = np.asarray(pixels.boxes[0][pixels.mask[0]], np.float64)
            hit = self._geometry[image_id] = (height, width, boxes)
        return hit

    def n_objects(self, image_id: str) -> int:
        """Number of the image's objects that enter the model input (≤ ``max_objects``)."""
        with self._lock:
            if self.pixels:
                boxes = self._pixel_boxes(image_id)
            else:
                _, boxes = self.data.image_objects(image_id)
        return min(len(boxes), self.max_objects)

    def probe_data_fp(self, probe: Probe, condition: Condition) -> str:
        """Data fingerprint of one probe (record, text, objects, donor, its object set)."""
        donor = ""
        if condition.replacement == "other-images" and condition.kind == "objects":
            donor = self.image_digest(self.donors.get(probe.image_id, probe.image_id))
        digest = self.image_digest(probe.image_id, probe.qid)
        base = data_fingerprint(probe.record, probe.question, digest)
        return data_fingerprint({"base": base, **probe.row_params()}, "", "", donor)

    # -- model inputs ----------------------------------------------------------------------
    def visual(self, probes: Sequence[Probe], condition: Condition) -> Any:
        """The visual input of a batch of probes under ``condition`` (None for blind models):
        an ``ObjectInput``, or a ``PixelInput`` passed through the model's
        ``prepare_pixels`` when it has one (the box encoder cuts its crops there, in the
        prefetch worker). The no-image condition (:mod:`vqadiag.probes.no_image`) gives
        None (``text-only``), blank images or an input without objects."""
        kind = self.model.capabilities.visual
        no_image = condition.params.get("variant") if condition.kind == NO_IMAGE else None
        if kind == "none" or no_image == TEXT_ONLY:
            return None
        if kind == "pixels":  # images decode in parallel: GQAData locks its detector reads
            pixels = self.data.pixel_input(
                [p.image_id for p in probes],
                size=self.input_size,
                max_objects=self.max_objects,
                questions=[p.qid for p in probes],
            )
            if condition.kind == "objects":
                pixels = apply_pixel_condition(pixels, probes, condition.fill)
            elif no_image == BLANK:
                pixels = blank_pixels(pixels, probes, condition.fill)
            prepare = getattr(self.model, "prepare_pixels", None)
            return pixels if prepare is None else prepare(pixels)
        if kind != "objects":
            raise DataError(self.data.root, f"model {self.model.name!r} needs {kind} input")
        image_ids = [p.image_id for p in probes]
        with self._lock:
            vis = self.data.object_input(image_ids, self.max_objects)
            donors = None
            if condition.replacement == "other-images":
                donors = [
                    self.data.image_objects(self.donors.get(i, i))[0][: self.max_objects]
                    for i in image_ids
                ]
        if no_image is not None:
            return no_objects(vis)
        if condition.kind != "objects":
            return vis
        keep = np.stack([visible_mask(p, vis.mask[i]) for i, p in enumerate(probes)])
        return apply_replacement(
            vis, keep, condition.replacement, (lambda row: donors[row]) if donors else None
        )

    @staticmethod
    def question_batch(probes: Sequence[Probe]) -> QuestionBatch:
        """The questions of a batch of probes (their own texts: noise replaces the question)."""
        return QuestionBatch(
            question_ids=[p.qid for p in probes],
            questions=[p.question for p in probes],
            image_ids=[p.image_id for p in probes],
            records=[p.record for p in probes],
        )

    def _answer_chunks(
        self,
        probes: Sequence[Probe],
        condition: Condition,
        visual: Any,
        want_vector: bool,
    ) -> Iterator[tuple[list[int], list[Answer]]]:
        """``(positions in probes, their answers)``: one chunk for the whole batch, or, for
        a model with ``predict_stream`` (a served model), one per answer as it arrives."""
        batch = self.question_batch(probes)
        if condition.kind == "gradcam":
            yield list(range(len(probes))), self._gradcam(batch, probes, visual)
            return
        stream = getattr(self.model, "predict_stream", None)
        if stream is None:
            out = self.model.predict(batch, visual)
            yield list(range(len(probes))), self._to_answers(probes, out, visual, want_vector)
            return
        for rows, out in stream(batch, visual):
            yield rows, self._to_answers([probes[i] for i in rows], out, visual, want_vector)

    def _to_answers(
        self,
        probes: Sequence[Probe],
        out: ModelOutput,
        visual: Any,
        want_vector: bool,
    ) -> list[Answer]:
        """Store rows from a model output over ``probes`` (in order), once the output is
        checked (:func:`~vqadiag.models.base.check_output`)."""
        check_output(out, len(probes), self.model)
        probs = out.probs
        tops = out.top_probs(self.vocab, TOP_K) if probs is not None else None
        answers = []
        for i, p in enumerate(probes):
            a = out.answers[i]
            p_answer = p_ref = None
            if probs is not None:
                j = self.index.get(a)
                p_answer = float(probs[i, j]) if j is not None else None
                if p.ref is not None:
                    k = self.index.get(p.ref)
                    p_ref = float(probs[i, k]) if k is not None else 0.0
            vector = None
            if want_vector and out.attention is not None and visual is not None:
                n = self.n_objects(p.image_id)
                vector = np.asarray(out.attention[i, :n], np.float32)
            raw = None if out.texts is None else out.texts[i]
            answers.append(
                Answer(a, p_answer, p.ref, p_ref, None if tops is None else tops[i], vector, raw)
            )
        return answers

    def _gradcam(
        self, batch: QuestionBatch, probes: Sequence[Probe], visual: ObjectInput | None
    ) -> list[Answer]:
        if visual is None:
            raise ValueError("GradCAM needs object input")
        index = np.array([self.index.get(p.ref or "", 0) for p in probes], dtype=np.int64)
        grads = self.model.object_gradients(batch, visual, index)  # type: ignore[attr-defined]
        scores = np.asarray(grads, np.float64).sum(axis=2).astype(np.float32)
        return [
            Answer(p.ref or "", None, p.ref, None, None, scores[i, : self.n_objects(p.image_id)])
            for i, p in enumerate(probes)
        ]

    # -- the loop ---------------------------------------------------------------------------
    def run(
        self,
        condition: Condition,
        probes: Sequence[Probe],
        *,
        description: str | None = None,
    ) -> ConditionRun:
        """Answers of every probe under ``condition`` (module docstring). Plain conditions
        also store the attention over the image's objects when the model returns it."""
        start = time.perf_counter()
        want_vector = condition.kind == "plain" and self.model.capabilities.attention
        params = {**condition.params, "max_objects": self.max_objects}
        cond_fp = condition_fingerprint(condition.kind, params)
        data_fps = [self.probe_data_fp(p, condition) for p in probes]
        keys: list[Key] = [
            (self.model_fp, d, cond_fp, p.qid) for p, d in zip(probes, data_fps, strict=True)
        ]
        answers: list[Answer | None] = []
        for key, probe in zip(keys, probes, strict=True):
            hit = self.store.get(key)
            if hit is not None and hit.ref != probe.ref:
                hit = None
            answers.append(hit)
        cached = sum(a is not None for a in answers)
        shared = None
        reused: list[int] = []
        if self.share_inputs:
            shared = SharedAnswers(
                self, condition, list(probes), want_vector, self._answered, self._bases
            )
            reused = shared.fill(answers)
            self.store.put_many((keys[i], answers[i]) for i in reused)  # type: ignore[misc]
        following = shared.following() if shared is not None else set()
        send = [i for i, a in enumerate(answers) if a is None and i not in following]
        if self.plan_only:
            self._plan(condition, probes, answers, keys, send, want_vector)
        else:
            self._compute(condition, probes, answers, keys, send, want_vector, description)
        if shared is not None:
            followed = shared.fill_followers(answers)
            self.store.put_many((keys[i], answers[i]) for i in followed)  # type: ignore[misc]
            shared.remember(answers)
            reused += followed
        run = ConditionRun(
            condition, cond_fp, [a for a in answers if a is not None], data_fps,
            computed=len(send), cached=cached, seconds=time.perf_counter() - start,
            reused=len(reused),
        )  # fmt: skip
        if self.plan_only and not self.blind:  # a blind model is sent no image
            run.planned_images = frozenset(probes[i].image_id for i in send)
        return run

    def _compute(
        self,
        condition: Condition,
        probes: Sequence[Probe],
        answers: list[Answer | None],
        keys: list[Key],
        send: list[int],
        want_vector: bool,
        description: str | None,
    ) -> None:
        """Ask the model for the answers of ``send`` (fixed batch slices: a batch holds
        the probes to send of ``batch_size`` consecutive probes), storing each as it
        comes."""
        bs = self.batch_size
        todo: list[list[int]] = []
        for begin in range(0, len(probes), bs):
            batch = [i for i in send if begin <= i < begin + bs]
            if batch:
                todo.append(batch)
        bar = progress_bar(self.progress, transient=True)
        with bar, single_torch_thread():
            task = bar.add_task(description or condition.name, total=len(probes))
            bar.advance(task, len(probes) - len(send))
            for done, got in self._answered_batches(todo, probes, condition, want_vector):
                for i, a in zip(done, got, strict=True):
                    answers[i] = a
                self.store.put_many((keys[i], a) for i, a in zip(done, got, strict=True))
                bar.advance(task, len(done))

    def _answered_batches(
        self, todo: list[list[int]], probes: Sequence[Probe], condition: Condition,
        want_vector: bool,
    ) -> Iterator[tuple[list[int], list[Answer]]]:  # fmt: skip
        """``(positions in probes, their answers)`` as they come: batch by batch, or per
        answer for a streaming model; a model that takes several batches at once
        (``stream_batches``: Ray actors) gets every batch as the data path built it and
        hands them back as each finishes."""
        many = getattr(self.model, "stream_batches", None)
        built = self._prefetch(todo, probes, condition)
        if many is None or condition.kind == "gradcam":
            for rows, visual in built:
                sub = [probes[i] for i in rows]
                for local, got in self._answer_chunks(sub, condition, visual, want_vector):
                    yield [rows[i] for i in local], got
            return
        items = (
            ((rows, visual), self.question_batch([probes[i] for i in rows]), visual)
            for rows, visual in built
        )
        for (rows, visual), out in many(items):
            sub = [probes[i] for i in rows]
            yield rows, self._to_answers(sub, out, visual, want_vector)

    def _plan(
        self,
        condition: Condition,
        probes: Sequence[Probe],
        answers: list[Answer | None],
        keys: list[Key],
        send: list[int],
        want_vector: bool,
    ) -> None:
        """The run as ``diagnose --plan`` sees it: every probe a run would send to the
        model gets a stand-in answer, counted, kept in the planning store's memory and
        never in a database. A stand-in has the shape of the model's answers (its
        reference answer or "", probability 0 where the model gives probabilities, zero
        attention or GradCAM over the image's objects) so the suites go on."""
        if not isinstance(self.store, PlanningStore):  # stand-ins never reach a database
            raise TypeError("a planned run needs a PlanningStore")
        for i in send:
            answers[i] = self._stand_in(probes[i], condition, want_vector)
        self.store.put_many((keys[i], answers[i]) for i in send)  # type: ignore[misc]

    def _stand_in(self, probe: Probe, condition: Condition, want_vector: bool) -> Answer:
        probabilities = self.model.capabilities.probabilities
        vector = None
        if condition.kind == "gradcam" or (want_vector and not self.blind):
            vector = np.zeros(self.n_objects(probe.image_id), np.float32)
        return Answer(
            probe.ref or "",
            0.0 if probabilities else None,
            probe.ref,
            0.0 if probabilities and probe.ref is not None else None,
            {} if probabilities else None,
            vector,
        )

    def _warm_images(self, probes: Sequence[Probe]) -> None:
        """Decode and resize the first batch's images on ``workers + 1`` threads: nothing
        else runs yet, so the model's first batch would otherwise wait for one thread."""
        first: dict[str, str] = {}
        for p in probes:
            first.setdefault(p.image_id, p.qid)
        size = self.input_size
        with ThreadPoolExecutor(max_workers=self.workers + 1) as pool:
            done = [pool.submit(self.data.images.resized, i, size, q) for i, q in first.items()]
            for fut in done:
                fut.result()

    def _prefetch(
        self, todo: list[list[int]], probes: Sequence[Probe], condition: Condition
    ) -> Iterator[tuple[list[int], Any]]:
        """``(rows, visual input)`` per batch to compute; inputs built ahead by ``workers``."""

        def build(rows: list[int]) -> Any:
            return self.visual([probes[i] for i in rows], condition)

        if self.workers == 0 or len(todo) <= 1:
            for rows in todo:
                yield rows, build(rows)
            return
        if self.pixels and self.input_size is not None:
            self._warm_images([probes[i] for i in todo[0]])
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            pending: deque[tuple[list[int], Future[Any]]] = deque()
            it = iter(todo)
            for rows in it:
                pending.append((rows, pool.submit(build, rows)))
                if len(pending) > self.workers:
                    break
            while pending:
                rows, fut = pending.popleft()
                nxt = next(it, None)
                if nxt is not None:
                    pending.append((nxt, pool.submit(build, nxt)))
                yield rows, fut.result()
