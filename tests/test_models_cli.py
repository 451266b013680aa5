"""`vqadiag train` / `vqadiag predict` end to end, and their bad-input errors (exit 2)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    out = tmp_path_factory.mktemp("cli_world")
    generate_world(out, images=80, seed=9, progress=False)
    return out


def _score(run_cli, world, predictions):
    result = run_cli(
        "score",
        "gqa",
        "--questions",
        world / "gqa" / "val_balanced_questions.json",
        "--predictions",
        predictions,
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    return result.json()


def test_prior_train_predict_score(run_cli, world, tmp_path):
    run = tmp_path / "prior"
    result = run_cli("train", "--data", world, "--model", "prior", "--out", run, "--json", "-q")
    assert result.exit_code == 0, result.stderr
    out = result.json()
    assert (out["model"] == "prior" and out["options"] == {}) or out["model"] == "prior"
    assert (run / "config.json").is_file() and (run / "weights.safetensors").is_file()
    val = out["val"]["accuracy"]
    assert out["ci"]["val"]["accuracy"]["value"] == val
    assert out["ci"]["val"]["accuracy"]["ci_low"] <= val <= out["ci"]["val"]["accuracy"]["ci_high"]
    preds = tmp_path / "prior.json"
    result = run_cli("predict", "--model", run, "--data", world, "--out", preds, "--json", "-q")
    assert result.exit_code == 0, result.stderr
    summary = result.json()
    assert summary["accuracy"] == pytest.approx(val)
    assert summary["questions"] == len(json.loads(preds.read_text()))
    scored = _score(run_cli, world, preds)
    # GQA accuracy counts the balanced questions only: recount them from the written file
    questions = json.loads((world / "gqa" / "val_balanced_questions.json").read_text())
    answers = json.loads(preds.read_text())
    hits = [answers[q] == r["answer"] for q, r in questions.items() if r["isBalanced"]]
    assert scored["accuracy"] == pytest.approx(100 * sum(hits) / len(hits))
    # an image folder for a model that reads no pixels would be ignored: refused
    other = tmp_path / "other.json"
    (tmp_path / "images").mkdir()
    result = run_cli("predict", "--model", run, "--data", world, "--out", other, "--images",
                     tmp_path / "images")  # fmt: skip
    assert result.exit_code == 2 and not other.exists()
    assert (
        result.stderr.strip()
        == "error: --images: is where a pixel model reads; prior reads no pixels"
    )
    trained = run_cli("train", "--data", world, "--model", "updn", "--out", tmp_path / "u",
                      "--images", tmp_path / "images", "-q")  # fmt: skip
    assert trained.exit_code == 2 and not (tmp_path / "u").exists()
    assert (
        trained.stderr.strip()
        == "error: --images: is where a pixel model reads; updn reads no pixels"
    )


def test_updn_train_predict_probs_score(run_cli, world, tmp_path):
    run = tmp_path / "updn"
    result = run_cli(
        "train",
        "--data",
        world,
        "--model",
        "updn",
        "--out",
        run,
        "--epochs",
        "1",
        "-o",
        "hidden_dim=16",
        "--json",
        "-q",
    )
    assert result.exit_code == 0, result.stderr
    out = result.json()
    assert out["epochs"] == 1 and out["options"]["hidden_dim"] == 16
    assert len(out["history"]) == 1 and "val_accuracy" in out["history"][0]
    preds = tmp_path / "updn.json"
    result = run_cli(
        "predict",
        "--model",
        run,
        "--data",
        world,
        "--out",
        preds,
        "--probs",
        "2",
        "--batch-size",
        "7",
        "--json",
        "-q",
    )
    assert result.exit_code == 0, result.stderr
    first = next(iter(json.loads(preds.read_text()).values()))
    assert set(first) == {"answer", "probs"} and len(first["probs"]) == 2
    assert first["answer"] == max(first["probs"], key=first["probs"].get)
    assert "accuracy" in _score(run_cli, world, preds)


def test_human_output(run_cli, world, tmp_path):
    result = run_cli("train", "--data", world, "--model", "prior", "--out", tmp_path / "r", "-q")
    assert result.exit_code == 0
    assert "trained prior" in result.stdout and "accuracy" in result.stdout
    result = run_cli(
        "predict", "--model", tmp_path / "r", "--data", world, "--out", tmp_path / "p.json", "-q"
    )
    assert result.exit_code == 0 and "val answers" in result.stdout


def test_val_questions_scores_the_first_n_in_file_order(run_cli, world, tmp_path):
    from vqadiag.data.model_inputs.gqa_data import GQAData

    run = tmp_path / "prior"
    args = ("train", "--data", world, "--model", "prior", "--out", run, "--json", "-q")
    result = run_cli(*args, "--val-questions", "7")
    assert result.exit_code == 0, result.stderr
    out = result.json()
    assert out["val"]["questions"] == 7 and out["ci"]["val"]["accuracy"]["n"] == 7
    # recount by hand: the prior's answers on the first seven val questions of the file
    preds = tmp_path / "prior.json"
    assert run_cli("predict", "--model", run, "--data", world, "--out", preds, "-q").exit_code == 0
    answers = json.loads(preds.read_text())
    first = list(GQAData(world).questions("val").items())[:7]
    hits = [answers[qid] == record["answer"] for qid, record in first]
    assert out["val"]["accuracy"] == pytest.approx(100 * sum(hits) / 7)
    # more than the split holds: all of them
    result = run_cli(*args[:-3], tmp_path / "all", "--json", "-q", "--val-questions", "100000")
    assert result.json()["val"]["questions"] == len(GQAData(world).questions("val"))
    result = run_cli(*args[:-3], tmp_path / "none", "--val-questions", "0")
    assert result.exit_code == 2 and "--val-questions" in result.stderr
    from vqadiag.errors import DataError
    from vqadiag.workflows.models import train

    with pytest.raises(DataError, match="--val-questions: must be at least 1, not 0"):
        train(world, "prior", tmp_path / "api", val_questions=0, progress=False)
    assert not (tmp_path / "api").exists()  # refused before any work


def test_unknown_model_name(run_cli, world, tmp_path):
    result = run_cli("train", "--data", world, "--model", "resnet", "--out", tmp_path / "r")
    assert result.exit_code == 2
    assert "error: --model: unknown model 'resnet'" in result.stderr


def test_untrainable_model_and_bad_options(run_cli, world, tmp_path):
    result = run_cli("train", "--data", world, "--model", "hf", "--out", tmp_path / "r")
    assert result.exit_code == 2 and "not trained by vqadiag" in result.stderr
    result = run_cli(
        "train", "--data", world, "--model", "updn", "--out", tmp_path / "r", "-o", "nope=1"
    )
    assert result.exit_code == 2 and "--option: unknown option(s) ['nope']" in result.stderr
    result = run_cli(
        "train", "--data", world, "--model", "updn", "--out", tmp_path / "r", "-o", "x"
    )
    assert result.exit_code == 2 and "expected KEY=VALUE" in result.stderr
    result = run_cli(
        "train", "--data", world, "--model", "updn", "--out", tmp_path / "r", "--mode", "group"
    )
    assert result.exit_code == 2 and "only the prior model has a mode" in result.stderr
    result = run_cli(
        "train", "--data", world, "--model", "prior", "--out", tmp_path / "r", "--mode", "x"
    )
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --mode: must be global, group or type, not 'x'"
    # an option given twice (the last would win unseen), epochs the prior never trains, an
    # option whose remedy is off: each one line, and no run folder
    for model, args, line in (
        ("updn", ("-o", "lr=1e-3", "-o", "lr=5"), "--option: 'lr' is given twice: give it once"),
        ("prior", ("--epochs", "5"), "--epochs: the prior model counts answers: it trains no"),
        ("updn", ("-o", "hint_margin=0.5"), "--option: hint_margin: shapes the HINT loss"),
    ):  # fmt: skip
        result = run_cli("train", "--data", world, "--model", model, "--out", tmp_path / "r",
                         *args)  # fmt: skip
        assert result.exit_code == 2 and result.stderr.startswith(f"error: {line}")
        assert not (tmp_path / "r").exists()


def test_features_of_another_width_name_the_detections_file(run_cli, world, tmp_path):
    """A run trained on 64-dimensional features, asked on data whose features have 32,
    was refused without naming which file held them."""
    from vqadiag.synth import generate_world

    narrow = tmp_path / "narrow"
    generate_world(narrow, images=20, seed=2, feature_dim=32, progress=False)
    run = tmp_path / "updn"
    trained = run_cli("train", "--data", world, "--model", "updn", "--out", run,
                      "--epochs", "1", "-o", "hidden_dim=8", "-q")  # fmt: skip
    assert trained.exit_code == 0, trained.stderr
    result = run_cli("predict", "--model", run, "--data", narrow, "--out", tmp_path / "p.json")
    assert result.exit_code == 2
    info = narrow / "gqa" / "objects" / "gqa_objects_info.json"
    assert f"{info}: object features have 32 dimensions; model 'updn' was trained on 64" in (
        " ".join(result.stderr.split())
    )


def test_missing_data_and_run_folders(run_cli, world, tmp_path):
    result = run_cli(
        "train", "--data", tmp_path / "nope", "--model", "prior", "--out", tmp_path / "r"
    )
    assert result.exit_code == 2 and "nope: data folder not found" in result.stderr
    result = run_cli(
        "predict", "--model", tmp_path / "norun", "--data", world, "--out", tmp_path / "p.json"
    )
    assert result.exit_code == 2 and "norun: run folder not found" in result.stderr
    not_a_run = tmp_path / "not-a-run"
    not_a_run.mkdir()
    result = run_cli("predict", "--model", not_a_run, "--data", world, "--out", tmp_path / "p.json")
    assert result.exit_code == 2 and "config.json" in result.stderr


def test_corrupt_weights_and_config(run_cli, world, tmp_path):
    run = tmp_path / "r"
    assert run_cli("train", "--data", world, "--model", "prior", "--out", run, "-q").exit_code == 0
    (run / "weights.safetensors").write_bytes(b"not safetensors")
    result = run_cli("predict", "--model", run, "--data", world, "--out", tmp_path / "p.json")
    assert result.exit_code == 2
    assert "weights.safetensors: does not match the weights_sha256" in result.stderr
    (run / "config.json").write_text('{"model": "resnet"}')
    result = run_cli("predict", "--model", run, "--data", world, "--out", tmp_path / "p.json")
    assert result.exit_code == 2 and "config.json: unknown model 'resnet'" in result.stderr
    (run / "config.json").write_text('{"model": NaN}')
    result = run_cli("predict", "--model", run, "--data", world, "--out", tmp_path / "p.json")
    assert result.exit_code == 2 and "config.json" in result.stderr


def test_malformed_questions(run_cli, tmp_path):
    gqa = tmp_path / "data" / "gqa"
    gqa.mkdir(parents=True)
    (gqa / "train_balanced_questions.json").write_text('{"q1": {"question": "x?", "imageId": "1"}}')
    result = run_cli(
        "train", "--data", tmp_path / "data", "--model", "prior", "--out", tmp_path / "r"
    )
    assert result.exit_code == 2
    assert "train_balanced_questions.json: record 'q1': missing field 'answer'" in result.stderr
    (gqa / "train_balanced_questions.json").write_text("")
    result = run_cli(
        "train", "--data", tmp_path / "data", "--model", "prior", "--out", tmp_path / "r"
    )
    assert result.exit_code == 2 and "train_balanced_questions.json" in result.stderr


@pytest.mark.parametrize(
    "command", ["synth", "train", "predict", "diagnose", "demo", "conditions export"]
)
def test_every_command_with_progress_bars_takes_quiet(run_cli, command):
    """``-q`` / ``--quiet`` turns the progress bars off wherever there are some."""
    res = run_cli(*command.split(), "--help")
    assert res.exit_code == 0 and "--quiet" in res.stdout and "-q" in res.stdout


def test_synth_quiet_prints_no_progress(run_cli, tmp_path):
    res = run_cli("synth", "--out", tmp_path / "w", "--images", "20", "--no-images", "-q")
    assert res.exit_code == 0, res.stderr
    assert res.stderr == "" and "synthetic world in" in res.stdout
