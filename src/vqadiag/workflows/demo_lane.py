"""The demo's second lane (docs/report.md, "Six models on two cores"): jobs that run one
after another in a process of their own while the demo's own stages go on.

The five reference models train on one thread each, so on a machine with two cores the
demo leaves one of them idle; the chat VLM's training and diagnosis run there
(:class:`ProcessLane`). With one usable core the same jobs run in the demo's own process,
each when it is submitted (:class:`InlineLane`), so the demo does the same work either way.

The worker process starts fresh (``spawn``: no PyTorch threads or CUDA state copied from
this process), computes on one intra-op thread, gives its freed heap back to the OS as
the demo's process does (:class:`~vqadiag.data.io.heap.HeapTrimmer`), and runs the jobs
in the order they were submitted. A job's error comes back, when the demo asks for the
job's result, as the error it raised (``DataError`` pickles as it reads); a worker that
dies (killed, out of memory) is one line naming what it was doing, and a worker whose
demo has died ends too.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from vqadiag.data.io.heap import HeapTrimmer
from vqadiag.errors import DataError


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class InlineLane:
    """Runs each job here and now, when it is submitted; a job's error stops the demo
    there, as any stage's does."""

    parallel = False

    def submit(self, job: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``job(*args)`` now (its error is raised here) and return its result as a
        finished future."""
        future: Future[Any] = Future()
        future.set_result(job(*args))
        return future

    def close(self, cancel: bool = False) -> None:
        """Nothing to stop."""

    def last_job_submitted(self) -> None:
        """Nothing to end."""


def _start_worker() -> None:
    """The worker's start: one intra-op thread (the other core runs the demo's stages),
    and its freed heap given back to the OS for its whole life (:class:`HeapTrimmer`)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    HeapTrimmer().__enter__()  # a daemon thread: it ends with the worker
    parent = os.getppid()
    threading.Thread(target=_end_with, args=(parent,), name="parent-watch", daemon=True).start()


def _end_with(parent: int, period: float = 1.0) -> None:
    """End this worker as soon as its parent, the demo, has ended (its parent is then
    another process): killed other than by Ctrl-C, the demo leaves no worker writing in
    its folder."""
    while os.getppid() == parent:
        time.sleep(period)
    os._exit(1)


class ProcessLane:
    """Runs the jobs, in the order submitted, in one worker process of its own."""

    parallel = True

    def __init__(self) -> None:
        self._pool = ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker,
        )  # fmt: skip
        self._workers: list[Any] = []

    def submit(self, job: Callable[..., Any], *args: Any) -> Future[Any]:
        future = self._pool.submit(job, *args)
        # the worker, started by the first job; the pool forgets it once shut down
        self._workers = list((getattr(self._pool, "_processes", None) or {}).values())
        return future

    def close(self, cancel: bool = False) -> None:
        """Stop the worker: after its jobs, or (``cancel``: the demo is stopping on an
        error) at once, its running job killed and those not started dropped."""
        if not cancel:
            self._pool.shutdown(wait=True)
            return
        self._pool.shutdown(wait=False, cancel_futures=True)
        for worker in self._workers:
            worker.terminate()

    def last_job_submitted(self) -> None:
        """No more jobs: the worker ends (and frees its memory) once it has run those
        submitted, whose results stay to be read; this returns at once."""
        self._pool.shutdown(wait=False)


def open_lane(parallel: bool) -> InlineLane | ProcessLane:
    """A :class:`ProcessLane` when ``parallel`` and this process may use two cores or
    more, else an :class:`InlineLane`."""
    return ProcessLane() if parallel and usable_cores() >= 2 else InlineLane()


def outcome(future: Future[Any], what: str, where: str | Path) -> Any:
    """The job's result (waiting for it); its own error when it raised one; a DataError
    naming ``where`` and ``what`` when the worker process died before it finished."""
    try:
        return future.result()
    except BrokenProcessPool:
        raise DataError(
            where,
            f"the process that ran {what} stopped before it finished (killed, or out of "
            "memory); run the demo again to resume",
        ) from None
