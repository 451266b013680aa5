"""The pixel reference model and pixel conditions, end to end on a rendered world.

Validity (the metrics measure what they claim, on pixels):

* a blind model that is fed pixels (it reads the images it is given, then ignores
  them) has FPVG+ exactly 0 under pixel masking, although its inputs really change;
* a model grounded by construction — it answers right exactly when the pixels of the
  question's relevant boxes are intact — has FPVG+ exactly 100, acc(relevant-only) 100
  and acc(irrelevant-only) 0: relevance, pixel masks and scoring agree box for box.

* the pixel model with its default recipe (the box encoder, pre-trained 6 epochs and
  frozen), trained on the demo's world (2,000 rendered images) for 4 epochs (the demo
  trains 8), its attention supervised by the questions' annotated objects, has FPVG+
  above the blind model's 0 (interval above 0), and replacing the pixels of its
  relevant boxes costs it more accuracy than replacing everything else
  (acc(relevant-only) > acc(irrelevant-only)); marked slow (a few minutes).
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from vqadiag import plugins
from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.models.base import Capabilities, ModelOutput
from vqadiag.models.reference.pixel import PixelModel, box_cell_overlap
from vqadiag.synth import generate_world

pytest.importorskip("torch")


class BlindPixelModel:
    """Reads every image it gets (their digests are kept), answers "yes" whatever it sees."""

    name = "blind-pixels"
    capabilities = Capabilities(visual="pixels", object_masking=False, probabilities=True)
    input_size = (32, 32)
    seen: set[str] = set()  # noqa: RUF012 (shared on purpose: what every instance saw)

    def __init__(self, spec: str) -> None:
        self.answer_vocab = ["yes", "no"]

    def predict(self, batch, visual):
        for image in visual.images:
            assert image.shape == (32, 32, 3) and image.dtype == np.uint8
            BlindPixelModel.seen.add(hashlib.blake2b(image.tobytes(), digest_size=8).hexdigest())
        probs = np.tile(np.array([[0.9, 0.1]], np.float32), (len(batch), 1))
        return ModelOutput(["yes"] * len(batch), probs)

    def fingerprint(self) -> str:
        return "blind-pixels-v1"


class RelevantPixelsOracle:
    """Right (the gold answer) exactly when the relevant boxes' pixels are the stored ones."""

    name = "relevant-pixels-oracle"
    capabilities = Capabilities(visual="pixels", object_masking=False, probabilities=False)
    input_size = (160, 120)
    relevant: dict[str, list[int]] = {}  # noqa: RUF012 (set by the fixture)
    world = None

    def __init__(self, spec: str) -> None:
        self.answer_vocab = []
        self.data = GQAData(RelevantPixelsOracle.world)

    def predict(self, batch, visual):
        from vqadiag.probes.conditions import region_mask

        answers = []
        for i, qid in enumerate(batch.question_ids):
            image = visual.images[i]
            # its own view of the truth: the stored image at the input size, and the
            # detected boxes scaled here (not the ones the data path hands over)
            original, (width, height) = self.data.images.resized(
                batch.image_ids[i], self.input_size
            )
            scale = np.array([self.input_size[0] / width, self.input_size[1] / height] * 2)
            boxes = self.data.image_boxes(batch.image_ids[i])[self.relevant.get(qid, [])] * scale
            region = region_mask(*image.shape[:2], boxes)
            intact = bool((image[region] == original[region]).all())
            answers.append(str(batch.record(i)["answer"]) if intact else "nope")
        return ModelOutput(answers)

    def fingerprint(self) -> str:
        return "relevant-pixels-oracle-v1"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("pixel") / "world"
    generate_world(root, images=300, seed=0)
    return root


