"""Where chunks of main questions are ranked: this process (``local``) or a Ray cluster.

Both backends call the same pure function ``fn(shared, chunk)`` on every chunk
and return the results in chunk order, so their output is identical. With Ray
the ``shared`` object (the pool embedding matrix, or the pool's n-gram index)
is put once in the object store (``ray.put``) and every task receives the
reference; without ``address`` a local Ray is started with ``num_cpus``
workers and shut down afterwards. A Ray task holds one CPU, so it runs with one
BLAS thread (:func:`one_blas_thread`, threadpoolctl): without that limit two
local LASSO tasks side by side were slower than one process using both cores
(32 mains at a 50,000 pool: 114 s against 89 s; 80 s with the limit).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from vqadiag.errors import DataError

BACKENDS = ("local", "ray")


def one_blas_thread(fn: Callable[[Any, Any], list[Any]], shared: Any, chunk: Any) -> list[Any]:
    """``fn(shared, chunk)`` with every BLAS library limited to one thread (a Ray task)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        return fn(shared, chunk)


def run_chunks(
    fn: Callable[[Any, Any], list[Any]],
    shared: Any,
    chunks: Sequence[Any],
    *,
    sizes: Sequence[int],
    backend: str = "local",
    address: str | None = None,
    num_cpus: int | None = None,
    progress: bool = True,
    description: str = "ranking",
    cache: Any = None,
) -> list[Any]:
    """``[fn(shared, c) for c in chunks]`` flattened, locally or as Ray tasks, with a progress bar.

    ``sizes[i]`` is the number of main questions in chunk i (progress units). With a
    ``cache`` (:class:`~.chunk_cache.ChunkCache`), finished chunks are read from it and
    each newly computed chunk is written to it as soon as it is done.
    """
    from vqadiag.progress import progress_bar

    done: list[Any] = [None if cache is None else cache.get(i) for i in range(len(chunks))]
    out: list[Any] = []
    if backend == "local":
        with progress_bar(progress) as bar:
            task = bar.add_task(description, total=sum(sizes))
            for i, (chunk, size) in enumerate(zip(chunks, sizes, strict=True)):
                if done[i] is None:
                    done[i] = fn(shared, chunk)
                    if cache is not None:
                        cache.put(i, done[i])
                out.extend(done[i])
                bar.advance(task, size)
        return out
    if backend != "ray":
        raise DataError(None, f"unknown backend {backend!r} (choose {', '.join(BACKENDS)})")
    try:
        import ray
    except ImportError:
        raise DataError(None, "backend 'ray' needs Ray: pip install 'vqadiag[ray]'") from None
    started = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
        started = True
    try:
        remote = ray.remote(one_blas_thread)
        shared_ref = ray.put(shared)
        todo = [i for i, d in enumerate(done) if d is None]
        refs = [remote.remote(fn, shared_ref, chunks[i]) for i in todo]
        index = {ref: i for ref, i in zip(refs, todo, strict=True)}
        pending = list(refs)
        with progress_bar(progress) as bar:
            task = bar.add_task(f"{description} (ray)", total=sum(sizes))
            bar.advance(task, sum(s for s, d in zip(sizes, done, strict=True) if d is not None))
            while pending:
                finished, pending = ray.wait(pending, num_returns=1)
                for ref in finished:
                    i = index[ref]
                    done[i] = ray.get(ref)
                    if cache is not None:
                        cache.put(i, done[i])
                    bar.advance(task, sizes[i])
        for part in done:
            out.extend(part)
        return out
    finally:
        if started:
            ray.shutdown()
