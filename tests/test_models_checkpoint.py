"""Checkpoints round-trip without pickle and name bad files."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("safetensors")

from vqadiag.errors import DataError
from vqadiag.models.checkpoint import load_checkpoint, run_fingerprint, save_checkpoint


def test_round_trip_and_fingerprint(tmp_path):
    w = {"emb": np.arange(6, dtype=np.float32).reshape(2, 3)}
    save_checkpoint(tmp_path / "run", {"model": "prior", "mode": "global"}, w, ["yes", "no"])
    config, tensors, answers = load_checkpoint(tmp_path / "run")
    assert config["model"] == "prior" and config["mode"] == "global"
    np.testing.assert_array_equal(tensors["emb"], w["emb"])
    assert answers == ["yes", "no"]
    first = run_fingerprint(tmp_path / "run")
    save_checkpoint(tmp_path / "run", {"model": "prior", "mode": "global"}, w, ["yes", "maybe"])
    assert run_fingerprint(tmp_path / "run") != first


def test_bad_run_folders(tmp_path):
    with pytest.raises(DataError, match="run folder not found"):
        load_checkpoint(tmp_path / "missing")
    save_checkpoint(tmp_path / "run", {"model": "x"}, {"a": np.zeros(1)}, ["a"])
    (tmp_path / "run" / "weights.safetensors").write_bytes(b"garbage")
    with pytest.raises(DataError, match="weights.safetensors: cannot read safetensors"):
        load_checkpoint(tmp_path / "run")
    (tmp_path / "run" / "config.json").write_text('{"mode": 1}')
    with pytest.raises(DataError, match="config.json: config: missing field 'model'"):
        load_checkpoint(tmp_path / "run")
    with pytest.raises(ValueError, match="name its model"):
        save_checkpoint(tmp_path / "r2", {}, {}, [])
