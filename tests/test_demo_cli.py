"""`vqadiag demo` end to end at the test size, its resume, and bad options."""

from __future__ import annotations

import json

import pytest

from tiny_demo import run_tiny_demo, tiny_demo_args


def _tiny_demo(out):
    """The arguments of a tiny demo run into ``out`` (as the first run used them)."""
    return tiny_demo_args(out)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    return run_tiny_demo(out), out


def test_demo_runs_every_stage_and_writes_the_report(first_run):
    res, out = first_run
    assert res.exit_code == 0, res.stderr
    data = json.loads(res.stdout)
    stages = [s["stage"] for s in data["stages"]]
    assert stages == [
        "world",
        "train-prior",
        "train-question-only",
        "train-updn",
        "train-symbolic",
        "train-pixel",
        "diagnose-prior",
        "diagnose-question-only",
        "diagnose-updn",
        "diagnose-symbolic",
        "diagnose-pixel",
        "report",
    ]
    assert all(s["status"] == "done" for s in data["stages"])
    # progress: one stage header per step on stderr, nothing but JSON on stdout
    assert "vqadiag demo [1/12]" in res.stderr and "vqadiag demo [12/12]" in res.stderr
    assert "report:" in res.stderr
    report = json.loads((out / "report" / "report.json").read_text())
    names = ["prior", "question-only", "updn", "symbolic", "pixel"]
    assert [m["name"] for m in report["models"]] == names
    assert (out / "report" / "report.html").stat().st_size > 10_000
    for name in names:
        assert (out / "results" / name / "results.json").is_file()
        assert data["models"][name]["results"] == str(out / "results" / name)
    world = json.loads((out / "world" / "world.json").read_text())
    assert world["images"] == 60 and world["seed"] == 0
    # the symbolic model is compared with the blind ones on the same questions
    acc = [c for c in report["comparisons"] if c["metric"] == "accuracy"]
    assert len(acc) == 10 and all(c["paired"] for c in acc)
    # the pixel model read the rendered images and was diagnosed under pixel conditions
    pixel = json.loads((out / "results" / "pixel" / "results.json").read_text())
    assert pixel["model"]["capabilities"]["pixel_input"] is True
    assert pixel["conditions"]["gqa.rel"]["computed"] > 0
    # the drill-down rows show thumbnails of the world's images with their boxes
    html = (out / "report" / "report.html").read_text()
    assert 'class="thumb"' in html and "relevant boxes green, irrelevant red" in html


def test_second_run_skips_every_stage(first_run, run_cli):
    _, out = first_run
    before = (out / "report" / "report.json").read_bytes()
    res = run_cli(*_tiny_demo(out))
    assert res.exit_code == 0, res.stderr
    data = res.json()
    assert [s["status"] for s in data["stages"]] == ["skipped"] * 12
    assert "skipped" in res.stderr
    assert (out / "report" / "report.json").read_bytes() == before


def test_a_training_record_from_before_val_questions_is_skipped_and_counted(first_run, run_cli):
    """A stage record written before the records kept their facts apart (the val accuracy
    beside the config, no count) is still done: it reports that accuracy, on every val
    question of the world, as it was scored."""
    _, out = first_run
    path = out / "stages" / "train-prior.json"
    record = json.loads(path.read_text())
    facts = record.pop("facts")
    path.write_text(json.dumps({**record, "val_accuracy": facts["val_accuracy"]}))
    res = run_cli(*_tiny_demo(out))
    assert res.exit_code == 0, res.stderr
    assert {s["status"] for s in res.json()["stages"]} == {"skipped"}
    prior = res.json()["models"]["prior"]
    val = json.loads((out / "world" / "gqa" / "val_balanced_questions.json").read_text())
    assert prior == {**prior, "val_accuracy": facts["val_accuracy"], "val_questions": len(val)}


def test_an_interrupted_diagnosis_reruns_only_what_depends_on_it(first_run, run_cli):
    _, out = first_run
    # as if the run had stopped while diagnosing updn: its results are not written yet
    (out / "results" / "updn" / "results.json").unlink()
    res = run_cli(*_tiny_demo(out))
    assert res.exit_code == 0, res.stderr
    status = {s["stage"]: s["status"] for s in res.json()["stages"]}
    assert status.pop("diagnose-updn") == "done"
    # the report's inputs are byte-identical again, so the report is still current
    assert set(status.values()) == {"skipped"}
    assert (out / "results" / "updn" / "results.json").is_file()


