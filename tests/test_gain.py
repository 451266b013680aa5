"""The no-image condition, the multi-modal gain and the "uses the image" verdict a model
gets from its own run without the image (docs/diagnose.md, "The model without its image";
docs/protocols.md §9).

* hand-worked: the gain and McNemar's exact p on ten questions; blank images; variants;
* the findings: the own test is one member of the Holm family and supersedes the blind
  comparison's "uses the image";
* end to end through ``vqadiag diagnose`` and ``vqadiag report`` on a rendered world: a
  pixel model that perceives by construction (it answers right only when it is given a
  picture) gets a gain above 0 and the verdict; a model that reads the pixels and ignores
  them (a question-only prior fed pixels) gets an interval containing 0 and no verdict;
  the no-image condition is in ``results.json`` ``conditions`` with its variant and is
  read back from the store on a rerun; a chat VLM is asked with the text alone.
"""

from __future__ import annotations

import json
import zlib
from types import SimpleNamespace

import numpy as np
import pytest

from vqadiag import plugins
from vqadiag.models.base import TEXT_GENERATOR, Capabilities, ModelOutput, PixelInput
from vqadiag.probes.conditions import Probe
from vqadiag.probes.no_image import blank_pixels, no_image_condition, no_image_variant
from vqadiag.protocols.gain.formulas import multimodal_gain
from vqadiag.report.findings import findings

pytest.importorskip("torch")


def test_gain_and_mcnemar_hand_worked():
    with_image = np.array([1, 1, 1, 1, 1, 0, 0, 0, 1, 0], float)
    without = np.array([0, 0, 0, 0, 1, 1, 0, 0, 1, 0], float)
    out = multimodal_gain(with_image, without, seed=0, n_bootstrap=200)
    # 6 right with the image, 3 without: 100 · (6 − 3) / 10 = 30 points
    assert out["gain"]["value"] == pytest.approx(30.0)
    assert out["accuracy_all"] == 60.0 and out["accuracy_noimage"] == 30.0
    # discordant: 4 improved, 1 worsened; two-sided binomial of 4 in 5 at ½:
    # P(X ≤ 1) + P(X ≥ 4) = (1 + 5 + 5 + 1) / 32 = 0.375
    assert (out["improved"], out["worsened"], out["n"]) == (4, 1, 10)
    assert out["test"] == {"p_value": pytest.approx(0.375), "test": "mcnemar_exact"}
    assert out["gain"]["ci_low"] <= 30.0 <= out["gain"]["ci_high"]
    # soft accuracies (VQA v2): no McNemar, the paired bootstrap decides
    soft = multimodal_gain(with_image * 0.9, without, seed=0, n_bootstrap=200)
    assert soft["test"]["test"] == "paired_bootstrap"
    assert soft["gain"]["value"] == pytest.approx(100 * (5.4 - 3) / 10)


def test_variants_follow_what_the_model_can_be_asked():
    # the shared capabilities of generative models (harness answers to exported images
    # among them) get a blank image; the chat adapters declare text_only themselves
    assert no_image_variant(TEXT_GENERATOR) == "blank"
    assert no_image_variant(Capabilities(visual="pixels", text_only=True)) == "text-only"
    assert no_image_variant(Capabilities(visual="objects")) == "no-objects"
    assert no_image_variant(Capabilities(visual="objects", object_masking=False)) is None
    assert no_image_variant(Capabilities(visual="none")) is None
    blur = no_image_condition("gqa.noimage", Capabilities(visual="pixels"), "blur")
    assert blur.params == {"variant": "blank", "fill": "mean"}  # a blur keeps the scene
    with pytest.raises(ValueError):
        no_image_condition("x", Capabilities(visual="none"))


def test_a_blank_image_is_the_fill_everywhere_and_has_no_boxes():
    image = np.zeros((4, 6, 3), np.uint8)
    image[:2] = (200, 100, 0)  # half the rows: mean (100, 50, 0)
    boxes = np.array([[[0, 0, 3, 2], [1, 1, 2, 2]]], np.float32)
    visual = PixelInput([image], boxes, np.ones((1, 2), bool))
    probe = Probe("q1", "what?", "img", {})
    out = blank_pixels(visual, [probe], "mean")
    assert out.images[0].shape == image.shape and (out.images[0] == (100, 50, 0)).all()
    assert not out.mask.any() and not out.boxes.any()
    noisy = blank_pixels(visual, [probe], "noise").images[0]
    assert (noisy == blank_pixels(visual, [probe], "noise").images[0]).all()  # seeded
    assert len(np.unique(noisy)) > 3


