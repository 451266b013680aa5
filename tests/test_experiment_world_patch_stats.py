"""experiments/world_patch_stats.py on a hand-worked scene, and end to end on a synthetic
world."""

from __future__ import annotations

import json
import sys

import pytest

# 100 × 100 in 2 × 2 patches: centres (25, 25), (75, 25), (25, 75), (75, 75)
SCENE = {
    "width": 100,
    "height": 100,
    "objects": {
        "a": {"name": "table", "x": 0, "y": 0, "w": 100, "h": 100, "attributes": ["red", "wood"]},
        "b": {"name": "cup", "x": 60, "y": 10, "w": 30, "h": 30, "attributes": ["white"]},
        "c": {"name": "fork", "x": 40, "y": 40, "w": 10, "h": 10},  # covers no centre
        "d": {"name": "table", "x": 0, "y": 50, "w": 50, "h": 50, "attributes": []},
    },
}


def asked(image: str, kind: str, *ids: str) -> dict:
    spans = {str(k): i for k, i in enumerate(ids)}
    return {"imageId": image, "types": {"detailed": kind}, "annotations": {"question": spans}}


def test_objects_own_the_patches_whose_centre_their_smallest_box_covers(experiment):
    script = experiment("world_patch_stats")
    # a keeps the centres no smaller box covers (patches 0 and 3); b and d one each
    assert script.owned_patches(SCENE, 2) == {"a": 2, "b": 1, "d": 1}


def test_under_the_overlap_rule_the_smallest_box_touching_a_patch_owns_it(experiment):
    script = experiment("world_patch_stats")
    # the fork (40–50 × 40–50) touches only the top-left patch and takes it from a; the
    # cup keeps the top right, d the bottom left (the fork ends at its top edge), a the rest
    assert script.owned_patches(SCENE, 2, "overlap") == {"a": 1, "b": 1, "c": 1, "d": 1}


def test_patch_stats_counts_objects_patches_and_asked_objects_shown(experiment, monkeypatch):
    script = experiment("world_patch_stats")
    monkeypatch.setattr(script, "MIN_TYPE_QUESTIONS", 1)
    questions = {
        "1": asked("i", "queryAttr", "b"),  # shown
        "2": asked("i", "queryAttr", "c"),  # owns no patch
        "3": asked("i", "verifyAttr", "a", "c"),  # not every object shown
        "4": {"imageId": "i", "types": {"detailed": "exist"}},  # no annotations: skipped
        "5": asked("other", "queryAttr", "x"),  # no scene graph: skipped
    }
    out = script.patch_stats({"i": SCENE}, questions, 2)
    assert out == {
        "images": 1,
        "objects_per_image": 4.0,
        "attributes_per_object": 0.75,  # (2 + 1 + 0 + 0) / 4
        "shared_names_per_image": 2.0,  # the two tables
        "objects_shown": 75.0,
        "patches_per_shown_object": round(4 / 3, 2),
        "questions_with_objects": 3,
        "asked_shown": round(100 / 3, 2),
        "asked_shown_by_type": {"queryAttr": 50.0, "verifyAttr": 0.0},
    }
    overlap = script.patch_stats({"i": SCENE}, questions, 2, "overlap")
    assert overlap["objects_shown"] == 100.0 and overlap["patches_per_shown_object"] == 1.0
    assert overlap["asked_shown"] == 100.0


def test_the_script_prints_its_line_for_a_synthetic_world(
    experiment, rendered_world_60, monkeypatch, capsys
):
    script = experiment("world_patch_stats")
    monkeypatch.setattr(
        sys, "argv", ["world_patch_stats.py", str(rendered_world_60), "--grid", "4"]
    )
    script.main()
    out = json.loads(capsys.readouterr().out)
    assert out["split"] == "val" and out["grid"] == 4 and out["images"] > 0
    assert out["labels"] == "centre"
    assert 0.0 < out["objects_shown"] <= 100.0 and out["questions_with_objects"] > 0
    monkeypatch.setattr(sys, "argv", [*sys.argv, "--labels", "overlap"])
    script.main()
    overlap = json.loads(capsys.readouterr().out)
    assert overlap["labels"] == "overlap"
    # a smaller box can take an object's patches, but on this world more objects own one
    assert out["objects_shown"] < overlap["objects_shown"] <= 100.0


def test_a_grid_below_one_is_refused(experiment, rendered_world_60, monkeypatch, capsys):
    script = experiment("world_patch_stats")
    monkeypatch.setattr(
        sys, "argv", ["world_patch_stats.py", str(rendered_world_60), "--grid", "0"]
    )
    with pytest.raises(SystemExit):
        script.main()
    assert "--grid must be at least 1" in capsys.readouterr().err
