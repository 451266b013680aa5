"""Checkpoints round-trip without pickle and name bad files."""

from __future__ import annotations

import json

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
    weights = tmp_path / "run" / "weights.safetensors"
    weights.write_bytes(b"garbage")
    with pytest.raises(DataError, match="weights.safetensors: does not match the weights_sha256"):
        load_checkpoint(tmp_path / "run")
    # a run saved before the digest existed: the safetensors reader names the problem
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    del config["weights_sha256"]
    (tmp_path / "run" / "config.json").write_text(json.dumps(config))
    with pytest.raises(DataError, match="weights.safetensors: cannot read safetensors"):
        load_checkpoint(tmp_path / "run")
    (tmp_path / "run" / "config.json").write_text('{"mode": 1}')
    with pytest.raises(DataError, match="config.json: config: missing field 'model'"):
        load_checkpoint(tmp_path / "run")
    with pytest.raises(ValueError, match="name its model"):
        save_checkpoint(tmp_path / "r2", {}, {}, [])


def test_a_bit_flip_in_the_weights_is_refused(tmp_path):
    w = {"emb": np.arange(64, dtype=np.float32)}
    save_checkpoint(tmp_path / "run", {"model": "prior"}, w, ["yes", "no"])
    weights = tmp_path / "run" / "weights.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-5] ^= 0x01  # one bit of one float: still a valid safetensors file
    weights.write_bytes(bytes(raw))
    with pytest.raises(DataError, match="does not match the weights_sha256"):
        load_checkpoint(tmp_path / "run")


def test_a_changed_answer_list_is_refused(tmp_path):
    """Found in review: answers.json decides every answer as much as the weights do, and
    swapping "yes" and "no" in it loaded without a word (val 29.54 became 25.27); its
    digest is now recorded and checked. A run saved before the digest existed loads."""
    save_checkpoint(tmp_path / "run", {"model": "prior"}, {"a": np.zeros(2)}, ["yes", "no"])
    answers = tmp_path / "run" / "answers.json"
    answers.write_text(json.dumps(["no", "yes"]))
    with pytest.raises(DataError, match="answers.json: does not match the answers_sha256"):
        load_checkpoint(tmp_path / "run")
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    del config["answers_sha256"]
    (tmp_path / "run" / "config.json").write_text(json.dumps(config))
    assert load_checkpoint(tmp_path / "run")[2] == ["no", "yes"]


def test_old_run_configs_are_upgraded_in_one_place():
    from vqadiag.models.run_configs import OPTIONS_OF_OLD_RUNS, upgrade_options

    # an option a config lacks has the value it had before it existed; saved ones win
    assert upgrade_options("updn", {"epochs": 3}) == {
        "feature_norm": "none", "pooling": "features", "epochs": 3,
    }  # fmt: skip
    assert upgrade_options("updn", {"pooling": "answers"})["pooling"] == "answers"
    assert upgrade_options("pixel", {})["encoder"] == "grid"
    assert upgrade_options("pixel", {})["attention_supervision"] == 0.0
    assert upgrade_options("prior", {"a": 1}) == {"a": 1}  # no table: the config as saved
    assert set(OPTIONS_OF_OLD_RUNS) == {"updn", "pixel"}