def _result(label, visual, summary, tests=None):
    return SimpleNamespace(
        label=label,
        summary={k: {"value": v, "ci_low": v - 1, "ci_high": v + 1, "n": 50}
                 for k, v in summary.items()},
        results={"model": {"capabilities": {"visual": visual}}},
        suites={"gain": {"tests": tests or {}}},
    )  # fmt: skip


def test_the_own_run_decides_uses_the_image_inside_the_holm_family():
    seeing = _result("vlm", "pixels", {"accuracy": 60.0, "gain_gqa": 12.0},
                     {"gain_gqa": {"p_value": 0.004, "test": "mcnemar_exact",
                                   "accuracy_noimage": 48.0}})  # fmt: skip
    ignoring = _result("deaf", "pixels", {"accuracy": 45.0, "gain_gqa": 0.0},
                       {"gain_gqa": {"p_value": 1.0, "test": "mcnemar_exact",
                                     "accuracy_noimage": 45.0}})  # fmt: skip
    qo = _result("qo", "none", {"accuracy": 50.0})
    cmps = [
        {"a": "vlm", "b": "qo", "metric": "accuracy", "paired": True, "p_value": 0.02,
         "difference": {"value": 10.0}, "test": "mcnemar_exact", "anchor": "cmp-0"},
        {"a": "deaf", "b": "qo", "metric": "accuracy", "paired": True, "p_value": 0.04,
         "difference": {"value": -5.0}, "test": "mcnemar_exact", "anchor": "cmp-1"},
    ]  # fmt: skip
    out = findings([seeing, ignoring, qo], cmps, {}, n_bootstrap=100)
    family = {(t["model"], t["key"], t["against"]): t for t in out["family"]}
    # the blind comparison's "uses the image" gives way to the own run: its accuracy tests
    # remain (for "relies on language priors"), the two own tests join the family
    assert set(family) == {("vlm", "gain_gqa", "no image"), ("deaf", "gain_gqa", "no image"),
                           ("vlm", "accuracy", "blind"), ("deaf", "accuracy", "blind")}  # fmt: skip
    # Holm over 4: .004 × 4 = .016, .02 × 3 = .06, .04 × 2 = .08, 1
    assert family[("vlm", "gain_gqa", "no image")]["p_adjusted"] == pytest.approx(0.016)
    verdicts = {m["model"]: {i["verdict"]: i for i in m["items"]} for m in out["models"]}
    assert set(verdicts["vlm"]) == {"uses the image"}
    item = verdicts["vlm"]["uses the image"]
    assert item["suite"] == "gain" and item["baseline"] is None
    assert item["sentence"] == (
        "multi-modal gain (GQA) 12.00 [11.00, 13.00]: accuracy 48.00 without its image "
        "(McNemar exact test, p = 0.004)"
    )
    assert set(verdicts["deaf"]) == {
        "answers as well without the image", "relies on language priors"
    }  # fmt: skip
    # one model alone gets the verdict
    alone = findings([seeing], [], {}, n_bootstrap=100)
    assert [i["verdict"] for i in alone["models"][0]["items"]] == ["uses the image"]
    assert "own run without the image" in alone["notes"][0]


# -- end to end ------------------------------------------------------------------------


class PerceivingPixels:
    """Answers right exactly when it is shown a picture (an image that is not one colour,
    with its detected boxes); "nope" otherwise."""

    name = "perceiving-pixels"
    capabilities = Capabilities(visual="pixels", object_masking=False, probabilities=False)
    input_size = (48, 36)

    def __init__(self, spec: str) -> None:
        self.answer_vocab: list[str] = []

    def predict(self, batch, visual):
        answers = []
        for i in range(len(batch)):
            image = visual.images[i]
            shown = bool(visual.mask[i].any()) and len(np.unique(image.reshape(-1, 3), axis=0)) > 1
            answers.append(str(batch.record(i)["answer"]) if shown else "nope")
        return ModelOutput(answers)

    def fingerprint(self) -> str:
        return "perceiving-pixels-v1"


