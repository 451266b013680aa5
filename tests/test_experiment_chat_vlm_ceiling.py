"""experiments/chat_vlm_ceiling.py: oracle patch features on a hand-worked scene, and
both feature kinds end to end on a small rendered world."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_oracle_features_sum_the_patch_objects_name_and_attribute_embeddings(experiment):
    script = experiment("chat_vlm_ceiling")
    # a 2 × 2 grid over a 100 × 50 image: patch centres (25, 12.5) (75, 12.5) (25, 37.5)
    # (75, 37.5); "table" (brown) covers the left half, "cup" (white, small; smaller, on
    # top) the top-left quarter; "ghost" is not in the name index: its patch is background
    scene = {
        "width": 100,
        "height": 50,
        "objects": {
            "1": {"name": "table", "x": 0, "y": 0, "w": 50, "h": 50, "attributes": ["brown"]},
            "2": {
                "name": "cup",
                "x": 10,
                "y": 5,
                "w": 30,
                "h": 15,
                "attributes": ["white", "small"],
            },
            "3": {"name": "ghost", "x": 60, "y": 30, "w": 30, "h": 15, "attributes": ["white"]},
        },
    }
    names = {"background": 0, "table": 1, "cup": 2}
    attrs = {"white": 0, "brown": 1, "small": 2}
    by_name = torch.tensor([[1.0, 0.0], [10.0, 0.0], [100.0, 0.0]])
    by_attr = torch.tensor([[0.0, 1.0], [0.0, 10.0], [0.0, 100.0]])
    features = script.oracle_features({"i": scene}, ["i"], 2, names, attrs, (by_name, by_attr))
    # top left: cup + white + small; top right: background; bottom left: table + brown;
    # bottom right: the unknown "ghost" → background name, its attribute still white
    expected = [[100.0, 101.0], [1.0, 0.0], [10.0, 10.0], [1.0, 1.0]]
    assert features.shape == (1, 4, 2)
    assert features[0].tolist() == expected


def test_oracle_features_under_the_overlap_rule_show_a_box_between_patch_centres(experiment):
    script = experiment("chat_vlm_ceiling")
    # a 10 × 10 "ant" at the middle of a 100 × 100 image in 2 × 2 patches covers no patch
    # centre but touches all four patches
    ant = {"name": "ant", "x": 45, "y": 45, "w": 10, "h": 10, "attributes": ["red"]}
    scene = {"width": 100, "height": 100, "objects": {"1": ant}}
    embeddings = (torch.tensor([[1.0, 0.0], [10.0, 0.0]]), torch.tensor([[0.0, 5.0]]))
    args = ({"i": scene}, ["i"], 2, {"background": 0, "ant": 1}, {"red": 0}, embeddings)
    assert script.oracle_features(*args)[0].tolist() == [[1.0, 0.0]] * 4
    assert script.oracle_features(*args, "overlap")[0].tolist() == [[10.0, 5.0]] * 4


def run(script, monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["chat_vlm_ceiling.py", *args])
    script.main()
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


TINY = ["-o", "vision_dim=32", "-o", "vision_layers=1", "-o", "text_dim=32", "-o", "image_size=32"]


@pytest.mark.parametrize("features", ["oracle", "tower"])
def test_one_epoch_prints_the_val_exact_match(
    experiment, features, rendered_world_60, monkeypatch, capsys
):
    script = experiment("chat_vlm_ceiling")
    out = run(
        script, monkeypatch, capsys, str(rendered_world_60), "--features", features,
        "--epochs", "1", "-o", "pretrain_epochs=1", "-o", "patch_labels=overlap", *TINY,
    )  # fmt: skip
    val = script.answered(script.GQAData(rendered_world_60), "val")
    assert out["features"] == features
    assert out["val_questions"] == len(val) > 0
    assert out["options"]["vision_dim"] == 32 and out["options"]["pretrain_epochs"] == 1
    for key in ("val_exact", "val_exact_text_only"):
        assert 0.0 <= out[key] <= 100.0
    # the tower is pre-trained and measured on held-out images; oracle features need no pixels
    measured = {"name_acc", "object_name_acc", "held_out_name_acc", "held_out_object_name_acc"}
    assert measured <= set(out["pretrain"]) if features == "tower" else out["pretrain"] == {}
    assert out["last_epoch"]["epoch"] == 1 and len(out["epoch_acc"]) == 1
    assert out["options"]["patch_labels"] == "overlap"
    # every val question in exactly one size group, each group's figures percentages
    groups = out["val_exact_by_side"]
    assert sum(g["questions"] for g in groups.values()) == out["val_questions"]
    for g in groups.values():
        assert 0.0 <= g["val_exact"] <= 100.0 and 0.0 <= g["val_exact_text_only"] <= 100.0
        assert g["gain"] == pytest.approx(g["val_exact"] - g["val_exact_text_only"], abs=0.02)
        assert g["gain_interval"][0] <= g["gain"] <= g["gain_interval"][1]


def naming(object_id):
    """A record on image "i" whose question names ``object_id``."""
    return {"imageId": "i", "annotations": {"question": {"0": object_id}}}


def test_exact_by_side_scores_each_size_group_with_and_without_the_image(experiment):
    script = experiment("chat_vlm_ceiling")
    # a 100 × 100 image at a 32-pixel input: sides 8 (s), 16 (m) and 32 (l) px
    box = {"name": "cup", "x": 0, "y": 0}
    objects = {k: {**box, "w": w, "h": w} for k, w in (("s", 25), ("m", 50), ("l", 100))}
    scenes = {"i": {"width": 100, "height": 100, "objects": objects}}
    records = [naming("s"), naming("s"), naming("m"), naming("l"), naming("ghost")]
    with_image = [True, True, False, True, False]
    text_only = [False, True, False, True, True]
    out = script.exact_by_side(records, scenes, 32, with_image, text_only)
    assert list(out) == ["under 12 px", "12-24 px", "24 px and up", "no annotated object"]
    # differences 1 and 0: a resample of the two is 0, 50 or 100 points (1/4, 1/2, 1/4)
    assert out["under 12 px"] == {
        "questions": 2, "val_exact": 100.0, "val_exact_text_only": 50.0, "gain": 50.0,
        "gain_interval": [0.0, 100.0],
    }  # fmt: skip
    assert out["12-24 px"] == {
        "questions": 1, "val_exact": 0.0, "val_exact_text_only": 0.0, "gain": 0.0,
        "gain_interval": [0.0, 0.0],
    }  # fmt: skip
    assert out["24 px and up"]["gain"] == 0.0
    assert out["no annotated object"]["gain"] == -100.0
    assert out["no annotated object"]["gain_interval"] == [-100.0, -100.0]
    # an empty group is left out
    assert list(script.exact_by_side(records[:1], scenes, 32, [True], [True])) == ["under 12 px"]


@pytest.mark.parametrize("ground_from", ["question", "answer"])
def test_grounding_supervision_reaches_the_answering_stage(
    experiment, rendered_world_60, monkeypatch, capsys, ground_from
):
    """Both kinds of pairs reach the training: from the answer, one pair per grounded
    question, at the prompt's last position."""
    script = experiment("chat_vlm_ceiling")
    seen = []
    real = script.fit.train_language

    def spy(model, features, train, *args):
        seen.extend(train)
        return real(model, features, train, *args)

    monkeypatch.setattr(script.fit, "train_language", spy)
    out = run(
        script, monkeypatch, capsys, str(rendered_world_60), "--features", "oracle",
        "--epochs", "1", "-o", "ground_tokens=1.0", "-o", f"ground_from={ground_from}", *TINY,
    )  # fmt: skip
    assert 0.0 < out["last_epoch"]["ground_mass"] <= 1.0
    grounded = [ex for ex in seen if ex.grounded]
    assert grounded
    at_end = [len(ex.grounded) == 1 and ex.grounded[0][0] == len(ex.with_image) - 1
              for ex in grounded]  # fmt: skip
    assert all(at_end) if ground_from == "answer" else not any(at_end)


