"""``diagnose --ray-actors N`` (docs/diagnose.md, "Many GPUs: Ray actors"): an in-process
model answered by N Ray actors gives the single-process answers, and an actor killed
mid-run loses nothing. One local Ray (2 CPUs) serves the module.

This file is also the plug-in the actors load (``plugins=[__file__]``): it registers the
``meanpix`` adapter, a model that answers from the pixels it is given; ``meanpix:FILE``
kills its own process at the first question whose id ends in "7", once (it writes
``FILE`` first, so the actor that replaces it answers)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from vqadiag import plugins
from vqadiag.models.base import Capabilities, ModelOutput

ANSWERS = ["yes", "no", "red", "blue", "green", "metal", "wood", "two"]


class MeanPixels:
    """Answers from the image's mean colour and the question's length."""

    name = "meanpix"
    capabilities = Capabilities(visual="pixels", object_masking=False, probabilities=False)
    input_size = (16, 16)

    def __init__(self, spec: str) -> None:
        self.answer_vocab = list(ANSWERS)
        self.marker = spec if spec.startswith("/") else None

    def predict(self, batch, visual):
        marker = self.marker
        answers = []
        for qid, image, question in zip(
            batch.question_ids, visual.images, batch.questions, strict=True
        ):
            if marker and qid.endswith("7") and not Path(marker).exists():
                Path(marker).write_text(str(os.getpid()))
                os._exit(1)  # the actor dies mid-batch
            mean = np.asarray(image, np.float64).mean(axis=(0, 1))
            answers.append(ANSWERS[(int(mean.sum()) + len(question)) % len(ANSWERS)])
        return ModelOutput(answers)

    def fingerprint(self) -> str:
        return "meanpix-v1"


def _register() -> None:
    plugins.register_adapter("meanpix", MeanPixels, "test: answers from pixels (Ray tests)")


if __name__.startswith("vqadiag_plugin_"):  # loaded by an actor as a plug-in file
    _register()

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(autouse=True)
def _adapter():
    _register()
    yield
    plugins.unregister_adapter("meanpix")


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    from vqadiag.synth import generate_world

    root = tmp_path_factory.mktemp("ray") / "world"
    generate_world(root, images=60, seed=8)
    return root


def _diagnose(world, model, out, **kw):
    from vqadiag.diagnosis.diagnose import diagnose

    return diagnose(world, model, out, suites="accuracy,fpvg", n_bootstrap=20,
                    plugins=[__file__], **kw)  # fmt: skip


def _rows(out: Path) -> bytes:
    return (out / "per_question.jsonl").read_bytes()


def test_two_actors_give_the_single_process_answers(world, tmp_path, local_ray):
    one = _diagnose(world, "meanpix:x", tmp_path / "one", batch_size=8)
    two = _diagnose(world, "meanpix:x", tmp_path / "two", batch_size=8,
                    ray={"actors": 2})  # fmt: skip
    assert two["summary"] == one["summary"]
    assert _rows(tmp_path / "two") == _rows(tmp_path / "one")
    assert two["conditions"]["gqa.all"]["computed"] == one["conditions"]["gqa.all"]["questions"]


def test_a_killed_actor_loses_nothing(world, tmp_path, local_ray):
    marker = tmp_path / "killed"
    one = _diagnose(world, "meanpix:x", tmp_path / "one", batch_size=8)
    two = _diagnose(world, f"meanpix:{marker}", tmp_path / "two", batch_size=8,
                    ray={"actors": 2})  # fmt: skip
    assert marker.exists(), "no actor was killed"
    assert int(marker.read_text()) != os.getpid()  # an actor's process, not this one
    assert two["summary"] == one["summary"]
    assert _rows(tmp_path / "two") == _rows(tmp_path / "one")


def test_a_reference_model_on_actors_answers_as_in_one_process(world, tmp_path, local_ray):
    pytest.importorskip("torch")
    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.models.registry import model_class

    run = tmp_path / "updn"
    model_class("updn").train(GQAData(world), epochs=1, progress=False).save(run)
    one = _diagnose(world, str(run), tmp_path / "one", batch_size=4, max_questions=30)
    # the runner's batches of 4, each on one of the two actors as a single process has it
    two = _diagnose(world, str(run), tmp_path / "two", batch_size=4, max_questions=30,
                    ray={"actors": 2})  # fmt: skip
    assert two["summary"] == one["summary"]
    assert _rows(tmp_path / "two") == _rows(tmp_path / "one")


def test_actors_that_cannot_start_are_one_line_and_the_cluster_stays_usable(local_ray):
    from vqadiag.errors import DataError
    from vqadiag.models.ray_actors import RayModel

    with pytest.raises(DataError, match="did not start within"):
        RayModel("meanpix:x", actors=1, gpus_per_actor=1, plugins=[__file__], ready_timeout=3)
    # the pending actor was killed: both CPUs serve two new actors at once
    both = RayModel("meanpix:x", actors=2, plugins=[__file__], ready_timeout=60)
    assert len(both.actors) == 2
    both.close()
    assert ray.is_initialized()  # a Ray it did not start is left running


def test_ray_actors_refuse_models_that_are_not_in_process(world, tmp_path, run_cli):
    result = run_cli("diagnose", "--data", world, "--model", "openai:http://127.0.0.1:9/v1",
                     "--out", tmp_path / "r", "--ray-actors", "2")  # fmt: skip
    assert result.exit_code == 2 and "openai:URL1,URL2" in result.stderr


@pytest.mark.parametrize("setting", [["--ray-gpus-per-actor", "1"], ["--ray-address", "auto"]])
def test_ray_settings_without_actors_are_refused(world, tmp_path, run_cli, setting):
    result = run_cli("diagnose", "--data", world, "--model", "prior:x", "--out", tmp_path / "r",
                     *setting)  # fmt: skip
    assert result.exit_code == 2 and f"{setting[0]}: goes with --ray-actors" in result.stderr
    assert not (tmp_path / "r").exists()
