"""The consistency and pairs suites have a perceiving ceiling (issue 47, docs/synth.md
"Programs"): on a world built here, the symbolic model, which executes the programs the
world writes for its VQA v2 and VQA-introspect questions, ranks above every blind model;
with the programs taken out of the files it falls back to the answer prior, and the blind
models' answers do not move (they never read the programs)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from vqadiag.data.model_inputs.gqa_data import GQAData
from vqadiag.diagnosis.diagnose import diagnose
from vqadiag.models.registry import model_class
from vqadiag.synth import generate_world

pytest.importorskip("torch")

MODELS = {"prior": {}, "question-only": {"epochs": 8}, "symbolic": {"epochs": 15}}
BLIND = ("prior", "question-only")
FIGURES = ("pair_both_correct", "reasoning_consistency")


def _without_programs(world: Path, out: Path) -> Path:
    """A copy of ``world`` whose VQA v2 questions and introspect sub-questions have no
    ``semantic`` (the shape of the official files)."""
    shutil.copytree(world, out)
    for path in (out / "vqa2").glob("v2_OpenEnded_*_questions.json"):
        data = json.loads(path.read_text())
        for record in data["questions"]:
            del record["semantic"]
        path.write_text(json.dumps(data))
    for path in (out / "introspect").glob("*.json"):
        data = json.loads(path.read_text())
        for record in data.values():
            for entry in record["introspect"]:
                for qa in entry["sub_qa"]:
                    del qa["semantic"]
        path.write_text(json.dumps(data))
    return out


@pytest.fixture(scope="module")
def worlds(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("vqa-validity")
    world = root / "world"
    generate_world(world, images=400, seed=1, render=False)
    return {"programs": world, "none": _without_programs(world, root / "no-programs")}


@pytest.fixture(scope="module")
def results(worlds, tmp_path_factory) -> dict[tuple[str, str], tuple[dict, list[dict]]]:
    """``(model, world)`` → (results.json, per-question rows) of pairs and consistency;
    the models are trained once, on the GQA files (the same in both worlds)."""
    data = GQAData(worlds["programs"])
    out = {}
    for name, options in MODELS.items():
        run = tmp_path_factory.mktemp("runs") / name
        model_class(name).train(data, progress=False, seed=0, **options).save(run)
        for kind, world in worlds.items():
            res = tmp_path_factory.mktemp("res") / f"{name}-{kind}"
            result = diagnose(world, str(run), res, suites="pairs,consistency", n_bootstrap=200)
            rows = [json.loads(line) for line in (res / "per_question.jsonl").open()]
            out[name, kind] = (result, rows)
    return out


def _estimate(result: dict, figure: str) -> dict:
    est = result["summary"][figure]
    assert est is not None, (figure, result["skipped"])
    return est


def _answers(rows: list[dict]) -> list[tuple[str, str]]:
    return [(r["id"], json.dumps(r["answers"], sort_keys=True)) for r in rows]


@pytest.mark.parametrize("figure", FIGURES)
def test_symbolic_ranks_above_every_blind_model(results, figure):
    symbolic = _estimate(results["symbolic", "programs"][0], figure)
    for blind in BLIND:
        other = _estimate(results[blind, "programs"][0], figure)
        # not a tie inside the noise: the intervals do not overlap
        assert symbolic["ci_low"] > other["ci_high"], (figure, blind, symbolic, other)
    assert symbolic["value"] >= {"pair_both_correct": 60.0, "reasoning_consistency": 80.0}[figure]


def test_the_suites_are_scored_on_enough_questions(results):
    result = results["symbolic", "programs"][0]
    assert result["suites"]["pairs"]["n_pairs"] >= 150
    assert result["suites"]["consistency"]["n_main"] >= 30


@pytest.mark.parametrize("figure", FIGURES)
def test_without_programs_symbolic_falls_back_to_the_prior(results, figure):
    # the figures come from the program path: without programs the symbolic model answers
    # every VQA v2 question with its training prior, as blindly as the prior model
    symbolic = _estimate(results["symbolic", "none"][0], figure)["value"]
    prior = _estimate(results["prior", "none"][0], figure)["value"]
    with_programs = _estimate(results["symbolic", "programs"][0], figure)["value"]
    assert symbolic <= prior + 5.0 < with_programs - 30.0
    rows = [r for r in results["symbolic", "none"][1] if r["suite"] == "pairs"]
    assert all(r["answers"]["a"] == r["answers"]["b"] for r in rows)


@pytest.mark.parametrize("blind", BLIND)
def test_blind_models_do_not_read_the_programs(results, blind):
    with_programs, rows = results[blind, "programs"]
    without, rows_without = results[blind, "none"]
    assert _answers(rows) == _answers(rows_without)
    for figure in FIGURES:
        assert _estimate(with_programs, figure) == _estimate(without, figure)
