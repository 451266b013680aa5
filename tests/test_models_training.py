"""The shared training loop: reproducibility, answer vocabulary, validation log, bad weights."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vqadiag.data.model_inputs.gqa_data import GQAData  # noqa: E402
from vqadiag.errors import DataError  # noqa: E402
from vqadiag.models.checkpoint import save_checkpoint  # noqa: E402
from vqadiag.models.predict import accuracy_values, predict_split  # noqa: E402
from vqadiag.models.reference.question_only import QuestionOnlyModel  # noqa: E402
from vqadiag.models.reference.updn import UpDnModel  # noqa: E402
from vqadiag.models.training import evaluate_accuracy, has_split  # noqa: E402


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    out = tmp_path_factory.mktemp("train_world")
    generate_world(out, images=80, seed=7, progress=False)
    return out


def _train(world, seed, **options):
    return UpDnModel.train(
        GQAData(world), epochs=1, seed=seed, progress=False, hidden_dim=16, **options
    )


def test_same_seed_same_weights_other_seed_other_weights(world):
    a, b, c = _train(world, 0), _train(world, 0), _train(world, 1)
    wa, wb, wc = a.state_arrays(), b.state_arrays(), c.state_arrays()
    assert wa.keys() == wb.keys()
    for key in wa:
        np.testing.assert_array_equal(wa[key], wb[key])
    assert any(not np.array_equal(wa[k], wc[k]) for k in wa)
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


def test_training_restores_global_torch_settings(world):
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    _train(world, 0, threads=1)
    assert torch.get_num_threads() == threads
    assert torch.are_deterministic_algorithms_enabled() == deterministic


def test_log_has_loss_and_val_accuracy_per_epoch(world):
    model = QuestionOnlyModel.train(GQAData(world), epochs=2, seed=0, progress=False, hidden_dim=16)
    log = model.training_log
    assert [row["epoch"] for row in log["history"]] == [1, 2]
    assert all(
        {"loss", "train_accuracy", "val_accuracy", "seconds"} <= set(r) for r in log["history"]
    )
    assert log["val_split"] == "val" and log["split"] == "train"
    # the last epoch's val accuracy is the model's accuracy on val, counted independently
    data = GQAData(world)
    preds = predict_split(model, data, "val")
    hits = accuracy_values(preds, data.questions("val"))
    assert log["history"][-1]["val_accuracy"] == pytest.approx(100 * sum(hits) / len(hits))
    assert evaluate_accuracy(model, data, "val") == pytest.approx(100 * np.mean(hits))


@pytest.mark.parametrize("epochs", [0, -1, 1.5])
def test_epochs_from_python_are_checked_as_the_option_is(world, epochs):
    """``train(epochs=…)`` goes through the same number rule as ``-o epochs=…``: refused
    before any training, where it used to train nothing (0) or fail late."""
    with pytest.raises(ValueError, match=r"^epochs must be a whole number of 1 or more, not"):
        QuestionOnlyModel.train(GQAData(world), epochs=epochs, progress=False, hidden_dim=16)


def test_top_answers_restricts_the_vocabulary(world):
    data = GQAData(world)
    model = QuestionOnlyModel.train(data, epochs=1, progress=False, hidden_dim=16, top_answers=3)
    assert len(model.answer_vocab) == 3
    assert set(predict_split(model, data, "val").values()) <= set(model.answer_vocab)


def test_has_split(world):
    assert has_split(GQAData(world), "val") and not has_split(GQAData(world), "nosuch")


def test_weights_that_do_not_fit_name_the_file(world, tmp_path):
    model = _train(world, 0)
    model.save(tmp_path / "run")
    config_arrays = model.state_arrays()
    config_arrays["classifier.3.weight"] = np.zeros((2, 2), np.float32)
    save_checkpoint(
        tmp_path / "bad",
        {**model.architecture(), "training": {}},
        config_arrays,
        model.answer_vocab,
    )
    with pytest.raises(
        DataError, match="bad/weights.safetensors: weights do not fit the model"
    ) as caught:
        UpDnModel.load(tmp_path / "bad")
    # PyTorch's first line ends in a colon: what it introduces follows, on the same line
    assert "size mismatch for classifier.3.weight" in str(caught.value)
    assert "\n" not in str(caught.value)
    (tmp_path / "run" / "weights.safetensors").write_bytes(b"\x00" * 10)
    with pytest.raises(DataError, match="does not match the weights_sha256"):
        UpDnModel.load(tmp_path / "run")


def test_cosine_schedule_on_a_hand_worked_case():
    from vqadiag.models.training import lr_scheduler

    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    scheduler = lr_scheduler(optimizer, "cosine", 4)
    seen = [optimizer.param_groups[0]["lr"]]
    for _ in range(4):
        optimizer.step()
        scheduler.step()
        seen.append(optimizer.param_groups[0]["lr"])
    # 0.1 · ½(1 + cos(π s / 4)), s = 0..4
    assert seen == pytest.approx([0.1, 0.0853553, 0.05, 0.0146447, 0.0], abs=1e-7)
    constant = torch.optim.SGD([weight], lr=0.1)
    flat = lr_scheduler(constant, "constant", 4)
    constant.step()
    flat.step()
    assert constant.param_groups[0]["lr"] == 0.1
    with pytest.raises(ValueError, match="lr_schedule must be one of constant, cosine"):
        lr_scheduler(constant, "linear", 4)


def test_fit_steps_a_constant_schedule_once_per_batch_by_default(world, schedulers_made):
    data = GQAData(world)
    QuestionOnlyModel.train(data, epochs=2, seed=0, progress=False)
    [(optimizer, schedule, steps, scheduler)] = schedulers_made
    assert schedule == "constant"
    assert steps == 2 * -(-len(data.questions("train")) // 64)
    assert scheduler.last_epoch == steps  # stepped once per batch
    assert optimizer.param_groups[0]["lr"] == QuestionOnlyModel.defaults["lr"]
