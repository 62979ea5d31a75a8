"""`evalpipe compare`: the `*` marks come from p adjusted over every run x metric cell."""

from __future__ import annotations

import pytest

from evalpipe.stats.comparison import CompareError, compare_runs
from test_compare import cell, run

BASE = [0.0] * 6 + [1.0] * 24


def _won(k: int) -> list[float]:
    return [1.0] * k + [0.0] * (6 - k) + [1.0] * 24


def test_a_lone_p_below_alpha_is_not_starred_after_holm_over_the_family():
    # Two runs, two metrics: run "b" wins 6 cases and loses none on each, exact sign-flip
    # p = 2 / 2^6 = 0.03125 < 0.05 raw. The 2 cells are one family: Holm multiplies the smaller
    # (equal) p by 2: 0.0625 > 0.05, not significant.
    runs = [run("a", recall_at_5=BASE, mrr=BASE), run("b", recall_at_5=_won(6), mrr=_won(6))]
    raw = compare_runs(runs, resamples=20000, correction="none")
    holm = compare_runs(runs, resamples=20000)
    b_raw, b_holm = cell(raw, "recall_at_5", "b"), cell(holm, "recall_at_5", "b")
    assert b_raw.p_value == pytest.approx(2 / 64, abs=0.006) and b_raw.significant
    assert holm.family == 2 and not holm.all_pairs
    assert b_holm.p_adj == pytest.approx(2 * b_holm.p_value) and not b_holm.significant
    assert (b_holm.won, b_holm.lost) == (6, 0)
    # BH: 0.031 * 2 / 2 for the two (tied) p-values = 0.031: significant under BH, as it should be.
    assert cell(compare_runs(runs, resamples=20000, correction="bh"), "mrr", "b").significant
    # Each cell says what it could detect, at alpha / 2.
    assert b_holm.mde is not None and b_holm.mde.alpha == pytest.approx(0.05 / 2)


def test_three_runs_are_one_all_pairs_family_and_a_correction_there_is_named_unused():
    # 4 runs x 2 metrics: 2 x 6 pairs in one max-T family. "b" wins 3 cases, loses none (sign-flip
    # p = 2/8 = 0.25 raw): nothing is significant, all runs tied, every rank interval is 1-4
    # except where identical runs share a mean.
    runs = [run("a", recall_at_5=BASE, mrr=BASE)]
    runs += [run("b", recall_at_5=_won(3), mrr=_won(3))]
    runs += [run(x, recall_at_5=BASE, mrr=BASE) for x in ("c", "d")]
    result = compare_runs(runs, resamples=2000)
    assert result.all_pairs and result.family == 12
    assert not any(c.significant for c in result.comparisons)
    assert all(c.tied for c in result.comparisons)
    b = cell(result, "recall_at_5", "b")
    assert b.rank == "1 [1-4]" and b.p_adj is not None and b.p_adj >= 0.05
    # the interval shown is the simultaneous one and contains 0, as "not significant" says
    assert b.diff_lo is not None and b.diff_hi is not None and b.diff_lo <= 0 <= b.diff_hi
    bh = compare_runs(runs, resamples=500, correction="bh")
    assert any("--correction bh is not used with 3+ runs" in w for w in bh.warnings)


def test_bad_correction_and_power_are_refused():
    runs = [run("a", recall_at_5=BASE), run("b", recall_at_5=_won(6))]
    with pytest.raises(CompareError, match="--correction: unknown correction 'x'"):
        compare_runs(runs, correction="x")
    with pytest.raises(CompareError, match="--power must be between 0 and 1"):
        compare_runs(runs, power=1.5)


def test_runs_tied_with_the_best_are_marked():
    # Three runs: "b" wins 3 of 30 cases over "a" and "c" (sign-flip p = 2/8 each): no run is surely
    # better, all tied. "e" wins 18 cases over three runs that hit nothing (every pair's 18 wins,
    # 0 losses; t = 0.6 / (0.498 / sqrt 30) = 6.6, beyond any critical value): only "e" is tied.
    b = _won(3)
    runs = [run("a", recall_at_5=BASE), run("b", recall_at_5=b), run("c", recall_at_5=BASE)]
    result = compare_runs(runs, resamples=5000)
    assert {c.run.run_id[0] for c in result.comparisons if c.tied} == {"a", "b", "c"}
    e = [1.0] * 18 + [0.0] * 12
    strong = [run("a", recall_at_5=[0.0] * 30), run("b", recall_at_5=[0.0] * 30), run("e", recall_at_5=e)]
    strong += [run("f", recall_at_5=[0.0] * 30)]
    result = compare_runs(strong, resamples=5000)
    assert [c.run.run_id[0] for c in result.comparisons if c.tied] == ["e"]
    assert cell(result, "recall_at_5", "e").rank == "1 [1]" and cell(result, "recall_at_5", "e").significant
    # Two runs: the baseline test already says it all, no tied column.
    assert not any(c.tied for c in compare_runs(runs[:2], resamples=200).comparisons)
