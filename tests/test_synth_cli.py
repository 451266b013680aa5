"""End-to-end: `vqadiag synth` and `vqadiag stats DIR` through the CLI, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vqadiag.synth import generate_world


@pytest.fixture(scope="module")
def small_world(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli_world")
    generate_world(out, images=120, seed=3, feature_dim=8)
    return out


def test_synth_command_json(run_cli, tmp_path):
    out = tmp_path / "w"
    res = run_cli("synth", "--out", out, "--images", "80", "--seed", "2", "--bias", "0.5",
                  "--feature-dim", "8", "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    data = res.json()
    assert data["images"] == 80 and data["seed"] == 2 and data["bias"] == 0.5
    assert sum(s["images"] for s in data["splits"]["gqa"].values()) == 80
    assert data["questions"] > 0 and "world.json" in data["files"]
    assert all((out / f).is_file() for f in data["files"])
    assert json.loads((out / "world.json").read_text())["feature_dim"] == 8


def test_synth_command_human_output(run_cli, tmp_path):
    res = run_cli("synth", "--out", tmp_path / "h", "--images", "30", "--feature-dim", "4")
    assert res.exit_code == 0
    assert "gqa" in res.stdout and "questions/s" in res.stdout


def test_synth_rejects_bad_options(run_cli, tmp_path):
    assert run_cli("synth", "--out", tmp_path / "x", "--bias", "1.5").exit_code == 2
    assert run_cli("synth", "--out", tmp_path / "x", "--images", "2").exit_code == 2


def test_synth_objects_sets_the_range_and_refuses_a_bad_one_in_one_line(run_cli, tmp_path):
    res = run_cli("synth", "--out", tmp_path / "s", "--images", "20", "--feature-dim", "4",
                  "--objects", "3-6", "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert res.json()["objects_per_image"] == [3, 6]
    wrong = "2 <= MIN <= MAX <= 40"
    for bad, why in (("6", "expected MIN-MAX"), ("a-b", "expected MIN-MAX"), ("1-6", wrong),
                     ("9-4", wrong)):  # fmt: skip
        res = run_cli("synth", "--out", tmp_path / "x", "--objects", bad)
        assert res.exit_code != 0
        line = res.stderr.strip()
        assert "--objects" in line and why in line and "\n" not in line, line
        assert not (tmp_path / "x").exists()


def test_stats_world_json(run_cli, small_world):
    res = run_cli("stats", small_world, "--json", "--n-bootstrap", "50")
    assert res.exit_code == 0, res.stderr
    data = res.json()
    assert data["world"]["images"] == 120
    assert data["gqa"]["val"]["questions"] > 0
    for split in ("train", "val", "testdev"):
        ci = data["ci"]["gqa"][split]["balanced_rate"]
        assert ci["value"] == pytest.approx(data["gqa"][split]["balanced_rate"])
        assert ci["ci_low"] <= ci["value"] <= ci["ci_high"]
    assert data["ci"]["detections"]["recall_iou50"]["n"] == sum(
        data["gqa"][s]["objects"] for s in ("train", "val", "testdev")
    )
    for split in ("train", "val"):
        v = data["vqa2"][split]
        assert v["pairs_with_different_answers"] == v["pairs"]
        assert set(data["ci"]["vqa2"][split]) == {"unanimous_rate", "pair_possible_rate"}


def test_stats_human_output(run_cli, small_world):
    res = run_cli("stats", "world", small_world, "--n-bootstrap", "20")
    assert res.exit_code == 0
    assert "detector recall" in res.stdout and "GQA-OOD" in res.stdout


def test_stats_of_a_folder_named_world(run_cli, small_world, tmp_path, monkeypatch):
    """The README's ``vqadiag synth --out world`` then ``vqadiag stats world``: the folder,
    not the subcommand without one ("Missing argument 'directory'")."""
    import shutil

    shutil.copytree(small_world, tmp_path / "world")
    monkeypatch.chdir(tmp_path)
    for args in (("world",), ("world", "world"), ("world", "--n-bootstrap", "20", "world")):
        res = run_cli("stats", *args, "--json", "--n-bootstrap", "20")
        assert res.exit_code == 0, (args, res.stderr)
        assert res.json()["world"]["images"] == 120


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_stats_missing_world_json(run_cli, tmp_path):
    (tmp_path / "empty").mkdir()
    res = run_cli("stats", tmp_path / "empty")
    assert res.exit_code == 2
    assert "world.json: file not found" in res.stderr


def test_stats_malformed_json_names_file(run_cli, small_world, tmp_path):
    w = _copy(small_world, tmp_path / "w")
    (w / "gqa" / "val_balanced_questions.json").write_text('{"1": {"question": ')
    res = run_cli("stats", w)
    assert res.exit_code == 2
    assert "val_balanced_questions.json" in res.stderr and "malformed JSON" in res.stderr


def test_stats_empty_file_names_file(run_cli, small_world, tmp_path):
    w = _copy(small_world, tmp_path / "w")
    (w / "gqa" / "testdev_sceneGraphs.json").write_text("")
    res = run_cli("stats", w)
    assert res.exit_code == 2
    assert "testdev_sceneGraphs.json" in res.stderr and "empty" in res.stderr


def test_stats_missing_field_names_record(run_cli, small_world, tmp_path):
    w = _copy(small_world, tmp_path / "w")
    path = w / "gqa" / "train_balanced_questions.json"
    data = json.loads(path.read_text())
    qid = sorted(data)[0]
    del data[qid]["answer"]
    path.write_text(json.dumps(data))
    res = run_cli("stats", w)
    assert res.exit_code == 2
    assert "train_balanced_questions.json" in res.stderr
    assert f"record '{qid}'" in res.stderr and "answer" in res.stderr


def test_stats_nan_box_names_file_and_object(run_cli, small_world, tmp_path):
    w = _copy(small_world, tmp_path / "w")
    path = w / "gqa" / "val_sceneGraphs.json"
    data = json.loads(path.read_text())
    image = sorted(data)[0]
    oid = sorted(data[image]["objects"])[0]
    data[image]["objects"][oid]["x"] = float("nan")
    path.write_text(json.dumps(data))  # json writes NaN
    res = run_cli("stats", w)
    assert res.exit_code == 2
    assert "val_sceneGraphs.json" in res.stderr and "NaN" in res.stderr


def test_stats_unknown_pair_id_names_file(run_cli, small_world, tmp_path):
    w = _copy(small_world, tmp_path / "w")
    path = w / "vqa2" / "v2_mscoco_val2014_complementary_pairs.json"
    pairs = json.loads(path.read_text())
    pairs.append([pairs[0][0] + 999999, pairs[0][1] + 999999])
    path.write_text(json.dumps(pairs))
    res = run_cli("stats", w)
    assert res.exit_code == 2
    assert "v2_mscoco_val2014_complementary_pairs.json" in res.stderr
