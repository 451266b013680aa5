"""Never silently wrong: atomic artefacts, committed per-question tables and basic-question
datasets, locked result folders (docs/reliability.md)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from vqadiag.data.io.atomic import FolderLock, atomic_write, file_digest, write_bytes_atomic
from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.errors import DataError
from vqadiag.models.registry import model_class
from vqadiag.synth import generate_world


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("reliable") / "world"
    generate_world(root, images=120, seed=3)
    return root


@pytest.fixture(scope="module")
def prior(world, tmp_path_factory):
    folder = tmp_path_factory.mktemp("run") / "prior"
    model_class("prior").train(GQAData(world), progress=False).save(folder)
    return folder


def _diagnose(world, prior, out, **kwargs):
    from vqadiag.diagnosis.diagnose import diagnose

    suites = kwargs.get("suites", "all")  # a ranker for the robustness suite alone
    ranker = {"bq_ranker": "bleu1"} if "robustness" in suites or suites == "all" else {}
    options = {"n_bootstrap": 20, "max_questions": 40, **ranker, **kwargs}
    return diagnose(world, str(prior), out, **options)


# -- atomic writes -----------------------------------------------------------------------


def test_a_failed_atomic_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "a.json"
    write_bytes_atomic(target, b"old")
    with pytest.raises(RuntimeError), atomic_write(target) as fh:
        fh.write(b"half of the new")
        raise RuntimeError("killed")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]
    write_bytes_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


def test_file_digest_is_sha256(tmp_path):
    path = write_bytes_atomic(tmp_path / "x", b"abc")
    # sha256("abc"), FIPS 180-2 appendix B.1
    assert file_digest(path) == ("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")


# -- locks -------------------------------------------------------------------------------


def test_a_locked_folder_refuses_a_second_holder_until_released(tmp_path):
    with FolderLock(tmp_path / "out"):
        with pytest.raises(DataError) as err, FolderLock(tmp_path / "out"):
            pass
        assert "in use by another vqadiag run" in str(err.value)
        assert f"pid {__import__('os').getpid()}" in str(err.value)
    with FolderLock(tmp_path / "out"):  # released: free again
        pass


def test_diagnose_into_a_folder_another_run_holds_exits_2_naming_it(
    run_cli, world, prior, tmp_path
):
    out = tmp_path / "res"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from vqadiag.data.io.atomic import FolderLock
            with FolderLock({str(out)!r}):
                print("held", flush=True)
                time.sleep(60)
        """)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        res = run_cli("diagnose", "--data", world, "--model", prior, "--out", out,
                      "--suite", "accuracy", "--n-bootstrap", "20")  # fmt: skip
        assert res.exit_code == 2
        line = res.stderr.strip()
        assert "\n" not in line and "in use by another vqadiag run" in line
        assert f"pid {holder.pid}" in line and str(out) in line
        assert not (out / "results.json").exists()
    finally:
        holder.kill()
        holder.wait()
    # the holder died: the kernel released its lock, the folder is usable again
    time.sleep(0.1)
    res = run_cli("diagnose", "--data", world, "--model", prior, "--out", out,
                  "--suite", "accuracy", "--n-bootstrap", "20")  # fmt: skip
    assert res.exit_code == 0, res.stderr


# -- results.json commits per_question.jsonl ----------------------------------------------


