"""The demo's second lane: jobs in a process of their own, in order, on one thread; their
errors come back as raised; a worker that dies is one line; one core runs them here."""

from __future__ import annotations

import os
import pickle
import signal
import time

import pytest

from vqadiag.errors import DataError
from vqadiag.workflows import demo_lane
from vqadiag.workflows.demo_lane import InlineLane, ProcessLane, open_lane, outcome


def where_and_threads(tag: str) -> tuple[str, int, int]:
    """A job: its tag, the process it ran in and its intra-op threads."""
    import torch

    return tag, os.getpid(), torch.get_num_threads()


def refuse(path: str) -> None:
    """A job that fails as a data problem does."""
    raise DataError(path, "no such record", record="q7")


def die() -> None:
    """A job whose process is killed (as the OS does when memory runs out)."""
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.fixture(scope="module")
def lane():
    started = ProcessLane()
    yield started
    started.close()


def test_a_process_lane_runs_its_jobs_in_order_in_another_process_on_one_thread(lane):
    first, second = lane.submit(where_and_threads, "a"), lane.submit(where_and_threads, "b")
    (tag_a, pid_a, threads_a), (tag_b, pid_b, threads_b) = first.result(), second.result()
    assert (tag_a, tag_b) == ("a", "b")
    assert pid_a == pid_b != os.getpid()
    assert threads_a == threads_b == 1
    assert lane.parallel


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_closing_on_an_error_stops_the_running_job_at_once():
    lane = ProcessLane()
    worker = lane.submit(where_and_threads, "a").result()[1]
    lane.submit(time.sleep, 120)
    lane.last_job_submitted()  # as the demo does once the chat VLM's diagnosis is handed over
    began = time.monotonic()
    lane.close(cancel=True)
    deadline = time.monotonic() + 15
    while not _ended(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _ended(worker) and time.monotonic() - began < 15


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_after_its_last_job_the_worker_ends_and_the_results_stay():
    lane = ProcessLane()
    first, second = lane.submit(where_and_threads, "a"), lane.submit(where_and_threads, "b")
    lane.last_job_submitted()  # returns at once
    assert [first.result()[0], second.result()[0]] == ["a", "b"]
    worker = second.result()[1]
    deadline = time.monotonic() + 15
    while not _ended(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _ended(worker)
    with pytest.raises(RuntimeError):
        lane.submit(where_and_threads, "c")
    lane.close()


def test_a_jobs_data_error_comes_back_as_it_was_raised(lane):
    future = lane.submit(refuse, "world/gqa/val.json")
    with pytest.raises(DataError) as err:
        outcome(future, "the chat VLM's training", "runs/chat-vlm")
    assert str(err.value) == "world/gqa/val.json: q7: no such record"
    assert (err.value.path, err.value.record) == ("world/gqa/val.json", "q7")


def test_a_worker_that_dies_is_one_line_naming_what_it_was_doing(tmp_path):
    dying = ProcessLane()
    try:
        future = dying.submit(die)
        with pytest.raises(DataError) as err:
            outcome(future, "the chat VLM's diagnosis", tmp_path / "runs" / "chat-vlm")
    finally:
        dying.close(cancel=True)
    text = str(err.value)
    assert len(text.splitlines()) == 1
    assert text.startswith(f"{tmp_path / 'runs' / 'chat-vlm'}: ")
    assert "the chat VLM's diagnosis stopped before it finished" in text
    assert "run the demo again to resume" in text


def test_an_inline_lane_runs_each_job_at_once_here_and_raises_its_error_there():
    lane = InlineLane()
    future = lane.submit(where_and_threads, "a")
    assert future.done() and future.result()[:2] == ("a", os.getpid())
    lane.last_job_submitted()
    with pytest.raises(DataError, match="no such record"):
        lane.submit(refuse, "x.json")
    assert not lane.parallel


def test_a_second_process_only_where_asked_for_and_two_cores_are_usable(monkeypatch):
    monkeypatch.setattr(demo_lane, "usable_cores", lambda: 1)
    assert isinstance(open_lane(True), InlineLane)
    monkeypatch.setattr(demo_lane, "usable_cores", lambda: 2)
    assert isinstance(open_lane(False), InlineLane)
    two = open_lane(True)
    try:
        assert isinstance(two, ProcessLane)
    finally:
        two.close()


def test_a_data_error_pickles_as_it_reads():
    err = DataError("a/b\nc.json", "bad\nvalue", record="q1")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is DataError
    assert str(back) == str(err) == "'a/b\\nc.json': q1: bad value"
    assert (back.path, back.problem, back.record) == (err.path, err.problem, err.record)


ORPHAN = """
import os, time
from vqadiag.workflows.demo_lane import ProcessLane
lane = ProcessLane()
print(lane.submit(os.getpid).result(), flush=True)
lane.submit(time.sleep, 120)
time.sleep(0.5)
os._exit(0)  # the demo killed mid-job: no shutdown, the worker busy
"""


def _ended(pid: int) -> bool:
    """Whether process ``pid`` has ended (gone, or a zombie nobody reaped yet)."""
    from pathlib import Path

    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] in "ZX"


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_a_worker_whose_demo_died_ends_instead_of_going_on():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", ORPHAN], capture_output=True, text=True,
                         check=True, timeout=60)  # fmt: skip
    worker = int(out.stdout.split()[0])
    deadline = time.monotonic() + 15
    while not _ended(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ended(worker)