def test_bad_options(run_cli, tmp_path):
    res = run_cli("demo", "--out", tmp_path / "d", "--size", "huge")
    assert res.exit_code == 2 and "--size" in res.stderr and "huge" in res.stderr
    (tmp_path / "file").write_text("x")
    res = run_cli("demo", "--out", tmp_path / "file", "--size", "tiny")
    assert res.exit_code == 2 and "file" in res.stderr and "expected the demo folder" in res.stderr
    # a ranker is checked before the world is built (it was the robustness stage's error)
    res = run_cli("demo", "--out", tmp_path / "r", "--size", "tiny", "--bq-ranker", "bleu9")
    assert res.exit_code == 2 and res.stderr.strip() == (
        "error: --bq-ranker: unknown ranker 'bleu9' (choose lasso, bleu1, bleu2, bleu3, bleu4, "
        "rouge, cider, meteor)"
    )
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--device", "cuda"), "only the chat VLM uses a device, and this demo has none"),
        (("--no-chat-vlm", "--device", "cuda:0"), "only the chat VLM uses a device"),
        (("--chat-vlm", "--device", "gpu"), "device must be a PyTorch device"),
        (("--chat-vlm", "--device", "mps"), "chat-vlm trains on cpu or cuda"),
        (("--chat-vlm", "--device", "cuda"), "this machine's PyTorch has no CUDA"),
    ],
)
def test_a_device_the_chat_vlm_cannot_use_is_refused_before_any_stage(run_cli, tmp_path, args,
                                                                      message):  # fmt: skip
    import torch

    if args[-1] == "cuda" and "--chat-vlm" in args and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    res = run_cli("demo", "--out", tmp_path / "d", "--size", "tiny", *args)
    assert res.exit_code == 2
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("error: --device: ") and message in line
    assert not (tmp_path / "d").exists()


def test_the_demos_findings_follow_from_its_figures(first_run):
    """No finding without its test passing: blind models are never called grounded nor
    said to use the image; a seeing model whose accuracy is not above the blind
    baseline's (not even before Holm's correction) is flagged as relying on language
    priors; every seeing model has its own run without the image, and uses the image
    exactly when that run's test says so (after the correction); the symbolic model
    reads the scene and is found to use the image."""
    from vqadiag.report.findings import holm

    _, out = first_run
    report = json.loads((out / "report" / "report.json").read_text())
    f = report["findings"]
    accuracy = {
        r["model"]: r["cells"]["accuracy"]["estimate"]["value"] for r in report["card"]["rows"]
    }
    assert f["baseline"] == max(("question-only", "prior"), key=accuracy.get)  # the stronger
    family = {(t["model"], t["key"], str(t["against"])): t for t in f["family"]}
    assert [t["p_adjusted"] for t in f["family"]] == pytest.approx(
        holm([t["p_value"] for t in f["family"]])
    )
    blind = {m["model"] for m in f["models"] if m["blind"]}
    assert blind == {"prior", "question-only"}
    for model in f["models"]:
        verdicts = {i["verdict"]: i for i in model["items"]}
        if model["blind"]:
            assert not {"uses the image", "grounded", "weakly grounded"} & set(verdicts)
            continue
        acc = family[(model["model"], "accuracy", "blind")]
        own = family[(model["model"], "gain_gqa", "no image")]  # its run without the image
        above = own["p_adjusted"] < f["alpha"] and own["difference"] > 0
        shown_alone = acc["p_value"] < f["alpha"] and acc["difference"] > 0
        assert ("uses the image" in verdicts) == above
        assert ("relies on language priors" in verdicts) == (not shown_alone)
        absent = (
            "relies on language priors",
            "not grounded",
            "answers as well without the image",
            "answers VQA v2 as well without the image",
        )
        for item in model["items"]:  # every verdict's own test says what it claims
            against = "blind" if item["baseline"] else None
            tests = [t for k, t in family.items() if k[:2] == (model["model"], item["key"])]
            test = family[(model["model"], item["key"], "blind")] if against else tests[0]
            significant = test["p_adjusted"] < f["alpha"]
            if item["verdict"] in absent:
                assert not (test["p_value"] < f["alpha"] and test["difference"] > 0)
            else:
                assert significant
    symbolic = next(m for m in f["models"] if m["model"] == "symbolic")
    assert "uses the image" in {i["verdict"] for i in symbolic["items"]}


def test_new_model_defaults_retrain_that_model_only(first_run, run_cli, monkeypatch):
    from vqadiag.models.reference.pixel import PixelModel

    _, out = first_run
    # as if a later version changed the pixel model's defaults: its run is out of date
    monkeypatch.setattr(PixelModel, "defaults", {**PixelModel.defaults, "dropout": 0.25})
    res = run_cli(*_tiny_demo(out))
    assert res.exit_code == 0, res.stderr
    status = {s["stage"]: s["status"] for s in res.json()["stages"]}
    assert status.pop("train-pixel") == "done"
    assert status.pop("diagnose-pixel") == "done"
    assert status.pop("report") == "done"
    assert set(status.values()) == {"skipped"}
    config = json.loads((out / "runs" / "pixel" / "config.json").read_text())
    assert config["options"]["dropout"] == 0.25


