"""An in-process model spread over Ray actors (docs/diagnose.md, "Many GPUs: Ray actors").

``diagnose --ray-actors N`` runs N copies of an in-process model (a run folder of
``vqadiag train``, ``hf:DIR``, a plug-in's model) as Ray actors: one per GPU on a
cluster (``--ray-gpus-per-actor 1``), one per CPU in the tests. Each actor loads the
model from its spec itself (the run folder or model folder must be on every node's file
system); the driver never loads it. The driver keeps everything else: the data path,
the batch plan, the probe runner and the one prediction store.

:class:`RayModel` stands for the model in the driver, with the name, capabilities,
answers and fingerprint the first actor reports. The probe runner hands it whole batches
(:meth:`RayModel.stream_batches`), as the data path built them for a single process,
one to each idle actor, and stores each batch's answers as it comes back. So:

* the answers are those of a single-process run with the same ``--batch-size``: each
  batch is the same input to the same model code;
* a killed or unreachable actor is killed for good and its batch goes to a new actor
  (:data:`MAX_REPLACEMENTS` × N new actors in all, then the run stops with one line);
* a run stopped outright asks, when run again, only for what the store lacks;
* actors that cannot start within ``ready_timeout`` seconds (more GPUs asked than the
  cluster has) stop the run with one line, and every actor and the local Ray started
  are stopped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from vqadiag.errors import DataError
from vqadiag.models.base import ModelOutput, QuestionBatch

#: new actors made, per actor asked for, before the run stops
MAX_REPLACEMENTS = 2
#: seconds the actors have to load the model
READY_TIMEOUT = 600.0


class ModelActor:
    """The body of one actor: the model loaded from its spec in the actor's process."""

    def __init__(self, spec: str, args: Mapping[str, Any] | None, plugins: Sequence[str]) -> None:
        from vqadiag.models.registry import load_model_spec
        from vqadiag.plugins import load_plugins

        load_plugins(plugins)
        self.model = load_model_spec(spec, args)

    def describe(self) -> dict[str, Any]:
        """What the driver needs of the model without loading it."""
        model = self.model
        settings = getattr(model, "settings", None)
        return {
            "name": model.name,
            "capabilities": model.capabilities,
            "answer_vocab": list(model.answer_vocab),
            "fingerprint": model.fingerprint(),
            "input_size": getattr(model, "input_size", None),
            "settings": settings() if callable(settings) else None,
            "deterministic": bool(getattr(model, "deterministic", True)),
            "gradients": hasattr(model, "object_gradients"),
            "pid": os.getpid(),
        }

    def predict(self, batch: QuestionBatch, visual: Any) -> ModelOutput:
        """The model's answers; its inputs prepared here (``prepare_pixels``), as the
        single-process runner prepares them in its data-path workers."""
        prepare = getattr(self.model, "prepare_pixels", None)
        ready = visual if prepare is None or visual is None else prepare(visual)
        return self.model.predict(batch, ready)

    def object_gradients(self, batch: QuestionBatch, visual: Any, index: np.ndarray) -> Any:
        return np.asarray(self.model.object_gradients(batch, visual, index))


