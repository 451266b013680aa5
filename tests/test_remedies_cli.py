"""`vqadiag finetune` and `train/predict --dataset vqa2` end to end, and their bad input."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("torch")

from vqadiag.protocols.consistency.formulas import QUADRANTS
from vqadiag.workflows.models import train


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    out = tmp_path_factory.mktemp("remedy_cli_world")
    generate_world(out, images=100, seed=4, progress=False)
    return out


@pytest.fixture(scope="module")
def vqa_run(world, tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "updn_vqa2"
    result = train(
        world,
        "updn",
        run,
        epochs=1,
        progress=False,
        dataset="vqa2",
        n_bootstrap=20,
        options={"hidden_dim": 16, "embedding_dim": 16},
    )
    return run, result


def _predict_vqa2(run_cli, model, world, out):
    """``vqadiag predict --dataset vqa2`` of a run on the world's VQA v2 val questions."""
    return run_cli(
        "predict", "--model", model, "--data", world, "--dataset", "vqa2", "--out", out,
        "-q", "--json", "--n-bootstrap", "20",
    )  # fmt: skip


def _finetune(run_cli, method, model, world, out, *extra):
    """``vqadiag finetune --method M --model RUN --data WORLD --out OUT -q EXTRA``."""
    return run_cli(
        "finetune", "--method", method, "--model", model, "--data", world, "--out", out, "-q",
        *extra,
    )  # fmt: skip


def test_train_and_predict_on_vqa2(run_cli, world, vqa_run, tmp_path):
    run, result = vqa_run
    assert result["dataset"] == "vqa2" and result["val"]["split"] == "val"
    vqa_train = json.loads(
        (world / "vqa2" / "v2_OpenEnded_mscoco_train2014_questions.json").read_text()
    )
    assert result["train_questions"] == len(vqa_train["questions"])
    out = _predict_vqa2(run_cli, run, world, tmp_path / "p.json")
    assert out.exit_code == 0, out.stderr
    payload = out.json()
    preds = json.loads((tmp_path / "p.json").read_text())
    vqa_val = json.loads(
        (world / "vqa2" / "v2_OpenEnded_mscoco_val2014_questions.json").read_text()
    )
    assert set(preds) == {str(q["question_id"]) for q in vqa_val["questions"]}
    assert payload["dataset"] == "vqa2" and payload["questions"] == len(preds)


def test_finetune_squint_end_to_end(run_cli, world, vqa_run, tmp_path):
    run, _ = vqa_run
    out = _finetune(
        run_cli,
        "squint",
        run,
        world,
        tmp_path / "ft",
        "--epochs",
        "1",
        "--json",
        "--n-bootstrap",
        "20",
        "-o",
        "batch_size=64",
    )
    assert out.exit_code == 0, out.stderr
    r = out.json()
    assert r["method"] == "squint" and r["epochs"] == 1 and r["lr"] == 0.01
    assert r["options"]["lambda1"] == 0.1 and r["options"]["lambda2"] == 1.0
    assert r["fingerprint"] != r["fingerprint_before"]
    assert {"attention", "main", "sub", "original", "loss"} <= set(r["history"][0])
    for side in ("before", "after"):
        figures = r[side]
        assert set(figures["quadrants"]) == set(QUADRANTS)
        assert sum(figures["quadrants"].values()) == pytest.approx(100.0)
        assert -1.0 <= figures["attention_correlation"] <= 1.0
        assert 0.0 <= figures["vqa_accuracy"] <= 100.0
        assert r["ci"][side]["consistency"]["n"] == figures["n_main"]
        answers = json.loads((tmp_path / "ft" / f"introspect_val_{side}.json").read_text())
        assert len(answers) == figures["n_main"] + figures["n_pairs"]
    config = json.loads((tmp_path / "ft" / "config.json").read_text())
    assert config["training"]["finetune"]["method"] == "squint"
    assert config["training"]["finetune"]["from_fingerprint"] == r["fingerprint_before"]
    # the fine-tuned run is an ordinary UpDn run
    again = _predict_vqa2(run_cli, tmp_path / "ft", world, tmp_path / "p.json")
    assert again.exit_code == 0 and again.json()["fingerprint"] == r["fingerprint"]


