"""Tied with the best, and each point's rank: one family of all pairwise differences, max-T.

A sweep names one best point, but the per-case noise of a fixture of a few hundred cases
makes several points indistinguishable from it. Testing each point against the point with the
highest *observed* mean and then correcting (Holm) ignores that the best was picked from the
same data: under the global null a 12-point sweep then declared some point "not tied" in 10%
(R@5) to 18% (MRR) of sweeps instead of 5% (issue #40).

The procedure here answers every question about k points (tied with the best? better than the
default? which rank?) from **one family**: the k (k - 1) / 2 paired differences
D_ij = mean_i - mean_j over the shared cases, with simultaneous intervals at level 1 - alpha.

* Studentised max-T, paired bootstrap: cases are resampled B times (the same resample for every
  point, so each case's pairing is kept); per resample the statistic is
  M* = max over pairs of |(D*_ij - D_ij) / SE_ij|, SE_ij the standard error of D_ij from the
  observed per-case differences. The critical value c is the order statistic of the M* with
  which a pair is significant exactly when its single-step adjusted p,
  (#{M* >= |t_ij|} + 1) / (B + 1), is below alpha: interval excludes 0 <=> adjusted p < alpha.
* The simultaneous intervals D_ij +- c SE_ij cover every true difference at once with
  probability ~ 1 - alpha, so every statement read off them holds together:
  - **tied with the best** (Hsu's multiple comparisons with the best, MCB): the interval of
    mu_i - max_{j != i} mu_j is [min_j (D_ij - c SE_ij), min_j (D_ij + c SE_ij)]; point i is
    *not* tied only if that interval lies entirely below 0 (some point is surely better);
  - **rank interval**: 1 + #{j surely better than i} to k - #{j surely worse than i}
    (simultaneous, the same family): tied with the best <=> the interval contains rank 1;
  - **i beats j** (e.g. the best beats the default): D_ij - c SE_ij > 0, the same pair's
    interval, so a command can never say "tied" and "beats" about one pair.
* Several metrics (compare with 3+ runs) are one family too: the same case resample for every
  metric, M* the max over every metric's pairs; each metric may score a subset of the cases.

Checked by simulation under the global null (per-case outcomes exchangeable across points):
tests/test_ties.py (12 points, binary and graded, in the suite) and scripts/ties_fwer.py (3, 12
and 30 points; figures in docs/power.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evalpipe.stats.corrections import DEFAULT_METHOD, adjust

#: What every output names the procedure as.
METHOD = "all-pairs max-T (studentised paired bootstrap), multiple comparisons with the best"
#: Upper bound on the float64 cells of one block of resampled pair differences (~32 MB).
_BLOCK_CELLS = 4_000_000


@dataclass(frozen=True)
class Pairs:
    """All pairwise differences of one metric's k points, with the family's critical value.

    `diff[i, j]` = mean_i - mean_j, `se[i, j]` its standard error, `t` = diff / se (0 where both
    are 0, +-inf where se is 0 and the difference is not: every case moved by the same amount).
    """

    means: np.ndarray
    diff: np.ndarray
    se: np.ndarray
    t: np.ndarray
    p_adj: np.ndarray
    crit: float
    alpha: float
    cases: int
    resamples: int
    #: the number of pairs in the whole family (every metric's, for a joint family)
    family: int

    @property
    def k(self) -> int:
        return int(self.means.size)

    @property
    def best(self) -> int:
        """The highest mean (ties: the earliest point)."""
        return int(np.argmax(self.means))

    def lo(self, i: int, j: int) -> float:
        return (
            float(self.diff[i, j] - self.crit * self.se[i, j])
            if self.se[i, j] > 0
            else float(self.diff[i, j])
        )

    def hi(self, i: int, j: int) -> float:
        return (
            float(self.diff[i, j] + self.crit * self.se[i, j])
            if self.se[i, j] > 0
            else float(self.diff[i, j])
        )

    def better(self, i: int, j: int) -> bool:
        """Point i is surely better than j: their simultaneous interval lies above 0."""
        return i != j and bool(self.t[i, j] > self.crit)

    @property
    def level(self) -> float:
        """The simultaneous confidence level of the intervals."""
        return 1.0 - self.alpha

    @property
    def pair_alpha(self) -> float:
        """The two-sided level one pair is effectively tested at (normal reference for c): what the
        family's minimum detectable differences are computed at."""
        if not math.isfinite(self.crit):  # nothing can be significant: as strict as a level gets
            return _FLOOR
        # Never looser than one test at alpha: a degenerate resampling distribution (every pair's
        # differences zero, so c = 0) would otherwise hand the power model a level of 1.
        return min(self.alpha, max(_FLOOR, float(2.0 * (1.0 - _phi(self.crit)))))


