"""``-o pretrain_checkpoint=FILE``: the chat VLM's vision pre-training saved after every
epoch, resumed from there to the weights of an unbroken run, and refused when the file
belongs to another pre-training (docs/chat-vlm.md, "Resuming the pre-training")."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

TINY = ["image_size=32", "patch_size=16", "vision_dim=32", "vision_layers=1", "vision_heads=2",
        "text_dim=32", "text_layers=1", "text_heads=2", "vocab_size=400", "pretrain_epochs=3",
        "batch_size=32", "pretrain_batch_size=8", "pretrain_augment=true"]  # fmt: skip


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    out = tmp_path_factory.mktemp("checkpoint_world") / "world"
    generate_world(out, images=30, seed=4)
    return out


def _train(run_cli, world, out, *extra):
    """``vqadiag train`` of the tiny recipe, an option of ``extra`` in place of TINY's."""
    given = {str(v).split("=", 1)[0] for k, v in pairwise(extra) if k == "-o"}
    args = [a for o in TINY if o.split("=", 1)[0] not in given for a in ("-o", o)]
    return run_cli("train", "--model", "chat-vlm", "--data", world, "--out", out,
                   "--epochs", "1", "--quiet", "--json", *args, *extra)  # fmt: skip


def _digest(run):
    return json.loads((run / "config.json").read_text())["model_digest"]


@pytest.fixture(scope="module")
def unbroken(world, tmp_path_factory):
    """The recipe trained without a checkpoint: the weights every resumed run must give."""
    from typer.testing import CliRunner

    from vqadiag.cli.main import app

    out = tmp_path_factory.mktemp("unbroken") / "run"
    args = [a for o in TINY for a in ("-o", o)]
    got = CliRunner().invoke(app, ["train", "--model", "chat-vlm", "--data", str(world),
                                   "--out", str(out), "--epochs", "1", "--quiet", "--json",
                                   *args])  # fmt: skip
    assert got.exit_code == 0, got.output
    return out, json.loads(got.stdout)


def test_a_run_stopped_after_an_epoch_goes_on_to_the_weights_of_an_unbroken_run(
    run_cli, world, unbroken, tmp_path, monkeypatch
):
    from vqadiag.models.reference import chat_vlm_pretrain_checkpoint as saved_state

    file = tmp_path / "tower.pt"
    original, calls = saved_state.PretrainCheckpoint.save, []

    def save_then_stop(self, state):
        original(self, state)
        calls.append(state["epochs_done"])
        raise RuntimeError("stopped after the first epoch")

    monkeypatch.setattr(saved_state.PretrainCheckpoint, "save", save_then_stop)
    with pytest.raises(RuntimeError, match="stopped after the first epoch"):
        _train(run_cli, world, tmp_path / "stopped", "-o", f"pretrain_checkpoint={file}")
    assert calls == [1] and file.is_file()
    monkeypatch.setattr(saved_state.PretrainCheckpoint, "save", original)

    resumed = _train(run_cli, world, tmp_path / "resumed", "-o", f"pretrain_checkpoint={file}")
    assert resumed.exit_code == 0, resumed.stderr
    figures = json.loads(resumed.stdout)["pretrain"]
    assert figures["resumed_epochs"] == 1
    assert _digest(tmp_path / "resumed") == _digest(unbroken[0])
    for key in ("loss", "name_acc", "object_name_acc", "held_out_object_name_acc"):
        assert figures[key] == unbroken[1]["pretrain"][key]

    # every epoch done: the stage is skipped, and the same weights again
    again = _train(run_cli, world, tmp_path / "again", "-o", f"pretrain_checkpoint={file}")
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout)["pretrain"]["resumed_epochs"] == 3
    assert _digest(tmp_path / "again") == _digest(unbroken[0])

    # another answering recipe on the same pre-training (docs: "Which answering recipes
    # share a file")
    other = _train(run_cli, world, tmp_path / "other", "-o", f"pretrain_checkpoint={file}",
                   "--epochs", "2", "-o", "lr=0.002",
                   "-o", "text_only=0.3", "-o", "question_first=true",
                   "-o", "tune_tower_layers=1", "-o", "ground_tokens=0.1",
                   "-o", "ground_layer=0", "-o", "ground_from=answer")  # fmt: skip
    assert other.exit_code == 0, other.stderr
    assert json.loads(other.stdout)["pretrain"]["resumed_epochs"] == 3


