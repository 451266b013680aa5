"""``vqadiag diagnose`` end to end: CLI, resume after SIGKILL, reproducibility, skips, bad input."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import vqadiag
from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.models.registry import model_class
from vqadiag.synth import generate_world

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("diagcli") / "world"
    generate_world(root, images=120, seed=3)
    return root


@pytest.fixture(scope="module")
def updn(world, tmp_path_factory):
    folder = tmp_path_factory.mktemp("run") / "updn"
    model_class("updn").train(GQAData(world), epochs=2, progress=False).save(folder)
    return folder


@pytest.fixture(scope="module")
def prior(world, tmp_path_factory):
    folder = tmp_path_factory.mktemp("run") / "prior"
    model_class("prior").train(GQAData(world), progress=False).save(folder)
    return folder


def _stable(path: Path) -> dict:
    """results.json without the fields that differ between a fresh and a resumed run."""
    result = json.loads(path.read_text())
    result.pop("created")
    result.pop("conditions")
    return result


def _rows(path: Path) -> int:
    db = sqlite3.connect(path, timeout=5)
    try:
        return db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()


def test_cli_json_matches_results_file_and_score_commands(run_cli, world, updn, tmp_path):
    out = tmp_path / "res"
    args = ["--data", world, "--model", updn, "--out", out, "--n-bootstrap", "50"]
    res = run_cli("diagnose", *args, "--suite", "accuracy,ood,fpvg,pairs", "--json")
    assert res.exit_code == 0, res.stderr
    result = res.json()
    assert result == json.loads((out / "results.json").read_text())
    assert result["kind"] == "vqadiag.results" and result["schema_version"] == 1
    assert set(result["suites"]) == {"accuracy", "ood", "fpvg", "pairs"}
    assert result["summary"]["r_score"] is None and result["skipped"] == {}
    # the written prediction files score to exactly the same numbers with `vqadiag score`
    gqa = run_cli(
        "score", "gqa", "--questions", out / "inputs" / "gqa_questions.json",
        "--predictions", out / "predictions" / "accuracy" / "all.json",
        "--choices", world / "gqa" / "val_choices.json", "--n-bootstrap", "50", "--json",
    )  # fmt: skip
    assert gqa.json() == result["suites"]["accuracy"]
    ood = run_cli(
        "score", "ood", "--questions", out / "inputs" / "gqa_questions.json",
        "--predictions", out / "predictions" / "ood" / "all.json", "--curve",
        "--n-bootstrap", "50", "--json",
    )  # fmt: skip
    assert ood.json() == result["suites"]["ood"]  # the suite scores in memory, identically
    from vqadiag.data.model_inputs.vqa2_data import VQA2Data

    pairs = run_cli(
        "score", "pairs", "--annotations", VQA2Data(world).annotations_path("val"),
        "--pairs", out / "inputs" / "vqa2_pairs.json",
        "--predictions", out / "predictions" / "pairs" / "all.json", "--n-bootstrap", "50",
        "--json",
    )  # fmt: skip
    assert pairs.json() == result["suites"]["pairs"]
    fpvg = run_cli(
        "score", "fpvg", "--questions", out / "inputs" / "gqa_questions.json",
        "--relevance", out / "inputs" / "relevance.json",
        "--all", out / "predictions" / "fpvg" / "all.json",
        "--rel", out / "predictions" / "fpvg" / "rel.json",
        "--irrel", out / "predictions" / "fpvg" / "irrel.json", "--n-bootstrap", "50", "--json",
    )  # fmt: skip
    expected = {
        k: v for k, v in result["suites"]["fpvg"].items() if k not in ("replacement", "relevance")
    }
    assert fpvg.json() == expected
    assert "suff_comp" in expected  # probabilities travel through the prediction files
    # the pandas table of the same folder re-derives the summary figures
    frame = vqadiag.per_question_table([out])
    for key in ("accuracy", "fpvg_plus", "pair_both_correct"):
        rows = frame[frame[key].notna()]
        assert 100 * rows[key].mean() == pytest.approx(result["summary"][key]["value"])
    # per-question rows sorted by (suite, id)
    rows = [json.loads(x) for x in (out / "per_question.jsonl").open()]
    keys = [(r["suite"], r["id"]) for r in rows]
    assert keys == sorted(keys) and {r["suite"] for r in rows} == {
        "accuracy",
        "ood",
        "fpvg",
        "pairs",
    }
    # a second run reads everything from the store
    again = run_cli("diagnose", *args, "--suite", "accuracy,ood,fpvg,pairs", "--json").json()
    assert all(
        c["computed"] == 0 and c["cached"] == c["questions"] for c in again["conditions"].values()
    )
    assert {k: v for k, v in again.items() if k != "created"} == {
        k: v for k, v in result.items() if k not in ("created", "conditions")
    } | {"conditions": again["conditions"]}


def test_same_seed_gives_byte_identical_results(world, prior, tmp_path):
    from vqadiag.diagnosis.diagnose import diagnose

    texts = []
    for name in ("a", "b"):
        diagnose(world, str(prior), tmp_path / name, suites="accuracy,ood,pairs", n_bootstrap=50)
        lines = (tmp_path / name / "results.json").read_text().splitlines()
        texts.append("\n".join(x for x in lines if '"created"' not in x))
    assert texts[0] == texts[1]
    other = diagnose(world, str(prior), tmp_path / "c", suites="accuracy", n_bootstrap=50, seed=1)
    first = json.loads((tmp_path / "a" / "results.json").read_text())
    assert other["summary"]["accuracy"]["value"] == first["summary"]["accuracy"]["value"]
    assert other["summary"]["accuracy"]["ci_low"] != first["summary"]["accuracy"]["ci_low"]


def test_vqa_records_are_let_go_between_suites_without_changing_a_result(
    world, prior, tmp_path, monkeypatch
):
    """Every suite that does not read VQA v2 starts with its records let go (after a
    suite that read them), and the results equal those of a run that keeps them."""
    from vqadiag.diagnosis import running
    from vqadiag.diagnosis.diagnose import diagnose, registered_suites

    held: list[tuple[str, bool]] = []
    run_suite = running._run_suite

    def spy(ran, the_model, state, name, suite):
        vqa = state.memo.get("vqa2")
        held.append((name, vqa is not None and bool(vqa._questions)))
        return run_suite(ran, the_model, state, name, suite)

    suites = "pairs,gain,ood,robustness,consistency"
    options = {"suites": suites, "n_bootstrap": 50, "max_questions": 80, "bq_ranker": "bleu1"}
    with monkeypatch.context() as patch:
        patch.setattr(running, "_run_suite", spy)
        diagnose(world, str(prior), tmp_path / "released", **options)
    assert [n for n, _ in held] == suites.split(",")
    assert [n for n, h in held if h] == ["gain"]  # read by pairs, kept for gain only
    registry = registered_suites()
    assert all("vqa2" not in registry[n].datasets for n in ("ood", "robustness"))
    assert "vqa2" in registry["consistency"].datasets  # and reads them again
    with monkeypatch.context() as patch:
        patch.setattr(running, "release_idle_sources", lambda state, upcoming: None)
        diagnose(world, str(prior), tmp_path / "kept", **options)
    released = json.loads((tmp_path / "released" / "results.json").read_text())
    assert list(released["suites"]) == ["pairs", "ood", "robustness", "consistency"]
    assert _stable(tmp_path / "released" / "results.json") == _stable(
        tmp_path / "kept" / "results.json"
    )


def test_sigkill_then_restart_gives_the_uninterrupted_numbers(world, updn, tmp_path):
    base = [sys.executable, "-m", "vqadiag", "diagnose", "--data", str(world), "--model", str(updn),
            "--suite", "fpvg,importance", "--n-bootstrap", "50", "--batch-size", "8",
            "--max-questions", "80"]  # fmt: skip
    env = {**os.environ, "COLUMNS": "120"}
    full = tmp_path / "full"
    subprocess.run([*base, "--out", str(full)], check=True, capture_output=True, env=env)
    # the importance figures of the report card: 100 × the mean of the per-question values
    result = json.loads((full / "results.json").read_text())
    rows = [json.loads(x) for x in (full / "per_question.jsonl").open()]
    for method in result["suites"]["importance"]["methods"]:
        key = f"{method}_relevant_score"
        values = [r["values"][key] for r in rows if key in r["values"]]
        assert result["summary"][key]["value"] == pytest.approx(100 * sum(values) / len(values))
    assert {"attention", "loo", "gradcam"} <= set(result["suites"]["importance"]["methods"])
    killed = tmp_path / "killed"
    proc = subprocess.Popen([*base, "--out", str(killed)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    store = killed / "store.sqlite"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if store.exists() and _rows(store) >= 150:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / "results.json").exists()
    stored = _rows(store)
    assert stored >= 150
    subprocess.run([*base, "--out", str(killed)], check=True, capture_output=True, env=env)
    assert _stable(killed / "results.json") == _stable(full / "results.json")
    assert (killed / "per_question.jsonl").read_bytes() == (
        full / "per_question.jsonl"
    ).read_bytes()
    resumed = json.loads((killed / "results.json").read_text())["conditions"]
    uninterrupted = json.loads((full / "results.json").read_text())["conditions"]
    total = sum(c["questions"] for c in uninterrupted.values())
    # every probe is asked or takes the answer of a probe with the same input, once
    assert sum(c["computed"] + c["reused"] for c in uninterrupted.values()) == total
    assert sum(c["cached"] for c in resumed.values()) == stored
    assert sum(c["computed"] + c["reused"] for c in resumed.values()) == total - stored
    assert _rows(store) == _rows(full / "store.sqlite") == total


def test_a_reused_folder_keeps_no_prediction_files_or_inputs_of_an_earlier_run(
    world, prior, updn, tmp_path
):
    """Found in review: after UpDn's full run, question-only's accuracy run into the same
    folder left UpDn's predictions/fpvg/… and inputs/relevance.json beside the new
    results.json, and rescoring them gave UpDn's numbers. A run now writes its results,
    prediction files and inputs afresh (the store and the basic-question dataset stay)."""
    from vqadiag.diagnosis.diagnose import diagnose

    out = tmp_path / "res"
    diagnose(world, str(updn), out, suites="accuracy,fpvg", n_bootstrap=20, max_questions=30)
    assert (out / "predictions" / "fpvg").is_dir() and (out / "inputs" / "relevance.json").is_file()
    second = diagnose(world, str(prior), out, suites="accuracy", n_bootstrap=20, max_questions=10)
    assert sorted(p.name for p in (out / "predictions").iterdir()) == ["accuracy"]
    assert sorted(p.name for p in (out / "inputs").iterdir()) == ["gqa_questions.json"]
    written = json.loads((out / "predictions" / "accuracy" / "all.json").read_text())
    assert len(written) == second["conditions"]["gqa.all"]["questions"] == 10
    assert (out / "store.sqlite").is_file()  # the earlier answers stay stored


def test_changed_model_recomputes_everything_and_data_change_only_its_questions(
    world, prior, tmp_path
):
    from vqadiag.diagnosis.diagnose import diagnose

    copy = tmp_path / "world"
    shutil.copytree(world, copy)
    out = tmp_path / "res"
    first = diagnose(copy, str(prior), out, suites="accuracy", n_bootstrap=20)
    n = first["conditions"]["gqa.all"]["questions"]
    # change one diagnosed question's text: only that question is asked again
    path = copy / "gqa" / "val_balanced_questions.json"
    questions = json.loads(path.read_text())
    qid = next(q for q, r in questions.items() if r["isBalanced"])
    questions[qid]["question"] += " really"
    questions[qid]["answer"] = "changed gold answers are not model input"
    path.write_text(json.dumps(questions))
    second = diagnose(copy, str(prior), out, suites="accuracy", n_bootstrap=20)
    assert second["conditions"]["gqa.all"] == {
        "questions": n,
        "computed": 1,
        "cached": n - 1,
        "reused": 0,
    }
    # another model: nothing stored applies
    other = tmp_path / "prior2"
    model_class("prior").train(GQAData(copy), progress=False, mode="global").save(other)
    third = diagnose(copy, str(other), out, suites="accuracy", n_bootstrap=20)
    assert third["conditions"]["gqa.all"] == {
        "questions": n,
        "computed": n,
        "cached": 0,
        "reused": 0,
    }
    # the dataset fingerprint follows the data, never the model (reports pair on it)
    assert second["data"]["fingerprint"] != first["data"]["fingerprint"]
    assert third["data"]["fingerprint"] == second["data"]["fingerprint"]
    assert third["fingerprints"]["data"] == third["data"]["fingerprint"]


def test_prediction_file_adapter_runs_plain_suites_only(run_cli, world, prior, tmp_path):
    from vqadiag.models.predict import predict_split

    preds = predict_split(model_class("prior").load(prior), GQAData(world), "val", probs_k=3)
    path = tmp_path / "preds.json"
    path.write_text(json.dumps(preds))
    res = run_cli("diagnose", "--data", world, "--model", f"files:{path}", "--out",
                  tmp_path / "res", "--n-bootstrap", "20", "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    result = res.json()
    assert result["model"]["name"] == "files"
    assert "accuracy" in result["suites"] and "ood" in result["suites"]
    assert result["skipped"]["fpvg"].startswith("prediction files answer only the plain")
    assert "robustness" in result["skipped"]
    # VQA v2 questions are not in a GQA prediction file: the VQA suites are skipped, not crashed
    assert "no answer" in result["skipped"]["pairs"]
    # every suite asked for skipped: the reasons are printed and the command fails
    res = run_cli("diagnose", "--data", world, "--model", f"files:{path}", "--out",
                  tmp_path / "res2", "--suite", "fpvg,pairs", "--n-bootstrap", "20")  # fmt: skip
    assert res.exit_code == 1
    assert "skipped fpvg" in res.stdout
    assert res.stderr.strip().splitlines()[-1] == (
        "error: every suite asked for was skipped (pairs, fpvg): nothing was diagnosed"
    )


def test_missing_datasets_are_skipped_with_reasons(world, prior, tmp_path):
    from vqadiag.diagnosis.diagnose import diagnose

    gqa_only = tmp_path / "gqa_only"
    shutil.copytree(world / "gqa", gqa_only / "gqa")
    (gqa_only / "gqa" / "val_sceneGraphs.json").unlink()
    result = diagnose(gqa_only, str(prior), tmp_path / "res", n_bootstrap=20, bq_ranker="bleu1")
    assert "accuracy" in result["suites"]
    assert result["skipped"]["fpvg"] == (
        "no scene graphs for split 'val' (val_sceneGraphs.json; GQA publishes them for train "
        "and val: add them with --scene-graphs FILE)"
    )
    assert result["skipped"]["pairs"] == "no VQA v2 questions for split 'val'"
    assert result["skipped"]["consistency"] == "no introspect data (VQAIntrospect_valv1.0.json)"
    assert result["summary"]["fpvg_plus"] is None and result["summary"]["accuracy"] is not None


# ----------------------------------------------------------------- bad input
def test_bad_inputs_exit_2_naming_the_file(run_cli, world, prior, tmp_path):
    res = run_cli(
        "diagnose", "--data", tmp_path / "nowhere", "--model", prior, "--out", tmp_path / "o"
    )
    assert res.exit_code == 2 and "nowhere: data folder not found" in res.stderr
    res = run_cli(
        "diagnose", "--data", world, "--model", tmp_path / "norun", "--out", tmp_path / "o"
    )
    assert res.exit_code == 2 and "norun: run folder not found" in res.stderr
    res = run_cli("diagnose", "--data", world, "--model", prior, "--out", tmp_path / "o",
                  "--suite", "accuracy,vibes")  # fmt: skip
    assert res.exit_code == 2 and "unknown suite(s) ['vibes']" in res.stderr
    res = run_cli("diagnose", "--data", world, "--model", prior, "--out", tmp_path / "o",
                  "--suite", "")  # fmt: skip
    assert res.exit_code == 2 and "error: --suite: no suite named (give all" in res.stderr
    assert not (tmp_path / "o").exists()
    res = run_cli("diagnose", "--data", world, "--model", prior, "--out", tmp_path / "o",
                  "--bq-ranker", "bleu9")  # fmt: skip
    assert res.exit_code == 2 and "error: --bq-ranker: unknown ranker 'bleu9'" in res.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"0100": {"answer": "yes"')
    res = run_cli("diagnose", "--data", world, "--model", f"files:{bad}", "--out", tmp_path / "o")
    assert res.exit_code == 2 and "bad.json: malformed JSON" in res.stderr
    empty = tmp_path / "empty.json"
    empty.write_text("")
    res = run_cli("diagnose", "--data", world, "--model", f"files:{empty}", "--out", tmp_path / "o")
    assert res.exit_code == 2 and "empty.json" in res.stderr
    nan = tmp_path / "nan.json"
    nan.write_text('{"0100": {"answer": "yes", "probs": {"yes": NaN}}}')
    res = run_cli("diagnose", "--data", world, "--model", f"files:{nan}", "--out", tmp_path / "o")
    assert res.exit_code == 2 and "nan.json: malformed JSON" in res.stderr
    nofield = tmp_path / "nofield.json"
    nofield.write_text('{"0100": {"probs": {"yes": 1.0}}}')
    res = run_cli(
        "diagnose", "--data", world, "--model", f"files:{nofield}", "--out", tmp_path / "o"
    )
    assert res.exit_code == 2 and "nofield.json: record '0100'" in res.stderr
    store_dir = tmp_path / "corrupt"
    store_dir.mkdir()
    (store_dir / "store.sqlite").write_text("garbage " * 100)
    res = run_cli("diagnose", "--data", world, "--model", prior, "--out", store_dir)
    assert res.exit_code == 2 and "store.sqlite: not a vqadiag prediction store" in res.stderr


def test_bad_question_record_names_file_and_record(run_cli, world, prior, tmp_path):
    copy = tmp_path / "world"
    shutil.copytree(world / "gqa", copy / "gqa")
    path = copy / "gqa" / "val_balanced_questions.json"
    questions = json.loads(path.read_text())
    qid = next(iter(questions))
    del questions[qid]["imageId"]
    path.write_text(json.dumps(questions))
    res = run_cli("diagnose", "--data", copy, "--model", prior, "--out", tmp_path / "o",
                  "--suite", "accuracy")  # fmt: skip
    assert res.exit_code == 2
    assert "val_balanced_questions.json" in res.stderr and qid in res.stderr


def test_robustness_builds_the_bqd_once_and_reuses_it(run_cli, world, prior, tmp_path):
    out = tmp_path / "res"
    args = ["diagnose", "--data", world, "--model", prior, "--out", out, "--suite",
            "robustness", "--bq-ranker", "bleu1", "--max-questions", "40", "--n-bootstrap", "20",
            "--json"]  # fmt: skip
    first = run_cli(*args)
    assert first.exit_code == 0, first.stderr
    rob = first.json()["suites"]["robustness"]
    assert rob["bqd"]["built"] is True and rob["bqd"]["cached"] is False
    assert rob["bqd"]["ranker"] == "bleu1" and (out / "bqd.json").is_file()
    assert len(rob["partitions"]) == 7 and rob["n"] == 40
    # the prior answers from the question's group, not its words: noise changes nothing
    assert all(p["accuracy"] == rob["clean"] for p in rob["partitions"])
    again = run_cli(*args).json()
    assert again["suites"]["robustness"]["bqd"]["cached"] is True
    assert all(c["computed"] == 0 for c in again["conditions"].values())
    # noisy prediction files hold the main question's id for every partition
    noisy = json.loads((out / "predictions" / "robustness" / "noise_7.json").read_text())
    clean = json.loads((out / "predictions" / "robustness" / "clean.json").read_text())
    assert noisy.keys() == clean.keys() and len(clean) == 40
    # the suite scores in memory; re-scoring its written artefacts gives the same result
    preds = out / "predictions" / "robustness"
    rescored = run_cli(
        "score", "robustness", "--truth", out / "inputs" / "gqa_questions.json",
        "--clean", preds / "clean.json",
        "--noisy", *(preds / f"noise_{k}.json" for k in range(1, 8)),
        "--questions", out / "inputs" / "robustness_questions.json",
        "--n-bootstrap", "20", "--json",
    )  # fmt: skip
    assert rescored.exit_code == 0, rescored.stderr
    assert rescored.json() == {k: v for k, v in rob.items() if k != "bqd"}
    assert rob["bqd"]["covers"] == {"questions": 40, "diagnosed": 40}


def test_the_shared_cache_gives_another_folder_and_the_plan_the_same_bqd(
    run_cli, world, prior, tmp_path, monkeypatch
):
    """With the shared cache on, a BQD built by one diagnosis (or by a plan, which writes
    nothing to OUT) is copied, not rebuilt, by a diagnosis of the same questions into
    another folder, with the same bytes and figures; other questions, another ranker or
    a changed entry build their own (docs/reliability.md, "The shared cache")."""
    from vqadiag.protocols.robustness.basic_questions import bqd_build

    monkeypatch.setenv("VQADIAG_CACHE_DIR", str(tmp_path / "cache"))
    builds: list[str] = []
    real_build = bqd_build.build_bqd

    def counted(*args, **kwargs):
        builds.append(str(args[2]))
        return real_build(*args, **kwargs)

    monkeypatch.setattr(bqd_build, "build_bqd", counted)  # the suite imports it when it runs
    args = ["diagnose", "--data", world, "--model", prior, "--suite", "robustness",
            "--bq-ranker", "bleu1", "--max-questions", "30", "--n-bootstrap", "20",
            "--json"]  # fmt: skip
    plan = run_cli(*args, "--out", tmp_path / "planned", "--plan")
    assert plan.exit_code == 0, plan.stderr
    assert len(builds) == 1 and not (tmp_path / "planned").exists()
    first = run_cli(*args, "--out", tmp_path / "a")
    second = run_cli(*args, "--out", tmp_path / "b")
    assert first.exit_code == 0 and second.exit_code == 0, first.stderr + second.stderr
    assert len(builds) == 1  # the run after the plan, and another folder, reuse it
    bqd = [run.json()["suites"]["robustness"]["bqd"] for run in (first, second)]
    assert [b["shared_cache"] for b in bqd] == [True, True]
    assert (tmp_path / "a" / "bqd.json").read_bytes() == (tmp_path / "b" / "bqd.json").read_bytes()
    assert first.json()["summary"]["r_score"] == second.json()["summary"]["r_score"]
    # other questions and another ranker are other datasets
    assert run_cli(*args[:-5], "--max-questions", "20", "--n-bootstrap", "20", "--json",
                   "--out", tmp_path / "c").exit_code == 0  # fmt: skip
    assert run_cli(*[a if a != "bleu1" else "bleu2" for a in args],
                   "--out", tmp_path / "d").exit_code == 0  # fmt: skip
    assert len(builds) == 3
    # an entry whose bytes no longer match its record is rebuilt, not used
    entries = list((tmp_path / "cache" / "bqd").iterdir())
    assert len(entries) == 3
    for entry in entries:
        (entry / "bqd.json").write_text("{}")
    again = run_cli(*args, "--out", tmp_path / "e")
    assert again.exit_code == 0 and len(builds) == 4
    assert again.json()["suites"]["robustness"]["bqd"]["shared_cache"] is False
    records = [json.loads((tmp_path / f / "bqd.json").read_text())["records"] for f in "ae"]
    assert records[0] == records[1]  # the same ranking (its meta says where and how long)


def test_a_bqd_built_for_other_questions_is_refused(run_cli, world, prior, tmp_path):
    """Ids alone do not tie a BQD to the diagnosed questions: a record whose main
    question is another question (another world's file) is refused, naming the record."""
    args = ["diagnose", "--data", world, "--model", prior, "--suite", "robustness",
            "--max-questions", "20", "--n-bootstrap", "20", "--json"]  # fmt: skip
    first = run_cli(*args, "--out", tmp_path / "built", "--bq-ranker", "bleu1")
    assert first.exit_code == 0, first.stderr
    bqd = json.loads((tmp_path / "built" / "bqd.json").read_text())
    records = bqd["records"]
    some = records[3]
    spaced = {**bqd, "records": [{**r, "question": f"  {r['question']} "} for r in records]}
    (tmp_path / "spaced.json").write_text(json.dumps(spaced))
    fine = run_cli(*args, "--out", tmp_path / "spaced", "--bqd", tmp_path / "spaced.json")
    assert fine.exit_code == 0, fine.stderr  # whitespace aside, the same questions
    assert fine.json()["suites"]["robustness"]["bqd"]["covers"]["questions"] == 20
    some["question"] = "What color is the unicorn?"
    (tmp_path / "other.json").write_text(json.dumps(bqd))
    res = run_cli(*args, "--out", tmp_path / "other", "--bqd", tmp_path / "other.json")
    assert res.exit_code == 2
    line = res.stderr.strip()
    assert "\n" not in line and "other.json" in line and str(some["question_id"]) in line
    assert "'What color is the unicorn?'" in line and "built for other questions" in line
    assert not (tmp_path / "other" / "results.json").exists()
    assert fine.json()["config"]["bq_ranker"] is None  # a given BQD was ranked elsewhere


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"max_objects": 0}, "--max-objects: must be at least 1, got 0"),
        ({"n_bootstrap": 0}, "--n-bootstrap: must be at least 10, got 0"),
        ({"batch_size": -5}, "--batch-size: must be at least 1, got -5"),
        ({"seed": -1}, "--seed: must be at least 0, got -1"),
        ({"workers": 1.5}, "--workers: must be a whole number, got 1.5"),
    ],
)
def test_the_python_api_bounds_the_counts_as_the_command_line_does(
    world, prior, tmp_path, given, message
):
    """Found in review: from Python, max_objects=0 ran with no visible object,
    n_bootstrap=0 gave NaN intervals, batch_size=-5 was recorded and ran as 1, and seed=-1
    was a numpy traceback."""
    from vqadiag.diagnosis.diagnose import diagnose
    from vqadiag.errors import DataError

    with pytest.raises(DataError) as err:
        diagnose(world, str(prior), tmp_path / "o", suites="accuracy", **given)
    assert str(err.value) == message
    assert not (tmp_path / "o").exists()


