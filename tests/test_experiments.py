"""experiments/pixel_recognition.py: its cell targets on a hand-worked scene, and one
epoch end to end on a small rendered world."""

from __future__ import annotations

import re
import sys

import pytest

pytest.importorskip("torch")


def test_cell_targets_take_the_smallest_box_containing_each_centre(experiment):
    probe = experiment("pixel_recognition")
    # a 2 × 2 grid over a 100 × 50 image: cell centres (25, 12.5) (75, 12.5) (25, 37.5)
    # (75, 37.5); "table" covers the whole left half, "cup" (smaller, on top) the top left
    # quarter; "lamp" covers no cell centre
    scene = {
        "width": 100,
        "height": 50,
        "objects": {
            "1": {"name": "table", "x": 0, "y": 0, "w": 50, "h": 50},
            "2": {"name": "cup", "x": 10, "y": 5, "w": 30, "h": 15},
            "3": {"name": "lamp", "x": 80, "y": 40, "w": 10, "h": 5},
        },
    }
    names = {"table": 1, "cup": 2, "lamp": 3}
    target, objects = probe.cell_targets(scene, 2, names, size=16)
    assert target.tolist() == [2, 0, 1, 0]
    # centre cells: table (25, 25) → row 1, col 0; cup (25, 12.5) → 0; lamp (85, 42.5) → 3;
    # shorter side in a 16-px input: min(w / 100, h / 50) · 16
    assert objects == [(2, 1, 8.0), (0, 2, 4.8), (3, 3, 1.6)]


def test_one_epoch_prints_the_recognition_figures(
    experiment, rendered_world_60, monkeypatch, capsys
):
    probe = experiment("pixel_recognition")
    argv = ["pixel_recognition.py", str(rendered_world_60 / "gqa"), "--epochs", "1", "--size", "32"]
    monkeypatch.setattr(sys, "argv", argv)
    probe.main()
    line = capsys.readouterr().out.strip()
    pattern = (
        r"epoch 1 \([\d.]+ s\): cell ([\d.]+)  train cell ([\d.]+)  centre ([\d.]+)  by side"
        r"( \d+-\d*: (?:[\d.]+|-) \(n=\d+\)){4}"
    )
    match = re.fullmatch(pattern, line)
    assert match, line
    assert all(0.0 <= float(match.group(k)) <= 1.0 for k in (1, 2, 3))
    counts = [int(n) for n in re.findall(r"n=(\d+)", line)]
    val_scenes = probe.GQAData(rendered_world_60 / "gqa").scene_graphs("val")
    assert sum(counts) == sum(len(scene["objects"]) for scene in val_scenes.values())
