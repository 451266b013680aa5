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
    assert script.present_colours(drawn, records, colours=6) == pytest.approx(100.0 * 1.5 / 4)


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
    assert "5 objects × 1 patches each do not fit the image's 4 patches" in capsys.readouterr().err


@pytest.mark.parametrize("prior", ["1", "-0.1", "nan"])
def test_a_prior_outside_0_to_1_is_refused(experiment, monkeypatch, capsys, prior):
    script = experiment("chat_vlm_retrieval")
    monkeypatch.setattr(sys, "argv", ["chat_vlm_retrieval.py", "--prior", prior])
    with pytest.raises(SystemExit):
        script.main()
    assert "--prior must be in [0, 1)" in capsys.readouterr().err


def test_features_cover_every_patch_of_a_shown_object_with_its_attributes(experiment):
    script = experiment("chat_vlm_retrieval")
    by_name = torch.tensor([[1.0, 0.0], [10.0, 0.0], [100.0, 0.0]])
    by_colour = torch.tensor([[0.0, 1.0], [0.0, 10.0]])
    by_extra = torch.tensor([[1000.0, 0.0], [0.0, 1000.0], [0.0, 5000.0]])
    # object 0: name 1 (row 2), colour 0, extras 0 and 2, on patches 1 and 3; object 1 on
    # patches 0 and 4 is hidden: background there
    scene = script.Scene(
        np.array([1, 0]), np.array([0, 1]), np.array([[1, 3], [0, 4]]),
        hidden=np.array([False, True]), extra=np.array([[0, 2], [1, 2]]),
    )  # fmt: skip
    out = script.features([scene], 5, (by_name, by_colour, by_extra))
    on = [1100.0, 5001.0]  # 100 + 0 + 1000 + 0, 0 + 1 + 0 + 5000
    assert out.tolist() == [[[1.0, 0.0], on, [1.0, 0.0], on, [1.0, 0.0]]]
    assert scene.object_patches(1).tolist() == [0, 4]
    assert scene.shown().tolist() == [True, False]


def test_present_colours_counts_only_the_objects_the_image_shows(experiment):
    script = experiment("chat_vlm_retrieval")
    # colour 2 twice but one of them hidden: colours 2 and 0 tie among the shown
    scene = script.Scene(
        np.array([0, 1, 2]), np.array([2, 2, 0]), np.array([0, 1, 2]),
        hidden=np.array([True, False, False]),
    )  # fmt: skip
    nothing = script.Scene(np.array([0]), np.array([1]), np.array([0]), hidden=np.array([True]))
    records = [{"imageId": "v0", "object": 0}, {"imageId": "v1", "object": 0}]
    # a tie of two (1/2), then nothing shown: a guess among 4 colours (1/4)
    assert script.present_colours([scene, nothing], records, colours=4) == pytest.approx(
        100.0 * 0.75 / 2
    )


def test_layout_options_draw_patch_rows_hidden_objects_and_distinct_attributes(experiment):
    script = experiment("chat_vlm_retrieval")
    rng = np.random.default_rng(0)
    drawn = script.scenes(rng, 300, 4, 10, 3, 16, object_patches=3, hidden=0.4, attributes=3)
    for scene in drawn:
        assert scene.patches.shape == (4, 3) and len(set(scene.patches.ravel())) == 12
        assert scene.extra.shape == (4, 3)
        assert all(len(set(row)) == 3 for row in scene.extra.tolist())
        assert scene.extra.max() < script.EXTRA_ATTRIBUTES
    hidden = np.concatenate([s.hidden for s in drawn])
    assert hidden.mean() == pytest.approx(0.4, abs=0.04)
    plain = script.scenes(np.random.default_rng(0), 3, 4, 10, 3, 16)
    assert all(s.hidden is None and s.extra is None and s.patches.shape == (4,) for s in plain)


