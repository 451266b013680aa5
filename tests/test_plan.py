"""``vqadiag diagnose --plan`` (docs/diagnose.md, "Plan a run").

The plan must be exact: for every condition of every suite, the calls it announces are
the answers the run then computes, with a cold store, a partly warm one (a run on fewer
questions before) and a warm one (nothing to call). It calls no model and writes
nothing to ``--out``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.diagnosis.diagnose import diagnose
from vqadiag.models.registry import model_class
from vqadiag.synth import generate_world

pytest.importorskip("torch")

OPTIONS = {"n_bootstrap": 20, "bq_ranker": "bleu1"}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("plan") / "world"
    generate_world(root, images=100, seed=5)
    return root


@pytest.fixture(scope="module")
def runs(world, tmp_path_factory) -> dict[str, Path]:
    out = {}
    for name, kw in (("updn", {"epochs": 1}), ("prior", {})):
        folder = tmp_path_factory.mktemp("run") / name
        model_class(name).train(GQAData(world), progress=False, **kw).save(folder)
        out[name] = folder
    return out


def _files(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


class NoCalls:
    """Wraps a model; any call to predict fails the test."""

    def __init__(self, model) -> None:
        self._model = model

    def __getattr__(self, name):
        found = getattr(self._model, name)
        if name not in ("predict", "predict_stream", "object_gradients"):
            return found

        def called(*args, **kwargs):
            raise AssertionError(f"the plan called {name}")

        return called


@pytest.mark.parametrize("name", ["updn", "prior"])
def test_the_plan_announces_exactly_the_calls_the_run_sends(world, runs, tmp_path, name):
    out = tmp_path / "res"
    for max_questions in (24, 48, 48):  # cold, partly warm, warm
        plan = diagnose(world, str(runs[name]), out, plan=True, max_questions=max_questions,
                        **OPTIONS)  # fmt: skip
        result = diagnose(world, str(runs[name]), out, max_questions=max_questions, **OPTIONS)
        assert set(plan["conditions"]) == set(result["conditions"])
        for condition, planned in plan["conditions"].items():
            ran = result["conditions"][condition]
            assert (planned["calls"], planned["cached"], planned["probes"]) == (
                ran["computed"],
                ran["cached"],
                ran["questions"],
            ), condition
        assert plan["skipped"] == result["skipped"]
        assert plan["total"]["calls"] == sum(c["computed"] for c in result["conditions"].values())
    assert plan["total"]["calls"] == 0 and plan["store"] == str(out / "store.sqlite")
    # the objects model runs every suite: LOO and GradCAM included
    if name == "updn":
        assert {"gqa.loo", "gqa.gradcam", "introspect.sub", "gqa.noise_7"} <= set(
            plan["conditions"]
        )


def test_the_plan_calls_no_model_and_writes_nothing(world, runs, tmp_path):
    from vqadiag.models.registry import load_model_spec

    model = NoCalls(load_model_spec(str(runs["updn"])))
    absent = tmp_path / "absent"
    plan = diagnose(world, model, absent, plan=True, max_questions=12, **OPTIONS)
    assert not absent.exists()
    assert plan["total"]["calls"] > 0 and plan["store"] is None
    out = tmp_path / "res"
    diagnose(world, str(runs["updn"]), out, max_questions=12, **OPTIONS)
    before = _files(out)
    diagnose(world, model, out, plan=True, max_questions=30, **OPTIONS)
    assert _files(out) == before


def test_plan_on_the_command_line_with_a_rate(world, runs, tmp_path, run_cli):
    result = run_cli("diagnose", "--data", world, "--model", runs["prior"], "--out", tmp_path / "r",
                     "--plan", "--rate", "2.5", "--max-questions", "10", "--suite",
                     "accuracy,robustness", "--bq-ranker", "bleu1", "--json")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["kind"] == "vqadiag.plan"
    calls = plan["total"]["calls"]
    assert calls == 10 * 8  # the plain run and the seven noise partitions, nothing cached
    assert plan["total"]["images"] == 0  # the prior is blind: it is sent no image
    assert plan["estimated_seconds"] == pytest.approx(calls / 2.5)
    table = run_cli("diagnose", "--data", world, "--model", runs["prior"], "--out", tmp_path / "r",
                    "--plan", "--max-questions", "10", "--suite", "accuracy")  # fmt: skip
    assert table.exit_code == 0 and "gqa.all" in table.stdout and "calls" in table.stdout
    bad = run_cli("diagnose", "--data", world, "--model", runs["prior"], "--out", tmp_path / "r",
                  "--rate", "2")  # fmt: skip
    assert bad.exit_code == 2 and "--plan" in bad.stderr


def test_a_plan_needs_no_write_access_to_out(world, runs, tmp_path, monkeypatch):
    """Found in review: --plan refused a read-only result folder ("cannot write here")
    although a plan writes nothing; an archived folder can be planned against."""
    from vqadiag.data.io import folders
    from vqadiag.diagnosis.diagnose import diagnose
    from vqadiag.errors import DataError

    out = tmp_path / "archived"
    diagnose(world, str(runs["prior"]), out, max_questions=5, suites="accuracy", n_bootstrap=20)

    def read_only(path, *, create=True):
        raise DataError(path, "cannot write here: Read-only file system")

    monkeypatch.setattr(folders, "writable_folder", read_only)
    plan = diagnose(world, str(runs["prior"]), out, plan=True, max_questions=8,
                    suites="accuracy", n_bootstrap=20)  # fmt: skip
    assert plan["total"] == {"probes": 8, "cached": 5, "calls": 3, "images": 0}
    with pytest.raises(DataError, match="Read-only file system"):
        diagnose(world, str(runs["prior"]), out, max_questions=8, suites="accuracy")