def test_the_chat_vlm_trains_on_the_demos_device_and_its_stage_is_keyed_by_it(
    tmp_path, monkeypatch
):
    """The device reaches the chat VLM's training options (and no other model's) beside
    its one thread and the size's options, and a run trained on one device is not reused
    for another."""
    from dataclasses import replace

    from vqadiag.workflows import demo as workflow
    from vqadiag.workflows import demo_records as records
    from vqadiag.workflows import models

    seen = []

    def fake_train(world, name, run, **kwargs):
        seen.append((name, kwargs["options"]))
        run.mkdir(parents=True, exist_ok=True)
        (run / "config.json").write_text(json.dumps({"options": kwargs["options"]}))
        return {"val": {"accuracy": 50.0, "questions": 10}}

    monkeypatch.setattr(models, "train", fake_train)
    plan = workflow._plan("tiny", 0, None, None, None, None, None, False)
    stages = records.Stages(tmp_path, False)

    def train(name, device):
        workflow._train_stage(stages, replace(plan, device=device), tmp_path, tmp_path, "w", name)

    train("chat-vlm", "cuda:0")
    train("pixel", "cuda:0")
    chat = {**workflow.CHAT_OPTIONS, **workflow.TINY_CHAT_OPTIONS}  # one thread, the size's
    assert seen == [("chat-vlm", {**chat, "device": "cuda:0"}), ("pixel", {})]
    assert chat["threads"] == 1
    train("chat-vlm", "cuda:0")  # done: skipped
    train("pixel", "cpu")  # the other models do not depend on it
    assert len(seen) == 2
    train("chat-vlm", "cpu")
    assert seen[-1] == ("chat-vlm", chat)


def test_the_chat_vlms_device_is_not_one_of_the_defaults_that_key_its_stage(monkeypatch):
    """A demo folder trained before the device, question_sets or pretrain_world option
    existed is not trained again for it; any CPU name is the CPU; another default still
    keys the stage."""
    from vqadiag.models.reference.chat_vlm import TrainedChatVLM
    from vqadiag.workflows import demo as workflow
    from vqadiag.workflows import demo_records as records

    digest = records.defaults_digest("chat-vlm")
    monkeypatch.setitem(TrainedChatVLM.defaults, "device", "cuda")
    assert records.defaults_digest("chat-vlm") == digest
    # question_sets at gqa trains as before the option existed; another value keys it
    without = {k: v for k, v in TrainedChatVLM.defaults.items() if k != "question_sets"}
    monkeypatch.setattr(TrainedChatVLM, "defaults", without)
    assert records.defaults_digest("chat-vlm") == digest
    monkeypatch.setitem(without, "question_sets", "gqa,vqa2")
    assert records.defaults_digest("chat-vlm") != digest
    monkeypatch.setitem(without, "question_sets", "gqa")
    # so does pretrain_world left empty (the training split's own images)
    gone = {k: v for k, v in without.items() if k != "pretrain_world"}
    monkeypatch.setattr(TrainedChatVLM, "defaults", gone)
    assert records.defaults_digest("chat-vlm") == digest
    monkeypatch.setitem(gone, "pretrain_world", "world20k")
    assert records.defaults_digest("chat-vlm") != digest
    # and pretrain_checkpoint, which changes no weights, left empty
    no_file = {k: v for k, v in without.items() if k != "pretrain_checkpoint"}
    monkeypatch.setattr(TrainedChatVLM, "defaults", no_file)
    assert records.defaults_digest("chat-vlm") == digest
    monkeypatch.setattr(TrainedChatVLM, "defaults", without)
    monkeypatch.setitem(without, "epochs", 4)
    assert records.defaults_digest("chat-vlm") != digest
    assert workflow._chat_device("cpu:0", True) == workflow._chat_device("cpu", False) == "cpu"


@pytest.mark.parametrize("size", ["tiny", "small", "medium"])
def test_every_sizes_chat_vlm_recipe_is_one_the_chat_vlm_accepts(size):
    """A misspelt option in a size's chat VLM recipe would only fail minutes into that
    demo; here it fails at once."""
    from vqadiag.models.reference.chat_vlm import TrainedChatVLM
    from vqadiag.workflows import demo as workflow

    preset = workflow.SIZES[size]
    plan = workflow._plan(size, 0, None, None, None, None, None, False)
    options = workflow._chat_options(plan)
    resolved = TrainedChatVLM.resolve_options(options, preset["epochs"][workflow.CHAT_VLM])
    assert resolved["threads"] == 1 and options.items() <= resolved.items()
