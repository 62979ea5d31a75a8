"""Multiple-comparison corrections over the family of tests one command makes.

A gate tests 2 metrics x 4 scopes = 8 rows, a sweep compares every point with its
reference, `compare` tests runs x metrics. At alpha 0.05 each, 8 independent true-null
rows give at least one false "real" 34% of the time. The adjusted p-values here are what
the commands decide on; the raw ones are shown beside them.

* `holm` (default): Holm's step-down (1979). Controls the family-wise error rate (the
  chance of any false positive in the family) under any dependence between the tests,
  and is uniformly more powerful than Bonferroni.
* `bh`: Benjamini-Hochberg step-up (1995). Controls the false discovery rate (the expected
  share of false positives among the rejections) for independent or positively dependent
  tests; more rejections than Holm, weaker guarantee.
* `none`: the raw p-values.

The adjusted p-values are the standard ones (those of statsmodels' `multipletests`, the
tests' oracle). A test is significant when its adjusted p < alpha, as raw p-values are
decided everywhere in evalpipe.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

METHODS = ("holm", "bh", "none")
DEFAULT_METHOD = "holm"
#: How each method is named in a report's caption.
DESCRIPTION = {
    "holm": "Holm step-down (family-wise error rate)",
    "bh": "Benjamini-Hochberg (false discovery rate)",
    "none": "not corrected",
}


def check_method(method: str) -> str:
    """`method` if it is one of METHODS; ValueError naming the choices otherwise."""
    if method not in METHODS:
        raise ValueError(f"unknown correction {method!r}; choose one of {', '.join(METHODS)}")
    return method


def adjust(p_values: Sequence[float | None], method: str = DEFAULT_METHOD) -> list[float | None]:
    """Adjusted p-values, in the input order; None (a row with no test) stays None and is not
    counted in the family."""
    check_method(method)
    idx = [i for i, p in enumerate(p_values) if p is not None and p == p]
    out: list[float | None] = [None] * len(p_values)
    if not idx:
        return out
    p = np.array([float(p_values[i]) for i in idx], dtype=np.float64)
    if np.any((p < 0) | (p > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    m = p.size
    if method == "none":
        adj = p
    elif method == "holm":
        order = np.argsort(p, kind="stable")
        stepped = (m - np.arange(m)) * p[order]  # (m - j + 1) p_(j), j from 1
        adj_sorted = np.minimum(1.0, np.maximum.accumulate(stepped))
        adj = np.empty(m)
        adj[order] = adj_sorted
    else:  # bh
        order = np.argsort(p, kind="stable")
        ranked = p[order] * m / np.arange(1, m + 1)
        adj_sorted = np.minimum(1.0, np.minimum.accumulate(ranked[::-1])[::-1])
        adj = np.empty(m)
        adj[order] = adj_sorted
    for i, value in zip(idx, adj, strict=True):
        out[i] = float(value)
    return out


def family_alpha(alpha: float, family: int, method: str = DEFAULT_METHOD) -> float:
    """The level one test of a family of `family` is effectively held to when it carries the only
    real effect: alpha / family under Holm (its first step) and BH (the smallest of m p-values
    is compared with alpha / m), alpha uncorrected. The minimum detectable effects are computed
    at this level, so they describe what the corrected decision can see."""
    check_method(method)
    if method == "none" or family <= 1:
        return alpha
    return alpha / family