def test_an_out_inside_the_data_or_the_run_folder_is_refused(run_cli, world, prior):
    """Found in review: --out w/gqa/newsub wrote a result folder into the world (which
    the data fingerprint and later readers then see); --out w itself was refused."""
    for inside, flag in ((world / "gqa" / "newsub", "--data"), (prior / "res", "--model")):
        res = run_cli("diagnose", "--data", world, "--model", prior, "--out", inside,
                      "--suite", "accuracy")  # fmt: skip
        assert res.exit_code == 2
        assert f"lies inside {flag}" in res.stderr and "write --out elsewhere" in res.stderr
        assert not inside.exists()


def test_a_malformed_bqd_is_refused_before_the_model_runs(run_cli, world, prior, tmp_path):
    """Found in review: a malformed --bqd was found only when the robustness suite came to
    it, after every earlier suite's model calls; it is now read whole first."""
    bad = tmp_path / "bad_bqd.json"
    bad.write_text(json.dumps({"records": [{"question_id": "1"}]}))
    res = run_cli("diagnose", "--data", world, "--model", prior, "--out", tmp_path / "o",
                  "--bqd", bad, "--max-questions", "10")  # fmt: skip
    assert res.exit_code == 2 and "bad_bqd.json" in res.stderr
    assert not (tmp_path / "o").exists()  # no folder claimed, no model call made


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (["--bqd", "BQD", "--bq-ranker", "bleu1"],
         "--bq-ranker: ranks the BQD built without --bqd: give one of them"),
        (["--bqd", "BQD", "--suite", "accuracy"],
         "--bqd: is read by the robustness suite alone, which --suite leaves out"),
        (["--bq-ranker", "bleu2", "--suite", "accuracy,fpvg"],
         "--bq-ranker: is read by the robustness suite alone, which --suite leaves out"),
        (["--importance-sample", "10", "--suite", "fpvg"],
         "--importance-sample: is read by the importance suite alone, which --suite leaves out"),
    ],
)  # fmt: skip
def test_options_a_suite_left_out_would_ignore_are_refused(
    run_cli, world, prior, tmp_path, given, message
):
    bqd = tmp_path / "bqd.json"
    bqd.write_text("[]")
    given = [str(bqd) if g == "BQD" else g for g in given]
    res = run_cli("diagnose", "--data", world, "--model", prior, "--out", tmp_path / "o", *given)
    assert res.exit_code == 2 and res.stderr.strip() == f"error: {message}"
    assert not (tmp_path / "o").exists()


