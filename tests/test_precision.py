"""``vqadiag diagnose --precision EPS`` (docs/diagnose.md, "A precision budget")."""

from __future__ import annotations

import json

import pytest

from vqadiag.diagnosis.precision import half_widths, next_prefix, widest_known

pytest.importorskip("torch")


def test_half_widths_take_the_bounded_rates_only():
    summary = {
        "accuracy": {"value": 50.0, "ci_low": 46.0, "ci_high": 55.0, "n": 100},
        "delta": {"value": 20.0, "ci_low": 0.0, "ci_high": 80.0, "n": 100},  # a ratio
        "r_score": {"value": 0.5, "ci_low": 0.1, "ci_high": 0.9, "n": 100},  # not points
        "loo_relevant_score": {"value": 9.0, "ci_low": 0.0, "ci_high": 60.0},  # a sample
        "fpvg_plus": None,
    }
    assert half_widths(summary) == {"accuracy": 4.5}
    # a value without a finite interval (an empty subset so far) is unknown: never met
    nan = float("nan")
    widths = half_widths({**summary, "fpvg_plus": {"value": 3.0, "ci_low": nan, "ci_high": nan}})
    assert widths["fpvg_plus"] == float("inf") and widest_known(widths, 2.0) == 4.5


def test_the_next_prefix_follows_one_over_root_n_with_a_margin():
    # w = 4, EPS = 2: four times the questions, × 1.2
    assert next_prefix(200, 4.0, 2.0) == 960
    # nearly there: still at least 1.5 ×
    assert next_prefix(200, 2.1, 2.0) == 300


@pytest.fixture(scope="module")
def world_and_prior(tmp_path_factory):
    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.models.registry import model_class
    from vqadiag.synth import generate_world

    root = tmp_path_factory.mktemp("precision") / "world"
    generate_world(root, images=200, seed=6)
    run = tmp_path_factory.mktemp("run") / "prior"
    model_class("prior").train(GQAData(root), progress=False).save(run)
    return root, run


ARGS = ("--suite", "accuracy", "--n-bootstrap", "200", "--json")


def test_precision_grows_the_prefix_until_the_target_and_records_it(
    world_and_prior, tmp_path, run_cli
):
    world, run = world_and_prior
    result = run_cli("diagnose", "--data", world, "--model", run, "--out", tmp_path / "r",
                     "--precision", "6", *ARGS)  # fmt: skip
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    record = out["precision"]
    assert record["met"] and record["stopped"] == "precision reached"
    assert max(record["half_widths"].values()) <= 6
    assert set(record["half_widths"]) == {"accuracy"}
    steps = record["steps"]
    assert steps[0]["max_questions"] == 200 and len(steps) == 2
    assert steps[0]["widest_half_width"] > 6
    assert [s["max_questions"] for s in steps] == sorted(s["max_questions"] for s in steps)
    assert record["calls"] == sum(s["calls"] for s in steps)
    # each step asked only for its new questions: the calls are the last prefix's questions
    assert record["calls"] == out["conditions"]["gqa.all"]["questions"]
    written = json.loads((tmp_path / "r" / "results.json").read_text())
    assert written["precision"] == record and written["config"]["importance_sample"] == 500
    # run again: nothing new to ask
    again = json.loads(run_cli("diagnose", "--data", world, "--model", run, "--out",
                               tmp_path / "r", "--precision", "6", *ARGS).stdout)  # fmt: skip
    assert again["precision"]["calls"] == 0 and again["summary"] == out["summary"]


def test_max_calls_stops_before_a_step_would_pass_it(world_and_prior, tmp_path, run_cli):
    world, run = world_and_prior
    result = run_cli("diagnose", "--data", world, "--model", run, "--out", tmp_path / "r",
                     "--precision", "0.5", "--max-calls", "250", *ARGS)  # fmt: skip
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)["precision"]
    assert not record["met"] and "--max-calls 250" in record["stopped"]
    assert record["calls"] == 200  # the first step; the second would pass 250
    too_few = run_cli("diagnose", "--data", world, "--model", run, "--out", tmp_path / "r2",
                      "--precision", "1", "--max-calls", "10", *ARGS)  # fmt: skip
    assert too_few.exit_code == 2 and "--max-calls" in too_few.stderr
    both = run_cli("diagnose", "--data", world, "--model", run, "--out", tmp_path / "r3",
                   "--precision", "1", "--max-questions", "10", *ARGS)  # fmt: skip
    assert both.exit_code == 2 and "--precision chooses" in both.stderr
