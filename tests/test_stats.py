"""Bootstrap CIs and the paired randomization test, against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalpipe.stats.resampling import bootstrap_ci, paired_bootstrap_ci_diff, paired_randomization_test


def test_identical_runs_p_is_one_and_diff_ci_is_zero():
    a = np.random.default_rng(3).random(50)
    assert paired_randomization_test(a, a.copy()) == 1.0
    assert paired_bootstrap_ci_diff(a, a.copy()) == (0.0, 0.0, 0.0)


def test_run_winning_every_case_is_significant():
    rng = np.random.default_rng(5)
    b = rng.random(150)
    a = b + 0.01 + rng.random(150) * 0.1  # better on all 150 cases
    p = paired_randomization_test(a, b)
    # Only the all-plus / all-minus sign patterns (probability 2**-149) are as extreme,
    # so no resample is and p = (0 + 1) / (10000 + 1).
    assert p < 0.01
    assert p == pytest.approx(1 / 10001)
    mean, lo, hi = paired_bootstrap_ci_diff(a, b)
    assert 0 < lo < mean < hi


@pytest.mark.parametrize(
    "d, exact",
    [
        # Flips of (1, 1, 1): |sum| >= 3 only for +++ and ---: 2 of 8 patterns.
        ([1.0, 1.0, 1.0], 2 / 8),
        # Flips of (1, -1, 2), observed |sum| = 2: sums are 4, 0, 2, -2, 2, -2, 0, -4,
        # so 6 of 8 are at least as extreme (ties count).
        ([1.0, -1.0, 2.0], 6 / 8),
    ],
)
def test_randomization_p_matches_exact_enumeration(d, exact):
    b = np.zeros(3)
    p = paired_randomization_test(np.array(d), b, n_resamples=10000, seed=11)
    # Monte Carlo standard error is at most sqrt(0.25 / 10000) = 0.005.
    assert p == pytest.approx(exact, abs=0.02)


def test_bootstrap_of_constant_is_degenerate():
    assert bootstrap_ci(np.full(30, 0.1)) == (0.1, 0.1, 0.1)


def test_bernoulli_ci_close_to_normal_approximation():
    x = (np.random.default_rng(7).random(400) < 0.3).astype(float)
    mean, lo, hi = bootstrap_ci(x, n_resamples=10000, confidence=0.95, seed=0)
    assert mean == pytest.approx(x.mean())
    half = 1.959964 * math.sqrt(mean * (1 - mean) / x.size)  # ~0.045 for p ~ 0.3, n = 400
    assert lo == pytest.approx(mean - half, abs=0.006)
    assert hi == pytest.approx(mean + half, abs=0.006)
    # A 50% interval is strictly inside the 95% one.
    _, lo50, hi50 = bootstrap_ci(x, confidence=0.5)
    assert lo < lo50 < mean < hi50 < hi


def test_seeded_results_are_reproducible():
    x = np.random.default_rng(1).random(40)
    assert bootstrap_ci(x, seed=4) == bootstrap_ci(x, seed=4)
    assert bootstrap_ci(x, seed=4) != bootstrap_ci(x, seed=5)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: bootstrap_ci(np.array([])), "values is empty"),
        (lambda: bootstrap_ci(np.array([1.0, np.nan])), "NaN or infinite"),
        (lambda: bootstrap_ci(np.array([1.0, 2.0]), confidence=1.0), "strictly between 0 and 1"),
        (lambda: paired_randomization_test(np.ones(3), np.ones(4)), "a has 3, b has 4"),
        (lambda: paired_bootstrap_ci_diff(np.ones(2), np.ones(2), n_resamples=0), "n_resamples must be"),
    ],
)
def test_bad_input_messages(call, message):
    with pytest.raises(ValueError, match=message):
        call()
