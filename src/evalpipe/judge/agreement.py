"""Agreement between two assessors (two people, or the judge and a person): Cohen's kappa with a
bootstrap confidence interval, and the confusion counts.

Kappa is unweighted (grades as categories): (p_o - p_e) / (1 - p_e), p_o the share of items
both gave the same grade, p_e the agreement expected by chance from each assessor's own grade
frequencies. The CI is the percentile bootstrap over items (the items are resampled with
replacement, kappa recomputed; seeded), which needs no normality assumption for the small,
skewed samples a labelling session gives. `tests/test_agreement.py` checks the kappa against
scikit-learn and statsmodels, and the bootstrap interval against statsmodels' asymptotic one
on a large sample, where the two must agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95


@dataclass(frozen=True)
class Agreement:
    items: int
    kappa: float
    lo: float
    hi: float
    observed: float  # p_o
    confusion: Mapping[tuple[int, int], int]  # (grade of a, grade of b) -> items

    def line(self, a: str, b: str) -> str:
        return (
            f"{a} vs {b}: {self.items} items judged by both, agree on {self.observed:.0%}, Cohen's kappa "
            f"{self.kappa:.2f} [{self.lo:.2f}, {self.hi:.2f}] "
            f"(percentile bootstrap {LEVEL:.0%}, {RESAMPLES} resamples)"
        )


def kappa(a: np.ndarray, b: np.ndarray, categories: np.ndarray) -> float:
    """Unweighted Cohen's kappa of two equal-length label arrays (1.0 when both are one constant)."""
    n = a.size
    po = float(np.mean(a == b))
    pa = np.array([np.sum(a == c) for c in categories]) / n
    pb = np.array([np.sum(b == c) for c in categories]) / n
    pe = float(pa @ pb)
    return 1.0 if pe >= 1.0 else (po - pe) / (1.0 - pe)


def _kappas(a: np.ndarray, b: np.ndarray, k: int, idx: np.ndarray) -> np.ndarray:
    """Kappa of every bootstrap resample at once: `idx` is resamples x n item indices; labels are 0..k-1."""
    ra, rb = a[idx], b[idx]
    po = (ra == rb).mean(axis=1)
    pa = np.stack([(ra == c).mean(axis=1) for c in range(k)], axis=1)
    pb = np.stack([(rb == c).mean(axis=1) for c in range(k)], axis=1)
    pe = (pa * pb).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(pe >= 1.0, 1.0, (po - pe) / (1.0 - pe))


def agreement(
    pairs: Sequence[tuple[int, int]], resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL
) -> Agreement | None:
    """Kappa, its bootstrap CI and the confusion counts of (grade by a, grade by b) pairs; None if empty."""
    if not pairs:
        return None
    cats = np.array(sorted({g for p in pairs for g in p}))
    code = {int(c): i for i, c in enumerate(cats)}
    a = np.array([code[x] for x, _ in pairs])
    b = np.array([code[y] for _, y in pairs])
    k = len(cats)
    point = kappa(a, b, np.arange(k))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, a.size, size=(resamples, a.size))
    boot = _kappas(a, b, k, idx)
    lo, hi = np.quantile(boot, [(1 - level) / 2, 1 - (1 - level) / 2])
    confusion: dict[tuple[int, int], int] = {}
    for x, y in pairs:
        confusion[(x, y)] = confusion.get((x, y), 0) + 1
    return Agreement(a.size, point, float(lo), float(hi), float(np.mean(a == b)), confusion)
