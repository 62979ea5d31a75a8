"""Cohen's kappa and its bootstrap CI (judge/agreement.py) against scikit-learn and statsmodels."""

from __future__ import annotations

import numpy as np
import pytest

from evalpipe.judge.agreement import agreement

sklearn_metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn is not installed")
inter_rater = pytest.importorskip(
    "statsmodels.stats.inter_rater", reason="statsmodels is not installed (dev)"
)


def simulated(n: int, seed: int, agree: float = 0.7) -> list[tuple[int, int]]:
    """Two assessors grading 0/1/2 with skewed base rates; b copies a with probability `agree`."""
    rng = np.random.default_rng(seed)
    a = rng.choice([0, 1, 2], size=n, p=[0.6, 0.25, 0.15])
    other = rng.choice([0, 1, 2], size=n, p=[0.5, 0.3, 0.2])
    b = np.where(rng.random(n) < agree, a, other)
    return list(zip(a.tolist(), b.tolist(), strict=True))


@pytest.mark.parametrize(("n", "seed"), [(30, 0), (120, 1), (400, 2)])
def test_kappa_equals_sklearn_and_statsmodels(n, seed):
    pairs = simulated(n, seed)
    got = agreement(pairs, resamples=200)
    a, b = zip(*pairs, strict=True)
    assert got.kappa == pytest.approx(sklearn_metrics.cohen_kappa_score(a, b), abs=1e-12)
    table = np.zeros((3, 3))
    for x, y in pairs:
        table[x, y] += 1
    assert got.kappa == pytest.approx(inter_rater.cohens_kappa(table).kappa, abs=1e-12)
    assert sum(got.confusion.values()) == n and got.confusion.get((0, 0), 0) == table[0, 0]


def test_bootstrap_ci_matches_statsmodels_asymptotic_ci_on_a_large_sample():
    pairs = simulated(2000, 7)
    got = agreement(pairs, resamples=2000, seed=3)
    table = np.zeros((3, 3))
    for x, y in pairs:
        table[x, y] += 1
    ref = inter_rater.cohens_kappa(table)
    # With 2,000 items the sampling distribution is close to normal: the two intervals agree.
    assert got.lo == pytest.approx(ref.kappa_low, abs=0.01)
    assert got.hi == pytest.approx(ref.kappa_upp, abs=0.01)
    assert got.lo < got.kappa < got.hi


def test_perfect_and_empty():
    assert agreement([]) is None
    same = agreement([(1, 1), (0, 0), (2, 2), (0, 0)], resamples=100)
    assert same.kappa == 1.0 and same.observed == 1.0