def test_scene_questions_reach_the_answering_stage(
    experiment, rendered_world_60, monkeypatch, capsys
):
    script = experiment("chat_vlm_ceiling")
    data = script.GQAData(rendered_world_60)
    out = run(
        script, monkeypatch, capsys, str(rendered_world_60), "--features", "oracle",
        "--epochs", "1", "-o", "scene_questions=2", *TINY,
    )  # fmt: skip
    assert out["train_questions"] > len(script.answered(data, "train"))


def test_no_answering_epochs_measure_the_pre_trained_tower_alone(
    experiment, rendered_world_60, monkeypatch, capsys
):
    script = experiment("chat_vlm_ceiling")
    out = run(
        script, monkeypatch, capsys, str(rendered_world_60), "--features", "tower",
        "--epochs", "0", "-o", "pretrain_epochs=1", *TINY,
    )  # fmt: skip
    assert 0.0 <= out["pretrain"]["held_out_object_name_acc"] <= 100.0
    assert "val_exact" not in out and "last_epoch" not in out
    # the val objects read whole; the per-patch figures are --features predicted's
    assert list(out["perception"]) == ["as_objects"]
    assert 0.0 <= out["perception"]["as_objects"]["object_name_acc"] <= 100.0


def test_options_are_read_as_vqadiag_train_reads_them(experiment, monkeypatch, capsys):
    from vqadiag.errors import DataError

    script = experiment("chat_vlm_ceiling")
    argv = ["chat_vlm_ceiling.py", "w", "--features", "tower"]
    monkeypatch.setattr(sys, "argv", [*argv, "-o", "x"])
    with pytest.raises(DataError, match="expected KEY=VALUE"):
        script.main()
    monkeypatch.setattr(sys, "argv", [*argv, "-o", "epochs=3"])
    with pytest.raises(DataError, match="use --epochs"):
        script.main()
    # values are JSON, as `-o question_first=false` is
    monkeypatch.setattr(script, "GQAData", lambda path: path)
    monkeypatch.setattr(
        script, "run", lambda data, kind, opts, *rest: {"qf": opts["question_first"]}
    )
    out = run(script, monkeypatch, capsys, *argv[1:], "-o", "question_first=false", "-o", "lr=0.01")
    assert out["qf"] is False and out["options"] == {"lr": 0.01, "question_first": False}


