"""Bootstrap intervals and paired tests (docs/protocols.md §8) on hand-checkable cases."""

from __future__ import annotations

import numpy as np
import pytest

from vqadiag.metrics.bootstrap import (
    distinct_rows,
    mcnemar_exact,
    mean_ci,
    paired_bootstrap,
    ratio_ci,
    resampled_sums,
)


def test_constant_values_have_a_degenerate_interval():
    est = mean_ci(np.ones(50))
    assert (est.value, est.ci_low, est.ci_high, est.n) == (100.0, 100.0, 100.0, 50)


def test_mean_interval_covers_the_mean_and_matches_normal_theory():
    values = np.r_[np.ones(600), np.zeros(400)]
    est = mean_ci(values, n_resamples=2000, seed=1)
    assert est.value == pytest.approx(60.0)
    half_width = 1.96 * np.sqrt(0.6 * 0.4 / 1000) * 100  # ≈ 3.04 points
    assert est.ci_low == pytest.approx(60 - half_width, abs=0.6)
    assert est.ci_high == pytest.approx(60 + half_width, abs=0.6)


def test_same_seed_same_interval_and_seed_changes_it():
    values = np.random.default_rng(0).random(300)
    assert mean_ci(values, seed=3) == mean_ci(values, seed=3)
    assert mean_ci(values, seed=3) != mean_ci(values, seed=4)


def test_resampled_sums_use_each_row_n_times_in_total():
    x = np.column_stack([np.ones(7), np.arange(7)])
    sums = resampled_sums(x, n_resamples=25, seed=0)
    assert sums.shape == (25, 2)
    assert np.all(sums[:, 0] == 7)


def test_ratio_of_sums():
    est = ratio_ci(np.array([1, 0, 1, 1]), np.array([1, 1, 1, 1]), scale=1.0)
    assert est.value == pytest.approx(0.75)
    empty = ratio_ci(np.array([0, 0]), np.array([0, 0]))
    assert np.isnan(empty.value) and np.isnan(empty.ci_low)


def test_empty_mean_is_nan():
    est = mean_ci(np.array([]))
    assert np.isnan(est.value) and est.n == 0


def test_mcnemar_exact_hand_worked():
    # a right / b wrong on 6 units, the reverse on 1: two-sided binomial(6; 7, 1/2)
    a = np.array([1] * 6 + [0] + [1] * 5, dtype=bool)
    b = np.array([0] * 6 + [1] + [1] * 5, dtype=bool)
    assert mcnemar_exact(a, b) == pytest.approx(16 / 128)
    assert mcnemar_exact(a, a) == 1.0


def test_paired_bootstrap_detects_a_real_difference_only():
    rng = np.random.default_rng(0)
    a = (rng.random(2000) < 0.7).astype(float)
    b = a.copy()
    flip = rng.random(2000) < 0.15
    b[flip & (a == 1)] = 0
    strong = paired_bootstrap(a, b, seed=0)
    assert strong.difference.value > 5 and strong.significant()
    assert paired_bootstrap(a, a).p_value == 1.0


def test_level_counts_path_matches_index_resampling(monkeypatch):
    # Few distinct values are resampled through multinomial counts of the levels; that
    # must give the same interval as drawing unit indices, up to Monte Carlo error.
    import vqadiag.metrics.bootstrap as bootstrap

    values = np.random.default_rng(2).choice([0.0, 0.3, 0.6, 0.9, 1.0], size=5000)
    fast = mean_ci(values, n_resamples=3000, seed=1)
    monkeypatch.setattr(bootstrap, "_MAX_LEVELS", 0)
    slow = mean_ci(values, n_resamples=3000, seed=1)
    assert fast.value == slow.value
    assert fast.ci_low == pytest.approx(slow.ci_low, abs=0.25)
    assert fast.ci_high == pytest.approx(slow.ci_high, abs=0.25)
    assert fast != slow  # the two paths really differ