def test_report_and_export_refuse_a_torn_or_empty_per_question_table(
    run_cli, world, prior, tmp_path
):
    out = tmp_path / "res"
    result = _diagnose(world, prior, out, suites="accuracy,fpvg")
    table = out / "per_question.jsonl"
    lines = table.read_bytes().splitlines(keepends=True)
    assert result["per_question_rows"] == len(lines) > 40
    assert result["per_question_sha256"] == file_digest(table)
    ok = run_cli("report", out, "--out", tmp_path / "rep")
    assert ok.exit_code == 0, ok.stderr
    for torn in (b"".join(lines[: len(lines) // 2]), b""):
        table.write_bytes(torn)
        for args in (("report", out, "--out", tmp_path / "rep2"),
                     ("export", out, "--out", tmp_path / "t.csv")):  # fmt: skip
            res = run_cli(*args)
            assert res.exit_code == 2, (args, res.stdout)
            line = res.stderr.strip()
            assert "\n" not in line and "per_question.jsonl" in line
            assert "does not match results.json" in line


def test_per_question_must_stay_inside_the_result_folder(run_cli, world, prior, tmp_path):
    out = tmp_path / "res"
    _diagnose(world, prior, out, suites="accuracy")
    results = json.loads((out / "results.json").read_text())
    for name in ("../elsewhere.jsonl", "/etc/passwd", ".."):
        (out / "results.json").write_text(json.dumps({**results, "per_question": name}))
        res = run_cli("report", out, "--out", tmp_path / "rep")
        assert res.exit_code == 2
        assert "per_question must be a file name in the folder" in res.stderr


# -- bqd.meta.json commits bqd.json --------------------------------------------------------


def _bqd_records(out):
    """The dataset's records (its meta records the build time, which differs)."""
    return json.loads((out / "bqd.json").read_text())["records"]


def test_a_run_killed_while_building_the_bqd_never_leaves_it_for_another_ranker(
    world, prior, tmp_path, monkeypatch
):
    out = tmp_path / "res"
    first = _diagnose(world, prior, out, suites="robustness")
    bleu = _bqd_records(out)
    assert first["suites"]["robustness"]["bqd"]["cached"] is False

    # a ROUGE build dies right after writing bqd.json, before its meta file
    import vqadiag.protocols.robustness.basic_questions.bqd_build as bqd_build

    real = bqd_build.build_bqd

    def build_then_die(*args, **kwargs):
        real(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(bqd_build, "build_bqd", build_then_die)
    with pytest.raises(KeyboardInterrupt):
        _diagnose(world, prior, out, suites="robustness", bq_ranker="rouge")
    monkeypatch.setattr(bqd_build, "build_bqd", real)
    assert _bqd_records(out) != bleu  # the other ranker's dataset is there

    again = _diagnose(world, prior, out, suites="robustness")
    assert again["suites"]["robustness"]["bqd"]["cached"] is False  # rebuilt, not reused
    assert _bqd_records(out) == bleu
    assert again["summary"]["r_score"] == first["summary"]["r_score"]
    # and a meta file that names the key but not these bytes is not trusted either
    meta = json.loads((out / "bqd.meta.json").read_text())
    (out / "bqd.meta.json").write_text(json.dumps({**meta, "sha256": "0" * 64}))
    third = _diagnose(world, prior, out, suites="robustness")
    assert third["suites"]["robustness"]["bqd"]["cached"] is False
    fourth = _diagnose(world, prior, out, suites="robustness")
    assert fourth["suites"]["robustness"]["bqd"]["cached"] is True


# -- OS failures are one line, found before the work --------------------------------------


def test_outputs_in_the_wrong_place_are_one_line_before_any_work(run_cli, world, prior, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    gqa, vqa = world / "gqa", world / "vqa2"
    predictions = tmp_path / "p.json"
    predictions.write_text("{}")
    cases = [
        (("train", "--data", world, "--model", "question-only", "--out", a_file),
         "is a file, expected a folder"),
        (("train", "--data", world, "--model", "question-only", "--out", a_file / "run"),
         "cannot write here"),
        (("predict", "--model", prior, "--data", world, "--out", tmp_path),
         "is a folder, expected a file"),
        (("diagnose", "--data", world, "--model", prior, "--out", a_file / "res"),
         "cannot write here"),
        (("synth", "--images", "20", "--out", a_file), "is a file, expected a folder"),
        (("report", tmp_path, "--out", a_file), "is a file, expected a folder"),
        (("score", "vqa", "--questions", vqa / "v2_OpenEnded_mscoco_val2014_questions.json",
          "--annotations", vqa / "v2_mscoco_val2014_annotations.json",
          "--predictions", predictions, "--per-question", tmp_path),
         "is a folder, expected a file"),
        (("bq", "build", "--pool", gqa / "train_balanced_questions.json", "--main",
          gqa / "val_balanced_questions.json", "--ranker", "bleu1", "--out", tmp_path),
         "is a folder, expected a file"),
        (("bq", "noise", "--bqd", a_file, "--questions", gqa / "val_balanced_questions.json",
          "--out", a_file), "is a file, expected a folder"),
        (("score", "ood", "--questions", gqa / "val_balanced_questions.json",
          "--write-split", a_file), "is a file, expected a folder"),
        (("score", "ood", "--questions", gqa / "val_balanced_questions.json",
          "--predictions", predictions, "--plot", tmp_path), "is a folder, expected a file"),
    ]  # fmt: skip
    for args, message in cases:
        started = time.perf_counter()
        res = run_cli(*args)
        assert res.exit_code == 2, (args, res.stdout, res.stderr)
        line = res.stderr.strip()
        assert "\n" not in line and message in line and str(tmp_path) in line, (args, line)
        assert time.perf_counter() - started < 30  # refused up front, not after training
    assert a_file.read_text() == "mine"


def test_os_and_store_errors_become_one_line(capsys):
    import sqlite3

    import typer

    from vqadiag.console.common import cli_errors

    def denied():
        raise PermissionError(13, "Permission denied", "/data/x.json")

    def disk_full():
        raise OSError(28, "No space left on device", "/out/results.json")

    def store_full():
        raise sqlite3.OperationalError("database or disk is full")

    expected = [
        "error: /data/x.json: Permission denied",
        "error: /out/results.json: No space left on device",
        "error: prediction store (store.sqlite): database or disk is full",
    ]
    for fn, line in zip((denied, disk_full, store_full), expected, strict=True):
        with pytest.raises(typer.Exit) as stop:
            cli_errors(fn)()
        assert stop.value.exit_code == 2
        assert capsys.readouterr().err.strip() == line


def test_a_folder_given_as_an_input_file_is_one_line(run_cli, world, tmp_path):
    gqa = world / "gqa"
    for args in (
        ("score", "gqa", "--questions", tmp_path, "--predictions", tmp_path),
        ("score", "gqa", "--questions", gqa / "val_balanced_questions.json",
         "--predictions", tmp_path),
        ("relevance", "--questions", tmp_path, "--scenes", gqa / "val_sceneGraphs.json",
         "--detections", gqa / "objects", "--out", tmp_path / "r.json"),
    ):  # fmt: skip
        res = run_cli(*args)
        assert res.exit_code == 2, (args, res.stdout)
        # one error line naming the folder (a progress bar may come before it)
        errors = [x for x in res.stderr.splitlines() if x.startswith("error")]
        assert len(errors) == 1 and str(tmp_path) in errors[0], res.stderr
        assert "Traceback" not in res.stderr and "Usage:" not in res.stderr


def test_a_model_name_with_dollars_is_drawn_literally(run_cli, world, prior, tmp_path):
    out = tmp_path / "res"
    _diagnose(world, prior, out, suites="accuracy,fpvg")
    results = json.loads((out / "results.json").read_text())
    name = r"model $\undefinedcmd$"  # not valid mathtext: it raises if parsed
    results["model"]["name"] = name
    (out / "results.json").write_text(json.dumps(results))
    res = run_cli("report", out, "--out", tmp_path / "rep")
    assert res.exit_code == 0, res.stderr
    assert r"$\\undefinedcmd$" in (tmp_path / "rep" / "report.json").read_text()


# -- synth builds its world aside and renames it when complete ------------------------------


def test_an_interrupted_synth_leaves_no_world_behind(tmp_path, monkeypatch):
    import vqadiag.synth.gqa_split as gqa_split_module  # writes the first files of a world

    real = gqa_split_module.write_json
    calls = {"n": 0}

    def write_then_die(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(gqa_split_module, "write_json", write_then_die)
    with pytest.raises(KeyboardInterrupt):
        generate_world(tmp_path / "w", images=20, seed=0, render=False)
    monkeypatch.setattr(gqa_split_module, "write_json", real)
    assert list(tmp_path.iterdir()) == []  # neither the world nor its partial folder
    # a complete world replaces an earlier one, identical to a fresh build
    generate_world(tmp_path / "w", images=20, seed=1, render=False)
    generate_world(tmp_path / "w", images=20, seed=0, render=False)
    generate_world(tmp_path / "fresh", images=20, seed=0, render=False)
    for name in ("world.json", "gqa/val_balanced_questions.json"):
        assert (tmp_path / "w" / name).read_bytes() == (tmp_path / "fresh" / name).read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "w"]


def test_synth_refuses_a_folder_of_other_files(run_cli, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    res = run_cli("synth", "--images", "20", "--out", tmp_path)
    assert res.exit_code == 2
    line = res.stderr.strip()
    assert "\n" not in line and str(tmp_path) in line and "holds no synthetic world" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_folder_of_the_users_own_files_is_never_written_into(run_cli, world, prior, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    result_dir = tmp_path / "res"
    _diagnose(world, prior, result_dir, suites="accuracy")
    for args in (
        ("diagnose", "--data", world, "--model", prior, "--out", mine, "--suite", "accuracy"),
        ("train", "--data", world, "--model", "prior", "--out", mine),
        ("report", result_dir, "--out", mine),
    ):
        res = run_cli(*args)
        assert res.exit_code == 2, (args, res.stdout)
        line = res.stderr.strip()
        assert "\n" not in line and str(mine) in line and "not a folder vqadiag wrote" in line
        assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    # vqadiag's own folders are reused: a rerun into the result folder works
    again = run_cli("diagnose", "--data", world, "--model", prior, "--out", result_dir,
                    "--suite", "accuracy", "--n-bootstrap", "20")  # fmt: skip
    assert again.exit_code == 0, again.stderr


# -- the basic-question ranking is checkpointed per chunk ----------------------------------


def test_a_killed_lasso_build_resumes_from_its_finished_chunks(world, tmp_path, monkeypatch):
    import vqadiag.protocols.robustness.basic_questions.rankers as rankers
    from vqadiag.protocols.robustness.basic_questions.bqd_build import LASSO_CHUNK, build_bqd

    gqa = world / "gqa"
    pool, main = [gqa / "train_balanced_questions.json"], gqa / "val_balanced_questions.json"
    n_main = min(3 * LASSO_CHUNK - 5, len(json.loads(main.read_text())))
    assert n_main > 2 * LASSO_CHUNK  # three chunks, the last one short
    options = {"ranker": "lasso", "max_main": n_main, "progress": False, "dim": 64}
    build_bqd(pool, main, tmp_path / "fresh.json", **options)

    real = rankers.lasso_chunk
    calls = {"n": 0}

    def counted(shared, chunk, die_at=None):
        calls["n"] += 1
        if calls["n"] == die_at:
            raise KeyboardInterrupt
        return real(shared, chunk)

    monkeypatch.setattr(rankers, "lasso_chunk", lambda s, c: counted(s, c, die_at=3))
    with pytest.raises(KeyboardInterrupt):  # killed while ranking the third chunk
        build_bqd(pool, main, tmp_path / "bqd.json", **options)
    assert not (tmp_path / "bqd.json").exists()
    assert len(list(tmp_path.glob(".bqd.json.chunks-*/*.json"))) == 2

    calls["n"] = 0
    monkeypatch.setattr(rankers, "lasso_chunk", lambda s, c: counted(s, c))
    build_bqd(pool, main, tmp_path / "bqd.json", **options)
    assert calls["n"] == 1  # only the missing chunk was ranked again
    resumed = json.loads((tmp_path / "bqd.json").read_text())["records"]
    fresh = json.loads((tmp_path / "fresh.json").read_text())["records"]
    assert resumed == fresh and len(fresh) == n_main
    assert list(tmp_path.glob(".bqd.json.chunks-*")) == []  # checkpoints removed when done

    # other parameters never reuse these checkpoints
    calls["n"] = 0
    monkeypatch.setattr(rankers, "lasso_chunk", lambda s, c: counted(s, c, die_at=2))
    with pytest.raises(KeyboardInterrupt):
        build_bqd(pool, main, tmp_path / "other.json", **options)
    calls["n"] = 0
    monkeypatch.setattr(rankers, "lasso_chunk", lambda s, c: counted(s, c))
    build_bqd(pool, main, tmp_path / "other.json", **{**options, "lam": 0.02})
    assert calls["n"] == 3


# -- a pipe is read once ---------------------------------------------------------------------


def test_process_substitutions_are_read_once(world, tmp_path):
    import shutil

    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("needs bash for <(…)")
    truth = world / "gqa" / "val_balanced_questions.json"
    questions = json.loads(truth.read_text())
    clean = tmp_path / "clean.json"
    noisy = tmp_path / "noisy.json"
    clean.write_text(json.dumps({q: r["answer"] for q, r in questions.items()}))
    noisy.write_text(json.dumps({q: "no" for q in questions}))
    cmd = [sys.executable, "-m", "vqadiag", "score", "robustness", "--json", "--n-bootstrap", "20"]
    files = ["--truth", truth, "--clean", clean, "--noisy", noisy]
    direct = subprocess.run([*cmd, *files], capture_output=True, text=True)
    assert direct.returncode == 0, direct.stderr
    piped = " ".join(cmd) + f" --truth <(cat {truth}) --clean <(cat {clean}) --noisy <(cat {noisy})"
    through_pipes = subprocess.run([bash, "-c", piped], capture_output=True, text=True)
    assert through_pipes.returncode == 0, through_pipes.stderr
    a, b = json.loads(direct.stdout), json.loads(through_pipes.stdout)
    assert a["truth"] == b["truth"] == "gqa" and a["partitions"] == b["partitions"]


def test_optional_inputs_read_once_through_process_substitutions(world, tmp_path):
    """``bq build --pool`` (repeatable, format sniffed before reading) through ``<(…)``
    builds the dataset the plain files build."""
    import shutil

    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("needs bash for <(…)")
    pool = world / "gqa" / "train_balanced_questions.json"
    main = world / "gqa" / "val_balanced_questions.json"
    line = f"{sys.executable} -m vqadiag bq build --ranker bleu1 -q --main {main} --out"
    plain = subprocess.run(
        [bash, "-c", f"{line} {tmp_path / 'a.json'} --pool {pool}"], capture_output=True, text=True
    )
    assert plain.returncode == 0, plain.stderr
    piped = subprocess.run(
        [bash, "-c", f"{line} {tmp_path / 'b.json'} --pool <(cat {pool})"],
        capture_output=True,
        text=True,
    )
    assert piped.returncode == 0, piped.stderr
    a, b = (json.loads((tmp_path / n).read_text())["records"] for n in ("a.json", "b.json"))
    assert a == b and len(a) == len(json.loads(main.read_text()))


def test_only_dead_writers_temporaries_are_removed(tmp_path):
    import os

    from vqadiag.data.io.atomic import remove_stale_temporaries

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    names = {
        f".results.json.{dead}.0a1b2c3d.tmp": False,  # a dead writer's: removed
        f".results.json.{os.getpid()}.0a1b2c3d.tmp": True,  # a live writer's: kept
        f".notes.{dead}.anything.tmp": True,  # not a name atomic_write gives: kept
        ".a.99999999999.0a1b2c3d.tmp": True,  # no such process id: not ours, kept
    }
    (tmp_path / "sub").mkdir()
    for name in names:
        (tmp_path / "sub" / name).write_text("x")
    assert remove_stale_temporaries(tmp_path, recursive=True) == 1
    assert {p.name for p in (tmp_path / "sub").iterdir()} == {
        n for n, kept in names.items() if kept
    }


def test_a_killed_bq_noise_can_be_run_again(run_cli, world, tmp_path):
    gqa = world / "gqa"
    bqd = tmp_path / "bqd.json"
    built = run_cli("bq", "build", "--pool", gqa / "train_balanced_questions.json",
                    "--main", gqa / "val_balanced_questions.json", "--ranker", "bleu1", "-q",
                    "--out", bqd)  # fmt: skip
    assert built.exit_code == 0, built.stderr
    out = tmp_path / "noise"
    (out / "partition_1").mkdir(parents=True)  # what a run killed before its manifest leaves
    res = run_cli("bq", "noise", "--bqd", bqd, "--questions", gqa / "val_balanced_questions.json",
                  "--out", out)  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert (out / "manifest.json").is_file()


# -- found by the OS-failure review ----------------------------------------------------


def test_exports_and_trainings_into_a_held_folder_are_refused(world, tmp_path):
    """Two ``conditions export`` runs into one folder left a manifest naming images the
    other run had deleted, both exiting 0; two trainings into one ``--out`` both said
    they succeeded. A held folder is now one line, before any work."""
    from vqadiag.workflows.conditions import export_conditions
    from vqadiag.workflows.models import train

    for out, run in (
        (tmp_path / "export", lambda o: export_conditions(world, o, suites="accuracy")),
        (tmp_path / "run", lambda o: train(world, "prior", o, progress=False)),
    ):
        with FolderLock(out), pytest.raises(DataError, match="in use by another vqadiag run"):
            run(out)
        assert [p.name for p in out.iterdir()] == [".vqadiag.lock"]


def test_explain_train_into_a_held_folder_is_refused(world, tmp_path):
    """``explain train`` took no lock: two trainings into one ``--out`` both said they
    succeeded, the second writing over the first's weights."""
    pytest.importorskip("torch")
    from vqadiag.workflows.explain import train

    out = tmp_path / "explainer"
    with FolderLock(out), pytest.raises(DataError, match="in use by another vqadiag run"):
        train(world, out, epochs=1, progress=False, val_split=None)
    assert [p.name for p in out.iterdir()] == [".vqadiag.lock"]


def test_a_killed_exports_scratch_folder_goes_with_the_next_export(world, tmp_path):
    from vqadiag.workflows.conditions import export_conditions

    out = tmp_path / "export"
    export_conditions(world, out, suites="accuracy", max_questions=5)
    (out / ".conditions-killed" / "run").mkdir(parents=True)  # what SIGKILL left
    (out / ".conditions-killed" / "run" / "store.sqlite").write_bytes(b"x" * 100)
    export_conditions(world, out, suites="accuracy", max_questions=5)
    assert not list(out.glob(".conditions-*"))


def test_a_report_json_is_never_beside_another_runs_page(world, prior, tmp_path, monkeypatch):
    """A second report interrupted while drawing kept the first one's report.html beside
    its own new report.json; both now go first, and report.json comes last."""
    from vqadiag.report import html
    from vqadiag.workflows.report import report

    result = tmp_path / "res"
    _diagnose(world, prior, result, suites="accuracy")
    report([result], tmp_path / "rep", n_bootstrap=20)
    assert {p.name for p in (tmp_path / "rep").glob("report.*")} == {"report.json", "report.html"}

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(html, "render_html", interrupted)
    with pytest.raises(KeyboardInterrupt):
        report([result], tmp_path / "rep", n_bootstrap=20, seed=1)
    assert not list((tmp_path / "rep").glob("report.*"))


def test_a_full_disk_is_refused_before_the_work(world, tmp_path, monkeypatch):
    """An empty probe file fits on a full disk: a training ran all its epochs before its
    first file failed. The free space is checked."""
    import shutil

    from vqadiag.data.io import atomic
    from vqadiag.workflows.models import train

    monkeypatch.setattr(
        atomic.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9, 4096)
    )
    with pytest.raises(DataError, match=r"run: cannot write here: the disk is full \(4,096 bytes"):
        train(world, "question-only", tmp_path / "run", progress=False)


def test_a_folder_where_a_result_file_goes_is_refused_not_emptied(world, prior, tmp_path):
    """A folder named results.json (with a user's notes in it) was deleted whole when a
    diagnosis reused the result folder."""
    out = tmp_path / "res"
    _diagnose(world, prior, out, suites="accuracy")
    (out / "results.json").unlink()
    (out / "results.json").mkdir()
    (out / "results.json" / "notes.txt").write_text("precious")
    with pytest.raises(DataError, match="results.json: is a folder, expected a file"):
        _diagnose(world, prior, out, suites="accuracy")
    assert (out / "results.json" / "notes.txt").read_text() == "precious"
