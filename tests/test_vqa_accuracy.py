"""Official VQA v2 accuracy (docs/protocols.md §1 steps 1, 3, 4) on hand-worked cases."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from vqadiag.metrics.first_seen import first_seen_codes
from vqadiag.metrics.vqa_accuracy import (
    annotator_scores,
    group_indices,
    official_mean,
    vqa_accuracies,
    vqa_accuracies_flat,
)

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_vqa_scoring.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_vqa_scoring", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def acc1(pred: str | None, answers: list[str], lenient: bool = False) -> float:
    return float(vqa_accuracies([pred], [answers], lenient=lenient)[0])


# ---------------------------------------------------------------- leave-one-out, by hand


@pytest.mark.parametrize(
    ("k", "expected"),
    [
        # k of 10 annotators say "red", the prediction is "red".
        # An annotator who said red sees k-1 other matches, one who did not sees k:
        (0, 0.0),  # 10 × min(1, 0/3) = 0
        (1, 0.3),  # (1 × 0/3 + 9 × 1/3) / 10 = 3/10
        (2, 0.6),  # (2 × 1/3 + 8 × 2/3) / 10 = (2/3 + 16/3) / 10 = 6/10
        (3, 0.9),  # (3 × 2/3 + 7 × 1) / 10 = 9/10
        (4, 1.0),  # (4 × 1 + 6 × 1) / 10
        (7, 1.0),
    ],
)
def test_leave_one_out_over_ten_annotators(k: int, expected: float) -> None:
    answers = ["red"] * k + ["blue"] * (10 - k)
    assert acc1("red", answers) == pytest.approx(expected, abs=1e-15)


def test_annotator_scores_formula() -> None:
    hit, miss = annotator_scores(np.array([0, 1, 2, 3, 4, 10]))
    # hit = min(1, (c-1)/3), miss = min(1, c/3)
    np.testing.assert_allclose(hit, [-1 / 3, 0, 1 / 3, 2 / 3, 1, 1])
    np.testing.assert_allclose(miss, [0, 1 / 3, 2 / 3, 1, 1, 1])


def test_answer_lists_of_other_lengths() -> None:
    # 3 annotators a, a, b; prediction a: c = 2 → (1/3 + 1/3 + 2/3) / 3 = 4/9
    assert acc1("a", ["a", "a", "b"]) == pytest.approx(4 / 9)
    # a single annotator can never be matched by "the others"
    assert acc1("a", ["a"]) == 0.0
    mixed = vqa_accuracies(["a", "red"], [["a", "a", "b"], ["red"] * 2 + ["blue"] * 8])
    np.testing.assert_allclose(mixed, [4 / 9, 0.6])


def test_missing_prediction_scores_zero() -> None:
    out = vqa_accuracies([None, "yes"], [["yes"] * 10, ["yes"] * 10])
    assert out.tolist() == [0.0, 1.0]


def test_empty_answer_list_is_rejected() -> None:
    with pytest.raises(ValueError, match="empty answer list"):
        vqa_accuracies(["a"], [[]])


def test_lengths_must_agree() -> None:
    with pytest.raises(ValueError):
        vqa_accuracies(["a", "b"], [["a"]])


def test_no_questions() -> None:
    assert vqa_accuracies([], []).shape == (0,)


# ---------------------------------------------------------------- when normalization applies


def test_black_period_scores_zero_against_unanimous_black() -> None:
    # 10 identical answers: nothing is normalized, "Black." != "black"
    assert acc1("Black.", ["black"] * 10) == 0.0
    # one annotator differs ("Black"): both sides are normalized, "black" × 10 → 1
    assert acc1("Black.", ["black"] * 9 + ["Black"]) == 1.0


def test_lenient_always_normalizes() -> None:
    assert acc1("Black.", ["black"] * 10, lenient=True) == 1.0
    assert acc1("Yes", ["yes"] * 10, lenient=True) == 1.0
    assert acc1("Yes", ["yes"] * 10) == 0.0


def test_whitespace_is_cleaned_even_when_unanimous() -> None:
    assert acc1(" yes\n", ["yes"] * 10) == 1.0
    assert acc1("yes", ["yes "] * 10) == 1.0
    assert acc1("red\tcar", ["red car"] * 10) == 1.0


def test_unanimity_is_judged_after_stripping() -> None:
    # "yes" and "yes " are the same after step 1: unanimous, so "Yes" is not lower-cased
    assert acc1("Yes", ["yes"] * 5 + ["yes "] * 5) == 0.0


def test_number_words_and_articles_match_when_answers_disagree() -> None:
    # answers 2 × 5, "two" × 2, 3 × 3 → normalized 2 × 7, 3 × 3
    answers = ["2"] * 5 + ["two"] * 2 + ["3"] * 3
    assert acc1("two", answers) == 1.0
    assert acc1("3", answers) == pytest.approx(0.9)  # c = 3
    # "an umbrella" × 3 + "umbrella" × 1 + "phone" × 6 → umbrella × 4
    assert acc1("the umbrella", ["an umbrella"] * 3 + ["umbrella"] + ["phone"] * 6) == 1.0


def test_contractions_match_when_answers_disagree() -> None:
    answers = ["dont know"] * 2 + ["don't know"] + ["no"] * 7
    # normalized: "don't know" × 3 → c = 3 → 0.9
    assert acc1("Dont know", answers) == pytest.approx(0.9)


# ---------------------------------------------------------------- bit-identity with the loop


def _official_order_sum(mask: int) -> float:
    c = bin(mask).count("1")
    terms = [min(1, float(c - 1) / 3) if mask >> i & 1 else min(1, float(c) / 3) for i in range(10)]
    return float(sum(terms)) / len(terms)


def test_summation_order_is_the_official_one() -> None:
    # The float sum depends on where the matching annotators sit (0.6 vs 0.6000000000000001);
    # every one of the 1024 patterns must equal the left-to-right sum of the official loop.
    masks = list(range(1024))
    answers = [["red" if m >> i & 1 else "blue" for i in range(10)] for m in masks]
    got = vqa_accuracies(["red"] * len(masks), answers)
    expected = np.array([_official_order_sum(m) for m in masks])
    assert np.array_equal(got, expected)
    assert len(set(expected[[bin(m).count("1") == 2 for m in masks]].tolist())) > 1


@pytest.mark.parametrize("lenient", [False, True])
def test_identical_to_naive_official_port_on_generated_data(lenient: bool) -> None:
    bench = _bench()
    gts, res = bench.generate(3000, seed=7)
    naive = np.asarray(bench.naive_vqa_accuracies(gts, res, lenient))
    answers = [[a["answer"] for a in g["answers"]] for g in gts]
    fast = vqa_accuracies([r["answer"] for r in res], answers, lenient=lenient)
    assert np.array_equal(naive, fast)
    assert 0 < fast.mean() < 1


def test_benchmark_runs_small() -> None:
    bench = _bench()
    out = bench.run(size=500, seed=1, lenient=False, repeat=1)
    assert out["questions"] == 500
    assert 0 < out["overall"] < 100


# ---------------------------------------------------------------- aggregation


def test_official_mean_sums_left_to_right() -> None:
    values = np.array([1.0, 0.9, 0.0, 0.6])
    # 100 × (1 + 0.9 + 0 + 0.6) / 4 = 62.5
    assert official_mean(values) == pytest.approx(62.5)
    assert official_mean(values) == 100 * float(sum([1.0, 0.9, 0.0, 0.6])) / 4
    assert np.isnan(official_mean(np.array([])))


def test_group_indices_first_seen_order() -> None:
    groups = group_indices(["other", "yes/no", "other", "number", "other", "yes/no"])
    assert list(groups) == ["other", "yes/no", "number"]
    assert groups["other"].tolist() == [0, 2, 4]
    assert groups["yes/no"].tolist() == [1, 5]
    assert groups["number"].tolist() == [3]
    assert group_indices([]) == {}


def test_factorize_numbers_values_in_first_seen_order() -> None:
    codes, uniques = first_seen_codes(["b", "a", "b", "c", "a"])
    assert uniques == ["b", "a", "c"]
    assert codes.tolist() == [0, 1, 0, 2, 1]


def test_flat_layout_equals_lists() -> None:
    answers = [["a", "a", "b"], ["red"] * 2 + ["blue"] * 8, ["x"]]
    flat = [a for row in answers for a in row]
    by_lists = vqa_accuracies(["a", "blue", None], answers)
    by_flat = vqa_accuracies_flat(["a", "blue", None], flat, np.array([3, 10, 1]))
    assert np.array_equal(by_lists, by_flat)
    with pytest.raises(ValueError, match="13 answers but the counts add up to 14"):
        vqa_accuracies_flat(["a", "b", "c"], flat[:-1], np.array([3, 10, 1]))
    with pytest.raises(ValueError, match="question 1 has an empty answer list"):
        vqa_accuracies_flat(["a", "b"], ["a"], np.array([1, 0]))


def test_all_patterns_of_small_lists_match_a_direct_loop() -> None:
    # every assignment of 4 annotators over {a, b, A.} with every prediction
    alphabet = ["a", "b", "A."]
    rows = [list(p) for p in itertools.product(alphabet, repeat=4)]
    bench = _bench()
    for pred in alphabet:
        gts = [{"answers": [{"answer": x, "answer_id": i} for i, x in enumerate(r)]} for r in rows]
        naive = bench.naive_vqa_accuracies(gts, [{"answer": pred}] * len(rows))
        assert np.array_equal(vqa_accuracies([pred] * len(rows), rows), np.asarray(naive))


# ---------------------------------------------------------------- bootstrap over few levels


def test_discrete_mean_ci_matches_index_resampling() -> None:
    from vqadiag.metrics.bootstrap import mean_ci
    from vqadiag.metrics.vqa_accuracy import discrete_mean_ci

    rng = np.random.default_rng(5)
    values = rng.choice([0.0, 0.3, 0.6, 0.9, 1.0], size=1000, p=[0.3, 0.1, 0.1, 0.1, 0.4])
    fast = discrete_mean_ci(values, n_resamples=4000, seed=1)
    slow = mean_ci(values, n_resamples=4000, seed=1)
    assert fast.value == official_mean(values)
    assert fast.n == 1000
    # both are bootstrap percentiles of the same distribution (standard error ≈ 1.3 points)
    assert abs(fast.ci_low - slow.ci_low) < 0.5
    assert abs(fast.ci_high - slow.ci_high) < 0.5
    assert fast.ci_low < fast.value < fast.ci_high
    assert discrete_mean_ci(values, seed=3) == discrete_mean_ci(values, seed=3)


def test_discrete_mean_ci_edge_cases() -> None:
    from vqadiag.metrics.vqa_accuracy import discrete_mean_ci

    constant = discrete_mean_ci(np.ones(50))
    assert (constant.value, constant.ci_low, constant.ci_high) == (100.0, 100.0, 100.0)
    assert np.isnan(discrete_mean_ci(np.array([])).value)
    many = discrete_mean_ci(np.linspace(0, 1, 5000), n_resamples=200)  # > 4096 levels
    assert many.value == pytest.approx(50.0)
    assert many.ci_low < 50.0 < many.ci_high
