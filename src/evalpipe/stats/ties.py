"""Tied with the best: every point not significantly worse than the top one, after correction.

A sweep names one best point, but the per-case noise of a fixture of a few hundred cases
makes several points indistinguishable from it; "best" is then first among equals. The
group is: the best point (highest mean), plus each other point whose paired test against the
best is not significant at alpha after correcting over the family of those comparisons.
The p-values come from the caller (the paired randomization test of `evalpipe compare`),
so this module decides and does not test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evalpipe.stats.corrections import DEFAULT_METHOD, adjust


@dataclass(frozen=True)
class Ties:
    """Which points are tied with the best (indices into the caller's list)."""

    best: int
    tied: tuple[int, ...]
    #: per point: raw and adjusted p of "differs from the best" (None for the best itself)
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
) -> Ties:
    """The tied group from each point's mean and its paired p-value against the best.

    `best` defaults to the highest mean (ties: the earliest point). `p_vs_best[best]` is ignored;
    a point with p None (it could not be paired with the best) is left out of the group and of
    the family.
    """
    if not means:
        raise ValueError("no points to rank")
    if best is None:
        best = max(range(len(means)), key=lambda i: (means[i], -i))
    family = [None if i == best else p for i, p in enumerate(p_vs_best)]
    adjusted = adjust(family, method)
    tied = tuple(i for i, p in enumerate(adjusted) if i == best or (p is not None and p >= alpha))
    return Ties(best, tied, tuple(family), tuple(adjusted), method, alpha)
