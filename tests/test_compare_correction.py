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