def test_program_objects_reads_the_ids_of_the_programs_arguments(experiment):
    script = experiment("chat_vlm_ceiling")
    record = {
        "semantic": [
            {"operation": "select", "argument": "cup (12)"},
            {"operation": "relate", "argument": "table,on,o (7)"},
            {"operation": "query", "argument": "color"},
        ]
    }
    assert script.program_objects(record) == {"12", "7"}
    assert script.program_objects({"question": "Which place is this?"}) == set()
    # several ids in one argument, and "-" for none, as real GQA programs write them
    several = {"semantic": [{"argument": "apple (12,13)"}, {"argument": "pear (-)"}]}
    assert script.program_objects(several) == {"12", "13"}


def test_reduced_scenes_keep_the_programs_objects_and_others_up_to_keep(experiment):
    script = experiment("chat_vlm_ceiling")
    np = pytest.importorskip("numpy")
    objects = {str(i): {"name": f"n{i}", "x": i, "y": 0, "w": 1, "h": 1} for i in range(6)}
    scenes = {"a": {"width": 10, "height": 10, "objects": objects}}
    select = [{"operation": "select", "argument": "n1 (1)"}]
    records = [{"imageId": "a", "question": f"q{i}", "semantic": select} for i in range(40)]
    records += [{"imageId": "a", "question": "place?"}, {"imageId": "b", "semantic": select}]
    image_ids = ["a", "b"]
    moved = script.reduce_scenes(np.random.default_rng(0), records, scenes, image_ids, 0.5, 3)
    copies = [r for r in records if "#" in r["imageId"]]
    assert moved == len(copies) and 10 < moved < 30  # about half of the 40 that can be
    assert image_ids[:2] == ["a", "b"] and image_ids[2:] == [r["imageId"] for r in copies]
    for r in copies:
        row = int(r["imageId"].split("#")[1])
        assert r["question"] == f"q{row}"  # re-pointed in place
        kept = scenes[r["imageId"]]["objects"]
        assert "1" in kept and len(kept) == 3 and all(kept[i] == objects[i] for i in kept)
    assert records[40]["imageId"] == "a" and records[41]["imageId"] == "b"  # no program, no scene