class PriorFedPixels:
    """A question-only prior that reads the pixels and learns nothing from them: of the
    two most frequent training answers of its question's first word, it picks one by a
    hash of the image's bytes, so its answers change with the image (blank or not) while
    the image says nothing about which is right."""

    name = "prior-fed-pixels"
    capabilities = Capabilities(visual="pixels", object_masking=False, probabilities=False)
    input_size = (48, 36)
    table: dict[str, list[str]] = {}  # noqa: RUF012 (set by the fixture)

    def __init__(self, spec: str) -> None:
        self.answer_vocab: list[str] = []

    def predict(self, batch, visual):
        answers = []
        for question, image in zip(batch.questions, visual.images, strict=True):
            assert image.shape == (36, 48, 3)
            top = self.table.get(question.split()[0].lower(), ["yes"])
            answers.append(top[zlib.crc32(image.tobytes()) % len(top)])
        return ModelOutput(answers)

    def fingerprint(self) -> str:
        return "prior-fed-pixels-v1"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from collections import Counter

    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.synth import generate_world

    root = tmp_path_factory.mktemp("gain") / "world"
    generate_world(root, images=40, seed=1)
    by_word: dict[str, Counter] = {}
    for record in GQAData(root).questions("train").values():
        word = str(record["question"]).split()[0].lower()
        by_word.setdefault(word, Counter())[str(record["answer"])] += 1
    PriorFedPixels.table = {w: [a for a, _ in c.most_common(2)] for w, c in by_word.items()}
    return root


@pytest.fixture
def adapters():
    plugins.register_adapter("perceiving", PerceivingPixels, "test: perceives by construction")
    plugins.register_adapter("priorpix", PriorFedPixels, "test: ignores the pixels it reads")
    yield
    plugins.unregister_adapter("perceiving")
    plugins.unregister_adapter("priorpix")


def _diagnose(run_cli, world, model, out, *extra):
    res = run_cli("diagnose", "--data", world, "--model", model, "--out", out,
                  "--suite", "accuracy,gain", "--max-questions", "60", "--n-bootstrap", "200",
                  "--json", *extra)  # fmt: skip
    assert res.exit_code == 0, res.stderr
    return res.json()


