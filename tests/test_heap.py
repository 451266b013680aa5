"""Giving the C heap's freed pages back: the call, and the trimmer that makes it when the
process's resident memory grows (run in a fresh interpreter, whose heap is known)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from vqadiag.data.io import heap

pytestmark = pytest.mark.skipif(
    heap._malloc_trim() is None or heap.resident_bytes() is None,
    reason="the C library cannot trim its heap, or /proc is missing",
)

#: 300 freed buffers of 1.6 MB, each pinned in the heap by a live 16 kB array after it
#: (one freed buffer first raises glibc's mmap threshold above their size)
FRAGMENT = """
import time
import numpy as np
from vqadiag.data.io.heap import HeapTrimmer, release_freed_memory, resident_bytes
del_first = np.ones(200_000); del del_first
keep, big = [], []
def fragment():
    for _ in range(300):
        big.append(np.ones(200_000)); keep.append(np.ones(2000))
"""


def _run(body: str) -> list[int]:
    out = subprocess.run([sys.executable, "-c", FRAGMENT + body], capture_output=True,
                         text=True, check=True)  # fmt: skip
    return [int(v) for v in out.stdout.split()]


def test_freed_pages_held_by_the_heap_go_back_to_the_os():
    held, trimmed = _run(
        "fragment(); big.clear()\n"
        "print(resident_bytes() >> 20); release_freed_memory(); print(resident_bytes() >> 20)"
    )
    assert held > 400  # 470 MB freed, still resident
    assert trimmed < held - 400


def test_the_trimmer_trims_when_resident_memory_has_grown_and_not_otherwise(monkeypatch):
    readings = iter([1050, 1099, 1100, 600, 650, 550, 649, 650, 700])
    monkeypatch.setattr(heap, "resident_bytes", lambda: next(readings))
    made = []
    monkeypatch.setattr(heap, "release_freed_memory", lambda: made.append(1) or True)
    trimmer = heap.HeapTrimmer(growth=100)
    trimmer._floor = 1000
    # 1050, 1099: under 1000 + 100; 1100: trim, then the floor is what is left (600)
    assert [trimmer.check() for _ in range(3)] == [False, False, True]
    # 650: no; 550 lowers the floor; 649: no; 650: trim (floor 700 after it)
    assert [trimmer.check() for _ in range(4)] == [False, False, False, True]
    assert trimmer.trims == len(made) == 2 and trimmer._floor == 700


def test_a_trimmer_that_cannot_read_resident_memory_trims_at_every_look(monkeypatch):
    monkeypatch.setattr(heap, "resident_bytes", lambda: None)
    monkeypatch.setattr(heap, "release_freed_memory", lambda: True)
    trimmer = heap.HeapTrimmer()
    assert all(trimmer.check() for _ in range(3)) and trimmer.trims == 3


def test_the_trimmer_returns_the_freed_heap_when_the_process_grows_again():
    held, after = _run(
        "fragment(); big.clear()\n"
        "with HeapTrimmer(period=0.02, growth=32 << 20):\n"
        "    time.sleep(0.1)\n"
        "    held = resident_bytes() >> 20  # freed, no growth since: still held\n"
        "    grow = np.ones(200_000 * 40); time.sleep(0.2); del grow  # 64 MB more\n"
        "print(held, resident_bytes() >> 20)"
    )
    assert held > 400 and after < 200


def test_the_trimmer_thread_stops_with_its_block(monkeypatch):
    monkeypatch.setattr(heap, "resident_bytes", lambda: None)  # unreadable: trim each period
    with heap.HeapTrimmer(period=0.01) as trimmer:
        time.sleep(0.1)
        assert trimmer._thread is not None and trimmer._thread.is_alive()
    assert not trimmer._thread.is_alive() and trimmer.trims >= 1
    count = trimmer.trims
    time.sleep(0.05)
    assert trimmer.trims == count