class RayModel:
    """The driver's stand-in for a model answered by Ray actors (module docstring)."""

    def __init__(
        self,
        spec: str,
        args: Mapping[str, Any] | None = None,
        *,
        actors: int = 2,
        gpus_per_actor: float = 0.0,
        address: str | None = None,
        plugins: Sequence[str] = (),
        ready_timeout: float = READY_TIMEOUT,
    ) -> None:
        try:
            import ray
        except ImportError:
            raise DataError("--ray-actors", "needs Ray: pip install 'vqadiag[ray]'") from None
        if actors < 1:
            raise DataError("--ray-actors", "must be at least 1")
        self._ray = ray
        self._started = False
        self.actors: list[Any] = []
        self.replaced = 0
        try:
            self._start(actors, gpus_per_actor, address, (spec, args, plugins), ready_timeout)
        except BaseException:
            self.close()
            raise

    def _start(self, actors: int, gpus: float, address: str | None, how: tuple,
               ready_timeout: float) -> None:  # fmt: skip
        ray = self._ray
        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=max(actors, 1), include_dashboard=False, log_to_driver=False)
            self._started = True
        self._remote = ray.remote(num_cpus=1, num_gpus=gpus)(ModelActor)
        spec, args, plugins = how
        self._how = (spec, dict(args) if args else None, tuple(plugins))
        self.actors = [self._remote.remote(*self._how) for _ in range(actors)]
        try:
            described = ray.get([a.describe.remote() for a in self.actors], timeout=ready_timeout)
        except ray.exceptions.GetTimeoutError:
            raise DataError(
                "--ray-actors", f"{actors} actors did not start within {ready_timeout:.0f} s: "
                "the cluster lacks the CPUs or GPUs asked (--ray-gpus-per-actor)",
            ) from None  # fmt: skip
        self.description = described[0]
        self.name = self.description["name"]
        self.capabilities = self.description["capabilities"]
        self.answer_vocab = self.description["answer_vocab"]
        self.input_size = self.description["input_size"]
        self.deterministic = self.description["deterministic"]

    def fingerprint(self) -> str:
        """The model's fingerprint, as the first actor computed it."""
        return str(self.description["fingerprint"])

    def __getattr__(self, name: str) -> Any:
        """``settings``, for a model that reports how it is asked (generative models), as
        the first actor reported them; nothing else."""
        if name == "settings" and not name.startswith("_"):
            settings = self.__dict__.get("description", {}).get("settings")
            if settings is not None:
                return lambda: settings
        raise AttributeError(name)

    # -- answers ------------------------------------------------------------------------
    def stream_batches(
        self, items: Iterator[tuple[Any, QuestionBatch, Any]]
    ) -> Iterator[tuple[Any, ModelOutput]]:
        """``(key, output)`` of each ``(key, batch, visual)`` as it finishes, one batch per
        idle actor; a dead actor's batch goes to its replacement."""
        ray = self._ray
        queued = iter(items)
        idle = list(range(len(self.actors)))
        running: dict[Any, tuple[int, Any, QuestionBatch, Any]] = {}

        def send(at: int, key: Any, batch: QuestionBatch, visual: Any) -> None:
            running[self.actors[at].predict.remote(batch, visual)] = (at, key, batch, visual)

        while True:
            while idle:
                item = next(queued, None)
                if item is None:
                    break
                send(idle.pop(), *item)
            if not running:
                return
            done, _ = ray.wait(list(running), num_returns=1)
            at, key, batch, visual = running.pop(done[0])
            try:
                output = ray.get(done[0])
            except ray.exceptions.RayActorError as err:
                self._replace(at, err)
                send(at, key, batch, visual)
                continue
            idle.append(at)
            yield key, output

    def predict(self, batch: QuestionBatch, visual: Any) -> ModelOutput:
        """The answers of one batch, from one actor."""
        return next(self.stream_batches(iter([(None, batch, visual)])))[1]

    def object_gradients(self, batch: QuestionBatch, visual: Any, index: np.ndarray) -> Any:
        """The model's object gradients of one batch, from one actor (replaced if dead)."""
        ray = self._ray
        while True:
            try:
                return ray.get(self.actors[0].object_gradients.remote(batch, visual, index))
            except ray.exceptions.RayActorError as err:
                self._replace(0, err)

    def _replace(self, at: int, err: BaseException) -> None:
        """Kill the actor for good (an unreachable one would keep its GPU) and start a new
        one in its place."""
        if self.replaced >= MAX_REPLACEMENTS * len(self.actors):
            raise DataError("--ray-actors", f"actors keep dying ({self.replaced} replaced): {err}")
        self.replaced += 1
        self._ray.kill(self.actors[at], no_restart=True)
        self.actors[at] = self._remote.remote(*self._how)

    def close(self) -> None:
        """Stop the actors (and the local Ray this model started)."""
        for actor in self.actors:
            self._ray.kill(actor, no_restart=True)
        self.actors = []
        if self._started:
            self._ray.shutdown()
            self._started = False
