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
    assert written["precision"] == record
    # the importance sample --precision chooses goes only to a run of the importance suite
    assert record["importance_sample"] is None and "importance_sample" not in written["config"]
    # run again: nothing new to ask, and the same record (the calls the steps need)
    again = json.loads(run_cli("diagnose", "--data", world, "--model", run, "--out",
                               tmp_path / "r", "--precision", "6", *ARGS).stdout)  # fmt: skip
    assert again["conditions"]["gqa.all"]["computed"] == 0
    assert again["precision"] == record and again["summary"] == out["summary"]


def test_max_calls_stops_before_a_step_would_pass_it(world_and_prior, tmp_path, run_cli):
    world, run = world_and_prior
    result = run_cli("diagnose", "--data", world, "--model", run, "--out", tmp_path / "r",
                     "--precision", "0.5", "--max-calls", "250", *ARGS)  # fmt: skip
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)["precision"]
    assert not record["met"] and "--max-calls 250" in record["stopped"]
    assert record["calls"] == 200  # the first step; the second would pass 250
    # found in review: interrupted after 150 calls and run again, the run counted only
    # its own calls, took the second step and passed the budget; it now counts the
    # answers the first attempt stored and stops where the uninterrupted run stopped
    partial = tmp_path / "r4"
    assert run_cli("diagnose", "--data", world, "--model", run, "--out", partial,
                   "--max-questions", "150", *ARGS).exit_code == 0  # fmt: skip
    resumed = run_cli("diagnose", "--data", world, "--model", run, "--out", partial,
                      "--precision", "0.5", "--max-calls", "250", *ARGS)  # fmt: skip
    assert resumed.exit_code == 0, resumed.stderr
    assert json.loads(resumed.stdout)["precision"] == record
    too_few = run_cli("diagnose", "--data", world, "--model", run, "--out", tmp_path / "r2",
                      "--precision", "1", "--max-calls", "10", *ARGS)  # fmt: skip
    assert too_few.exit_code == 2 and "--max-calls" in too_few.stderr
    both = run_cli("diagnose", "--data", world, "--model", run, "--out", tmp_path / "r3",
                   "--precision", "1", "--max-questions", "10", *ARGS)  # fmt: skip
    assert both.exit_code == 2 and "--precision chooses" in both.stderr


def _est(half: float, n: int) -> dict:
    return {"value": 50.0, "ci_low": 50.0 - half, "ci_high": 50.0 + half, "n": n}


def test_each_suite_grows_its_own_prefix_until_met_or_out_of_questions():
    from vqadiag.diagnosis.precision import SuitePrefixes

    p = SuitePrefixes(precision=2.0, start=200, own=frozenset({"robustness"}))
    p.update({"accuracy": _est(1.5, 200), "acc_tail": _est(4.0, 20), "acc_head": _est(3.0, 30),
              "noise_accuracy": [_est(1.0, 200), _est(3.0, 200)]})  # fmt: skip
    # accuracy is met at 200; ood (widest 4) and robustness (widest partition 3) grow
    assert p.done == {"accuracy": "met"}
    assert p.prefix == {"ood": 960, "robustness": 540}
    assert p.max_questions() == 960 and not p.finished()
    # the tail took no more questions while its prefix grew: it has none left
    p.update({"accuracy": _est(0.7, 960), "acc_tail": _est(3.5, 20), "acc_head": _est(2.5, 30),
              "noise_accuracy": [_est(1.5, 540), _est(1.9, 540)]})  # fmt: skip
    assert p.done == {"accuracy": "met", "ood": "every question taken", "robustness": "met"}
    assert p.finished() and p.prefix["robustness"] == 540


def test_a_suite_on_the_shared_run_grows_from_what_it_saw():
    """Accuracy scores the shared plain run: it saw the largest prefix (set by FPVG), so
    it grows from there, and is not out of questions when FPVG stops growing."""
    from vqadiag.diagnosis.precision import SuitePrefixes

    p = SuitePrefixes(precision=2.0, start=200, own=frozenset({"fpvg"}))
    p.update({"accuracy": _est(3.0, 200), "fpvg_plus": _est(6.0, 150)})
    assert p.prefix == {"accuracy": 540, "fpvg": 2160} and p.max_questions() == 2160
    p.update({"accuracy": _est(2.2, 2160), "fpvg_plus": _est(1.9, 1600)})
    assert p.done == {"fpvg": "met"}
    assert p.prefix["accuracy"] == 3240 and not p.finished()  # 1.5 × 2160
    p.update({"accuracy": _est(1.8, 3240), "fpvg_plus": _est(1.9, 1600)})
    assert p.done == {"fpvg": "met", "accuracy": "met"} and p.finished()