def test_finetune_subq_human_output(run_cli, world, vqa_run, tmp_path):
    run, _ = vqa_run
    out = _finetune(
        run_cli, "subq", run, world, tmp_path / "ft", "--epochs", "1", "--n-bootstrap", "20"
    )
    assert out.exit_code == 0, out.stderr
    assert "subq: fine-tuned" in out.stdout and "consistency" in out.stdout
    assert "attention correlation" in out.stdout
    assert "pairs left out" not in out.stderr


def test_finetune_counts_the_pairs_the_model_cannot_learn(run_cli, world, vqa_run, tmp_path):
    """A pair whose main and sub answers are both outside the model's vocabulary teaches
    nothing: it is left out, counted and noted (a model trained on another dataset's
    answers was fine-tuned on a few pairs without a word)."""
    from vqadiag.data.formats.introspect import read_introspect
    from vqadiag.data.io.atomic import file_digest

    run = tmp_path / "run"
    shutil.copytree(vqa_run[0], run)
    vocab = json.loads((run / "answers.json").read_text())
    unknown = {"yes", "no"}  # the model is made not to know these two answers
    (run / "answers.json").write_text(json.dumps([f"{a}#" if a in unknown else a for a in vocab]))
    config = json.loads((run / "config.json").read_text())
    config["answers_sha256"] = file_digest(run / "answers.json")
    (run / "config.json").write_text(json.dumps(config))
    out = _finetune(run_cli, "subq", run, world, tmp_path / "ft", "--epochs", "1", "--no-eval")
    assert out.exit_code == 0, out.stderr
    intro = read_introspect(world / "introspect" / "VQAIntrospect_trainv1.0.json")
    total = sum(len(main.subs) for main in intro.mains.values())
    left_out = int(out.stderr.split("note: ")[1].split(" pairs left out")[0])
    pairs = int(out.stdout.split(" on ")[1].split(" introspect pairs")[0])
    assert 0 < left_out < total and pairs + left_out == total


def test_finetune_into_a_held_folder_is_refused(world, vqa_run, tmp_path):
    """``finetune`` took no lock: two fine-tunings into one ``--out`` wrote one run folder
    together."""
    from vqadiag.data.io.atomic import FolderLock
    from vqadiag.errors import DataError
    from vqadiag.workflows.finetune import finetune

    out = tmp_path / "ft"
    with FolderLock(out), pytest.raises(DataError, match="in use by another vqadiag run"):
        finetune(vqa_run[0], world, out, method="subq", epochs=1, evaluate=False, progress=False)
    assert [p.name for p in out.iterdir()] == [".vqadiag.lock"]


def _introspect_copy(world, tmp_path, text):
    folder = tmp_path / "intro"
    shutil.copytree(world / "introspect", folder)
    (folder / "VQAIntrospect_trainv1.0.json").write_text(text)
    return folder


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "VQAIntrospect_trainv1.0.json"),
        ("{}", "VQAIntrospect_trainv1.0.json: no questions in file"),
        (
            '{"5": {"reasoning_question": "Is it ripe?"}}',
            "VQAIntrospect_trainv1.0.json: record '5': missing field",
        ),
        (
            '{"5": {"reasoning_question": "Is it?", "reasoning_answer_most_common": NaN, '
            '"image_id": 1, "introspect": []}}',
            "VQAIntrospect_trainv1.0.json",
        ),
    ],
)
def test_finetune_bad_introspect_file(run_cli, world, vqa_run, tmp_path, text, message):
    folder = _introspect_copy(world, tmp_path, text)
    out = _finetune(run_cli, "squint", vqa_run[0], world, tmp_path / "ft", "--introspect", folder)
    assert out.exit_code == 2
    assert out.stderr.startswith("error: ") and message in out.stderr


