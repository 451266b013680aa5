"""experiments/world_owners.py: visible-owner patch labels on hand-worked owner maps, the
owner maps of a rendered world, and the ceiling experiment's ``--visible-owner``."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from vqadiag.models.reference.chat_vlm_data import scene_labeller

# a 4 × 4 image in 2 × 2 patches: centre pixels (2, 2) (2, 0) (0, 2) (0, 0) are read at
# x, y = 1 and 3 (pixel columns and rows from 0)
SCENE = {
    "width": 4,
    "height": 4,
    "objects": {
        "10": {"name": "table", "x": 0, "y": 0, "w": 4, "h": 4, "attributes": ["brown"]},
        "11": {"name": "cup", "x": 0, "y": 0, "w": 2, "h": 2, "attributes": ["white"]},
        "12": {"name": "ghost", "x": 2, "y": 2, "w": 2, "h": 2, "attributes": []},
    },
}
# what was painted: the cup's box holds only background at its centre pixel (1, 1); the
# table shows at (3, 1) and (1, 3); the ghost at (3, 3)
OWNER = np.array(
    [
        [0, 1, 0, 0],
        [1, -1, 0, 0],
        [0, 0, 2, 2],
        [0, 0, 2, 2],
    ]
)
NAMES = {"background": 0, "table": 1, "cup": 2}
ATTRS = {"white": 0, "brown": 1}


def test_a_patch_is_labelled_by_the_object_painted_at_its_centre_pixel(experiment):
    script = experiment("world_owners")
    names, attrs = script.visible_labels(SCENE, OWNER, 2, NAMES, ATTRS)
    # top left: the background shows through the cup's box; top right and bottom left:
    # the table; bottom right: the ghost, a name outside the index (background, no attribute)
    assert names.tolist() == [0, 1, 1, 0]
    assert attrs.tolist() == [[0, 0], [0, 1], [0, 1], [0, 0]]


def test_visible_labels_move_with_the_image_as_the_augmentation_moves_it(experiment):
    script = experiment("world_owners")
    # mirrored: the patch at u reads the original at 1 − u
    names, _ = script.visible_labels(SCENE, OWNER, 2, NAMES, ATTRS, flip=True)
    assert names.tolist() == [1, 0, 0, 1]
    # moved right by half the image: the left patches read outside it (background), the
    # right ones the original's left column of centres
    names, _ = script.visible_labels(SCENE, OWNER, 2, NAMES, ATTRS, shift=(0.5, 0.0))
    assert names.tolist() == [0, 0, 0, 1]
    # moved up by a quarter: the top patches read the original's row 2, the bottom ones
    # outside it
    names, _ = script.visible_labels(SCENE, OWNER, 2, NAMES, ATTRS, shift=(0.0, -0.25))
    assert names.tolist() == [1, 0, 0, 0]


class HandOwners:
    """An owner source with the hand-worked map for every image."""

    def owner_map(self, image_id, scene):
        return OWNER


def test_the_labeller_labels_every_image_and_leaves_one_without_a_scene_empty(experiment):
    script = experiment("world_owners")
    by_owner = script.visible_image_labels(HandOwners(), 2, NAMES, ATTRS)
    label = scene_labeller({"a": SCENE}, ["a", "missing"], 2, NAMES, ATTRS, label_image=by_owner)
    names, attrs = label(np.array([False, False]), np.zeros((2, 2)))
    assert names.tolist() == [[0, 1, 1, 0], [0, 0, 0, 0]]
    assert attrs.shape == (2, 4, 2)
    assert label(np.array([True, False]), np.zeros((2, 2)))[0][0].tolist() == [1, 0, 0, 1]


def test_agreement_counts_what_the_centre_rules_object_patches_show(experiment):
    script = experiment("world_owners")
    out = script.centre_label_agreement(HandOwners(), {"a": SCENE}, 2)
    # the centre rule: cup (top left, smallest box with (1, 1)), table (top right, bottom
    # left), ghost (bottom right): 4 object patches; shown: background, table, table, ghost
    assert out == {
        "images": 1,
        "patches": 4,
        "centre_rule_object_patches": 4,
        "visible_object_patches": 3,
        "centre_rule_shows_same": 75.0,
        "centre_rule_shows_background": 25.0,
        "centre_rule_shows_other": 0.0,
    }


def test_owner_maps_are_the_renderers_and_a_changed_scene_graph_is_refused(
    experiment, rendered_world_60
):
    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.synth.render import render_indices

    script = experiment("world_owners")
    owners = script.VisibleOwners(rendered_world_60)
    scenes = GQAData(rendered_world_60).scene_graphs("val")
    image_id, scene = next(iter(scenes.items()))
    owner = owners.owner_map(image_id, scene)
    expected = render_indices(owners.scenes, owners.index[image_id])[1]
    assert owner.shape == (scene["height"], scene["width"])
    assert (owner == expected).all() and -1 <= owner.min() <= owner.max() < len(scene["objects"])
    # the painted pixels of every object lie in its box
    for k, obj in enumerate(scene["objects"].values()):
        ys, xs = np.nonzero(owner == k)
        if len(xs):
            assert obj["x"] <= xs.min() and xs.max() < obj["x"] + obj["w"]
            assert obj["y"] <= ys.min() and ys.max() < obj["y"] + obj["h"]
    moved = {**scene, "objects": dict(scene["objects"])}
    first = next(iter(moved["objects"]))
    moved["objects"][first] = {**moved["objects"][first], "x": moved["objects"][first]["x"] + 1}
    with pytest.raises(SystemExit, match=f"image {image_id}: its scene graph is not"):
        script.VisibleOwners(rendered_world_60).owner_map(image_id, moved)
    with pytest.raises(SystemExit, match="image nope: its scene graph is not"):
        owners.owner_map("nope", scene)


def test_a_folder_without_a_world_json_is_refused_in_one_line(experiment, tmp_path):
    script = experiment("world_owners")
    with pytest.raises(SystemExit, match=r"world.json: not a vqadiag synth world.json"):
        script.VisibleOwners(tmp_path)
    (tmp_path / "world.json").write_text('{"seed": 0}')
    with pytest.raises(SystemExit, match=r"world.json: not a vqadiag synth world.json"):
        script.VisibleOwners(tmp_path)


def test_the_script_prints_the_agreement_of_a_rendered_world(
    experiment, rendered_world_60, monkeypatch, capsys
):
    script = experiment("world_owners")
    monkeypatch.setattr(sys, "argv", ["world_owners.py", str(rendered_world_60)])
    script.main()
    out = json.loads(capsys.readouterr().out)
    shares = [out[f"centre_rule_shows_{k}"] for k in ("same", "background", "other")]
    assert out["split"] == "val" and out["patches"] == 64 * out["images"] > 0
    assert abs(sum(shares) - 100.0) < 0.05 and 0 < out["visible_object_patches"] <= out["patches"]


TINY = ["-o", "vision_dim=32", "-o", "vision_layers=1", "-o", "text_dim=32", "-o", "image_size=32"]


@pytest.mark.parametrize("features", ["oracle", "tower"])
def test_the_ceiling_experiment_labels_patches_by_their_visible_owner(
    experiment, features, rendered_world_60, monkeypatch, capsys
):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    script = experiment("chat_vlm_ceiling")
    made, labelled = [], set()
    real = script.visible_image_labels

    def spy(owners, *rest):
        made.append(owners)
        by_owner = real(owners, *rest)

        def label_image(image_id, *args):
            labelled.add(image_id)
            return by_owner(image_id, *args)

        return label_image

    monkeypatch.setattr(script, "visible_image_labels", spy)
    monkeypatch.setattr(
        sys, "argv",
        ["chat_vlm_ceiling.py", str(rendered_world_60), "--features", features, "--epochs", "1",
         "--visible-owner", "-o", "pretrain_epochs=1", *TINY],
    )  # fmt: skip
    script.main()
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["visible_owner"] is True and out["val_questions"] > 0
    # oracle: the train and val features; tower: the training images, the held-out ones
    # and the val objects (val images both): both splits labelled by their visible owner
    data = script.GQAData(rendered_world_60)
    assert len(made) == (2 if features == "oracle" else 3)
    for split in ("train", "val"):
        assert labelled & set(data.scene_graphs(split)), split


def test_visible_owner_is_refused_with_another_label_rule_or_reduced_scenes(
    experiment, rendered_world_60, monkeypatch, capsys
):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    script = experiment("chat_vlm_ceiling")
    for args, message in (
        (["-o", "patch_labels=overlap"], "--visible-owner replaces the centre rule"),
        (["--reduce", "0.5"], "--reduce drops objects the renderer painted"),
    ):
        monkeypatch.setattr(
            sys, "argv",
            ["chat_vlm_ceiling.py", str(rendered_world_60), "--features", "oracle",
             "--visible-owner", *args],
        )  # fmt: skip
        with pytest.raises(SystemExit):
            script.main()
        assert message in capsys.readouterr().err