def test_a_checkpoint_of_another_pre_training_is_refused_and_left_as_it_was(
    run_cli, world, tmp_path, monkeypatch
):
    file = tmp_path / "tower.pt"
    made = _train(run_cli, world, tmp_path / "made", "-o", f"pretrain_checkpoint={file}")
    assert made.exit_code == 0, made.stderr
    assert json.loads(made.stdout)["pretrain"]["resumed_epochs"] == 0
    before = file.read_bytes()
    for extra, differ in (
        (("-o", "pretrain_lr=0.002"), "options.pretrain_lr differs"),
        (("-o", "threads=1"), "options.threads differs"),
        (("--seed", "1"), "initial_weights, generator differ"),
        (("-o", "blind=true"), "pixels, initial_weights differ"),
        (("-o", "vision_heads=4"), "vision_config differs"),
        (("-o", "text_dim=64"), "initial_weights differs"),  # the heads are drawn after
    ):
        got = _train(run_cli, world, tmp_path / "other", "-o", f"pretrain_checkpoint={file}",
                     *extra)  # fmt: skip
        assert got.exit_code == 2, got.stderr
        line = " ".join(got.stderr.split())
        assert line.startswith(f"error: {file}: pretrain_checkpoint was written by another")
        assert f"({differ}):" in line
        assert file.read_bytes() == before
        assert not (tmp_path / "other").exists()

    # other settings are refused before any image is read (a world of 20,000 takes minutes)
    from vqadiag.models.reference import chat_vlm_data

    def no_images(*args):
        raise AssertionError("the images were read")

    monkeypatch.setattr(chat_vlm_data, "pixel_values", no_images)
    got = _train(run_cli, world, tmp_path / "other", "-o", f"pretrain_checkpoint={file}",
                 "-o", "pretrain_lr=0.002")  # fmt: skip
    assert got.exit_code == 2, got.stderr
    assert "(options.pretrain_lr differs):" in " ".join(got.stderr.split())
    monkeypatch.undo()

    # written under another PyTorch: its epochs would not round as this one's do
    import torch

    saved = torch.load(file, weights_only=True)
    saved["parts"]["libraries"]["torch"] = "0.0.1"
    torch.save(saved, file)
    before = file.read_bytes()
    got = _train(run_cli, world, tmp_path / "other", "-o", f"pretrain_checkpoint={file}")
    assert got.exit_code == 2, got.stderr
    assert "(libraries.torch differs):" in " ".join(got.stderr.split())
    assert file.read_bytes() == before


def test_a_finished_checkpoint_is_only_read_and_may_lie_where_vqadiag_cannot_write(
    run_cli, world, tmp_path, monkeypatch
):
    """A file holding every epoch is read from a folder vqadiag cannot write (a tower
    shared read-only) and left byte for byte; one with epochs left there is refused before
    the images are read, and a new one before the model is built."""
    from pathlib import Path

    import torch

    from vqadiag.data.io import atomic
    from vqadiag.errors import DataError
    from vqadiag.models.reference import chat_vlm_data
    from vqadiag.models.reference import chat_vlm_pretrain_checkpoint as saved_state

    shared = tmp_path / "shared"
    file = shared / "tower.pt"
    made = _train(run_cli, world, tmp_path / "made", "-o", f"pretrain_checkpoint={file}")
    assert made.exit_code == 0, made.stderr
    partial = shared / "partial.pt"
    saved = torch.load(file, weights_only=True)
    saved["epochs_done"] = 2
    torch.save(saved, partial)

    # as root no mode bit stops a write, so the folder is made read-only where every
    # writer checks it, and a write to the finished file fails the test
    checked = atomic.writable_folder

    def read_only(path, **kwargs):
        if Path(path).resolve() == shared.resolve():
            raise DataError(path, "cannot write here: Read-only file system")
        return checked(path, **kwargs)

    def no_save(self, state):
        raise AssertionError(f"{self.path} was written")

    monkeypatch.setattr(atomic, "writable_folder", read_only)
    monkeypatch.setattr(saved_state.PretrainCheckpoint, "save", no_save)
    before = file.read_bytes()
    got = _train(run_cli, world, tmp_path / "read", "-o", f"pretrain_checkpoint={file}")
    assert got.exit_code == 0, got.stderr
    assert json.loads(got.stdout)["pretrain"]["resumed_epochs"] == 3
    assert file.read_bytes() == before

    def no_images(*args):
        raise AssertionError("the images were read")

    monkeypatch.setattr(chat_vlm_data, "pixel_values", no_images)
    for name in ("partial.pt", "new.pt"):
        got = _train(run_cli, world, tmp_path / "run", "-o", f"pretrain_checkpoint={shared / name}")
        assert got.exit_code == 2, got.stderr
        assert got.stderr.strip() == f"error: {shared}: cannot write here: Read-only file system"
    assert not (shared / "new.pt").exists()


