"""No request asked twice (docs/diagnose.md, "No request asked twice").

Hand-worked signatures: an image with 3 objects; a pixel model's 10 × 10 input with box
A = (0, 0, 5, 10) (the left half), box B = (5, 0, 10, 10) (the right half) and box C =
(2.6, 2.6, 3.4, 3.4), which holds no pixel centre (centres are at k + ½).
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from vqadiag.probes.conditions import Condition, Probe
from vqadiag.probes.shared_inputs import INTACT, input_signature, reused_answer
from vqadiag.probes.store import Answer

PLAIN = Condition("gqa.all", "plain")
DROP = Condition("gqa.rel", "objects", {"replacement": "drop"})
ZEROS = Condition("gqa.rel", "objects", {"replacement": "zeros"})
MEAN = Condition("gqa.rel", "objects", {"fill": "mean"})
NOISE = Condition("gqa.rel", "objects", {"fill": "noise"})


class Ctx:
    """The parts of a probe context a signature reads."""

    def __init__(self, *, blind=False, pixels=False) -> None:
        self.blind, self.pixels, self.donors = blind, pixels, {}

    def image_digest(self, image_id: str, question: str | None = None) -> str:
        return "blind" if self.blind else f"digest-{image_id}"

    def n_objects(self, image_id: str) -> int:
        return 3

    def pixel_geometry(self, image_id: str):
        boxes = np.array([[0, 0, 5, 10], [5, 0, 10, 10], [2.6, 2.6, 3.4, 3.4]], np.float64)
        return 10, 10, boxes


def _probe(qid="q1", **kw) -> Probe:
    return Probe(qid, "what colour is it?", "img", {"imageId": "img", "question": "x"}, **kw)


def test_objects_left_visible_decide_the_input():
    ctx = Ctx()
    plain = input_signature(ctx, _probe(), PLAIN)
    # relevant-only when every object is relevant, irrelevant-only removing none: plain
    assert input_signature(ctx, _probe(keep=(0, 1, 2)), DROP) == plain
    assert input_signature(ctx, _probe(remove=()), DROP) == plain
    loo = [input_signature(ctx, _probe(remove=(j,)), DROP) for j in range(3)]
    assert len({plain, *loo}) == 4
    # the same visible set by keep or by remove is one input
    assert input_signature(ctx, _probe(keep=(1, 2)), DROP) == loo[0]
    # a removed object shown with zero features is another input than one masked out
    assert input_signature(ctx, _probe(remove=(0,)), ZEROS) != loo[0]
    # the model never sees the question id: the same text, record and image is one input
    assert input_signature(ctx, _probe("q2"), PLAIN) == plain
    # another record, or another text, is another input
    other = Probe("q1", "what colour is it?", "img", {"imageId": "img", "question": "y"})
    assert input_signature(ctx, other, PLAIN) != plain
    noisy = Probe("q1", "what colour is it? is it red?", "img", _probe().record)
    assert input_signature(ctx, noisy, PLAIN) != plain
    # GradCAM is not an answer
    assert input_signature(ctx, _probe(), Condition("gqa.gradcam", "gradcam")) is None


def test_a_blind_model_has_one_input_per_question_text():
    ctx = Ctx(blind=True)
    plain = input_signature(ctx, _probe(), PLAIN)
    assert input_signature(ctx, _probe(remove=(0,)), DROP) == plain
    assert input_signature(ctx, _probe(keep=()), ZEROS) == plain


def test_pixels_replaced_decide_a_pixel_models_input():
    ctx = Ctx(pixels=True)
    plain = input_signature(ctx, _probe(), PLAIN)
    # box C holds no pixel centre: removing it replaces nothing
    assert input_signature(ctx, _probe(remove=(2,)), MEAN) == plain
    # keeping A and B keeps every pixel
    assert input_signature(ctx, _probe(keep=(0, 1)), MEAN) == plain
    # removing B replaces the right half, as keeping A (and C) does
    assert input_signature(ctx, _probe(remove=(1,)), MEAN) == input_signature(
        ctx, _probe(keep=(0, 2)), MEAN
    )
    assert input_signature(ctx, _probe(remove=(0,)), MEAN) != input_signature(
        ctx, _probe(remove=(1,)), MEAN
    )
    # noise is drawn per question: two questions never share a noisy input
    a = input_signature(ctx, _probe("q1", remove=(0,)), NOISE)
    b = input_signature(ctx, _probe("q2", remove=(0,)), NOISE)
    mean_a = input_signature(ctx, _probe("q1", remove=(0,)), MEAN)
    mean_b = input_signature(ctx, _probe("q2", remove=(0,)), MEAN)
    assert mean_a == mean_b and len({a, b, mean_a}) == 3
    assert INTACT not in (a, b)


def test_a_reused_answer_carries_the_probability_of_the_reference_answer():
    plain = Answer("red", 0.7, None, None, {"red": 0.7, "blue": 0.2}, np.ones(3, np.float32))
    # leave-one-out's reference is the plain answer: its probability is p_answer
    loo = reused_answer(plain, _probe(ref="red"), want_vector=False)
    assert loo is not None and loo.ref == "red" and loo.p_ref == 0.7 and loo.vector is None
    assert reused_answer(plain, _probe(ref="blue"), False).p_ref == 0.2
    # a reference answer whose probability the source lacks: asked again
    assert reused_answer(plain, _probe(ref="green"), False) is None
    # a plain condition keeps attention: a source without it cannot serve
    no_vector = Answer("red", 0.7, None, None, {"red": 0.7})
    assert reused_answer(no_vector, _probe(), want_vector=True) is None
    assert reused_answer(plain, _probe(), want_vector=True).vector is not None
    # a model without probabilities: nothing to carry
    text = Answer("red", raw="Red.")
    assert reused_answer(text, _probe(ref="blue"), False).p_ref is None


@pytest.fixture(scope="module")
def world_and_prior(tmp_path_factory):
    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.models.registry import model_class
    from vqadiag.synth import generate_world

    root = tmp_path_factory.mktemp("shared") / "world"
    generate_world(root, images=80, seed=4)
    run = tmp_path_factory.mktemp("run") / "prior"
    model_class("prior").train(GQAData(root), progress=False).save(run)
    return root, run


def test_a_blind_model_is_asked_once_per_question_and_answers_as_without_reuse(
    world_and_prior, tmp_path, run_cli
):
    world, run = world_and_prior
    args = ["--suite", "accuracy,fpvg", "--n-bootstrap", "20", "--json"]
    out = {}
    for name, extra in (("reuse", []), ("ask", ["--no-reuse"])):
        result = run_cli("diagnose", "--data", world, "--model", run, "--out", tmp_path / name,
                         *args, *extra)  # fmt: skip
        assert result.exit_code == 0, result.stderr
        out[name] = json.loads(result.stdout)
    rel = out["reuse"]["conditions"]["gqa.rel"]
    assert rel["computed"] == 0 and rel["reused"] == rel["questions"] > 0
    assert out["ask"]["conditions"]["gqa.rel"]["computed"] == rel["questions"]
    assert out["reuse"]["summary"] == out["ask"]["summary"]
    rows = [(tmp_path / n / "per_question.jsonl").read_text() for n in ("reuse", "ask")]
    assert rows[0] == rows[1]
    # the reused answers are stored: a rerun finds them
    again = run_cli("diagnose", "--data", world, "--model", run, "--out", tmp_path / "reuse", *args)
    counts = json.loads(again.stdout)["conditions"]["gqa.rel"]
    assert counts["cached"] == rel["questions"] and counts["reused"] == 0
    shutil.rmtree(tmp_path / "ask")


def test_only_answers_to_a_records_own_question_are_kept_for_later_conditions():
    """A rewritten question (the basic-question noise) is asked by no other condition: its
    answer and its signature part are not kept (they would hold every noisy text of the
    diagnosis); the record's own question is."""
    from vqadiag.probes.shared_inputs import SharedAnswers

    record = {"imageId": "img", "question": "what colour is it?"}
    own = Probe("q1", record["question"], "img", record)
    noisy = Probe("q1", "what colour is it? is it red?", "img", record)
    answered: dict = {}
    bases: dict = {}
    text = Condition("gqa.noise_1", "text", {"partition": 1})
    shared = SharedAnswers(Ctx(), text, [own, noisy], False, answered, bases)
    shared.remember([Answer("red"), Answer("blue")])
    assert list(answered.values()) == [Answer("red")]
    assert list(bases) == [("q1", record["question"])]