def test_the_python_api_refuses_options_its_suites_would_ignore(world, prior, tmp_path):
    """Found in review: the Python API took ``bqd``, ``bq_ranker`` and
    ``importance_sample`` for suites that never read them and recorded them in config."""
    from vqadiag.diagnosis.diagnose import diagnose
    from vqadiag.diagnosis.precision import diagnose_to_precision
    from vqadiag.errors import DataError
    from vqadiag.workflows.conditions import export_conditions

    bqd = tmp_path / "bqd.json"
    bqd.write_text("[]")
    for given, says in (
        ({"bqd": bqd}, "--bqd: is read by the robustness suite alone"),
        ({"bq_ranker": "lasso"}, "--bq-ranker: is read by the robustness suite alone"),
        ({"importance_sample": 5}, "--importance-sample: is read by the importance suite"),
    ):
        with pytest.raises(DataError, match=says):
            diagnose(world, str(prior), tmp_path / "o", suites="accuracy", **given)
        with pytest.raises(DataError, match=says):
            diagnose_to_precision(world, str(prior), tmp_path / "o", precision=5,
                                  suites=["accuracy"], **given)  # fmt: skip
    with pytest.raises(DataError, match="ranks the BQD built without --bqd"):
        diagnose(world, str(prior), tmp_path / "o", bqd=bqd, bq_ranker="bleu1")
    with pytest.raises(DataError, match="--bq-ranker: is read by the robustness suite"):
        export_conditions(world, tmp_path / "x", suites="fpvg", bq_ranker="bleu1")
    assert not (tmp_path / "o").exists() and not (tmp_path / "x").exists()
    # what --precision chooses itself (its importance sample) goes only to a run with it
    run = diagnose_to_precision(world, str(prior), tmp_path / "p", precision=50,
                                suites="accuracy", n_bootstrap=20, max_calls=400)  # fmt: skip
    assert run["config"].get("importance_sample") is None
    assert run["precision"]["importance_sample"] is None