def test_diagnose_and_report_give_one_pixel_model_its_own_verdict(
    run_cli, world, tmp_path, adapters
):
    seeing = _diagnose(run_cli, world, "perceiving:x", tmp_path / "seeing")
    assert seeing["skipped"] == {}, seeing["skipped"]
    for dataset, name in (("gqa", "gqa.noimage"), ("vqa2", "vqa2.noimage")):
        cond = seeing["conditions"][name]
        assert cond["variant"] == "blank" and cond["fill"] == "mean"
        assert cond["computed"] == cond["questions"] > 0
        assert seeing["suites"]["gain"][dataset]["variant"] == "blank"
        assert name in seeing["fingerprints"]["conditions"]
    gqa = seeing["suites"]["gain"]["gqa"]
    # right whenever it sees, "nope" (never a gold answer) without the image
    assert gqa["accuracy_all"] == 100.0 and gqa["accuracy_noimage"] == 0.0
    gain = seeing["summary"]["gain_gqa"]
    assert gain["value"] == 100.0 and gain["ci_low"] > 0
    assert seeing["summary"]["gain_vqa2"]["ci_low"] > 0
    assert seeing["suites"]["gain"]["tests"]["gain_gqa"]["test"] == "mcnemar_exact"
    rows = [json.loads(x) for x in (tmp_path / "seeing" / "per_question.jsonl").open()]
    gain_rows = [r for r in rows if r["suite"] == "gain"]
    assert len(gain_rows) == gqa["n"] + seeing["suites"]["gain"]["vqa2"]["n"]
    assert all(set(r["answers"]) == {"all", "noimage"} for r in gain_rows)
    gqa_rows = [r for r in gain_rows if r["id"].startswith("gqa:")]
    assert np.mean([r["values"]["gain_gqa"] for r in gqa_rows]) * 100 == gain["value"]
    # both runs' prediction files, as every condition's (found in review: gain had none)
    files = tmp_path / "seeing" / "predictions" / "gain"
    assert sorted(p.name for p in files.iterdir()) == [
        "gqa_all.json", "gqa_noimage.json", "vqa2_all.json", "vqa2_noimage.json"]  # fmt: skip
    noimage = json.loads((files / "gqa_noimage.json").read_text())
    assert len(noimage) == gqa["n"] and set(noimage.values()) == {"nope"}  # no probs: plain

    # a rerun reads both conditions back from the store
    again = _diagnose(run_cli, world, "perceiving:x", tmp_path / "seeing")
    assert again["conditions"]["gqa.noimage"]["computed"] == 0
    assert again["conditions"]["vqa2.noimage"]["cached"] > 0
    assert again["summary"] == seeing["summary"]

    ignoring = _diagnose(run_cli, world, "priorpix:x", tmp_path / "ignoring")
    for key in ("gain_gqa", "gain_vqa2"):
        est = ignoring["summary"][key]
        assert est["ci_low"] <= 0.0 <= est["ci_high"], (key, est)
    # not a constant: its answers change without the image, the gain does not move
    part = ignoring["suites"]["gain"]["gqa"]
    assert part["improved"] > 0 and part["worsened"] > 0

    rep = run_cli("report", tmp_path / "seeing", tmp_path / "ignoring", "--out",
                  tmp_path / "report", "--n-bootstrap", "200", "--json")  # fmt: skip
    assert rep.exit_code == 0, rep.stderr
    report = rep.json()
    verdicts = {m["model"]: {i["verdict"] for i in m["items"]}
                for m in report["findings"]["models"]}  # fmt: skip
    assert "uses the image" in verdicts["perceiving-pixels"]
    assert "uses the image" not in verdicts["prior-fed-pixels"]
    assert "answers as well without the image" in verdicts["prior-fed-pixels"]
    family = {(t["model"], t["key"], t["against"]) for t in report["findings"]["family"]}
    assert ("perceiving-pixels", "gain_gqa", "no image") in family
    assert report["findings"]["baseline"] is None  # no blind model: the own run decided
    assert {"gain_gqa", "gain_vqa2"} <= {c["key"] for c in report["card"]["columns"]}


def test_a_chat_vlm_is_asked_with_the_text_alone(run_cli, world, tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    from tiny_vlm import build_tiny_llava
    from vqadiag.models.adapters.chat_vlm import ChatVLM

    model_dir = build_tiny_llava(tmp_path / "llava")
    asked: list[bool] = []
    real = ChatVLM._generate

    def spy(self, images, questions):
        asked.append(images is None)
        return real(self, images, questions)

    monkeypatch.setattr(ChatVLM, "_generate", spy)
    result = _diagnose(run_cli, world, f"hf:{model_dir}", tmp_path / "vlm", "--model-args",
                       "max_new_tokens=3,batch_size=8", "--max-questions", "8")  # fmt: skip
    assert result["model"]["capabilities"]["text_only"] is True
    assert result["conditions"]["gqa.noimage"]["variant"] == "text-only"
    assert "fill" not in result["conditions"]["gqa.noimage"]
    assert result["suites"]["gain"]["gqa"]["variant"] == "text-only"
    assert True in asked and False in asked  # text alone for no-image, images otherwise
    rows = [json.loads(x) for x in (tmp_path / "vlm" / "per_question.jsonl").open()]
    assert all(set(r["raw"]) == {"all", "noimage"} for r in rows if r["suite"] == "gain")


def test_a_served_chat_model_is_sent_the_text_alone():
    pytest.importorskip("urllib3")
    from vqadiag.models.adapters.openai_endpoint import EndpointModel
    from vqadiag.models.base import QuestionBatch

    model = EndpointModel("http://127.0.0.1:9/v1", served_model="m", in_flight=1)
    assert model.capabilities.text_only
    sent = []

    def call(method, path, body, parse):
        sent.append(body["messages"][0]["content"])
        return "Yes."

    model._http = SimpleNamespace(call=call)
    batch = QuestionBatch(["q1"], ["Is it red?"], ["img"])
    assert model.predict(batch, None).answers == ["yes"]
    model.predict(batch, PixelInput([np.zeros((4, 4, 3), np.uint8)]))
    assert [[part["type"] for part in content] for content in sent] == [
        ["text"], ["image_url", "text"]
    ]  # fmt: skip