def test_a_prefix_counts_questions_left_out_for_a_missing_image():
    """A suite's prefix is what ``--max-questions n`` takes: the first n of the order,
    then those whose image is missing left out (not n questions that have images)."""
    from vqadiag.suites.sources import GQASource
    from vqadiag.suites.state import subsample

    taken = [f"q{i}" for i in range(40)]
    diagnosed = [q for q in taken if q not in set(subsample(taken, 10)[::2])]
    src = GQASource(None, diagnosed, {}, None, None, taken)  # type: ignore[arg-type]
    assert src.prefix(10) == [q for q in subsample(taken, 10) if q in diagnosed]
    assert len(src.prefix(10)) == 5 and src.prefix(None) == diagnosed


def test_suite_questions_name_suites_and_positive_counts(world_and_prior, tmp_path):
    from vqadiag.diagnosis.diagnose import diagnose
    from vqadiag.errors import DataError

    world, run = world_and_prior
    for bad, message in (({"nope": 5}, "no suite is called 'nope'"),
                         ({"fpvg": 0}, "fpvg: must be a positive")):  # fmt: skip
        with pytest.raises(DataError, match=message):
            diagnose(world, str(run), tmp_path / "r", suite_questions=bad)


@pytest.fixture(scope="module")
def world_and_updn(world_and_prior, tmp_path_factory):
    from vqadiag.data.model_inputs.gqa_data import GQAData
    from vqadiag.models.registry import model_class

    world, _ = world_and_prior
    run = tmp_path_factory.mktemp("run") / "updn"
    model_class("updn").train(GQAData(world), epochs=1, progress=False).save(run)
    return world, run


def _rows(folder, suite: str) -> list[dict]:
    lines = (folder / "per_question.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["suite"] == suite]


def test_a_suite_runs_its_own_conditions_on_its_own_prefix(world_and_updn, tmp_path):
    """``suite_questions``: the plain run covers ``max_questions``; FPVG's relevant-only and
    irrelevant-only runs and robustness's noise partitions run on the first questions of
    the same order only, giving what a diagnosis with that ``--max-questions`` gives."""
    from vqadiag.diagnosis.diagnose import diagnose

    world, run = world_and_updn
    opts = {"suites": "accuracy,fpvg,robustness", "n_bootstrap": 50, "bq_ranker": "bleu1"}
    out = diagnose(world, str(run), tmp_path / "r", max_questions=150,
                   suite_questions={"robustness": 60, "fpvg": 40}, **opts)  # fmt: skip
    counts = out["conditions"]
    assert counts["gqa.all"]["questions"] == 150
    assert 0 < counts["gqa.noise_1"]["questions"] <= 60
    assert 0 < counts["gqa.rel"]["questions"] <= 40
    assert out["config"]["suite_questions"] == {"robustness": 60, "fpvg": 40}
    for suite, n in (("robustness", 60), ("fpvg", 40)):
        ranker = {"bq_ranker": "bleu1"} if suite == "robustness" else {}  # fpvg refuses one
        alone = diagnose(world, str(run), tmp_path / suite, max_questions=n, suites=suite,
                         n_bootstrap=50, **ranker)  # fmt: skip
        assert _rows(tmp_path / suite, suite) == _rows(tmp_path / "r", suite)
        for key in {k for _, k in _suite_figures(suite)}:
            assert alone["summary"][key] == out["summary"][key], key


def _suite_figures(name: str):
    from vqadiag.suites.base import figures

    return [(s.name, f.key) for s, f in figures() if s.name == name]


def test_the_python_api_runs_the_same_precision_diagnosis(world_and_prior, tmp_path, run_cli):
    """``vqadiag.diagnose_to_precision`` is ``diagnose --precision`` from Python."""
    import vqadiag

    world, run = world_and_prior
    cli = run_cli("diagnose", "--data", world, "--model", run, "--out", tmp_path / "cli",
                  "--precision", "6", *ARGS)  # fmt: skip
    api = vqadiag.diagnose_to_precision(
        world, str(run), tmp_path / "api", precision=6, suites="accuracy", n_bootstrap=200
    )
    assert api["precision"] == json.loads(cli.stdout)["precision"]
    assert api["summary"] == json.loads(cli.stdout)["summary"]
