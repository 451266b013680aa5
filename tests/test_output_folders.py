"""Output folders, locks and links (docs/reliability.md, "Output folders, locks and links"):
vqadiag writes only into folders it marked as its own, never through a link, and never
over one of a command's inputs."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from vqadiag.data.io.atomic import LOCK_NAME, FolderLock
from vqadiag.data.io.folders import MARKER
from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError
from vqadiag.models.registry import model_class
from vqadiag.synth import generate_world


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("folders") / "world"
    generate_world(root, images=40, seed=3, render=False)
    return root


@pytest.fixture(scope="module")
def prior(world, tmp_path_factory):
    folder = tmp_path_factory.mktemp("run") / "prior"
    model_class("prior").train(GQAData(world), progress=False).save(folder)
    return folder


@pytest.fixture(scope="module")
def result(world, prior, tmp_path_factory):
    """A finished result folder (read only by the tests)."""
    from vqadiag.diagnosis.diagnose import diagnose

    out = tmp_path_factory.mktemp("res") / "res"
    diagnose(world, str(prior), out, suites="accuracy", n_bootstrap=20, max_questions=40)
    return out


def _diagnose_args(world, prior, out):
    return ("diagnose", "--data", world, "--model", prior, "--out", out,
            "--suite", "accuracy", "--n-bootstrap", "20", "--max-questions", "40")  # fmt: skip


def _one_line(res, *parts):
    assert res.exit_code == 2, (res.stdout, res.stderr)
    line = res.stderr.strip()
    assert "\n" not in line and line.startswith("error: "), line
    for part in parts:
        assert str(part) in line, (part, line)
    return line


def _user_database(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (body TEXT)")
    db.execute("INSERT INTO notes VALUES ('mine')")
    db.commit()
    db.close()


def _tables(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return sorted(r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'"))
    finally:
        db.close()


# -- 4: the lock is never followed through a link -----------------------------------------


def test_a_lock_that_is_a_link_is_refused_and_its_target_untouched(
    run_cli, world, prior, result, tmp_path
):
    victim = tmp_path / "thesis.tex"
    victim.write_text("my thesis")
    out = tmp_path / "res"
    out.mkdir()
    (out / LOCK_NAME).symlink_to(victim)
    _one_line(run_cli(*_diagnose_args(world, prior, out)), LOCK_NAME, "is a link")
    rep = tmp_path / "rep"
    rep.mkdir()
    (rep / LOCK_NAME).symlink_to(victim)
    _one_line(run_cli("report", result, "--out", rep), LOCK_NAME, "is a link")
    with pytest.raises(DataError, match="is a link"), FolderLock(rep):
        pass
    assert victim.read_text() == "my thesis"
    assert not (out / "results.json").exists() and not (rep / "report.html").exists()


def test_a_lock_that_is_a_hard_link_is_refused_and_its_target_untouched(tmp_path):
    victim = tmp_path / "notes.txt"
    victim.write_text("mine")
    (tmp_path / "out").mkdir()
    os.link(victim, tmp_path / "out" / LOCK_NAME)
    with pytest.raises(DataError, match="not a lock file of its own"), FolderLock(tmp_path / "out"):
        pass
    assert victim.read_text() == "mine"


def test_a_store_that_is_a_link_is_refused(tmp_path):
    from vqadiag.probes.store import PredictionStore

    theirs = tmp_path / "theirs.sqlite"
    _user_database(theirs)
    (tmp_path / "store.sqlite").symlink_to(theirs)
    with pytest.raises(DataError, match="is a link"):
        PredictionStore(tmp_path / "store.sqlite")
    assert _tables(theirs) == ["notes"]


# -- 5: a folder is vqadiag's only when vqadiag marked it so -------------------------------


def test_a_users_store_results_config_and_report_are_not_taken_as_ours(
    run_cli, world, prior, result, tmp_path
):
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    _user_database(store_dir / "store.sqlite")
    _one_line(run_cli(*_diagnose_args(world, prior, store_dir)), store_dir,
              "not a folder vqadiag wrote")  # fmt: skip
    assert _tables(store_dir / "store.sqlite") == ["notes"]
    assert sorted(p.name for p in store_dir.iterdir()) == ["store.sqlite"]
    cases = [
        ("results.json", '{"accuracy": 0.9}', _diagnose_args(world, prior, tmp_path / "r")),
        ("config.json", '{"lr": 0.1}',
         ("train", "--data", world, "--model", "prior", "--out", tmp_path / "c")),
        ("report.html", "<p>mine</p>", ("report", result, "--out", tmp_path / "h")),
        ("report.json", '{"kind": "mine"}', ("report", result, "--out", tmp_path / "j")),
    ]  # fmt: skip
    for name, text, args in cases:
        folder = Path(args[args.index("--out") + 1])
        folder.mkdir()
        (folder / name).write_text(text)
        _one_line(run_cli(*args), folder, "not a folder vqadiag wrote")
        assert [p.name for p in folder.iterdir()] == [name]
        assert (folder / name).read_text() == text


def test_the_store_never_adds_its_tables_to_another_database(tmp_path):
    from vqadiag.probes.store import PredictionStore

    _user_database(tmp_path / "store.sqlite")
    with pytest.raises(DataError, match="not a vqadiag prediction store: it holds other tables"):
        PredictionStore(tmp_path / "store.sqlite")
    assert _tables(tmp_path / "store.sqlite") == ["notes"]


def test_a_folder_of_another_kind_is_refused(run_cli, world, result, tmp_path):
    res = run_cli("train", "--data", world, "--model", "prior", "--out", result)
    _one_line(res, result, "is a vqadiag result folder, not a run folder")


def test_folders_of_earlier_versions_are_accepted_and_marked(run_cli, world, prior, tmp_path):
    out = tmp_path / "res"
    assert run_cli(*_diagnose_args(world, prior, out)).exit_code == 0
    assert json.loads((out / MARKER).read_text())["folder"] == "result folder"
    (out / MARKER).unlink()  # as an earlier vqadiag left it: results.json says whose it is
    assert run_cli(*_diagnose_args(world, prior, out)).exit_code == 0
    assert (out / MARKER).is_file()
    for name in (MARKER, "results.json", "per_question.jsonl", "timing.json"):
        (out / name).unlink()  # killed before results.json: the store's schema says so
    shutil_rmtree(out / "predictions")
    assert run_cli(*_diagnose_args(world, prior, out)).exit_code == 0
    assert (out / MARKER).is_file() and (out / "results.json").is_file()
    rep = tmp_path / "rep"
    assert run_cli("report", out, "--out", rep, "--n-bootstrap", "10").exit_code == 0
    (rep / MARKER).unlink()  # an earlier report: its report.json says so
    assert run_cli("report", out, "--out", rep, "--n-bootstrap", "10").exit_code == 0
    assert (rep / MARKER).is_file()
    run = tmp_path / "run"
    model_class("prior").train(GQAData(world), progress=False).save(run)  # no marker
    res = run_cli("train", "--data", world, "--model", "prior", "--out", run)
    assert res.exit_code == 0, res.stderr
    assert json.loads((run / MARKER).read_text())["folder"] == "run folder"


def shutil_rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path)


# -- 8: a result folder refuses links that leave it ----------------------------------------


def test_a_link_out_of_the_result_folder_is_refused(run_cli, world, prior, tmp_path):
    out = tmp_path / "res"
    assert run_cli(*_diagnose_args(world, prior, out)).exit_code == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil_rmtree(out / "predictions")
    (out / "predictions").symlink_to(elsewhere, target_is_directory=True)
    _one_line(run_cli(*_diagnose_args(world, prior, out)), out / "predictions",
              "is a link out of the folder")  # fmt: skip
    assert list(elsewhere.iterdir()) == []
    (out / "predictions").unlink()
    (out / "predictions").symlink_to(out / "inputs", target_is_directory=True)  # stays inside
    assert run_cli(*_diagnose_args(world, prior, out)).exit_code == 0


# -- 6: an output equal to an input is refused ---------------------------------------------


def test_an_output_that_is_an_input_is_refused_before_any_work(run_cli, world, result, tmp_path):
    gqa, vqa = world / "gqa", world / "vqa2"
    questions = tmp_path / "questions.json"
    questions.write_bytes((gqa / "val_balanced_questions.json").read_bytes())
    predictions = tmp_path / "predictions.json"
    predictions.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(predictions)
    table = result / "per_question.jsonl"
    before = {p: p.read_bytes() for p in (questions, predictions, table)}
    cases = [
        (("relevance", "--questions", questions, "--scenes", gqa / "val_sceneGraphs.json",
          "--detections", gqa / "objects", "--out", questions), "--questions"),
        (("score", "vqa", "--questions", vqa / "v2_OpenEnded_mscoco_val2014_questions.json",
          "--annotations", vqa / "v2_mscoco_val2014_annotations.json",
          "--predictions", predictions, "--per-question", predictions), "--predictions"),
        (("score", "vqa", "--questions", vqa / "v2_OpenEnded_mscoco_val2014_questions.json",
          "--annotations", vqa / "v2_mscoco_val2014_annotations.json",
          "--predictions", link, "--per-question", predictions), "--predictions"),
        (("export", result, "--out", table), "RESULT_DIR"),
        (("report", result, "--out", result), "not a report folder"),
        (("report", result, "--out", result / "report"), "RESULT_DIR"),
        (("predict", "--model", f"files:{predictions}", "--data", world, "--out", predictions),
         "--model"),
        (("classify-questions", "--questions", questions, "--out", questions), "--questions"),
    ]  # fmt: skip
    for args, flag in cases:
        _one_line(run_cli(*args), flag)
    assert {p: p.read_bytes() for p in before} == before
    os.link(predictions, tmp_path / "hard.json")  # a hard link is the same file too
    vqa_files = ("--questions", vqa / "v2_OpenEnded_mscoco_val2014_questions.json",
                 "--annotations", vqa / "v2_mscoco_val2014_annotations.json")  # fmt: skip
    res = run_cli("score", "vqa", *vqa_files, "--predictions", predictions,
                  "--per-question", tmp_path / "hard.json")  # fmt: skip
    _one_line(res, "hard.json", "--predictions")


def test_an_output_inside_a_folder_the_command_reads_is_refused(run_cli, world, prior, tmp_path):
    """Found in review: predict --out RUN/config.json destroyed the run it read, predict
    --out DATA/gqa/val_balanced_questions.json replaced the questions it had just read,
    and train / finetune / explain wrote run folders into the data folder (whose files
    named after the split enter its fingerprint). Each is refused before any work."""
    config = (prior / "config.json").read_bytes()
    questions = (world / "gqa" / "val_balanced_questions.json").read_bytes()
    cases = [
        (("predict", "--model", prior, "--data", world, "--out", prior / "config.json"),
         "lies inside --model"),
        (("predict", "--model", prior, "--data", world,
          "--out", world / "gqa" / "val_balanced_questions.json"), "lies inside --data"),
        (("train", "--model", "prior", "--data", world, "--out", world / "gqa" / "run"),
         "lies inside --data"),
        (("finetune", "--method", "squint", "--model", prior, "--data", world,
          "--out", prior / "ft"),
         "lies inside --model"),
        (("explain", "train", "--data", world, "--out", world / "ex"), "lies inside --data"),
    ]  # fmt: skip
    for args, part in cases:
        _one_line(run_cli(*args), part, "write --out elsewhere")
    assert (prior / "config.json").read_bytes() == config
    assert (world / "gqa" / "val_balanced_questions.json").read_bytes() == questions
    assert not (world / "gqa" / "run").exists() and not (world / "ex").exists()


def test_the_python_api_refuses_the_same_outputs(world, prior, result, tmp_path):
    """Found in review: the checks were the command line's, so ``vqadiag.predict`` wrote
    its answers over the questions it read and ``vqadiag.finetune`` over its source run.
    The API functions now make them, and a single result folder is a folder, not a list
    of its path's characters."""
    import vqadiag
    from vqadiag.errors import DataError

    questions = world / "gqa" / "val_balanced_questions.json"
    before = questions.read_bytes()
    calls = [
        (lambda: vqadiag.predict(prior, world, questions), "lies inside --data"),
        (lambda: vqadiag.predict(prior, world, prior / "config.json"), "lies inside --model"),
        (lambda: vqadiag.train(world, "prior", world / "gqa" / "run"), "lies inside --data"),
        (lambda: vqadiag.finetune(prior, world, prior), "is also the input --model"),
        (lambda: vqadiag.diagnose(world, str(prior), world / "res"), "lies inside --data"),
        (lambda: vqadiag.export(result, result / "t.csv"), "lies inside RESULT_DIR"),
        (lambda: vqadiag.report([result], result / "rep"), "lies inside RESULT_DIR"),
    ]
    for call, says in calls:
        with pytest.raises(DataError, match=says):
            call()
    assert questions.read_bytes() == before and not (world / "res").exists()
    assert len(vqadiag.per_question_table(result)) == len(vqadiag.per_question_table([result]))
    assert vqadiag.export(str(result), tmp_path / "t.csv")["rows"] > 0


