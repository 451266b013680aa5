"""An in-process model spread over Ray actors (docs/diagnose.md, "Many GPUs: Ray actors").

``diagnose --ray-actors N`` runs N copies of an in-process model (a run folder of
``vqadiag train``, ``hf:DIR``, a plug-in's model) as Ray actors: one per GPU on a
cluster (``--ray-gpus-per-actor 1``), one per CPU in the tests. Each actor loads the
model from its spec itself (the run folder or model folder must be on every node's file
system). The driver keeps everything else: the data path, the probe runner and the one
prediction store.

:class:`RayModel` stands for the model in the driver. Its ``predict_stream`` cuts each
batch the runner hands it into one slice per actor and hands each slice's answers back as
it finishes, so the runner stores them at once: a killed actor loses only the slice it
was answering, which goes to a new actor (at most :data:`MAX_REPLACEMENTS` per actor);
a run stopped outright asks, when run again, only for what the store lacks. A slice is
answered by the same model code on the same inputs, so with ``batch_size`` 1 the answers
are those of the single-process run (larger batches may pad differently).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from vqadiag.errors import DataError
from vqadiag.models.base import ModelOutput, QuestionBatch

#: new actors made for each of the N, before the run stops
MAX_REPLACEMENTS = 2


class ModelActor:
    """The body of one actor: the model loaded from its spec in the actor's process."""

    def __init__(self, spec: str, args: Mapping[str, Any] | None, plugins: Sequence[str]) -> None:
        from vqadiag.models.registry import load_model_spec
        from vqadiag.plugins import load_plugins

        load_plugins(plugins)
        self.model = load_model_spec(spec, args)

    def predict(self, batch: QuestionBatch, visual: Any) -> ModelOutput:
        return self.model.predict(batch, visual)

    def object_gradients(self, batch: QuestionBatch, visual: Any, index: np.ndarray) -> Any:
        return np.asarray(self.model.object_gradients(batch, visual, index))

    def pid(self) -> int:
        return os.getpid()


def take_rows(value: Any, rows: Sequence[int], size: int) -> Any:
    """The rows ``rows`` of a batch-shaped value of ``size`` rows: an array or sequence of
    that length is indexed, a dataclass field by field, anything else kept."""
    if value is None or isinstance(value, (str, bytes, bool, int, float)):
        return value
    if isinstance(value, np.ndarray):
        return value[list(rows)] if value.ndim and value.shape[0] == size else value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {
            f.name: take_rows(getattr(value, f.name), rows, size)
            for f in dataclasses.fields(value)
            if f.init
        }
        return dataclasses.replace(value, **changes)
    if isinstance(value, (list, tuple)) and len(value) == size:
        return (
            type(value)(value[i] for i in rows)
            if isinstance(value, tuple)
            else [value[i] for i in rows]
        )
    return value


class RayModel:
    """The driver's stand-in for a model answered by Ray actors (module docstring)."""

    def __init__(
        self,
        model: Any,
        spec: str,
        args: Mapping[str, Any] | None = None,
        *,
        actors: int = 2,
        gpus_per_actor: float = 0.0,
        address: str | None = None,
        plugins: Sequence[str] = (),
    ) -> None:
        try:
            import ray
        except ImportError:
            raise DataError("--ray-actors", "needs Ray: pip install 'vqadiag[ray]'") from None
        if actors < 1:
            raise DataError("--ray-actors", "must be at least 1")
        self._ray = ray
        self._model = model
        self._started = False
        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=max(actors, 1), include_dashboard=False, log_to_driver=False)
            self._started = True
        self._remote = ray.remote(num_cpus=1, num_gpus=gpus_per_actor)(ModelActor)
        self._how = (spec, dict(args) if args else None, tuple(plugins))
        self.actors = [self._remote.remote(*self._how) for _ in range(actors)]
        self.replaced = 0
        ray.get([a.pid.remote() for a in self.actors])  # loaded, or the error now

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._model, name)

    # -- answers ------------------------------------------------------------------------
    def _slices(self, n: int) -> list[list[int]]:
        per = math.ceil(n / len(self.actors))
        return [list(range(b, min(b + per, n))) for b in range(0, n, per)]

    def _run(self, method: str, batch: QuestionBatch, visual: Any, *extra: Any):
        """``(rows, result)`` per slice as it finishes; a dead actor's slice is sent to
        its replacement."""
        ray = self._ray
        n = len(batch)
        pending: dict[Any, tuple[int, list[int]]] = {}

        def send(actor_at: int, rows: list[int]) -> None:
            args = [take_rows(batch, rows, n), take_rows(visual, rows, n)]
            args += [take_rows(e, rows, n) for e in extra]
            ref = getattr(self.actors[actor_at], method).remote(*args)
            pending[ref] = (actor_at, rows)

        for at, rows in enumerate(self._slices(n)):
            send(at, rows)
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            at, rows = pending.pop(done[0])
            try:
                result = ray.get(done[0])
            except ray.exceptions.RayActorError as err:
                self._replace(at, err)
                send(at, rows)
                continue
            yield rows, result

    def _replace(self, at: int, err: BaseException) -> None:
        if self.replaced >= MAX_REPLACEMENTS * len(self.actors):
            raise DataError("--ray-actors", f"actors keep dying ({self.replaced} replaced): {err}")
        self.replaced += 1
        self.actors[at] = self._remote.remote(*self._how)

    def predict_stream(
        self, batch: QuestionBatch, visual: Any
    ) -> Iterator[tuple[list[int], ModelOutput]]:
        """``(rows, their output)`` per actor's slice, as each finishes."""
        yield from self._run("predict", batch, visual)

    def predict(self, batch: QuestionBatch, visual: Any) -> ModelOutput:
        """Every answer of ``batch`` in order (the slices put back together)."""
        parts = sorted(self._run("predict", batch, visual), key=lambda part: part[0][0])
        return merge_outputs([out for _, out in parts])

    def object_gradients(self, batch: QuestionBatch, visual: Any, index: np.ndarray) -> Any:
        """The model's object gradients, computed on the actors."""
        parts = sorted(
            self._run("object_gradients", batch, visual, index), key=lambda part: part[0][0]
        )
        return np.concatenate([np.asarray(g) for _, g in parts], axis=0)

    def close(self) -> None:
        """Stop the actors (and the local Ray this model started)."""
        for actor in self.actors:
            self._ray.kill(actor)
        self.actors = []
        if self._started:
            self._ray.shutdown()


def merge_outputs(parts: Sequence[ModelOutput]) -> ModelOutput:
    """The outputs of consecutive slices as one output."""

    def joined(name: str) -> Any:
        values = [getattr(p, name) for p in parts]
        if any(v is None for v in values):
            return None
        if isinstance(values[0], np.ndarray):
            return np.concatenate(values, axis=0)
        return [x for v in values for x in v]

    return ModelOutput(joined("answers"), joined("probs"), joined("attention"), joined("texts"))
