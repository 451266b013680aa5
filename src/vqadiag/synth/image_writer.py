"""Writing the synthetic world's images: one PNG per image, drawn in worker processes.

:class:`ImageWriter` hands chunks of images to worker processes (forked on Linux) while
the caller generates the questions, and draws what is left itself at the end
(docs/synth.md, section "Images", "Speed"); :func:`write_images` draws and writes
images in the calling process. The bytes written do not depend on the number of workers.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path

from vqadiag.synth.render import encode_png, render_image
from vqadiag.synth.scenes import Scenes


def scenes_slice(scenes: Scenes, start: int, stop: int) -> Scenes:
    """The images ``start:stop`` of ``scenes`` as a Scenes of their own."""
    a, b = int(scenes.offsets[start]), int(scenes.offsets[stop])
    return Scenes(
        scenes.width[start:stop],
        scenes.height[start:stop],
        scenes.place[start:stop],
        scenes.offsets[start : stop + 1] - a,
        scenes.cls[a:b],
        scenes.color[a:b],
        scenes.material[a:b],
        scenes.state[a:b],
        scenes.size[a:b],
        scenes.box[a:b],
    )


def write_images(scenes: Scenes, folder: str | Path, names: Sequence[str]) -> int:
    """Write image ``k`` of ``scenes`` to ``folder/{names[k]}.png``; returns the count."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(names):
        (folder / f"{name}.png").write_bytes(encode_png(render_image(scenes, k)))
    return len(names)


#: worlds with fewer images are rendered in the calling process by default
POOL_MIN_IMAGES = 400


def idle_cpus() -> int:
    """CPUs this process may use, less one (for the caller) and less the 1-minute load
    average (other jobs), at most 8: the default number of render workers."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows
        busy = 0.0
    return max(0, min(8, int(cpus - 1 - busy)))


def _start_method() -> str:
    """``fork`` on Linux (no re-import of the caller's main module, fast start), else spawn."""
    return "fork" if sys.platform.startswith("linux") else "spawn"


class ImageWriter:
    """Render all images of ``scenes`` to ``folder/{names[i]}.png``.

    With ``workers`` > 0, :meth:`start` hands chunks of ``chunk`` images to that many
    worker processes (forked on Linux, spawned elsewhere), which draw them while the
    caller does other work; :meth:`finish` waits for them and draws the chunks they have
    not started yet. With 0 workers, :meth:`finish` draws everything here. ``None``
    picks 0 under :data:`POOL_MIN_IMAGES` images, otherwise :func:`idle_cpus` (the
    calling process keeps one CPU for its own work meanwhile). The bytes written do
    not depend on ``workers`` or ``chunk``. Use as a context manager (or call
    :meth:`close`) so the workers stop if the caller fails.
    """

    def __init__(self, scenes: Scenes, folder: str | Path, names: Sequence[str],
                 workers: int | None = None, chunk: int = 50) -> None:  # fmt: skip
        if len(names) != scenes.n_images:
            raise ValueError(f"{len(names)} names for {scenes.n_images} images")
        if workers is None:
            workers = 0 if scenes.n_images < POOL_MIN_IMAGES else idle_cpus()
        self.scenes, self.folder, self.names = scenes, Path(folder), list(names)
        self.workers, self.chunk = workers, max(1, chunk)
        self._pool: ProcessPoolExecutor | None = None
        self._futures: list[tuple[range, Future[int]]] = []
        self._lock = threading.Lock()
        self._done = 0
        self._advance: Callable[[int], None] | None = None

    def _chunks(self) -> list[range]:
        n = self.scenes.n_images
        return [range(lo, min(n, lo + self.chunk)) for lo in range(0, n, self.chunk)]

    def _write(self, part: range) -> int:
        sub = scenes_slice(self.scenes, part.start, part.stop)
        return write_images(sub, self.folder, self.names[part.start : part.stop])

    def start(self) -> None:
        """Start the workers on all chunks (call before starting threads of your own: on
        Linux the workers are forked). Nothing happens with 0 workers."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if not self.workers or self._pool is not None:
            return
        self._pool = ProcessPoolExecutor(self.workers, mp_context=get_context(_start_method()))
        for part in self._chunks():
            sub = scenes_slice(self.scenes, part.start, part.stop)
            names = self.names[part.start : part.stop]
            fut = self._pool.submit(write_images, sub, str(self.folder), names)
            fut.add_done_callback(self._on_done)
            self._futures.append((part, fut))

    def follow(self, advance: Callable[[int], None]) -> None:
        """Call ``advance(n)`` as images are written (at once for those already written)."""
        with self._lock:
            self._advance = advance
            done = self._done
        if done:
            advance(done)

    def _count(self, n: int) -> None:
        with self._lock:
            self._done += n
            advance = self._advance
        if advance is not None:
            advance(n)

    def _on_done(self, fut: Future[int]) -> None:
        if not fut.cancelled() and fut.exception() is None:
            self._count(fut.result())

    def finish(self) -> int:
        """Wait for the rendering, helping with it; returns the number of images written.

        Chunks no worker has started yet are drawn here (last first, while the workers
        go on from the front), so this process is not idle while it waits; chunks whose
        worker died are drawn here too.
        """
        try:
            if self._pool is None:
                for part in self._chunks():
                    self._count(self._write(part))
                return self.scenes.n_images
            n = 0
            for part, fut in reversed(self._futures):
                if fut.cancel():
                    n += self._write(part)
                    self._count(len(part))
                    continue
                try:
                    n += fut.result()
                except BrokenProcessPool:  # a worker died: draw its chunk here
                    n += self._write(part)
                    self._count(len(part))
            return n
        finally:
            self.close()

    def __enter__(self) -> ImageWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers (chunks not yet started are cancelled)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
