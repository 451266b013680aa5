"""Give the C heap's freed pages back to the operating system (docs/report.md, "Memory").

Training the pixel model allocates and frees buffers of many sizes between long-lived
tensors and arrays, and glibc keeps the freed space in its heap: its training holds about
2.2 GiB of memory while it uses about 1 GiB. glibc's ``malloc_trim(0)`` returns those pages;
:class:`HeapTrimmer` calls it while a block runs, whenever the process's resident memory
has grown, so the process holds about what it uses. Other C libraries (musl, macOS,
Windows) have no such call; nothing happens there.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_freed_memory() -> bool:
    """Return the heap's free pages to the operating system; True when the C library
    could (glibc), False where it has no such call. Live memory is untouched."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def resident_bytes() -> int | None:
    """This process's resident memory in bytes (Linux ``/proc/self/statm``; None where
    there is none)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


class HeapTrimmer:
    """``with HeapTrimmer():`` — while the block runs, a daemon thread looks at this
    process's resident memory every ``period`` seconds and calls
    :func:`release_freed_memory` when it has grown by ``growth`` bytes since the last
    trim (every time where the resident memory cannot be read). Trimming only after
    growth leaves steady work alone: pages given back are faulted in again when next
    allocated, which costs system time. Nothing happens where the C library cannot
    trim."""

    def __init__(self, period: float = 1.0, growth: int = 256 << 20) -> None:
        self.period = period
        self.growth = growth
        self.trims = 0
        self._floor: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        self._floor = resident_bytes()
        while not self._stop.wait(self.period):
            self.check()

    def check(self) -> bool:
        """One look: trim when the resident memory is ``growth`` above the lowest reading
        since the last trim (or cannot be read); True when it trimmed."""
        now = resident_bytes()
        if now is not None and self._floor is not None and now - self._floor < self.growth:
            self._floor = min(self._floor, now)
            return False
        release_freed_memory()
        self.trims += 1
        self._floor = resident_bytes()
        return True

    def __enter__(self) -> HeapTrimmer:
        if _malloc_trim() is not None:
            self._thread = threading.Thread(target=self._run, name="heap-trimmer", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        err: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