@pytest.fixture(scope="module")
def pixel_run(world, tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs") / "pixel"
    PixelModel.train(GQAData(world), epochs=4, progress=False).save(folder)
    return folder


@pytest.fixture(scope="module")
def results(world, tmp_path_factory):
    from vqadiag.diagnosis.diagnose import diagnose

    plugins.register_adapter("blindpix", BlindPixelModel, "test: blind, fed pixels")
    out = {}
    try:
        for name, spec in (("blind", "blindpix:x"),):
            folder = tmp_path_factory.mktemp("res") / name
            diagnose(
                world, spec, folder, suites="accuracy,fpvg,importance", n_bootstrap=50,
                max_questions=400,
            )  # fmt: skip
            out[name] = json.loads((folder / "results.json").read_text())
    finally:
        plugins.unregister_adapter("blindpix")
    return out


def _value(result, key):
    est = result["summary"][key]
    assert est is not None, (key, result["skipped"])
    return est["value"]


def test_box_cell_overlap_is_hand_worked():
    # a 16-pixel input, 2 × 2 grid of 8-pixel cells; a box over the left half and the
    # top half of the bottom row: cell (0,0) full, (0,1) none, (1,0) half, (1,1) none
    overlap = box_cell_overlap(np.array([[[0.0, 0.0, 8.0, 12.0]]]), grid=2, size=16)
    assert overlap.tolist() == [[[1.0, 0.0, 0.5, 0.0]]]


def test_pixel_model_trains_saves_and_loads(pixel_run, world):
    from vqadiag.models.registry import load_model

    model = load_model(pixel_run)
    # the default: the box encoder reads the stored images (it crops the boxes itself)
    assert isinstance(model, PixelModel) and model.input_size is None
    data = GQAData(world)
    batch = data.batch("val", list(data.questions("val"))[:5])
    visual = data.pixel_input(batch.image_ids, size=model.input_size)
    out = model.predict(batch, visual)
    assert len(out.answers) == 5 and out.probs.shape[0] == 5
    # per-box importance: one value per detected box, in [0, 1], none on padding
    assert out.attention.shape == visual.mask.shape
    assert (out.attention >= 0).all() and (out.attention <= 1 + 1e-6).all()
    assert (out.attention[~visual.mask] == 0).all()
    # a reloaded model answers exactly the same
    again = load_model(pixel_run).predict(batch, visual)
    assert again.answers == out.answers and np.allclose(again.probs, out.probs)


def test_blind_model_has_fpvg_plus_exactly_zero_under_pixel_masking(results):
    blind = results["blind"]
    assert blind["model"]["capabilities"]["pixel_input"] is True
    assert _value(blind, "fpvg_plus") == 0.0
    assert _value(blind, "acc_rel") == _value(blind, "acc_irrel") == _value(blind, "acc_all")
    # the masking happened: it was fed many distinct images (plain, relevant-only,
    # irrelevant-only, one box left out), more than the world's images
    assert len(BlindPixelModel.seen) > 300
    assert blind["config"]["pixel_fill"] == "mean"


def test_a_model_grounded_by_construction_scores_fpvg_plus_100(world, tmp_path):
    from vqadiag.data.formats.relevance_files import read_relevance, relevance
    from vqadiag.diagnosis.diagnose import diagnose

    gqa = world / "gqa"
    rel_file = tmp_path / "relevance.json"
    relevance(gqa / "val_balanced_questions.json", gqa / "val_sceneGraphs.json",
              gqa / "objects", rel_file)  # fmt: skip
    RelevantPixelsOracle.relevant = {q: list(r[0]) for q, r in read_relevance(rel_file).items()}
    RelevantPixelsOracle.world = world
    plugins.register_adapter("oracle", RelevantPixelsOracle, "test: grounded by construction")
    try:
        result = diagnose(
            world, "oracle:x", tmp_path / "out", suites="fpvg", n_bootstrap=20, max_questions=200
        )
    finally:
        plugins.unregister_adapter("oracle")
    assert _value(result, "fpvg_plus") == 100.0
    assert _value(result, "acc_all") == _value(result, "acc_rel") == 100.0
    assert _value(result, "acc_irrel") == 0.0
    assert result["summary"]["fpvg_plus"]["n"] > 50


@pytest.fixture(scope="module")
def demo_scale_pixel(tmp_path_factory):
    """The default pixel model on the demo's world (2,000 images; 4 epochs after 6 of
    pre-training, the demo trains 8), diagnosed on 600 val questions (the grid encoder
    needed this scale to look: on 600-800 images its acc(relevant-only) was ≤
    acc(irrelevant-only))."""
    from vqadiag.diagnosis.diagnose import diagnose

    root = tmp_path_factory.mktemp("demo_scale")
    generate_world(root / "world", images=2000, seed=0)
    PixelModel.train(GQAData(root / "world"), epochs=4, progress=False).save(root / "run")
    return diagnose(
        root / "world", str(root / "run"), root / "out", suites="accuracy,fpvg",
        n_bootstrap=200, max_questions=600,
    )  # fmt: skip


@pytest.mark.slow
def test_pixel_model_is_grounded_more_than_a_blind_one(demo_scale_pixel, results):
    pixel, blind = demo_scale_pixel, results["blind"]
    fpvg = pixel["summary"]["fpvg_plus"]
    assert fpvg["value"] > _value(blind, "fpvg_plus") == 0.0
    assert fpvg["ci_low"] > 0.0, fpvg
    # replacing the relevant pixels costs it more than replacing everything else
    assert _value(pixel, "acc_rel") > _value(pixel, "acc_irrel")