def test_finetune_bad_arguments(run_cli, world, vqa_run, tmp_path):
    run = vqa_run[0]
    bad = _finetune(run_cli, "magic", run, world, tmp_path / "ft")
    assert bad.exit_code == 2 and "unknown method 'magic'" in bad.stderr
    missing = _finetune(
        run_cli, "subq", run, world, tmp_path / "ft", "--introspect", tmp_path / "nowhere"
    )
    assert missing.exit_code == 2 and "nowhere/VQAIntrospect_trainv1.0.json" in missing.stderr
    option = _finetune(run_cli, "subq", run, world, tmp_path / "ft", "-o", "gamma=3")
    assert option.exit_code == 2 and "unknown fine-tuning option(s) ['gamma']" in option.stderr
    # found in review: out-of-range options were tracebacks (batch_size=0 divided by zero,
    # lambda1=nan), numpy's words (mix=-1) or accepted (momentum=1.5); a setting given by
    # its flag and by -o let the flag win silently. Each is one line, before any work.
    for given, message in (
        (("-o", "batch_size=0"), "batch_size must be a whole number of 1 or more, not 0"),
        (("-o", "lambda1=nan"), "lambda1 must be a number of 0 or more, not 'nan'"),
        (("-o", "mix=-1"), "mix must be a number of 0 or more, not -1"),
        (("-o", "momentum=1.5"), "momentum must be a number from 0 to below 1, not 1.5"),
        (("--lr", "0.05", "-o", "lr=0.001"), "lr is also given by --lr: give it once"),
    ):
        res = _finetune(run_cli, "squint", run, world, tmp_path / "ft-bad", *given)
        assert res.exit_code == 2, given
        assert res.stderr.strip() == f"error: --option: {message}", res.stderr
        assert not (tmp_path / "ft-bad").exists()
    # SQuINT's loss weights given to subq, whose loss has none, did nothing
    unused = _finetune(run_cli, "subq", run, world, tmp_path / "ft-bad", "-o", "lambda2=3")
    assert unused.exit_code == 2 and not (tmp_path / "ft-bad").exists()
    assert "option(s) ['lambda2'] weigh SQuINT's loss terms; --method subq does not" in (
        unused.stderr
    )
    prior = tmp_path / "prior"
    assert (
        run_cli(
            "train",
            "--data",
            world,
            "--dataset",
            "vqa2",
            "--model",
            "prior",
            "--out",
            prior,
            "-q",
            "--json",
            "--n-bootstrap",
            "20",
        ).exit_code
        == 0
    )
    blind = _finetune(run_cli, "subq", prior, world, tmp_path / "ft")
    assert blind.exit_code == 2 and "prior/config.json" in blind.stderr
    assert "no object attention" in blind.stderr


def test_train_bad_dataset_and_remedy_options(run_cli, world, tmp_path):
    out = tmp_path / "run"
    bad = run_cli("train", "--data", world, "--model", "updn", "--dataset", "coco", "--out", out)
    assert bad.exit_code == 2 and "--dataset: unknown dataset 'coco'" in bad.stderr
    option = run_cli(
        "train", "--data", world, "--model", "updn", "--out", out, "-q", "-o", "debias=magic"
    )
    assert option.exit_code == 2 and "--option: debias must be one of" in option.stderr
    hint = run_cli(
        "train",
        "--data",
        world,
        "--model",
        "updn",
        "--dataset",
        "vqa2",
        "--out",
        out,
        "-q",
        "-o",
        "hint=1",
        "--epochs",
        "1",
    )
    assert hint.exit_code == 2
    assert "vqa2: hint needs GQA scene graphs and annotations" in hint.stderr