def test_consistency_suite_equals_score_consistency_on_its_artefacts(world, prior, tmp_path):
    from vqadiag.data.model_inputs.vqa2_data import VQA2Data
    from vqadiag.diagnosis.diagnose import diagnose

    out = tmp_path / "res"
    result = diagnose(world, str(prior), out, suites="consistency", n_bootstrap=30)
    suite = result["suites"]["consistency"]
    subset = out / "inputs" / "introspect.json"
    introspect = subset if subset.is_file() else world / "introspect" / "VQAIntrospect_valv1.0.json"
    annotated = suite["main_correctness"].startswith("vqa_accuracy")
    preds = out / "predictions" / "consistency"
    rescored = vqadiag.score_consistency(
        introspect, preds / "main.json", preds / "sub.json", n_bootstrap=30,
        annotations=VQA2Data(world).annotations_path("val") if annotated else None,
    )  # fmt: skip
    assert rescored == suite and suite["n_pairs"] > 0


def test_a_main_question_without_its_annotation_is_refused(run_cli, world, prior, tmp_path):
    """Found in review: one introspect main missing from the VQA v2 annotations turned
    every main's scoring from VQA accuracy to a normalized match, without a word, where
    ``score consistency`` refuses it."""
    import shutil

    copy = tmp_path / "w"
    shutil.copytree(world, copy, ignore=shutil.ignore_patterns("images"))
    path = copy / "introspect" / "VQAIntrospect_valv1.0.json"
    intro = json.loads(path.read_text())
    first = next(iter(intro))
    intro[f"{first}999"] = intro.pop(first)
    path.write_text(json.dumps(intro))
    res = run_cli("diagnose", "--data", copy, "--model", prior, "--out", tmp_path / "o",
                  "--suite", "consistency", "--n-bootstrap", "20")  # fmt: skip
    assert res.exit_code == 2, res.stderr
    assert res.stderr.startswith(
        f"error: {path}: record '{first}999': main question has no annotation in "
        "v2_mscoco_val2014_annotations.json (1 of "
    ), res.stderr
    assert not (tmp_path / "o" / "results.json").exists()
    # a main question on an image the world does not know: the introspect file names it
    intro[f"{first}999"]["image_id"] = 999999
    path.write_text(json.dumps(intro))
    res = run_cli("diagnose", "--data", copy, "--model", prior, "--out", tmp_path / "o",
                  "--suite", "consistency", "--n-bootstrap", "20")  # fmt: skip
    assert res.exit_code == 2 and res.stderr.startswith(
        f"error: {path}: record '{first}999': image 999999 is not in the image map"
    ), res.stderr


