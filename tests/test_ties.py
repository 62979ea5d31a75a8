"""Tied with the best: which points the paired test cannot tell from the top one (after Holm)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from evalpipe.stats.ties import _critical, _p, all_pairs, tied_with_best, ties_of


def test_group_by_hand():
    means = [0.70, 0.74, 0.60, 0.73]
    # Point 1 is best. Against it: point 0 p=0.03, point 2 p=0.001, point 3 p=0.40 (raw).
    # Holm over the 3 comparisons: 0.001*3=0.003, 0.03*2=0.06, 0.40 -> point 0 and 3 tied.
    ties = tied_with_best(means, [0.03, None, 0.001, 0.40])
    assert ties.best == 1
    assert ties.tied == (0, 1, 3)
    assert ties.p_adj == (pytest.approx(0.06), None, pytest.approx(0.003), pytest.approx(0.40))
    # Uncorrected, point 0 at p = 0.03 is significantly worse: not tied.
    assert tied_with_best(means, [0.03, None, 0.001, 0.40], method="none").tied == (1, 3)


def test_best_defaults_to_the_earliest_highest_and_unpaired_points_are_left_out():
    ties = tied_with_best([0.5, 0.5, 0.4], [None, 0.9, None])
    assert ties.best == 0 and ties.tied == (0, 1) and ties.size == 2


def test_no_points():
    with pytest.raises(ValueError, match="no points"):
        tied_with_best([], [])


# --- the procedure the commands use: one family of all pairs, max-T (stats.ties) -------------------

DATA = Path(__file__).parent / "data" / "gold_dev_bm25_grid.json"


def _exchangeable_null(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k points under the global null from real per-case outcomes x (points x cases): per case,
    each point independently takes the value of a random real point on that case, or (half the
    time) on a random case; every case's values are exchangeable across points (no point is
    better), hard cases stay hard. As scripts/ties_fwer.py."""
    p, n = x.shape
    pick = rng.integers(0, p, size=(k, n))
    case = np.where(rng.random((k, n)) < 0.5, rng.integers(0, n, size=(k, n)), np.arange(n)[None, :])
    return x[pick, case]


@pytest.mark.parametrize("metric", ["recall_at_5", "mrr"])
def test_tied_with_the_best_keeps_its_family_wise_error_under_the_global_null(metric):
    # Real per-case outcomes: the 12 points of the bm25 grid on gold's dev split (101 cases;
    # recall@5 is 0/1, MRR graded). 200 simulated 12-point sweeps, 100 resamples each.
    x = np.array(json.loads(DATA.read_text())[metric], dtype=np.float64)
    assert x.shape == (12, 101)
    rng = np.random.default_rng(7)
    sims, k = 200, 12
    errors = 0
    for s in range(sims):
        y = _exchangeable_null(x, k, rng)
        (pairs,) = all_pairs([y], 0.05, 100, seed=s)
        errors += ties_of(pairs).size < k
    rate = errors / sims
    # P(some point declared not tied) <= 0.05 + 2.5 Monte Carlo SEs (SE at 0.05: 0.0154)
    assert rate <= 0.05 + 2.5 * math.sqrt(0.05 * 0.95 / sims), rate


def test_decisions_intervals_p_and_ranks_are_one_family():
    rng = np.random.default_rng(3)
    base = rng.random(80)
    x = np.array(
        [base, base + rng.normal(0.0, 0.05, 80), base + 0.08 + rng.normal(0.0, 0.05, 80), base - 0.01]
    )
    (pairs,) = all_pairs([x], 0.05, 2000, seed=1)
    ties = ties_of(pairs)
    for i in range(4):
        for j in range(4):
            if i == j:
                continue
            # surely better <=> the pair's simultaneous interval lies above 0 <=> family p < alpha
            # (two-sided) and a gain
            gain = pairs.diff[i, j] > 0
            assert pairs.better(i, j) == (pairs.lo(i, j) > 0) == (pairs.p_adj[i, j] < 0.05 and gain)
            assert pairs.lo(i, j) == pytest.approx(-pairs.hi(j, i))
        # tied with the best <=> the MCB interval reaches 0 <=> the rank interval contains 1
        assert ties.is_tied(i) == (ties.mcb_hi[i] >= 0) == (ties.rank_lo[i] == 1)
        assert ties.rank_lo[i] <= ties.rank[i] <= ties.rank_hi[i]
    # point 2 is 0.08 above the others on every case (noise SD 0.05): surely first
    assert ties.best == 2 and ties.tied == (2,) and ties.rank_text(2) == "1 [1]"
    assert ties.rank_lo[0] == 2


def test_a_pair_that_differs_by_the_same_amount_on_every_case_is_surely_different():
    base = np.linspace(0.0, 0.5, 30)
    (pairs,) = all_pairs([np.array([base, base + 0.1, base])], 0.05, 500)
    assert pairs.better(1, 0) and pairs.better(1, 2) and not pairs.better(0, 2)
    assert pairs.lo(1, 0) == pytest.approx(0.1) == pytest.approx(pairs.hi(1, 0))
    assert ties_of(pairs).tied == (1,)


def test_critical_value_matches_the_p_value_rule_by_hand():
    # B = 39 resampled maxima 1..39: (#{M* >= t} + 1) / 40 < 0.05 needs no M* >= t: c = 39.
    m = np.arange(1.0, 40.0)
    assert _critical(m, 0.05) == pytest.approx(39.0)
    assert _p(m, np.array([39.0]))[0] == pytest.approx(2 / 40)
    assert _p(m, np.array([39.5]))[0] == pytest.approx(1 / 40)
    # alpha 0.2: (count + 1) / 40 < 0.2 allows up to 6 maxima >= t: c = the 7th largest, 33
    assert _critical(m, 0.2) == pytest.approx(33.0)
    # B = 19: (0 + 1) / 20 is not < 0.05: nothing can be significant
    assert _critical(np.arange(1.0, 20.0), 0.05) == math.inf


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="at least 2 points"):
        all_pairs([np.zeros((1, 5))])
    with pytest.raises(ValueError, match="NaN"):
        all_pairs([np.array([[0.0, np.nan], [1.0, 0.0]])])
