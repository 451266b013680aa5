"""The pixel model's token-grounded head (``-o head=tokens``; docs/models.md, "The pixel
model"): word → token alignment, per-token attention targets and loss on hand-worked
cases, and train / save / load on a small rendered world."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.models.reference.pixel import PixelModel
from vqadiag.models.reference.pixel_objective import GridObjective, word_token_starts
from vqadiag.models.registry import load_model

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def world(rendered_world_60):
    return GQAData(rendered_world_60 / "gqa")


@pytest.fixture(scope="module")
def token_model(world):
    return PixelModel.train(
        world, epochs=1, seed=0, progress=False, encoder="grid", head="tokens", image_size=32
    )


def test_word_token_starts_follow_the_tokenizer():
    # words: Is the cup, or the plate, red → tokens: is the cup , or the plate , red ?
    assert word_token_starts("Is the cup, or the plate, red?") == [0, 1, 2, 4, 5, 6, 8]
    assert word_token_starts("What is the man's hat made of?") == [0, 1, 2, 3, 4, 5, 6]
    assert word_token_starts("The cup is red.") == [0, 1, 2, 3]


def hand_scene_objective(model: PixelModel, world: GQAData) -> GridObjective:
    objective = GridObjective(model, world, "train")
    # a 100 × 100 image, grid 4 × 4 (cell centres at 12.5, 37.5, 62.5, 87.5)
    objective.scenes = {
        "img": {
            "width": 100,
            "height": 100,
            "objects": {
                "cup": {"name": "cup", "x": 0, "y": 0, "w": 50, "h": 50},
                "plate": {"name": "plate", "x": 75, "y": 75, "w": 25, "h": 25},
                "dot": {"name": "dot", "x": 45, "y": 45, "w": 4, "h": 4},
            },
        }
    }
    return objective


def test_token_targets_are_the_cells_of_the_annotated_objects(world, token_model):
    objective = hand_scene_objective(token_model, world)
    record = {
        "imageId": "img",
        "question": "Is the cup, or the plate, red?",
        # words 2 ("cup,") and 5 ("plate,"); an unknown object and a bad key are ignored
        "annotations": {"question": {"2": "cup", "5": "plate", "3": "ghost", "x": "cup"}},
    }
    target = objective.token_attention_target(record, n_tokens=10)
    assert target.shape == (10, 16)
    assert sorted(np.flatnonzero(target[2])) == [0, 1, 4, 5]  # cup: centres < 50
    assert np.flatnonzero(target[6]).tolist() == [15]  # plate: centre (87.5, 87.5)
    assert target.sum(axis=1).tolist() == [0, 0, 4, 0, 0, 0, 1, 0, 0, 0]
    # a span "3:5" ties words 3 and 4 (tokens 4 and 5); an object that covers no cell
    # centre gets the cell of its box centre (47, 47) → row 1, column 1
    record["annotations"] = {"question": {"3:5": "dot"}}
    target = objective.token_attention_target(record, n_tokens=10)
    assert [np.flatnonzero(row).tolist() for row in target[3:7]] == [[], [5], [5], []]
    # tokens past the model's question length are dropped
    record["annotations"] = {"question": {"5": "plate"}}
    assert not objective.token_attention_target(record, n_tokens=6).any()


def test_token_loss_is_minus_log_attention_mass_on_the_targets(world, token_model):
    qids = list(world.questions("train"))[:16]
    batch = world.batch("train", qids)
    visual = token_model.training_input(world, batch.image_ids)
    target = torch.zeros(16, dtype=torch.int64)
    token_model.net.eval()  # no dropout: both losses see the same network
    with_tokens = GridObjective(token_model, world, "train")
    without = GridObjective(token_model, world, "train")
    without.token_weight = 0.0
    with torch.no_grad():
        loss_without, _ = without(batch, visual, target)
        loss_with, _ = with_tokens(batch, visual, target)
        alpha = token_model.net.token_attention.numpy()
    on = np.stack([with_tokens.token_attention_target(r, alpha.shape[1]) for r in batch.records])
    tied = on.any(axis=2)
    assert tied.sum() >= 8  # most synthetic questions name an object
    expected = -np.log((alpha * on).sum(axis=2)[tied] + 1e-6).mean()
    assert float(loss_with - loss_without) == pytest.approx(expected, rel=1e-4)


def test_train_save_load_and_per_box_importance(world, token_model, tmp_path):
    token_model.save(tmp_path / "run")
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["options"]["head"] == "tokens"
    loaded = load_model(tmp_path / "run")
    assert loaded.options["head"] == "tokens"
    assert loaded.fingerprint() == token_model.fingerprint()
    qids = list(world.questions("val"))[:12]
    batch = world.batch("val", qids)
    visual = world.pixel_input(batch.image_ids, size=loaded.input_size)
    first, second = token_model.predict(batch, visual), loaded.predict(batch, visual)
    assert first.answers == second.answers
    importance = np.asarray(second.attention)
    assert importance.shape[0] == 12
    # a box's importance is the attention mass on the part of the grid it covers
    assert np.isfinite(importance).all() and (importance >= 0).all()
    assert (importance <= 1 + 1e-5).all()
    tokens, lengths = loaded._question_tensors(batch)
    images, image_of = loaded._pixel_tensors(batch, visual)
    with torch.no_grad():
        _, cell_attention = loaded.net(tokens, lengths, images, image_of)
    assert cell_attention.shape == (12, 16)
    assert torch.allclose(cell_attention.sum(dim=1), torch.ones(12), atol=1e-5)
    assert loaded.net.token_attention.shape == (12, tokens.shape[1], 16)


def test_grid_runs_keep_their_config_and_a_bad_head_is_refused(world):
    grid = PixelModel.train(world, epochs=1, seed=0, progress=False, encoder="grid", image_size=32)
    assert "head" not in grid.architecture()["options"]
    assert "token_supervision" not in grid.architecture()["options"]
    with pytest.raises(ValueError, match="head must be one of grid, tokens"):
        PixelModel.resolve_options({"head": "transformer"})