def test_an_output_folder_holding_an_input_is_refused(run_cli, world, tmp_path):
    gqa = world / "gqa"
    split = tmp_path / "split"
    split.mkdir()
    head = split / "ood_head.json"
    head.write_text("{}")
    res = run_cli("score", "ood", "--questions", gqa / "val_balanced_questions.json",
                  "--head", head, "--tail", head, "--write-split", split)  # fmt: skip
    _one_line(res, split, "holds the input --head")
    assert head.read_text() == "{}"


# -- messages -------------------------------------------------------------------------------


def test_a_full_disk_while_creating_the_store_names_the_file(tmp_path, monkeypatch):
    from vqadiag.probes.store import PredictionStore

    real = sqlite3.connect

    def tiny(*args, **kwargs):  # a database that cannot grow: SQLite's "disk is full"
        db = real(*args, **kwargs)
        db.execute("PRAGMA max_page_count=1")
        return db

    monkeypatch.setattr(sqlite3, "connect", tiny)
    with pytest.raises(DataError) as err:
        PredictionStore(tmp_path / "store.sqlite")
    text = str(err.value)
    assert str(tmp_path / "store.sqlite") in text and "database or disk is full" in text
    assert "not a vqadiag prediction store" not in text


def test_a_write_error_names_the_file(run_cli, result, tmp_path, monkeypatch):
    def full(_fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    out = tmp_path / "table.csv"
    res = run_cli("export", result, "--out", out)
    assert _one_line(res) == f"error: {out}: No space left on device"


def test_diagnose_on_an_empty_folder_or_an_unknown_split_is_one_line(
    run_cli, world, prior, tmp_path
):
    empty = tmp_path / "empty"
    empty.mkdir()
    for data, split in ((empty, "val"), (world, "vall")):
        res = run_cli("diagnose", "--data", data, "--model", prior, "--out", tmp_path / "o",
                      "--split", split)  # fmt: skip
        _one_line(res, data, f"no GQA or VQA v2 question file for split '{split}'")
        assert not (tmp_path / "o").exists()