def test_reduce_needs_oracle_features_and_a_share_in_0_to_1(
    experiment, rendered_world_60, monkeypatch, capsys
):
    script = experiment("chat_vlm_ceiling")
    for args, message in (
        (["--features", "tower", "--reduce", "0.5"], "--reduce needs --features oracle"),
        (["--features", "oracle", "--reduce", "2"], "need 0 <= --reduce <= 1"),
    ):
        monkeypatch.setattr(sys, "argv", ["chat_vlm_ceiling.py", str(rendered_world_60), *args])
        with pytest.raises(SystemExit):
            script.main()
        assert message in capsys.readouterr().err


def test_reduced_oracle_run_counts_its_copies(experiment, rendered_world_60, monkeypatch, capsys):
    script = experiment("chat_vlm_ceiling")
    out = run(
        script, monkeypatch, capsys, str(rendered_world_60), "--features", "oracle",
        "--epochs", "1", "--reduce", "0.5", *TINY,
    )  # fmt: skip
    train = script.answered(script.GQAData(rendered_world_60), "train")
    assert 0 < out["reduced"] < len(train) and out["train_questions"] == len(train)


def test_oracle_embedding_layouts_reach_the_run_and_are_refused_where_they_cannot_hold(
    experiment, rendered_world_60, monkeypatch, capsys
):
    script = experiment("chat_vlm_ceiling")
    world = str(rendered_world_60)
    out = run(
        script, monkeypatch, capsys, world, "--features", "oracle", "--epochs", "1",
        "--embeddings", "split", *TINY,
    )  # fmt: skip
    assert out["embeddings"] == "split" and 0.0 <= out["val_exact"] <= 100.0
    monkeypatch.setattr(
        sys, "argv", ["chat_vlm_ceiling.py", world, "--features", "oracle", "--epochs", "1",
                      "--embeddings", "orthogonal", *TINY],
    )  # fmt: skip
    with pytest.raises(SystemExit, match=r"attributes need -o vision_dim=\d+ or more"):
        script.main()
    monkeypatch.setattr(
        sys, "argv", ["chat_vlm_ceiling.py", world, "--features", "tower", "--embeddings", "split"]
    )
    with pytest.raises(SystemExit):
        script.main()
    assert "--embeddings needs --features oracle" in capsys.readouterr().err


def test_mislabel_names_renames_object_patches_only_and_always_to_another_object(experiment):
    np = pytest.importorskip("numpy")
    script = experiment("chat_vlm_ceiling")
    labels = np.array([[0, 1, 2, 3], [3, 0, 1, 2]])
    same = script.mislabel_names(labels, 0.0, 4, np.random.default_rng(0))
    assert same.tolist() == labels.tolist() and same is not labels
    renamed = script.mislabel_names(labels, 1.0, 4, np.random.default_rng(0))
    objects = labels > 0
    assert (renamed[~objects] == 0).all()  # the background stays background
    assert (renamed[objects] != labels[objects]).all()  # every object patch renamed ...
    assert ((renamed[objects] >= 1) & (renamed[objects] <= 3)).all()  # ... to an object
    # with names 1 and 2 only, the one other name is the other
    two = np.array([1, 2, 0, 2])
    assert script.mislabel_names(two, 1.0, 3, np.random.default_rng(5)).tolist() == [2, 1, 0, 1]
    # no other name to give: unchanged
    assert script.mislabel_names(np.array([1, 0]), 1.0, 2, np.random.default_rng(0)).tolist() == [
        1, 0
    ]  # fmt: skip
    many = np.ones(20000, dtype=np.int64)
    share = (script.mislabel_names(many, 0.25, 10, np.random.default_rng(1)) != 1).mean()
    assert 0.24 < share < 0.26
    drawn = script.mislabel_names(many, 1.0, 10, np.random.default_rng(2))
    assert set(np.unique(drawn).tolist()) == set(range(2, 10))  # every other name is drawn


def test_name_noise_reaches_the_oracle_features_and_is_refused_elsewhere(
    experiment, rendered_world_60, monkeypatch, capsys
):
    script = experiment("chat_vlm_ceiling")
    world = str(rendered_world_60)
    seen = []
    real = script.mislabel_names

    def spy(labels, share, n_names, rng):
        out = real(labels, share, n_names, rng)
        seen.append((share, int((labels > 0).sum()), int((out != labels).sum())))
        return out

    monkeypatch.setattr(script, "mislabel_names", spy)
    out = run(
        script, monkeypatch, capsys, world, "--features", "oracle", "--epochs", "1",
        "--name-noise", "0.5", *TINY,
    )  # fmt: skip
    assert out["name_noise"] == 0.5 and 0.0 <= out["val_exact"] <= 100.0
    assert [s[0] for s in seen] == [0.5, 0.5]  # the train and the val features
    assert all(0 < changed < objects for _, objects, changed in seen)
    refused(script, monkeypatch, capsys, world, (
        (["--features", "tower", "--name-noise", "0.5"], "--name-noise needs --features oracle"),
        (["--features", "oracle", "--name-noise", "1.5"], "need 0 <= --name-noise <= 1"),
    ))  # fmt: skip