def test_one_column_levels_are_ordered_as_rows_are():
    # One column takes a 1-d np.unique; the multinomial draws depend on the order of the
    # levels, so it must number them as the row-wise np.unique of several columns does.
    values = np.random.default_rng(3).choice([0.0, 1.0, 0.3, 0.9, 0.6], size=4000)
    alone = resampled_sums(values[:, None], n_resamples=200, seed=5)
    with_constant = resampled_sums(np.c_[values, np.zeros_like(values)], n_resamples=200, seed=5)
    # (equal up to the matrix product's summation order; another level order would
    # change the sums by whole units)
    np.testing.assert_allclose(alone[:, 0], with_constant[:, 0], rtol=1e-12)


def test_distinct_rows_hand_worked():
    # rows (1, 0), (0, 2), (1, 0), (0, 0): keys x0·3 + x1 = 3, 2, 3, 0 → ordered 0, 2, 3
    levels, counts = distinct_rows(np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 0.0], [0.0, 0.0]]))
    assert levels.tolist() == [[0.0, 0.0], [0.0, 2.0], [1.0, 0.0]]
    assert counts.tolist() == [1, 1, 2]


def _columns(kind: int, rng: np.random.Generator) -> np.ndarray:
    n, k = int(rng.integers(1, 200)), int(rng.integers(2, 6))
    choices = {
        0: [0.0, 1.0],  # indicators: the integer-key path
        1: [0.0, 1.0, 2.0, 5.0, 9.0],  # whole counts
        2: [0.0, 0.3, 0.6, 1.0],  # fractions: np.unique
        3: [-1.0, 0.0, -0.0, 2.0],  # negatives and −0.0: np.unique
        4: [0.0, np.nan, 1.0, np.inf],  # not finite: np.unique
        5: [0.0, 2.0**40, 3.0],  # keys beyond 2**62: np.unique
        6: [0.0, -0.0, 1.0, 2.0],  # −0.0 among whole numbers: np.unique
        7: [0.0, 1.0, np.inf],  # infinite, no NaN: np.unique
    }
    return rng.choice(choices[kind], size=(n, k))


@pytest.mark.parametrize("kind", range(8))
def test_distinct_rows_are_np_unique_bit_for_bit(kind: int):
    # the multinomial draws follow the order of the levels: any other order or value
    # would change every interval
    rng = np.random.default_rng(kind)
    for _ in range(40):
        x = _columns(kind, rng)
        levels, counts = distinct_rows(x)
        expected_levels, expected_counts = np.unique(x, axis=0, return_counts=True)
        assert levels.tobytes() == expected_levels.tobytes()
        assert levels.shape == expected_levels.shape
        assert counts.tolist() == expected_counts.tolist()


@pytest.mark.parametrize(
    "maxima",
    [
        (2.0**32 - 1, 2.0**30 - 2),
        (2.0**32 - 1, 2.0**30 - 1),
        (2.0**33 - 1, 2.0**30 + 5),
        (2.0**60, 1.0),
    ],
    ids=["product just below 2**62", "product 2**62", "product past 2**63", "one big column"],
)
def test_distinct_rows_at_the_key_bound(maxima: tuple[float, float]):
    # the largest key is the product of the radixes (max + 1) minus 1: below 2**62 the
    # integer key is taken, from 2**62 on np.unique; both give np.unique's arrays
    rng = np.random.default_rng(7)
    x = np.column_stack([rng.choice([0.0, 1.0, m], size=300) for m in maxima])
    levels, counts = distinct_rows(x)
    expected_levels, expected_counts = np.unique(x, axis=0, return_counts=True)
    assert levels.tobytes() == expected_levels.tobytes()
    assert counts.tolist() == expected_counts.tolist()


def test_distinct_rows_of_indicators_do_not_sort_whole_rows(monkeypatch: pytest.MonkeyPatch):
    row_sorts = []
    unique = np.unique

    def spy(*args, **kwargs):
        if kwargs.get("axis") is not None:
            row_sorts.append(kwargs["axis"])
        return unique(*args, **kwargs)

    monkeypatch.setattr(np, "unique", spy)
    x = np.random.default_rng(8).integers(0, 2, size=(500, 6)).astype(float)
    distinct_rows(x)
    assert row_sorts == []
    distinct_rows(x - 0.5)  # fractions: the row sort
    assert row_sorts == [0]
