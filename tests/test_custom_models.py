"""A model object given to the Python API (docs/contributing.md): the wrong kind of object,
or a ``predict`` that gives the wrong thing, is one line naming the model and what is
wrong, never an attribute error from deep inside the run or a stored wrong answer."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vqadiag.diagnosis.diagnose import diagnose
from vqadiag.diagnosis.precision import diagnose_to_precision
from vqadiag.errors import DataError
from vqadiag.models.base import Capabilities, ModelOutput
from vqadiag.synth import generate_world

BLIND = Capabilities(visual="none", object_masking=False)


class Echo:
    """A blind model answering ``yes`` to everything, or what ``make`` builds."""

    name = "echo"
    capabilities = BLIND
    answer_vocab = ("yes", "no")

    def __init__(self, make=None) -> None:
        self.make = make or (lambda n: ModelOutput(["yes"] * n, np.tile([0.75, 0.25], (n, 1))))

    def predict(self, batch, visual):
        return self.make(len(batch.question_ids))

    def fingerprint(self) -> str:
        return "echo"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("custom") / "world"
    generate_world(root, images=30, seed=2, render=False)
    return root


def _diagnose(world, model, out, **options):
    return diagnose(world, model, out, suites="accuracy", n_bootstrap=20, max_questions=20,
                    **options)  # fmt: skip


@pytest.mark.parametrize(
    ("model", "got"),
    [
        (lambda batch, visual: None, "got function, without name, capabilities"),
        (None, "got NoneType, without name"),
        (Echo, "got a class (Echo), not an instance, without name"),
        ({"capabilities": BLIND}, "got dict, without name"),
    ],
)
def test_what_is_not_a_model_is_one_line(world, tmp_path, model, got):
    with pytest.raises(DataError) as err:
        _diagnose(world, model, tmp_path / "o")
    assert str(err.value).startswith("a model is a run folder, an adapter spec (KIND:SPEC)")
    assert got in str(err.value)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda n: ["yes"] * n, "model 'echo': predict returned list, not a ModelOutput"),
        (lambda n: ModelOutput(["yes"] * (n - 1)), "answers for"),
        (lambda n: ModelOutput([1] * n), "model 'echo': an answer is int 1, not text"),
        (lambda n: ModelOutput(["yes"] * n, np.full((n, 2), math.nan)), "probs hold NaN"),
        (lambda n: ModelOutput(["yes"] * n, np.ones((n, 1))), "probs of shape"),
    ],
)
def test_a_wrong_output_is_one_line_naming_the_model(world, tmp_path, make, says):
    with pytest.raises(DataError, match=says):
        _diagnose(world, Echo(make), tmp_path / "o")


def test_a_model_object_diagnoses_and_grows_to_a_precision(world, tmp_path):
    assert _diagnose(world, Echo(), tmp_path / "plain")["model"]["run"] == "echo"
    result = diagnose_to_precision(world, Echo(), tmp_path / "precise", precision=20,
                                   suites="accuracy", n_bootstrap=20, max_calls=300)  # fmt: skip
    assert result["precision"]["calls"] > 0 and result["summary"]["accuracy"] is not None


def test_settings_a_model_never_reads_are_refused(world, tmp_path):
    with pytest.raises(DataError, match="--model-args: set an adapter's settings as it loads"):
        _diagnose(world, Echo(), tmp_path / "o", model_args={"temperature": 0})
    with pytest.raises(DataError, match="model_name: names a model given as an object"):
        _diagnose(world, "prior", tmp_path / "o", model_name="mine")
    with pytest.raises(ValueError, match="Capabilities.visual must be one of objects, pixels"):
        Capabilities(visual="image")


def test_api_arguments_the_command_line_would_refuse(world, tmp_path):
    """Found in review: the Python API accepted what the command refuses, or named the
    wrong thing in its error."""
    import vqadiag
    from vqadiag.data.formats.introspect import read_introspect

    intro = world / "introspect" / "VQAIntrospect_valv1.0.json"
    cases = [
        (lambda: _diagnose(world, Echo(), tmp_path / "o", rate=3.0), "--rate: goes with --plan"),
        (lambda: diagnose_to_precision(world, Echo(), tmp_path / "o", precision=5, start=0),
         "start: must be a whole number of questions"),
        (lambda: vqadiag.train(world, "prior", tmp_path / "r", epochs=5),
         "--epochs: the prior model counts answers"),
        (lambda: vqadiag.train(world, "prior", tmp_path / "r", options=["mode=global"]),
         "--option: options are a mapping of KEY to value, got list"),
        (lambda: vqadiag.train(world, "prior", tmp_path / "r", val_split="vall"),
         "val_split: no split 'vall' to score"),
        (lambda: vqadiag.generate_world(tmp_path / "w", images=20.5),
         "images must be a whole number of 3 or more, got 20.5"),
        (lambda: read_introspect(intro, []), "no pred_q_type to include"),
    ]  # fmt: skip
    for call, says in cases:
        with pytest.raises(ValueError, match=says):
            call()
    assert not (tmp_path / "o").exists() and not (tmp_path / "r").exists()