def refused(script, monkeypatch, capsys, world, cases):
    """Each ``(arguments, message)`` of ``cases`` stops the script with ``message``."""
    for args, message in cases:
        monkeypatch.setattr(sys, "argv", ["chat_vlm_ceiling.py", world, *args])
        with pytest.raises(SystemExit):
            script.main()
        assert message in capsys.readouterr().err


def test_the_tower_pre_trains_on_another_worlds_train_split(
    experiment, rendered_world_60, tmp_path, monkeypatch, capsys
):
    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.synth import generate_world

    script = experiment("chat_vlm_ceiling")
    other = tmp_path / "other"
    generate_world(other, images=20, seed=5)
    shown_ids = sorted(GQAData(other).scene_graphs("train"))
    seen = []
    real = script.cdata.pixel_values

    def spy(processor, data, image_ids, *rest):
        seen.append((data.root, list(image_ids)))
        return real(processor, data, image_ids, *rest)

    monkeypatch.setattr(script.cdata, "pixel_values", spy)
    out = run(
        script, monkeypatch, capsys, str(rendered_world_60), "--features", "tower",
        "--epochs", "1", "--pretrain-world", str(other), "-o", "pretrain_epochs=1", *TINY,
    )  # fmt: skip
    assert out["pretrain_world"] == str(other) and out["pretrain"]["images"] == len(shown_ids)
    # the tower sees the other world's images; the answers are fitted and scored on this one
    assert seen[0] == (other, shown_ids)
    assert [root for root, _ in seen[1:]] == [rendered_world_60] * (len(seen) - 1)
    assert 0.0 <= out["pretrain"]["held_out_object_name_acc"] <= 100.0
    assert 0.0 <= out["val_exact"] <= 100.0


def test_a_pretraining_world_gives_its_own_images_and_indices(
    experiment, rendered_world_60, monkeypatch, capsys
):
    from vqadiag.data.model_inputs.gqa_data import GQAData

    script = experiment("chat_vlm_ceiling")
    data = GQAData(rendered_world_60)
    scenes, names, attrs = script.cdata.patch_vocabulary(data, "train", 8)
    same = script.pretraining_images(data, data, scenes, ["x"], names, attrs, 8)
    assert same[2] == sorted(scenes) and same[3] == names
    alone = script.pretraining_images(data, None, scenes, ["x"], names, attrs, 8)
    assert alone[0] is data and alone[2] == ["x"]
    world = str(rendered_world_60)
    for args, message in (
        (["--features", "oracle"], "--pretrain-world needs --features tower"),
        (["--features", "tower", "--visible-owner"], "leave one out"),
    ):
        argv = ["chat_vlm_ceiling.py", world, "--pretrain-world", world, *args]
        monkeypatch.setattr(sys, "argv", argv)
        with pytest.raises(SystemExit):
            script.main()
        assert message in capsys.readouterr().err