def test_a_removal_option_the_model_never_reads_is_refused(run_cli, world, prior, tmp_path):
    """``--pixel-fill`` for a model that reads no pixels, ``--replacement`` for one that
    reads pixels: refused, not recorded in ``config`` as if they had been used."""
    from vqadiag.diagnosis.diagnose import _check_removal_options, diagnose
    from vqadiag.errors import DataError
    from vqadiag.models.base import Capabilities
    from vqadiag.suites.state import Options

    res = run_cli("diagnose", "--data", world, "--model", prior, "--out", tmp_path / "o",
                  "--pixel-fill", "blur")  # fmt: skip
    assert res.exit_code == 2
    assert (
        res.stderr.strip()
        == "error: --pixel-fill: fills replaced pixels; prior reads none, not pixels"
    )

    class Pixels:  # a model that reads pixels and is never asked anything here
        name = "pixels-stub"
        capabilities = Capabilities(visual="pixels", object_masking=False)
        answer_vocab = ("yes",)

        def predict(self, batch, visual):
            raise AssertionError("refused before any question")

        def fingerprint(self):
            return "stub"

    with pytest.raises(DataError, match="^--replacement: replaces removed objects; pixels-stub"):
        diagnose(world, Pixels(), tmp_path / "p", suites="accuracy", replacement="zeros")
    res = run_cli("diagnose", "--data", world, "--model", prior, "--out", tmp_path / "o",
                  "--replacement", "zeros")  # fmt: skip
    assert res.exit_code == 2
    assert res.stderr.strip() == "error: --replacement: replaces removed objects; prior reads none"
    assert not (tmp_path / "o").exists() and not (tmp_path / "p").exists()
    _check_removal_options(Pixels(), Options(suites=("accuracy",), fill="blur"))  # read: kept


def test_a_misspelt_suite_is_named_before_the_options_it_would_read(
    run_cli, world, prior, tmp_path
):
    bqd = tmp_path / "bqd.json"
    bqd.write_text("[]")
    res = run_cli("diagnose", "--data", world, "--model", prior, "--out", tmp_path / "o",
                  "--suite", "robustnes", "--bqd", bqd)  # fmt: skip
    assert res.exit_code == 2 and "error: --suite: unknown suite(s) ['robustnes']" in res.stderr
