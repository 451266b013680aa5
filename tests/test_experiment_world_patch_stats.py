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


def test_each_patch_has_the_size_group_of_the_object_it_shows(experiment):
    script = experiment("world_patch_stats")
    # at a 40-pixel input: a 40 px (24 and up), b 12 and d 20 (12-24), c 4 (under 12)
    assert script.patch_sides(SCENE, 2, size=40).tolist() == [2, 1, 1, 2]
    # by overlap the fork takes the top-left patch
    assert script.patch_sides(SCENE, 2, "overlap", size=40).tolist() == [0, 1, 1, 2]
    # a patch that shows no object is -1
    alone = {**SCENE, "objects": {"b": SCENE["objects"]["b"]}}
    assert script.patch_sides(alone, 2, size=40).tolist() == [-1, 1, -1, -1]


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
        # at the default 128-pixel input: c (10 → 12.8 px) owns none, a, b and d do
        "objects_shown_by_side": {"12-24 px": 0.0, "24 px and up": 100.0},
        "questions_with_objects": 3,
        "asked_shown": round(100 / 3, 2),
        "asked_shown_by_type": {"queryAttr": 50.0, "verifyAttr": 0.0},
    }
    # at a 32-pixel input: b (9.6) owns one, c (3.2) none; d (16) and a (32) own theirs
    small = script.patch_stats({"i": SCENE}, questions, 2, size=32)["objects_shown_by_side"]
    assert small == {"under 12 px": 50.0, "12-24 px": 100.0, "24 px and up": 100.0}
    overlap = script.patch_stats({"i": SCENE}, questions, 2, "overlap")
    assert overlap["objects_shown"] == 100.0 and overlap["patches_per_shown_object"] == 1.0
    assert overlap["asked_shown"] == 100.0


# a 200 × 100 image at a 32 × 32 input: x scaled by 0.16, y by 0.32; shorter sides
# A min(8, 16) = 8, B min(16, 25.6) = 16, C min(32, 32) = 32, D min(12, 12.8) = 12
SIZED = {
    "width": 200,
    "height": 100,
    "objects": {
        "A": {"name": "cup", "x": 0, "y": 0, "w": 50, "h": 50},
        "B": {"name": "car", "x": 0, "y": 0, "w": 100, "h": 80},
        "C": {"name": "bus", "x": 0, "y": 0, "w": 200, "h": 100},
        "D": {"name": "dog", "x": 0, "y": 0, "w": 75, "h": 40},
    },
}


def asking(*spans):
    """A record on image "i" whose annotations name the objects in ``spans``
    (question, answer, full answer)."""
    names = ("question", "answer", "fullAnswer")
    return {"imageId": "i", "annotations": {n: dict(s) for n, s in zip(names, spans, strict=False)}}


def test_smallest_side_is_the_smallest_named_objects_shorter_side_at_the_input(experiment):
    script = experiment("world_patch_stats")
    scenes = {"i": SIZED}
    assert script.smallest_side(asking({"2": "B"}), SIZED, 32) == pytest.approx(16.0)
    # named in the question and in the full answer: the smaller one counts
    assert script.smallest_side(asking({"2": "B"}, {}, {"1": "A"}), SIZED, 32) == 8.0
    assert script.smallest_side(asking({}, {"0": "C"}), SIZED, 32) == 32.0
    # an id the scene lacks, no annotations, no scene: no side
    assert script.smallest_side(asking({"0": "Z"}), SIZED, 32) is None
    assert script.smallest_side({"imageId": "i"}, SIZED, 32) is None
    assert script.smallest_side(asking({"2": "B"}), scenes.get("other"), 32) is None
    # the group bounds: under 12, 12 up to 24, 24 and up
    assert [script.side_group(v) for v in (8.0, 11.99, 12.0, 23.99, 24.0, None)] == [
        "under 12 px", "under 12 px", "12-24 px", "12-24 px", "24 px and up",
        "no annotated object",
    ]  # fmt: skip
    assert script.side_group(script.smallest_side(asking({"1": "D"}), SIZED, 32)) == "12-24 px"


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
    assert out["image_size"] == 128 and out["objects_shown_by_side"]
    assert all(0.0 <= v <= 100.0 for v in out["objects_shown_by_side"].values())
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
    monkeypatch.setattr(
        sys, "argv", ["world_patch_stats.py", str(rendered_world_60), "--image-size", "0"]
    )
    with pytest.raises(SystemExit):
        script.main()
    assert "--image-size must be at least 1" in capsys.readouterr().err