def test_predicted_features_check_the_pretraining_worlds_width_before_pretraining(
    experiment, rendered_world_60, tmp_path, monkeypatch, capsys
):
    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.synth import generate_world

    script = experiment("chat_vlm_ceiling")
    answering = tmp_path / "answering"
    generate_world(answering, images=20, seed=5)

    def width(world):
        _, names, attrs = script.cdata.patch_vocabulary(GQAData(world), "train", 64)
        return len(names) + len(attrs)

    # wide enough for the answering world's indices, too narrow for the tower's
    fits = -(-width(answering) // 4) * 4  # a multiple of the tower's 4 heads
    assert fits < width(rendered_world_60)
    monkeypatch.setattr(script.fit, "pretrain_vision", lambda *a: pytest.fail("pre-trained"))
    monkeypatch.setattr(
        sys, "argv", ["chat_vlm_ceiling.py", str(answering), "--features", "predicted",
                      "--embeddings", "orthogonal", "--pretrain-world", str(rendered_world_60),
                      "-o", f"vision_dim={fits}", "-o", "aux_attributes=64"],
    )  # fmt: skip
    expected = rf"pre-training world's .* need -o vision_dim={width(rendered_world_60)} or more"
    with pytest.raises(SystemExit, match=expected):
        script.main()


def test_mislabel_attributes_gives_object_patches_another_patchs_attributes(experiment):
    np = pytest.importorskip("numpy")
    script = experiment("chat_vlm_ceiling")
    # one image of 4 patches: background, then objects whose attributes are rows of a
    # 3 × 3 identity, so that each object patch's attributes tell which patch they are
    names = np.array([[0, 1, 2, 1]])
    attrs = np.array([[[1, 1, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1]]], dtype=np.float32)
    same = script.mislabel_attributes(names, attrs, 0.0, np.random.default_rng(0))
    assert same.tolist() == attrs.tolist() and same is not attrs
    moved = script.mislabel_attributes(names, attrs, 1.0, np.random.default_rng(0))
    assert moved[0, 0].tolist() == [1, 1, 1]  # the background keeps its own
    rows = [attrs[0, 1:].tolist().index(row) + 1 for row in moved[0, 1:].tolist()]
    assert all(row != patch for patch, row in zip((1, 2, 3), rows, strict=True))
    assert names.tolist() == [[0, 1, 2, 1]]  # names untouched
    # with two object patches the other is the one to take
    two = script.mislabel_attributes(names[:, :3], attrs[:, :3], 1.0, np.random.default_rng(3))
    assert two[0, 1:].tolist() == [[0, 1, 0], [1, 0, 0]]
    # one object patch has no other: unchanged
    one = script.mislabel_attributes(names[:, :2], attrs[:, :2], 1.0, np.random.default_rng(0))
    assert one.tolist() == attrs[:, :2].tolist()
    many_names = np.ones((1, 20000), dtype=np.int64)
    many = np.eye(20000, dtype=np.float32)[None]  # each patch its own attribute
    changed = script.mislabel_attributes(many_names, many, 0.25, np.random.default_rng(1))
    assert 0.24 < (changed[0].argmax(-1) != np.arange(20000)).mean() < 0.26


def test_perception_counts_object_patches_names_and_attributes(experiment):
    np = pytest.importorskip("numpy")
    script = experiment("chat_vlm_ceiling")
    # 4 patches: background (left out), then 3 object patches of true attributes
    # {0}, {0, 1}, {} seen as name right / wrong / right with {0}, {0}, {1}
    truth_names = np.array([[0, 1, 2, 3]])
    truth_attrs = np.array([[[1, 1], [1, 0], [1, 1], [0, 0]]], dtype=np.float32)
    seen_names = np.array([[5, 1, 1, 3]])
    seen_attrs = np.array([[[0, 0], [1, 0], [1, 0], [0, 1]]], dtype=np.float32)
    got = script.perception((seen_names, seen_attrs), (truth_names, truth_attrs))
    # names: 2 of 3; every attribute right: the first only (1 of 3); perceived 3
    # attributes, 2 of them true (precision 2/3); 3 true ones, 2 perceived (recall 2/3)
    assert got == {
        "object_patches": 3,
        "object_name_acc": 66.67,
        "object_attributes_exact": 33.33,
        "attribute_precision": 66.67,
        "attribute_recall": 66.67,
    }
    # per attribute: "a" (index 0) is true on 2 object patches and perceived on those 2
    # only; "b" (index 1) is true on 1 and perceived on another one
    by = script.perception((seen_names, seen_attrs), (truth_names, truth_attrs), {"b": 1, "a": 0})
    assert list(by["by_attribute"]) == ["a", "b"]  # the most frequent first
    assert by["by_attribute"] == {
        "a": {"patches": 2, "recall": 100.0, "precision": 100.0},
        "b": {"patches": 1, "recall": 0.0, "precision": 0.0},
    }
    # by the size of the object shown: the first object patch under 12 px (all right),
    # the other two 24 px and up (one name right, no attribute set exact, one of the two
    # perceived attributes true and one of the two true ones perceived); no 12-24 group
    sides = np.array([[-1, 0, 2, 2]])
    got = script.perception((seen_names, seen_attrs), (truth_names, truth_attrs), sides=sides)
    assert got["by_side"] == {
        "under 12 px": {
            "object_patches": 1, "object_name_acc": 100.0, "object_attributes_exact": 100.0,
            "attribute_precision": 100.0, "attribute_recall": 100.0,
        },
        "24 px and up": {
            "object_patches": 2, "object_name_acc": 50.0, "object_attributes_exact": 0.0,
            "attribute_precision": 50.0, "attribute_recall": 50.0,
        },
    }  # fmt: skip


def test_object_perception_names_each_object_from_the_mean_of_its_patches(experiment):
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    script = experiment("chat_vlm_ceiling")
    # one image of 4 patches: background, an object of name 1 on two patches, and an
    # object of name 2 on one; the identity name head reads the second patch of object 1
    # alone as name 2 (wrong), their mean (0, 1, 0.75) as name 1 (right)
    states = torch.tensor([[[5.0, 5.0, 5.0], [0.0, 3.0, 0.0], [0.0, -1.0, 1.5], [0.0, 0.0, 1.0]]])
    name_head, attr_head = torch.nn.Linear(3, 3), torch.nn.Linear(3, 1)
    with torch.no_grad():
        name_head.weight.copy_(torch.eye(3))
        name_head.bias.zero_()
        attr_head.weight.copy_(torch.tensor([[0.0, 1.0, -1.0]]))
        attr_head.bias.zero_()
    heads = torch.nn.ModuleList([name_head, attr_head])
    names = np.array([[0, 1, 1, 2]])
    attrs = np.array([[[0.0], [1.0], [1.0], [1.0]]], dtype=np.float32)
    # attribute logit (0, 1, −1)·state: object 1's mean 0.25, above 0, true: right;
    # object 2's −1, not above 0, against a true attribute: wrong
    got = script.object_perception(heads, states, (names, attrs), np.array([[-1, 2, 2, 0]]))
    assert got == {
        "objects": 2, "object_name_acc": 100.0, "object_attributes_exact": 50.0,
        "by_side": {
            "under 12 px": {"objects": 1, "object_name_acc": 100.0,
                            "object_attributes_exact": 0.0},
            "24 px and up": {"objects": 1, "object_name_acc": 100.0,
                             "object_attributes_exact": 100.0},
        },
    }  # fmt: skip


def test_predicted_features_read_the_towers_heads_as_clean_sums(
    experiment, rendered_world_60, monkeypatch, capsys
):
    script = experiment("chat_vlm_ceiling")
    seen = []
    real = script.predicted_labels

    def spy(heads, features):
        out = real(heads, features)
        seen.append((len(features), out))
        return out

    monkeypatch.setattr(script, "predicted_labels", spy)
    built = []
    clean = script.clean_features
    monkeypatch.setattr(
        script, "clean_features", lambda labels, emb: built.append(clean(labels, emb)) or built[-1]
    )
    out = run(
        script, monkeypatch, capsys, str(rendered_world_60), "--features", "predicted",
        "--epochs", "1", "-o", "pretrain_epochs=1", *TINY,
    )  # fmt: skip
    data = script.GQAData(rendered_world_60)
    train, val = script.answered(data, "train"), script.answered(data, "val")
    counts = [len({r["imageId"] for r in part}) for part in (train, val)]
    assert [n for n, _ in seen] == counts  # the train images, then the val images
    for _, (names, attrs) in seen:
        assert names.dtype.kind == "i" and set(np.unique(attrs).tolist()) <= {0.0, 1.0}
    # 32 px in 16-px patches: 4 per image
    assert [tuple(f.shape[:2]) for f in built] == [(counts[0], 4), (counts[1], 4)]
    assert out["perception"]["object_patches"] > 0
    for key in ("object_name_acc", "object_attributes_exact", "attribute_recall"):
        assert 0.0 <= out["perception"][key] <= 100.0
    # every object patch falls in one size group
    by_side = out["perception"]["by_side"]
    assert sum(g["object_patches"] for g in by_side.values()) == out["perception"]["object_patches"]
    # each object once, on one or more of its patches
    objects = out["perception"]["as_objects"]
    assert 0 < objects["objects"] <= out["perception"]["object_patches"]
    assert sum(g["objects"] for g in objects["by_side"].values()) == objects["objects"]
    assert "held_out_object_name_acc" in out["pretrain"] and 0.0 <= out["val_exact"] <= 100.0


def test_attribute_noise_reaches_the_oracle_features_and_is_refused_elsewhere(
    experiment, rendered_world_60, monkeypatch, capsys
):
    script = experiment("chat_vlm_ceiling")
    world = str(rendered_world_60)
    seen = []
    real = script.mislabel_attributes

    def spy(names, attrs, share, rng):
        out = real(names, attrs, share, rng)
        seen.append((share, int((out != attrs).any(-1).sum())))
        return out

    monkeypatch.setattr(script, "mislabel_attributes", spy)
    out = run(
        script, monkeypatch, capsys, world, "--features", "oracle", "--epochs", "1",
        "--attr-noise", "0.5", *TINY,
    )  # fmt: skip
    assert out["attr_noise"] == 0.5 and "name_noise" not in out
    assert [s[0] for s in seen] == [0.5, 0.5] and all(changed > 0 for _, changed in seen)
    refused(script, monkeypatch, capsys, world, (
        (["--features", "tower", "--attr-noise", "0.5"], "--attr-noise needs --features oracle"),
        (["--features", "oracle", "--attr-noise", "-0.1"], "need 0 <= --attr-noise <= 1"),
    ))  # fmt: skip


def test_attributes_keep_only_the_categories_asked(
    experiment, rendered_world_60, monkeypatch, capsys
):
    script = experiment("chat_vlm_ceiling")
    attrs = {"large": 0, "red": 1, "wood": 2, "old": 3, "blue": 4}
    assert script.kept_attributes(attrs, ["colour"]) == {"red": 0, "blue": 1}
    assert script.kept_attributes(attrs, ["size", "material"]) == {"large": 0, "wood": 1}
    assert script.kept_attributes(attrs, ["state", "colour", "size", "material"]) == attrs
    seen = []
    real = script.oracle_features

    def spy(scenes, image_ids, grid, names, attrs, *rest):
        seen.append(dict(attrs))
        return real(scenes, image_ids, grid, names, attrs, *rest)

    monkeypatch.setattr(script, "oracle_features", spy)
    world = str(rendered_world_60)
    out = run(
        script, monkeypatch, capsys, world, "--features", "oracle", "--epochs", "1",
        "--attributes", "colour", *TINY,
    )  # fmt: skip
    colours = set(script.taxonomy.COLORS)
    assert out["attributes"] == ["colour"] and len(seen) == 2  # train, then val
    assert seen[0] == seen[1] and seen[0] and set(seen[0]) <= colours
    assert sorted(seen[0].values()) == list(range(len(seen[0])))
    refused(script, monkeypatch, capsys, world, (
        (["--features", "oracle", "--attributes", "colour,shape"], "not ['shape']"),
    ))  # fmt: skip


def test_attributes_narrow_the_towers_pretraining_labels_and_heads(
    experiment, rendered_world_60, monkeypatch, capsys
):
    script = experiment("chat_vlm_ceiling")
    made = []
    real = script.fit.pretraining_heads

    def spy(model, n_names, n_attrs):
        made.append(n_attrs)
        return real(model, n_names, n_attrs)

    monkeypatch.setattr(script.fit, "pretraining_heads", spy)
    world = str(rendered_world_60)
    out = run(
        script, monkeypatch, capsys, world, "--features", "predicted", "--epochs", "0",
        "--attributes", "colour,material", "-o", "pretrain_epochs=1", *TINY,
    )  # fmt: skip
    data = script.GQAData(rendered_world_60)
    _, _, attrs = script.cdata.patch_vocabulary(data, "train", 64)  # the recipe's 64
    kept = script.kept_attributes(attrs, ["colour", "material"])
    assert 0 < len(kept) < len(attrs) and made == [len(kept)]
    allowed = set(script.taxonomy.COLORS) | set(script.taxonomy.MATERIALS)
    assert out["attributes"] == ["colour", "material"]
    assert out["perception"]["by_attribute"]
    assert set(out["perception"]["by_attribute"]) <= allowed
    # a pre-training world's labels are narrowed alike
    shown = script.pretraining_images(data, data, {}, [], {}, kept, 64, ("colour", "material"))
    assert shown[4] == kept