def test_a_checkpoint_path_that_cannot_be_one_is_refused_in_one_line(run_cli, world, tmp_path):
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint")
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    for value, expected in (
        (garbage, f"{garbage}: not a pre-training checkpoint vqadiag can read"),
        (tmp_path, f"{tmp_path}: is a folder, expected a file"),
        (a_file / "tower.pt", f"{a_file}: is a file, expected a folder"),
        ("[1]", "pretrain_checkpoint must be a file path, not [1]"),
    ):
        got = _train(run_cli, world, tmp_path / "run", "-o", f"pretrain_checkpoint={value}")
        assert got.exit_code == 2, got.stderr
        assert expected in " ".join(got.stderr.split()), got.stderr
        assert len(got.stderr.strip().splitlines()) == 1, got.stderr
        assert not (tmp_path / "run").exists()


def test_a_damaged_state_or_a_killed_writers_file_is_handled(run_cli, world, tmp_path):
    """A file whose key matches but whose state does not load is one line naming it; a
    temporary file a killed writer left beside it is removed when the next run reads it."""
    import torch

    file = tmp_path / "tower.pt"
    made = _train(run_cli, world, tmp_path / "made", "-o", f"pretrain_checkpoint={file}")
    assert made.exit_code == 0, made.stderr
    left = tmp_path / ".tower.pt.999999.0badc0de.tmp"  # a pid that is not running
    left.write_bytes(b"half a checkpoint")
    saved = torch.load(file, weights_only=True)
    del saved["optimizer"]
    torch.save(saved, file)
    got = _train(run_cli, world, tmp_path / "run", "-o", f"pretrain_checkpoint={file}")
    assert got.exit_code == 2, got.stderr
    assert got.stderr.startswith(f"error: {file}: its state cannot be loaded ('optimizer')")
    assert len(got.stderr.strip().splitlines()) == 1 and not left.exists()


def test_a_state_is_finished_when_it_holds_every_epoch():
    from vqadiag.models.reference.chat_vlm_pretrain_checkpoint import finished

    assert finished({"epochs_done": 3}, 3) and finished({"epochs_done": 4}, 3)
    assert not finished({"epochs_done": 2}, 3)
    assert not finished(None, 3) and not finished({}, 3)
    assert not finished({"epochs_done": "3"}, 3)  # a hand-made file is written, not trusted


def test_the_differences_name_each_part_and_option_that_differs():
    from vqadiag.models.reference.chat_vlm_pretrain_checkpoint import _differences

    ours = {"pixels": "a", "options": {"pretrain_lr": 0.001, "pretrain_epochs": 3}, "x": 1}
    assert _differences(dict(ours), ours) == []
    other = {"pixels": "b", "options": {"pretrain_lr": 0.002, "pretrain_epochs": 3}, "x": 1}
    assert _differences(other, ours) == ["pixels", "options.pretrain_lr"]
    assert _differences(None, ours) == ["its key"]
    assert _differences({"options": 5}, ours) == ["pixels", "options", "x"]
    libs = {"libraries": {"torch": "2.13.0", "numpy": "2.3.0"}}
    assert _differences({"libraries": {"torch": "2.12.0", "numpy": "2.3.0"}}, libs) == [
        "libraries.torch"
    ]


def test_path_options_are_kept_apart_from_out_and_the_data_before_any_work(
    run_cli, world, tmp_path
):
    """A checkpoint inside ``--out`` would stop a stopped run from claiming its folder
    again; one inside the data, or ``--out`` inside the world pre-trained on, would write
    into what the run reads: each refused in one line, with nothing written."""
    other = tmp_path / "other_world"
    other.mkdir()
    out = tmp_path / "run"
    for extra, expected in (
        (("-o", f"pretrain_checkpoint={out / 'tower.pt'}"),
         f"{out}: holds the input -o pretrain_checkpoint ({out / 'tower.pt'})"),
        (("-o", f"pretrain_checkpoint={world / 'tower.pt'}"),
         f"{world / 'tower.pt'}: lies inside --data {world}"),
        (("-o", f"pretrain_world={tmp_path}"),
         f"{out}: lies inside -o pretrain_world {tmp_path}"),
    ):  # fmt: skip
        got = _train(run_cli, world, out, *extra)
        assert got.exit_code == 2, got.stderr
        assert " ".join(got.stderr.split()).startswith(f"error: {expected}"), got.stderr
        assert not out.exists() and not (world / "tower.pt").exists()
