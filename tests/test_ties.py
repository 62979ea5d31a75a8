"""Tied with the best: which points the paired test cannot tell from the top one (after Holm)."""

from __future__ import annotations

import pytest

from evalpipe.stats.ties import tied_with_best


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
