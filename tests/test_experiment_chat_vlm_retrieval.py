"""experiments/chat_vlm_retrieval.py: its features and its baseline on hand-worked
scenes, and one tiny run end to end."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_features_put_name_plus_colour_on_the_objects_patches(experiment):
    script = experiment("chat_vlm_retrieval")
    by_name = torch.tensor([[1.0, 0.0], [10.0, 0.0], [100.0, 0.0]])
    by_colour = torch.tensor([[0.0, 1.0], [0.0, 10.0]])
    # name 1 (row 2 of by_name) in colour 1 on patch 3; name 0 (row 1) in colour 0 on patch 0
    scene = script.Scene(np.array([1, 0]), np.array([1, 0]), np.array([3, 0]))
    out = script.features([scene], 4, (by_name, by_colour))
    assert out.tolist() == [[[10.0, 1.0], [1.0, 0.0], [1.0, 0.0], [100.0, 10.0]]]


def test_present_colours_answers_the_images_most_common_colour(experiment):
    script = experiment("chat_vlm_retrieval")
    patches = np.array([0, 1, 2])
    drawn = [
        script.Scene(np.array([0, 1, 2]), np.array([0, 0, 1]), patches),  # colour 0 twice
        script.Scene(np.array([0, 1, 2]), np.array([2, 3, 3]), patches[::-1]),
        script.Scene(np.array([0, 1]), np.array([4, 5]), patches[:2]),  # a tie of two
    ]
    records = [
        {"imageId": "v0", "object": 1},  # colour 0, the most common: right
        {"imageId": "v0", "object": 2},  # colour 1: wrong
        {"imageId": "v1", "object": 0},  # colour 2, not the most common (3): wrong
        {"imageId": "v2", "object": 0},  # colour 4, one of two tied: 1/2
    ]
    assert script.present_colours(drawn, records) == pytest.approx(100.0 * 1.5 / 4)


def test_questions_ask_about_distinct_objects_of_their_image(experiment):
    script = experiment("chat_vlm_retrieval")
    rng = np.random.default_rng(0)
    drawn = script.scenes(rng, 5, objects=4, names=10, colours=3, patches=16)
    records = script.questions(rng, drawn, 3, "t")
    assert len(records) == 15
    for row, scene in enumerate(drawn):
        mine = [r for r in records if r["imageId"] == f"t{row}"]
        assert len({r["object"] for r in mine}) == 3
        for r in mine:
            name = script.NAMES[scene.names[r["object"]]]
            assert r["question"] == f"What is the color of the {name}?"
            assert r["answer"] == script.COLOURS[scene.colours[r["object"]]]
        assert len(set(scene.patches)) == 4 and len(set(scene.names)) == 4


def test_prior_gives_objects_their_names_own_colour(experiment):
    script = experiment("chat_vlm_retrieval")
    # prior 0 draws names, colours, patches and nothing else, in that order, so the
    # figures docs/chat-vlm.md gives without --prior reproduce
    even = script.scenes(np.random.default_rng(0), 5, 3, 10, 4, 16)
    rng = np.random.default_rng(0)
    for scene in even:
        assert scene.names.tolist() == rng.choice(10, 3, replace=False).tolist()
        assert scene.colours.tolist() == rng.integers(0, 4, 3).tolist()
        assert scene.patches.tolist() == rng.choice(16, 3, replace=False).tolist()
    drawn = script.scenes(np.random.default_rng(0), 400, 3, 10, 4, 16, prior=0.75)
    own = np.concatenate([s.colours == s.names % 4 for s in drawn])
    # own colour with probability 0.75, else drawn evenly (1/4 of which is the own one too)
    assert own.mean() == pytest.approx(0.75 + 0.25 / 4, abs=0.03)


def test_name_colours_counts_answers_that_are_the_names_own_colour(experiment):
    script = experiment("chat_vlm_retrieval")
    patches = np.array([0, 1, 2])
    drawn = [script.Scene(np.array([5, 2, 3]), np.array([1, 2, 0]), patches)]  # 5 mod 4 = 1
    records = [{"imageId": "v0", "object": j} for j in range(3)]  # own, own, 3 mod 4 = 3: no
    assert script.name_colours(drawn, records, colours=4) == pytest.approx(200.0 / 3)


def test_one_tiny_run_prints_its_figures(experiment, monkeypatch, capsys):
    script = experiment("chat_vlm_retrieval")
    argv = [
        "chat_vlm_retrieval.py", "--epochs", "1", "--train-images", "20", "--val-images",
        "10", "--colours", "4", "-o", "text_dim=32", "-o", "vision_dim=32",
    ]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    script.main()
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["train_questions"] == 120 and out["val_questions"] == 30
    assert out["chance"] == 25.0
    assert out["options"] == {"text_dim": 32, "vision_dim": 32}
    for key in (
        "present_colours", "name_colours", "val_exact", "val_exact_text_only", "answers_present"
    ):  # fmt: skip
        assert 0.0 <= out[key] <= 100.0
    assert len(out["epoch_acc"]) == 1


def test_more_objects_than_names_is_refused(experiment, monkeypatch):
    script = experiment("chat_vlm_retrieval")
    monkeypatch.setattr(sys, "argv", ["chat_vlm_retrieval.py", "--objects", "9", "--names", "5"])
    with pytest.raises(SystemExit):
        script.main()


def test_answer_grounding_ties_the_answer_position_to_the_objects_image_token(experiment):
    script = experiment("chat_vlm_retrieval")
    from vqadiag.models.reference.chat_vlm_build import IMAGE
    from vqadiag.models.reference.chat_vlm_data import Example

    drawn = [script.Scene(np.array([3, 5]), np.array([0, 1]), np.array([7, 2]))]
    records = [{"imageId": "t0", "object": 0}, {"imageId": "t0", "object": 1}]
    prompt = (10, 11, IMAGE, IMAGE, IMAGE, IMAGE, IMAGE, IMAGE, IMAGE, IMAGE, IMAGE, 12, 13)
    train = [Example(0, prompt, (10, 11, 12), (20, 2))] * 2
    out = script.answer_grounded(train, records, drawn)
    # the image starts at position 2; object 0 sits on patch 7, object 1 on patch 2; the
    # prompt's last position (12) predicts the answer's first token
    assert [ex.grounded for ex in out] == [((12, (9,)),), ((12, (4,)),)]
    assert [ex.answer for ex in out] == [(20, 2), (20, 2)]


def test_answer_grounding_without_a_weight_is_refused(experiment, monkeypatch, capsys):
    script = experiment("chat_vlm_retrieval")
    monkeypatch.setattr(sys, "argv", ["chat_vlm_retrieval.py", "--ground-answer"])
    with pytest.raises(SystemExit):
        script.main()
    assert "ground_tokens" in capsys.readouterr().err


def test_more_objects_than_patches_is_refused(experiment, monkeypatch, capsys):
    script = experiment("chat_vlm_retrieval")
    argv = ["chat_vlm_retrieval.py", "--objects", "5", "-o", "image_size=16", "-o", "patch_size=8"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit):
        script.main()
    assert "5 objects do not fit 4 patches" in capsys.readouterr().err


@pytest.mark.parametrize("prior", ["1", "-0.1", "nan"])
def test_a_prior_outside_0_to_1_is_refused(experiment, monkeypatch, capsys, prior):
    script = experiment("chat_vlm_retrieval")
    monkeypatch.setattr(sys, "argv", ["chat_vlm_retrieval.py", "--prior", prior])
    with pytest.raises(SystemExit):
        script.main()
    assert "--prior must be in [0, 1)" in capsys.readouterr().err