#: The smallest pair level handed to the power model (an infinite critical value detects nothing).
_FLOOR = 1e-12


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


@dataclass(frozen=True)
class Ties:
    """Which points are tied with the best (indices into the caller's list), and each one's rank."""

    best: int
    tied: tuple[int, ...]
    #: per point: the simultaneous interval of mu_i - max_{j != i} mu_j (MCB)
    mcb_lo: tuple[float, ...]
    mcb_hi: tuple[float, ...]
    #: per point: observed rank (1 = highest mean) and its simultaneous interval
    rank: tuple[int, ...]
    rank_lo: tuple[int, ...]
    rank_hi: tuple[int, ...]
    alpha: float
    method: str = METHOD

    def is_tied(self, i: int) -> bool:
        return i in self.tied

    @property
    def size(self) -> int:
        return len(self.tied)

    def rank_text(self, i: int) -> str:
        lo, hi = self.rank_lo[i], self.rank_hi[i]
        return f"{self.rank[i]} [{lo}-{hi}]" if lo != hi else f"{self.rank[i]} [{lo}]"


def _studentise(diff: np.ndarray, se: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(
            se > 0, diff / np.where(se > 0, se, 1.0), np.where(diff == 0, 0.0, np.sign(diff) * np.inf)
        )
    return t


def _weights(n: int, resamples: int, seed: int) -> np.ndarray:
    """Case counts of `resamples` bootstrap resamples of n cases (rows: resamples)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n)) + (np.arange(resamples) * n)[:, None]
    return np.bincount(idx.ravel(), minlength=resamples * n).reshape(resamples, n).astype(np.float64)


def _block_max(x: np.ndarray, w: np.ndarray, diff: np.ndarray, se: np.ndarray) -> np.ndarray:
    """Per resample: the max over pairs of |D*_ij - D_ij| / SE_ij of one metric's points x (k x n)."""
    k = x.shape[0]
    iu, ju = np.triu_indices(k, 1)
    keep = se[iu, ju] > 0  # a pair whose every case moved alike never varies: it adds 0
    iu, ju = iu[keep], ju[keep]
    out = np.zeros(w.shape[0])
    if iu.size == 0:
        return out
    inv = 1.0 / se[iu, ju]
    total = w.sum(axis=1, keepdims=True)
    total[total == 0] = 1.0
    rows = max(1, _BLOCK_CELLS // max(iu.size + x.shape[1], 1))
    for start in range(0, w.shape[0], rows):
        means = (w[start : start + rows] @ x.T) / total[start : start + rows]  # resamples x k
        centred = np.abs((means[:, iu] - means[:, ju]) - diff[iu, ju]) * inv
        out[start : start + rows] = centred.max(axis=1)
    return out


def _gram_t(y: np.ndarray) -> np.ndarray:
    """|t| of every pair of y (experiments x k x n), as experiments x k x k: the mean per-case
    difference over its SE, from the Gram matrix (BLAS) rather than the per-case differences."""
    n = y.shape[2]
    s1 = y.sum(axis=2)
    gram = np.matmul(y, np.swapaxes(y, 1, 2))
    sq = np.diagonal(gram, axis1=1, axis2=2)
    mean = (s1[:, :, None] - s1[:, None, :]) / n
    ss = sq[:, :, None] + sq[:, None, :] - 2.0 * gram  # sum over cases of (y_i - y_j)^2
    var = np.clip(ss - n * mean * mean, 0.0, None) / max(n - 1, 1)
    tiny = 1e-12 * np.maximum(ss, 1e-300)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(var > tiny, np.abs(mean) / np.sqrt(var / n), np.where(np.abs(mean) > 1e-12, np.inf, 0.0))
    return t


def _permutation_max(
    xs: Sequence[np.ndarray], index: Sequence[np.ndarray], n_cases: int, permutations: int, seed: int
) -> np.ndarray:
    """Per within-case permutation of the point labels: max over every block's pairs of |t| (each
    pair's SE recomputed on the permuted values). One permutation of the labels per case serves
    every block (a metric's points are the same runs). Under the global null (each case's values
    exchangeable across points) the observed max is one draw of this distribution: exact there."""
    kmax = max(x.shape[0] for x in xs)
    rng = np.random.default_rng(seed)
    out = np.zeros(permutations)
    cells = sum(x.shape[0] * (x.shape[0] + x.shape[1]) for x in xs) + kmax * n_cases
    rows = max(1, _BLOCK_CELLS // max(cells, 1))
    for start in range(0, permutations, rows):
        stop = min(permutations, start + rows)
        # per (permutation, case): a uniform permutation of the labels, as the order of random keys
        keys = rng.random((stop - start, n_cases, kmax), dtype=np.float32)
        for x, ix in zip(xs, index, strict=True):
            k, n = x.shape
            order = np.argsort(keys[:, ix, :k], axis=2)  # permutations x cases x labels
            flat = x.T.ravel()[order + (np.arange(n) * k)[None, :, None]]
            out[start:stop] = np.maximum(out[start:stop], _gram_t(np.swapaxes(flat, 1, 2)).max(axis=(1, 2)))
    return out


#: Relative tolerance with which a resampled max counts as reaching an observed |t|: the Gram
#: matrix and the direct SE differ in the last bits, and on 0/1 outcomes many permutations tie
#: the observed statistic exactly; losing those ties would make the test liberal.
_TOL = 1e-9


def _critical(m_star: np.ndarray, alpha: float) -> float:
    """The c with |t| > c <=> (#{M* >= |t| (1 - tol)} + 1) / (B + 1) < alpha."""
    b = m_star.size
    m = math.ceil(alpha * (b + 1) - 1 - 1e-9) - 1  # the most M* >= |t| a significant pair may have
    return float(np.sort(m_star)[::-1][m]) / (1.0 - _TOL) if 0 <= m < b else math.inf


def _p(m_star: np.ndarray, t: np.ndarray) -> np.ndarray:
    ordered = np.sort(m_star)
    count = m_star.size - np.searchsorted(ordered, np.abs(t) * (1.0 - _TOL), side="left")
    return (count + 1) / (m_star.size + 1)


def all_pairs(
    blocks: Sequence[np.ndarray],
    alpha: float = 0.05,
    resamples: int = 10000,
    seed: int = 0,
    case_index: Sequence[np.ndarray] | None = None,
    n_cases: int | None = None,
) -> list[Pairs]:
    """One family over every pair of points of every block (a block: one metric's points x cases).

    Without `case_index`, every block scores the same n cases. With it, block b's columns are the
    cases `case_index[b]` of a universe of `n_cases` (the same resample / permutation of cases for
    every block). `resamples` bootstrap resamples and as many permutations, seeded."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    xs = [np.asarray(b, dtype=np.float64) for b in blocks]
    if not xs or any(x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 1 for x in xs):
        raise ValueError("each block needs at least 2 points and 1 case")
    if any(not np.all(np.isfinite(x)) for x in xs):
        raise ValueError("per-case values contain NaN or infinite values")
    if case_index is None:
        n_cases = xs[0].shape[1]
        if any(x.shape[1] != n_cases for x in xs):
            raise ValueError("blocks score different numbers of cases; pass case_index")
        index = [np.arange(n_cases) for _ in xs]
    else:
        index = [np.asarray(ix, dtype=np.intp) for ix in case_index]
        if n_cases is None:
            raise ValueError("case_index needs n_cases")
    w = _weights(n_cases, resamples, seed)
    stats = []
    boot = np.zeros(resamples)
    for x, ix in zip(xs, index, strict=True):
        k, n = x.shape
        means = x.mean(axis=1)
        diff = means[:, None] - means[None, :]
        iu, ju = np.triu_indices(k, 1)
        d = x[iu] - x[ju]
        sd = d.std(axis=1, ddof=1) if n > 1 else np.zeros(iu.size)
        # a pair that moved every case by the same amount has SE 0, not the rounding left in it
        sd = np.where(sd <= 1e-12 * np.abs(d).max(axis=1, initial=0.0), 0.0, sd)
        se = np.zeros((k, k))
        se[iu, ju] = se[ju, iu] = sd / math.sqrt(n)
        stats.append((means, diff, se, _studentise(diff, se)))
        boot = np.maximum(boot, _block_max(x, w[:, ix], diff, se))
    perm = _permutation_max(xs, index, n_cases, resamples, seed + 1)
    crit = max(_critical(boot, alpha), _critical(perm, alpha))
    family = sum(x.shape[0] * (x.shape[0] - 1) // 2 for x in xs)
    out = []
    for x, (means, diff, se, t) in zip(xs, stats, strict=True):
        p_adj = np.maximum(_p(boot, t), _p(perm, t))
        np.fill_diagonal(p_adj, np.nan)
        out.append(Pairs(means, diff, se, t, p_adj, crit, alpha, x.shape[1], resamples, family))
    return out


def ties_of(pairs: Pairs) -> Ties:
    """The tied group and the rank intervals read off one metric's simultaneous pair intervals."""
    k = pairs.k
    best = pairs.best
    lo = np.array([[pairs.lo(i, j) for j in range(k)] for i in range(k)])
    hi = np.array([[pairs.hi(i, j) for j in range(k)] for i in range(k)])
    np.fill_diagonal(lo, np.inf)
    np.fill_diagonal(hi, np.inf)
    surely = pairs.t > pairs.crit  # surely[i, j]: i is surely better than j
    np.fill_diagonal(surely, False)
    tied = tuple(i for i in range(k) if not surely[:, i].any())
    order = np.argsort(-pairs.means, kind="stable")
    rank = np.empty(k, dtype=int)
    rank[order] = np.arange(1, k + 1)
    rank_lo = 1 + surely.sum(axis=0)
    rank_hi = k - surely.sum(axis=1)
    return Ties(
        best=best,
        tied=tied,
        mcb_lo=tuple(float(v) for v in lo.min(axis=1)),
        mcb_hi=tuple(float(v) for v in hi.min(axis=1)),
        rank=tuple(int(r) for r in rank),
        rank_lo=tuple(int(r) for r in rank_lo),
        rank_hi=tuple(int(r) for r in rank_hi),
        alpha=pairs.alpha,
    )


def tied_group(
    values: Sequence[np.ndarray] | np.ndarray, alpha: float = 0.05, resamples: int = 10000, seed: int = 0
) -> tuple[Ties, Pairs]:
    """The tied group of k points from their per-case values (k x n, the same cases in one order)."""
    (pairs,) = all_pairs([np.asarray(values, dtype=np.float64)], alpha, resamples, seed)
    return ties_of(pairs), pairs


@dataclass(frozen=True)
class HolmTies:
    """The former rule (kept for comparison in scripts/ties_fwer.py): each point against the
    observed best, p adjusted over those comparisons. It does not keep its error rate."""

    best: int
    tied: tuple[int, ...]
    p_raw: tuple[float | None, ...]
    p_adj: tuple[float | None, ...]
    method: str
    alpha: float

    def is_tied(self, i: int) -> bool:
        return i in self.tied

    @property
    def size(self) -> int:
        return len(self.tied)


def tied_with_best(
    means: Sequence[float],
    p_vs_best: Sequence[float | None],
    alpha: float = 0.05,
    method: str = DEFAULT_METHOD,
    best: int | None = None,
) -> HolmTies:
    """The former rule's group from each point's mean and its paired p against the observed best
    (see `HolmTies`); the commands use `tied_group`."""
    if not means:
        raise ValueError("no points to rank")
    if best is None:
        best = max(range(len(means)), key=lambda i: (means[i], -i))
    family = [None if i == best else p for i, p in enumerate(p_vs_best)]
    adjusted = adjust(family, method)
    tied = tuple(i for i, p in enumerate(adjusted) if i == best or (p is not None and p >= alpha))
    return HolmTies(best, tied, tuple(family), tuple(adjusted), method, alpha)