def test_each_kind_of_question_asks_and_answers_as_the_world_does(experiment):
    script = experiment("chat_vlm_retrieval")
    rng = np.random.default_rng(0)
    assert script.ask(rng, "query", "dog", 2, 4) == ("What is the color of the dog?", "green")
    verified = [script.ask(rng, "verify", "dog", 2, 4) for _ in range(200)]
    for question, answer in verified:
        asked = question.removeprefix("Is the dog ").removesuffix("?")
        assert answer == ("yes" if asked == "green" else "no")
        assert asked in script.COLOURS[:4]
    assert 0.4 < np.mean([a == "yes" for _, a in verified]) < 0.6
    for _ in range(50):
        question, answer = script.ask(rng, "choose", "dog", 2, 4)
        first, second = question.removeprefix("Is the dog ").removesuffix("?").split(" or ")
        assert answer == "green" and "green" in (first, second) and first != second
        assert {first, second} <= set(script.COLOURS[:4])


def test_mixed_kinds_are_scored_per_kind(experiment, monkeypatch, capsys):
    script = experiment("chat_vlm_retrieval")
    argv = [
        "chat_vlm_retrieval.py", "--epochs", "1", "--train-images", "20", "--val-images",
        "10", "--colours", "4", "--kinds", "query,verify", "--hidden", "0.5",
        "--object-patches", "2", "--attributes", "2", "-o", "text_dim=32", "-o", "vision_dim=32",
    ]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    script.main()
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(out["val_exact_by_kind"]) == {"query", "verify"}
    assert 0.0 <= out["shown"] <= 100.0 and 0.0 <= out["val_exact_shown"] <= 100.0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--kinds", "query,count"], "--kinds takes distinct kinds"),
        (["--kinds", "query,query"], "--kinds takes distinct kinds"),
        (["--kinds", "verify", "--colours", "1"], "at least 2 colours"),
        (["--hidden", "1"], "--hidden must be in [0, 1)"),
        (["--reduce", "1.5"], "need 0 <= --reduce <= 1 and --reduce-to >= 1"),
        (["--reduce-to", "0"], "need 0 <= --reduce <= 1 and --reduce-to >= 1"),
        (["--attributes", "49"], "--attributes <= 48"),
        (["--object-patches", "0"], "--object-patches >= 1"),
        (["--objects", "6", "--object-patches", "11"], "6 objects × 11 patches each do not fit"),
        (["--embeddings", "orthogonal", "-o", "vision_dim=16"], "29 orthogonal embeddings need"),
        (["--embeddings", "circular"], "invalid choice: 'circular'"),
    ],
)
def test_bad_layout_and_kind_options_are_refused(experiment, monkeypatch, capsys, argv, message):
    script = experiment("chat_vlm_retrieval")
    monkeypatch.setattr(sys, "argv", ["chat_vlm_retrieval.py", *argv])
    with pytest.raises(SystemExit):
        script.main()
    assert message in capsys.readouterr().err


def test_reduced_images_show_the_object_asked_about_and_keep_minus_one_others(experiment):
    script = experiment("chat_vlm_retrieval")
    rng = np.random.default_rng(0)
    drawn = script.scenes(rng, 40, 6, 10, 3, 16, hidden=0.3)
    records = script.questions(rng, drawn, 4, "t")
    before = [dict(r) for r in records]
    script.reduce_images(np.random.default_rng(1), drawn, records, 0.5, 3)
    moved = [(b, r) for b, r in zip(before, records, strict=True) if b != r]
    assert 0.35 < len(moved) / len(records) < 0.65 and len(drawn) == 40 + len(moved)
    for b, r in moved:
        original, copy = script.scene_of(drawn, b), script.scene_of(drawn, r)
        assert {**b, "imageId": r["imageId"]} == r and int(r["imageId"][1:]) >= 40
        assert copy.shown()[r["object"]]  # the object asked about, even when it was hidden
        others = copy.shown() & (np.arange(6) != r["object"])
        assert others.sum() == min(2, (original.shown() & (np.arange(6) != r["object"])).sum())
        assert not (others & ~original.shown()).any()  # only objects the image showed
        assert copy.names.tolist() == original.names.tolist()
        assert copy.patches.tolist() == original.patches.tolist()


def test_an_embedding_layout_reaches_the_features_and_the_printed_line(
    experiment, monkeypatch, capsys
):
    script = experiment("chat_vlm_retrieval")
    argv = [
        "chat_vlm_retrieval.py", "--epochs", "1", "--train-images", "20", "--val-images",
        "10", "--colours", "4", "--embeddings", "orthogonal", "-o", "text_dim=32",
        "-o", "vision_dim=32",
    ]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    script.main()
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["embeddings"] == "orthogonal" and 0.0 <= out["val_exact"] <= 100.0
