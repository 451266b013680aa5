"""Write points: where a test may kill vqadiag to prove resume is safe (docs/reliability.md,
"Fault injection").

Every step that changes what a later run reads calls :func:`write_point` with a short
name: an atomic artefact just before its rename (bytes on disk, target untouched) and
just after it, a prediction-store batch inside its transaction and after its commit,
a synthetic world's folder renames. The function does nothing unless the environment
names a point to die at:

* ``VQADIAG_KILL_AT_WRITE=k`` — at the k-th write point of the process, the process
  sends itself SIGKILL (no ``finally`` block, no ``atexit``: exactly what a power cut or
  the OOM killer leaves behind);
* ``VQADIAG_WRITE_LOG=FILE`` — every write point passed is appended to ``FILE`` as one
  line ``{n}\\t{name}`` (how the fault-injection tests count the points of a command).

The tests run a command with k = 1, 2, … until it finishes without dying, and check
after every kill that the next run gives the numbers of an uninterrupted run or refuses
with one line (``tests/test_fault_injection.py``).
"""

from __future__ import annotations

import os
import signal
import threading

KILL_ENV = "VQADIAG_KILL_AT_WRITE"
LOG_ENV = "VQADIAG_WRITE_LOG"

_lock = threading.Lock()
_passed = 0


def write_point(name: str) -> None:
    """Count one write point; die here when it is the one ``VQADIAG_KILL_AT_WRITE`` names."""
    kill_at = os.environ.get(KILL_ENV)
    log = os.environ.get(LOG_ENV)
    if not kill_at and not log:
        return
    global _passed
    with _lock:
        _passed += 1
        n = _passed
        if log:
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(f"{n}\t{name}\n")
        if kill_at and n == int(kill_at):
            os.kill(os.getpid(), signal.SIGKILL)
