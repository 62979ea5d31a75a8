"""Minimum detectable effect (MDE) and power of evalpipe's paired test, per tier and overall.

"No difference" from a tier of 40 cases means little if that tier could not have seen a
5-point change. The MDE is the smallest true mean difference the paired randomization test
(`evalpipe compare`, the gate) detects with probability `power` (default 0.8) at level
`alpha`. Two analytic models, chosen by the per-case values:

* **binary** metrics (every value 0 or 1: hit@k, recall@k with one expected ID): the test on
  0/1 outcomes is the two-sided sign test on the discordant cases (McNemar's exact test).
  A change is described by its *discordance* psi, the share of cases whose outcome differs
  between the two runs. Each case is won with probability (psi + delta) / 2, lost with
  (psi - delta) / 2, unchanged otherwise; the power is computed **exactly** (the number of
  discordant cases is binomial, and given it the number won is binomial, against the sign
  test's exact critical value), not by the normal approximation, which is poor for the few
  discordant cases of a small tier. A change of delta needs at least a share delta of the
  cases to change, so psi is taken as max(psi, delta).
* **graded** metrics (RR, nDCG, recall with several expected IDs): the sign-flip statistic
  sum(d) / sqrt(sum(d^2)) is about standard normal under H0, and rejecting it above
  z = z_(1-alpha/2) is the same as rejecting the paired t statistic above
  c = z sqrt((n - 1) / (n - z^2)); for a true shift delta of differences with SD sigma the t
  statistic is noncentral t with noncentrality sqrt(n) delta / sigma, whose power is taken
  from the normal approximation P = Phi((lambda - c) / sqrt(1 + c^2 / (2 (n - 1)))), solved for
  delta in closed form. tests/test_power.py checks by simulation that the randomization
  test's power at this MDE is 0.80 +- 0.03 for roughly symmetric differences; strongly skewed
  per-case differences (a few large gains, many small losses) move it (0.83-0.93 measured
  for one such shape, see docs/power.md).

Where the spread (psi or sigma) comes from, stated in every output:

* **paired**: from the two runs' per-case differences (a gate row, a compare cell), when at
  least `min_changed(alpha)` cases changed; fewer changed cases say nothing about the spread;
* **one run**: from one run's per-case values (a fixture before any comparison, or a
  comparison that changed too few cases): a second system correlated rho with the first
  (default 0.5) on the same cases differs per case with variance 2 * var(x) * (1 - rho);
  for 0/1 outcomes that is a discordance psi = 2 p (1 - p)(1 - rho).

A tier with fewer cases than `min_changed(alpha)` (6 at alpha 0.05) can detect nothing: no
p-value of a paired test on so few reaches alpha. Its MDE is infinite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

#: Default target power and the one-run model's assumed correlation between two systems.
POWER = 0.8
RHO = 0.5
_Z = NormalDist()
#: Above this many expected discordant cases the binary power uses McNemar's normal approximation.
EXACT_LIMIT = 3000


def min_changed(alpha: float) -> int:
    """The fewest changed cases whose sign-flip p-value can be < alpha (all in one direction: 2/2^k)."""
    k = 1
    while 2.0 / 2.0**k >= alpha:
        k += 1
    return k


def _check(alpha: float, power: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha}")
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be strictly between 0 and 1, got {power}")


# --- binary: exact power of the sign test on discordant cases ------------------------------------


@lru_cache(maxsize=64)
def _log_factorials(n: int) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)))])


def _log_binom(m: int, lf: np.ndarray) -> np.ndarray:
    k = np.arange(m + 1)
    return lf[m] - lf[k] - lf[m - k]


@lru_cache(maxsize=65536)
def _critical(m: int, alpha: float) -> int:
    """The smallest number won of m discordant cases that the two-sided sign test rejects (m + 1: none)."""
    if m < 1:
        return 1
    lf = _log_factorials(m)
    pmf = np.exp(_log_binom(m, lf) - m * math.log(2.0))
    sf = np.cumsum(pmf[::-1])[::-1]  # sf[k] = P(B >= k), B ~ Bin(m, 1/2)
    k = np.arange(m + 1)
    ok = (2 * k > m) & (2.0 * sf < alpha)
    return int(k[ok][0]) if ok.any() else m + 1


def _binom_pmf(m: int, p: float, lf: np.ndarray) -> np.ndarray:
    k = np.arange(m + 1)
    if p <= 0.0:
        return (k == 0).astype(np.float64)
    if p >= 1.0:
        return (k == m).astype(np.float64)
    return np.exp(_log_binom(m, lf) + k * math.log(p) + (m - k) * math.log1p(-p))


def binary_power(delta: float, n: int, discordance: float, alpha: float) -> float:
    """Exact probability that the sign test on n paired 0/1 cases detects a mean change `delta`
    (> 0) in its direction, when a share `discordance` of the cases change outcome."""
    if n < 1 or delta <= 0.0:
        return 0.0
    delta = min(delta, 1.0)
    psi = min(1.0, max(discordance, delta))
    q = (psi + delta) / (2.0 * psi)  # a discordant case goes the way of the change
    if n * psi > EXACT_LIMIT:  # thousands of discordant cases: the normal approximation is exact enough
        a = _Z.inv_cdf(1.0 - alpha / 2.0)
        var = psi - delta * delta
        if var <= 0.0:
            return 1.0
        return _Z.cdf((math.sqrt(n) * delta - a * math.sqrt(psi)) / math.sqrt(var))
    lf = _log_factorials(n)
    mean, sd = n * psi, math.sqrt(n * psi * (1.0 - psi))
    lo, hi = max(0, int(mean - 12 * sd - 12)), min(n, int(mean + 12 * sd + 12))
    weights = _binom_pmf(n, psi, lf)
    total = 0.0
    for m in range(lo, hi + 1):
        w = weights[m]
        if w < 1e-15:
            continue
        k = _critical(m, alpha)
        if k > m:
            continue
        total += w * float(_binom_pmf(m, q, lf)[k:].sum())
    return min(1.0, total)


def binary_mde(n: int, discordance: float, alpha: float, power: float = POWER) -> float:
    """The smallest delta with binary_power >= power (math.inf when even delta = 1 falls short)."""
    _check(alpha, power)
    if n < min_changed(alpha) or binary_power(1.0, n, discordance, alpha) < power:
        return math.inf
    lo, hi = 0.0, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        if binary_power(mid, n, discordance, alpha) >= power:
            hi = mid
        else:
            lo = mid
    return hi


# --- graded: normal approximation on the per-case differences ----------------------------------


def _t_critical(n: int, alpha: float) -> float:
    """The critical value of the paired t statistic that the sign-flip test amounts to.

    sum(d) / sqrt(sum(d^2)) > z  <=>  t > z sqrt((n - 1) / (n - z^2)), t the paired t statistic,
    z = z_(1-alpha/2): the randomization test is, to first order, a t-test with this cut-off."""
    z = _Z.inv_cdf(1.0 - alpha / 2.0)
    return math.inf if n <= z * z else z * math.sqrt((n - 1) / (n - z * z))


def mean_mde(n: int, sd: float, alpha: float, power: float = POWER) -> float:
    """Smallest shift delta of per-case differences with SD `sd` detected with `power`: the
    noncentrality sqrt(n) delta / sd = c + z_power sqrt(1 + c^2 / (2 (n - 1))) at which the normal
    approximation to the noncentral t puts `power` above the cut-off c (`_t_critical`)."""
    _check(alpha, power)
    if n < min_changed(alpha):
        return math.inf
    if sd <= 0.0:
        return 0.0
    c = _t_critical(n, alpha)
    if not math.isfinite(c):
        return math.inf
    lam = c + _Z.inv_cdf(power) * math.sqrt(1.0 + c * c / (2.0 * (n - 1)))
    return sd * lam / math.sqrt(n)


def mean_power(delta: float, n: int, sd: float, alpha: float) -> float:
    """The power of the paired test for a shift `delta` (the inverse of mean_mde)."""
    if n < min_changed(alpha) or delta <= 0.0:
        return 0.0
    if sd <= 0.0:
        return 1.0
    c = _t_critical(n, alpha)
    if not math.isfinite(c):
        return 0.0
    lam = math.sqrt(n) * delta / sd
    return _Z.cdf((lam - c) / math.sqrt(1.0 + c * c / (2.0 * (n - 1))))


# --- what a command shows ------------------------------------------------------------------------


def is_binary(*arrays: np.ndarray) -> bool:
    """Every value of every array is 0 or 1 (a hit metric): the exact binary model applies."""
    return all(np.all((np.asarray(a) == 0) | (np.asarray(a) == 1)) for a in arrays)


@dataclass(frozen=True)
class Detectable:
    """The MDE of one comparison (a gate row, a compare cell, a fixture's tier) and how it was got."""

    mde: float
    cases: int
    kind: str  # binary | graded
    #: the discordance psi (binary) or the SD of the per-case differences (graded)
    spread: float
    source: str  # paired | one run
    alpha: float
    power: float
    rho: float = RHO

    @property
    def detectable(self) -> bool:
        return math.isfinite(self.mde) and self.mde <= 1.0

    def text(self, digits: int = 3) -> str:
        """The MDE as a number, or "none" when no change of any size can be detected."""
        return f"{self.mde:.{digits}f}" if self.detectable else "none"

    @property
    def method(self) -> str:
        model = (
            "exact sign test on discordant cases"
            if self.kind == "binary"
            else "normal approx. on differences"
        )
        spread = "discordance" if self.kind == "binary" else "SD of differences"
        if self.source.startswith("resampled"):
            return (
                f"measured: {self.source.split()[1]} planted on the runs' own per-case outcomes "
                f"(real churn), paired randomization test, {SIMS} simulated experiments; "
                f"{spread} {self.spread:.3f}"
            )
        where = "paired differences" if self.source == "paired" else f"one run, rho {self.rho:g}"
        return f"{model}; {spread} {self.spread:.3f} from {where}"


def _one_run_spread(values: np.ndarray, binary: bool, rho: float) -> float:
    if binary:
        p = float(values.mean())
        return 2.0 * p * (1.0 - p) * (1.0 - rho)
    var = float(values.var(ddof=1)) if values.size > 1 else 0.0
    return math.sqrt(max(0.0, 2.0 * var * (1.0 - rho)))


def _mde(n: int, binary: bool, spread: float, alpha: float, power: float) -> float:
    if binary or spread <= 0.0:  # a constant graded metric: as large a change as 0/1 cases allow
        return binary_mde(n, spread if binary else 0.0, alpha, power)
    return mean_mde(n, spread, alpha, power)


def _values(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64).ravel()
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return v


def one_run(
    values: Sequence[float] | np.ndarray, alpha: float = 0.05, power: float = POWER, rho: float = RHO
) -> Detectable:
    """The MDE of a tier from one run's per-case values (no comparison yet), by the one-run model."""
    _check(alpha, power)
    if not 0.0 <= rho < 1.0:
        raise ValueError(f"rho must be in [0, 1), got {rho}")
    v = _values(values, "values")
    binary = is_binary(v)
    spread = _one_run_spread(v, binary, rho) if v.size else 0.0
    mde = _mde(int(v.size), binary, spread, alpha, power) if v.size else math.inf
    return Detectable(
        mde, int(v.size), "binary" if binary else "graded", spread, "one run", alpha, power, rho
    )


def paired(
    base: Sequence[float] | np.ndarray,
    cand: Sequence[float] | np.ndarray,
    alpha: float = 0.05,
    power: float = POWER,
    rho: float = RHO,
) -> Detectable:
    """The MDE of a paired comparison: spread from the differences when enough cases changed,
    else from the baseline alone (one-run model)."""
    b, c = _values(base, "base"), _values(cand, "cand")
    if b.shape != c.shape:
        raise ValueError(f"paired runs must score the same cases: {b.size} and {c.size} values")
    d = c - b
    if int(np.count_nonzero(d)) < min_changed(alpha):
        return one_run(b, alpha, power, rho)
    _check(alpha, power)
    binary = is_binary(b, c)
    spread = float(np.count_nonzero(d)) / d.size if binary else float(d.std(ddof=1))
    mde = _mde(int(d.size), binary, spread, alpha, power)
    return Detectable(mde, int(d.size), "binary" if binary else "graded", spread, "paired", alpha, power, rho)


def cases_needed(delta: float, detectable: Detectable, limit: int = 200_000) -> int | None:
    """The fewest cases with which a change of `delta` is detected with the same spread, alpha and
    power as `detectable` (None: not within `limit` cases)."""
    if delta <= 0.0:
        raise ValueError(f"delta must be > 0, got {delta}")
    binary = detectable.kind == "binary"

    def enough(n: int) -> bool:
        if binary or detectable.spread <= 0.0:
            spread = detectable.spread if binary else 0.0
            return binary_power(delta, n, spread, detectable.alpha) >= detectable.power
        return mean_mde(n, detectable.spread, detectable.alpha, detectable.power) <= delta

    lo = min_changed(detectable.alpha) - 1  # not enough
    if not enough(limit):
        return None
    hi = max(lo + 1, 8)
    while not enough(hi):
        lo, hi = hi, min(limit, hi * 2)
    while hi - lo > 1:  # the exact binary power is not quite monotone in n: the first n that reaches it
        mid = (lo + hi) // 2
        if enough(mid):
            hi = mid
        else:
            lo = mid
    return hi


# --- measured on the fixture's own outcomes: plant an effect, count the test's rejections ---------

#: Simulated experiments and sign-flip resamples per power estimate of the resampling MDE.
SIMS = 1000
FLIPS = 1000


def _plant(
    base: np.ndarray,
    cand: np.ndarray,
    delta: float,
    gain: bool,
    binary: bool,
    rng: np.random.Generator,
    sims: int,
) -> tuple[np.ndarray, np.ndarray]:
    """`sims` pairs of (baseline, candidate) with the real pair's churn and a planted change delta.

    Null with the real churn: per case, the two runs' values are swapped with probability 1/2
    (the pair's own disagreements, in both directions). Then delta is planted on the candidate:
    binary, round(delta n) cases flipped (gain: misses to hits; drop: hits to misses), chosen at
    random; graded, every case moved in proportion to its room (gain: + delta (1 - v) / mean(1 - v),
    drop: - delta v / mean(v)), clipped to [0, 1]."""
    n = base.size
    swap = rng.random((sims, n)) < 0.5
    b = np.where(swap, cand[None, :], base[None, :])
    c = np.where(swap, base[None, :], cand[None, :])
    if binary:
        # delta n flips on average: floor(delta n), plus one with probability its fraction
        flips = np.floor(delta * n) + (rng.random(sims) < delta * n - np.floor(delta * n))
        want = 0.0 if gain else 1.0
        keys = np.where(c == want, rng.random((sims, n)), np.inf)  # only misses (gain) / hits (drop)
        order = np.argsort(keys, axis=1)
        rows = np.arange(sims)[:, None]
        chosen = np.isfinite(keys[rows, order]) & (np.arange(n)[None, :] < flips[:, None])
        c = c.copy()
        c[rows, order] = np.where(chosen, 1.0 - want, c[rows, order])
    else:
        room = (1.0 - c) if gain else c
        scale = room.mean(axis=1, keepdims=True)
        scale[scale <= 0] = 1.0
        c = np.clip(c + (1 if gain else -1) * delta * room / scale, 0.0, 1.0)
    return b, c


def _sign_flip_power(d: np.ndarray, alpha: float, gain: bool, rng: np.random.Generator, flips: int) -> float:
    """The share of experiments (rows of per-case differences d) the two-sided paired sign-flip
    randomization test (`resampling.paired_randomization_test`) rejects at alpha in the planted
    direction; one sign matrix serves every row."""
    signs = rng.integers(0, 2, size=(d.shape[1], flips), dtype=np.int8).astype(np.float64) * 2.0 - 1.0
    observed = d.sum(axis=1)
    threshold = np.abs(observed) - 1e-9 * np.maximum(np.abs(observed), 1.0)
    extreme = (np.abs(d @ signs) >= threshold[:, None]).sum(axis=1)
    p = (extreme + 1) / (flips + 1)
    right = observed > 0 if gain else observed < 0
    return float(np.mean((p < alpha) & right))


def resampled_power(
    base: np.ndarray,
    cand: np.ndarray,
    delta: float,
    alpha: float,
    gain: bool = True,
    sims: int = SIMS,
    seed: int = 0,
    flips: int = FLIPS,
) -> float:
    """The measured power of the paired randomization test for a change delta planted on the real
    pair (base, cand) (`_plant`), at level alpha."""
    b, c = _values(base, "base"), _values(cand, "cand")
    binary = is_binary(b, c)
    rng = np.random.default_rng(seed)
    pb, pc = _plant(b, c, delta, gain, binary, rng, sims)
    return _sign_flip_power(pc - pb, alpha, gain, rng, flips)


def resampled(
    base: Sequence[float] | np.ndarray,
    cand: Sequence[float] | np.ndarray | None = None,
    alpha: float = 0.05,
    power: float = POWER,
    gain: bool = True,
    sims: int = SIMS,
    seed: int = 0,
) -> Detectable:
    """The MDE measured on the fixture's own per-case outcomes: the smallest planted change
    (`_plant`: the real pair's churn plus delta) the gate's paired randomization test detects in
    its direction with probability `power` at `alpha`, found by bisection with common random
    numbers (the same seed at every delta). Without `cand`, the run is paired with itself (no
    churn: the minimum-churn MDE). The spread reported is the pair's discordance (binary) or the
    SD of its differences (graded)."""
    _check(alpha, power)
    b = _values(base, "base")
    c = b.copy() if cand is None else _values(cand, "cand")
    if b.shape != c.shape:
        raise ValueError(f"paired runs must score the same cases: {b.size} and {c.size} values")
    n = int(b.size)
    binary = is_binary(b, c)
    d = c - b
    spread = float(np.count_nonzero(d)) / max(n, 1) if binary else float(d.std(ddof=1)) if n > 1 else 0.0
    kind = "binary" if binary else "graded"

    def reached(delta: float) -> bool:
        return resampled_power(b, c, delta, alpha, gain, sims, seed) >= power

    mde = math.inf
    if n >= min_changed(alpha):
        room = float(np.mean(1.0 - np.maximum(b, c))) if gain else float(np.mean(np.minimum(b, c)))
        hi = max(room, 1.0 / n)
        if reached(hi):
            lo = 0.0
            for _ in range(12):
                mid = (lo + hi) / 2
                if reached(mid):
                    hi = mid
                else:
                    lo = mid
            mde = hi
    return Detectable(mde, n, kind, spread, "resampled gain" if gain else "resampled drop", alpha, power)
