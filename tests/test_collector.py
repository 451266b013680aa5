"""The cyclic collector around scoring (vqadiag.data.io.jsonio.collector_paused_over)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from vqadiag.data.io.jsonio import FREEZE_BYTES, collector_paused_over, paused_gc


@pytest.fixture
def collector_state():
    """Leave the collector as it was: enabled, nothing frozen by the test."""
    was_enabled = gc.isenabled()
    gc.enable()
    frozen_before = gc.get_freeze_count()
    yield frozen_before
    if gc.get_freeze_count() != frozen_before:
        gc.unfreeze()
    if not was_enabled:
        gc.disable()


def _sized(path: Path, size: int) -> Path:
    with path.open("wb") as fh:
        fh.truncate(size)  # sparse: the size without the disk
    return path


@collector_paused_over("first", "others")
def _observe(first: str | Path, others: tuple[str | Path, ...] = (), *, fail: bool = False) -> bool:
    garbage: list = []
    garbage.append(garbage)  # one cycle made during the call
    if fail:
        raise ValueError("failed inside")
    return gc.isenabled()


def test_small_inputs_pause_and_freeze_nothing(tmp_path: Path, collector_state) -> None:
    small = _sized(tmp_path / "small.json", 1000)
    assert _observe(small) is False  # paused during the call
    assert gc.isenabled()
    assert gc.get_freeze_count() == collector_state


def test_big_inputs_together_are_frozen_afterwards(tmp_path: Path, collector_state) -> None:
    half = FREEZE_BYTES // 2
    a, b = _sized(tmp_path / "a.json", half), _sized(tmp_path / "b.json", half)
    assert _observe(a) is False
    assert gc.get_freeze_count() == collector_state  # half the threshold: not frozen
    assert _observe(a, others=(b, tmp_path / "missing.json")) is False
    assert gc.isenabled()
    assert gc.get_freeze_count() > collector_state


def test_the_collector_comes_back_unfrozen_after_an_error(tmp_path: Path, collector_state) -> None:
    big = _sized(tmp_path / "big.json", FREEZE_BYTES)
    with pytest.raises(ValueError, match="failed inside"):
        _observe(big, fail=True)
    assert gc.isenabled()
    assert gc.get_freeze_count() == collector_state  # nothing of the failed call is kept


def test_defaults_count_and_odd_paths_count_zero(tmp_path: Path, collector_state) -> None:
    big = _sized(tmp_path / "big.json", FREEZE_BYTES)

    @collector_paused_over("path")
    def with_default(path: Path = big) -> None:
        pass

    with_default()
    assert gc.get_freeze_count() > collector_state  # the default file was counted
    gc.unfreeze()
    _observe("a\0b")  # a NUL in the name: counted 0, the function's own reader says why
    assert gc.get_freeze_count() == 0


def test_a_parameter_name_that_is_not_there_is_refused() -> None:
    with pytest.raises(TypeError, match="no parameter questoins"):

        @collector_paused_over("questoins")
        def score(questions: str) -> None:
            pass


def test_a_disabled_collector_stays_disabled(tmp_path: Path, collector_state) -> None:
    gc.disable()
    try:
        assert _observe(_sized(tmp_path / "big.json", FREEZE_BYTES)) is False
        assert not gc.isenabled()
        assert gc.get_freeze_count() == collector_state  # paused_gc freezes only on re-enabling
    finally:
        gc.enable()


def test_paused_gc_freezes_only_after_a_normal_exit(collector_state) -> None:
    with pytest.raises(ValueError, match="failed read"), paused_gc(freeze=True):
        assert not gc.isenabled()
        raise ValueError("failed read")
    assert gc.isenabled()
    assert gc.get_freeze_count() == collector_state
    with paused_gc(freeze=True):
        pass
    assert gc.isenabled()
    assert gc.get_freeze_count() > collector_state
