"""Uncertainty for per-case metric values: bootstrap CIs and a paired randomization test.

`evalpipe compare` asks two questions of two runs over the same cases: how sure
are we of each mean, and is the difference real? Both are answered from the
per-case values alone, so they work for any metric (0/1 hits, RR, nDCG).

Choices, stated once:
* Cases are the resampling unit (queries are the independent draws; ranks are not).
* The CI is the plain percentile bootstrap (numpy's linear-interpolated
  percentiles of the resampled means). It is simple, needs no normality and is
  adequate for the ~100+ cases a fixture has; it is not BCa.
* The test is a two-sided paired sign-flip randomization test on the mean
  difference: under H0 (the runs are exchangeable per case) each difference is
  equally likely to have either sign. The Monte Carlo p-value is
  (count(|mean d*| >= |mean d_obs|) + 1) / (n_resamples + 1), which is never 0
  and is a valid (slightly conservative) p-value; when every difference is 0 the
  p-value is exactly 1.0.
* Everything is seeded (numpy PCG64 via `default_rng(seed)`) so a report is
  reproducible, and vectorised in blocks so memory stays bounded for big fixtures.
"""

from __future__ import annotations

import numpy as np

#: Upper bound on the number of float64 cells held per block (~16 MB).
_BLOCK_CELLS = 2_000_000


def _as_values(values: np.ndarray, name: str = "values") -> np.ndarray:
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        raise ValueError(f"{name} is empty; need at least one per-case value")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} contains NaN or infinite values; drop or fix those cases first")
    return v


def _check(n_resamples: int, confidence: float | None = None) -> None:
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if confidence is not None and not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence}")


def _blocks(n_resamples: int, n: int):
    rows = max(1, _BLOCK_CELLS // max(n, 1))
    for start in range(0, n_resamples, rows):
        yield min(rows, n_resamples - start)


def bootstrap_ci(
    values: np.ndarray, n_resamples: int = 10000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """(mean, lo, hi): the sample mean and its percentile-bootstrap confidence interval.

    A constant sample returns (c, c, c) exactly: every resample has the same mean,
    and short-circuiting avoids one-ulp noise from summation order.
    """
    v = _as_values(values)
    _check(n_resamples, confidence)
    mean = float(v.mean())
    if np.all(v == v[0]):
        return float(v[0]), float(v[0]), float(v[0])
    rng = np.random.default_rng(seed)
    n = v.size
    means = np.empty(n_resamples, dtype=np.float64)
    pos = 0
    for rows in _blocks(n_resamples, n):
        idx = rng.integers(0, n, size=(rows, n))
        means[pos : pos + rows] = v[idx].mean(axis=1)
        pos += rows
    alpha = 1.0 - confidence
    lo, hi = np.percentile(means, [100.0 * alpha / 2, 100.0 * (1 - alpha / 2)])
    return mean, float(lo), float(hi)


def _paired(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    av, bv = _as_values(a, "a"), _as_values(b, "b")
    if av.shape != bv.shape:
        raise ValueError(
            f"paired runs must score the same cases in the same order: a has {av.size}, b has {bv.size}"
        )
    return av - bv


def paired_randomization_test(a: np.ndarray, b: np.ndarray, n_resamples: int = 10000, seed: int = 0) -> float:
    """Two-sided p-value that the mean of a - b differs from 0 (paired sign flips).

    The statistic is the sum of differences (same p as the mean). Cases with a
    zero difference add 0 under every flip, so they are left out of the sign
    matrix without changing the p-value. Ties with the observed
    statistic count as extreme, with a 1e-9 relative tolerance so a flip pattern
    that reproduces the observed sum is not lost to floating-point rounding.
    """
    d = _paired(a, b)
    _check(n_resamples)
    if np.all(d == 0):
        return 1.0
    nz = d[d != 0]
    observed = abs(float(nz.sum()))
    threshold = observed - 1e-9 * max(observed, 1.0)
    rng = np.random.default_rng(seed)
    extreme = 0
    for rows in _blocks(n_resamples, nz.size):
        signs = rng.integers(0, 2, size=(rows, nz.size), dtype=np.int8) * 2 - 1
        extreme += int(np.count_nonzero(np.abs(signs @ nz) >= threshold))
    return (extreme + 1) / (n_resamples + 1)


def paired_bootstrap_ci_diff(
    a: np.ndarray, b: np.ndarray, n_resamples: int = 10000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """(mean of a - b, lo, hi): percentile bootstrap CI of the paired mean difference.

    Resamples cases (keeping each case's pair together), so the shared per-case
    difficulty cancels and the interval is much tighter than two independent CIs.
    """
    d = _paired(a, b)
    return bootstrap_ci(d, n_resamples=n_resamples, confidence=confidence, seed=seed)


def bootstrap_ci_diff_independent(
    a: np.ndarray, b: np.ndarray, n_resamples: int = 10000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """(mean(a) - mean(b), lo, hi) for two *different* case sets (a dev and a test split).

    Nothing pairs a dev case with a test case, so each set is resampled on its own (cases
    within each set are the draws) and the interval is the percentile of the resampled
    differences of means: both sets' sampling noise is in it.
    """
    av, bv = _as_values(a, "a"), _as_values(b, "b")
    _check(n_resamples, confidence)
    diff = float(av.mean() - bv.mean())
    rng = np.random.default_rng(seed)
    diffs = np.empty(n_resamples, dtype=np.float64)
    pos = 0
    for rows in _blocks(n_resamples, max(av.size, bv.size)):
        ia = rng.integers(0, av.size, size=(rows, av.size))
        ib = rng.integers(0, bv.size, size=(rows, bv.size))
        diffs[pos : pos + rows] = av[ia].mean(axis=1) - bv[ib].mean(axis=1)
        pos += rows
    alpha = 1.0 - confidence
    lo, hi = np.percentile(diffs, [100.0 * alpha / 2, 100.0 * (1 - alpha / 2)])
    return diff, float(lo), float(hi)
