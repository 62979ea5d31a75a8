"""`evalpipe compare`: the `*` marks come from p adjusted over every run x metric cell."""

from __future__ import annotations

import pytest

from evalpipe.stats.comparison import CompareError, compare_runs
from test_compare import cell, run

BASE = [0.0] * 6 + [1.0] * 24


def _won(k: int) -> list[float]:
    return [1.0] * k + [0.0] * (6 - k) + [1.0] * 24


def test_a_lone_p_below_alpha_is_not_starred_after_holm_over_the_family():
    # Run "b" wins 6 cases and loses none: exact sign-flip p = 2 / 2^6 = 0.03125 < 0.05.
    # Runs "c" and "d" change nothing (p = 1). 3 runs x 2 metrics = 6 cells (the second metric
    # copies the first): Holm multiplies the smallest p (two cells at 0.031) by 6 and 5: > 0.05.
    runs = [run("a", recall_at_5=BASE, mrr=BASE)]
    runs += [run("b", recall_at_5=_won(6), mrr=_won(6))]
    runs += [run(x, recall_at_5=BASE, mrr=BASE) for x in ("c", "d")]
    raw = compare_runs(runs, resamples=20000, correction="none")
    holm = compare_runs(runs, resamples=20000)
    b_raw, b_holm = cell(raw, "recall_at_5", "b"), cell(holm, "recall_at_5", "b")
    assert b_raw.p_value == pytest.approx(2 / 64, abs=0.006) and b_raw.significant
    assert holm.family == 6
    assert b_holm.p_adj == pytest.approx(6 * b_holm.p_value) and not b_holm.significant
    assert (b_holm.won, b_holm.lost) == (6, 0)
    # BH: 0.031 * 6 / 2 for the two smallest (tied) p-values = 0.094: not significant either.
    assert not cell(compare_runs(runs, resamples=20000, correction="bh"), "mrr", "b").significant
    # Each cell says what it could detect, at alpha / 6.
    assert b_holm.mde is not None and b_holm.mde.alpha == pytest.approx(0.05 / 6)


def test_bad_correction_and_power_are_refused():
    runs = [run("a", recall_at_5=BASE), run("b", recall_at_5=_won(6))]
    with pytest.raises(CompareError, match="--correction: unknown correction 'x'"):
        compare_runs(runs, correction="x")
    with pytest.raises(CompareError, match="--power must be between 0 and 1"):
        compare_runs(runs, power=1.5)


def test_runs_tied_with_the_best_are_marked():
    # Per metric, the best run (highest mean) against each other run: "b" wins 6 of 30 over "a"
    # and "c" (p = 2/64 each, Holm over the 2 comparisons: 0.0625 -> both tied); "e" wins 12 more
    # cases than everyone (p = 2/2^12 against each, far below 0.05 / 3): only "e" is tied with itself.
    b = _won(6)
    runs = [run("a", recall_at_5=BASE), run("b", recall_at_5=b), run("c", recall_at_5=BASE)]
    result = compare_runs(runs, resamples=20000)
    assert {c.run.run_id[0] for c in result.comparisons if c.tied} == {"a", "b", "c"}
    e = [1.0] * 18 + [0.0] * 12
    strong = [run("a", recall_at_5=[0.0] * 30), run("b", recall_at_5=[0.0] * 30), run("e", recall_at_5=e)]
    strong += [run("f", recall_at_5=[0.0] * 30)]
    result = compare_runs(strong, resamples=20000)
    assert [c.run.run_id[0] for c in result.comparisons if c.tied] == ["e"]
    # Two runs: the baseline test already says it all, no tied column.
    assert not any(c.tied for c in compare_runs(runs[:2], resamples=200).comparisons)
