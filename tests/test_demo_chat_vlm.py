"""`vqadiag demo` with the chat VLM as its sixth model: trained and diagnosed in a second
process where two cores are usable, the same weights as in the demo's own process, and
resumed like the other stages."""

from __future__ import annotations

import json

import pytest

from tiny_demo import run_tiny_demo, tiny_demo_args
from vqadiag.workflows.demo_lane import usable_cores

FIVE = ["prior", "question-only", "updn", "symbolic", "pixel"]


def _six_model_demo(out):
    return tiny_demo_args(out, "--chat-vlm")


@pytest.fixture(scope="module")
def six_models(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo6")
    return run_tiny_demo(out, "--chat-vlm"), out


def test_the_chat_vlm_is_the_sixth_model_of_the_report(six_models):
    res, out = six_models
    assert res.exit_code == 0, res.stderr
    data = json.loads(res.stdout)
    stages = {s["stage"]: s["status"] for s in data["stages"]}
    expected = ["world", *(f"{step}-{m}" for step in ("train", "diagnose")
                           for m in (*FIVE, "chat-vlm")), "report"]  # fmt: skip
    assert sorted(stages) == sorted(expected) and set(stages.values()) == {"done"}
    assert "vqadiag demo [14/14]" in res.stderr
    report = json.loads((out / "report" / "report.json").read_text())
    assert [m["name"] for m in report["models"]] == [*FIVE, "hf-chat"]
    chat = json.loads((out / "results" / "chat-vlm" / "results.json").read_text())
    assert chat["model"]["name"] == "hf-chat"
    assert data["models"]["chat-vlm"]["results"] == str(out / "results" / "chat-vlm")
    # the tiny size's chat VLM, on one thread, diagnosed on its 20 questions per split
    options = json.loads((out / "runs" / "chat-vlm" / "config.json").read_text())["options"]
    assert options["threads"] == 1 and options["vision_dim"] == 32
    assert "on 20 questions per split" in res.stderr
    # scored after training on the first 20 val questions, the other models on every one
    chat = data["models"]["chat-vlm"]
    val = json.loads((out / "world" / "gqa" / "val_balanced_questions.json").read_text())
    assert chat["val_questions"] == 20 and data["models"]["prior"]["val_questions"] == len(val)


def test_the_demos_chat_vlm_is_scored_on_the_first_val_questions(six_models, run_cli, tmp_path):
    """Its val accuracy, recounted by hand from its answers to the first 20 val questions
    in file order."""
    res, out = six_models
    preds = tmp_path / "chat.json"
    run = out / "runs" / "chat-vlm"
    assert run_cli("predict", "--model", run, "--data", out / "world", "--out", preds,
                   "-q").exit_code == 0  # fmt: skip
    answers = json.loads(preds.read_text())
    val = json.loads((out / "world" / "gqa" / "val_balanced_questions.json").read_text())
    first = list(val.items())[:20]
    hits = sum(answers[qid] == record["answer"] for qid, record in first)
    assert json.loads(res.stdout)["models"]["chat-vlm"]["val_accuracy"] == pytest.approx(
        100 * hits / 20
    )


@pytest.mark.skipif(usable_cores() < 2, reason="one usable core: the chat VLM runs in-process")
def test_with_two_cores_the_chat_vlm_runs_in_a_second_process(six_models):
    res, _ = six_models
    assert "train chat-vlm (1 epochs), in a second process" in res.stderr
    assert "the chat VLM's training (second process): done in" in res.stderr
    assert "the chat VLM's diagnosis (second process): done in" in res.stderr
    # the lane's stages join the log after the five models' diagnoses, before the report
    order = [s["stage"] for s in json.loads(res.stdout)["stages"]]
    assert order[-3:] == ["train-chat-vlm", "diagnose-chat-vlm", "report"]


def test_a_second_six_model_run_skips_every_stage(six_models, run_cli):
    _, out = six_models
    before = (out / "report" / "report.json").read_bytes()
    res = run_cli(*_six_model_demo(out))
    assert res.exit_code == 0, res.stderr
    assert [s["status"] for s in res.json()["stages"]] == ["skipped"] * 14
    assert (out / "report" / "report.json").read_bytes() == before
    # a skipped training stage reports the val accuracy it recorded, and on how many
    first = json.loads(six_models[0].stdout)["models"]
    again = res.json()["models"]
    for name in (*FIVE, "chat-vlm"):
        for key in ("val_accuracy", "val_questions"):
            assert again[name][key] == first[name][key] is not None, (name, key)


def test_one_core_trains_the_same_chat_vlm_in_the_demos_own_process(six_models, tmp_path,
                                                                     monkeypatch):  # fmt: skip
    """The chat VLM's weights do not depend on where it trained: with one usable core it
    trains first, in the demo's process, and its model folder has the same digest."""
    from vqadiag.workflows import demo as workflow
    from vqadiag.workflows import demo_lane
    from vqadiag.workflows import demo_records as records

    _, out = six_models
    monkeypatch.setattr(demo_lane, "usable_cores", lambda: 1)
    plan = workflow._plan("tiny", 0, None, None, 40, 50, None, False)
    stages = records.Stages(tmp_path, False)
    world_fp = records.file_hash(out / "world" / "world.json")
    lane = demo_lane.open_lane(True)
    assert not lane.parallel
    args = (plan, tmp_path, out / "world", world_fp, "chat-vlm")
    future = workflow._submit(stages, lane, workflow._train_stage, args, "train chat-vlm")
    assert future.done()
    assert [s["stage"] for s in stages.log] == ["train-chat-vlm"]

    def weights(root):  # the digest of the save_pretrained folder (weights, processor)
        return json.loads((root / "runs" / "chat-vlm" / "config.json").read_text())["model_digest"]

    assert weights(tmp_path) == weights(out)


def test_without_transformers_the_six_model_demo_says_what_to_install(run_cli, tmp_path,
                                                                      monkeypatch):  # fmt: skip
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "transformers" else found(name, *a),
    )
    res = run_cli("demo", "--out", tmp_path / "d", "--size", "tiny", "--chat-vlm")
    assert res.exit_code == 2
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("error: --chat-vlm: the chat VLM needs transformers: ")
    assert "pip install 'vqadiag[hf]'" in line and "--no-chat-vlm" in line
    assert not (tmp_path / "d").exists()
