"""`top_k` selects before sorting; the ranking must be exactly the full sort's, ties included."""

from __future__ import annotations

import numpy as np
import pytest

from evalpipe.core import Unit
from evalpipe.corpus import Corpus
from evalpipe.rankers.base import top_k


def _corpus(n: int) -> Corpus:
    return Corpus([Unit(f"d{i}", "doc") for i in range(n)], name="ties")


def _full_sort(scores, k, mask=None, min_score=None, drop_nonpositive=False):
    """The pre-#13 rule spelled out: every eligible row ordered by (-score, row), first k."""
    rows = [
        i
        for i, s in enumerate(scores)
        if np.isfinite(s)
        and (mask is None or mask[i])
        and (not drop_nonpositive or s > 0)
        and (min_score is None or s >= min_score)
    ]
    rows.sort(key=lambda i: (-scores[i], i))
    return [(f"d{i}", float(scores[i])) for i in rows[:k]]


def test_hand_worked_ties_keep_corpus_order():
    scores = np.array([1.0, 3.0, 2.0, 3.0, 2.0, 0.0, 2.0])
    hits = top_k(_corpus(7), scores, 4, drop_nonpositive=True)
    # 3.0 at rows 1 and 3, then the 2.0 tie (rows 2, 4, 6) cut after its first member.
    assert [(h.id, h.score) for h in hits] == [("d1", 3.0), ("d3", 3.0), ("d2", 2.0), ("d4", 2.0)]


@pytest.mark.parametrize("seed", range(25))
def test_random_ties_match_the_full_sort(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    # few distinct values -> many ties straddling the k-th place; some -inf/nan and negatives
    scores = rng.integers(-2, 6, size=n).astype(np.float64)
    scores[rng.random(n) < 0.05] = np.nan
    scores[rng.random(n) < 0.05] = -np.inf
    mask = rng.random(n) < 0.8 if seed % 2 else None
    k = int(rng.integers(1, n + 5))
    min_score = 1.0 if seed % 3 == 0 else None
    drop = seed % 5 != 0
    got = [(h.id, h.score) for h in top_k(_corpus(n), scores, k, mask, min_score, drop)]
    assert got == _full_sort(scores, k, mask, min_score, drop)


def test_k_zero_and_nothing_eligible():
    assert top_k(_corpus(3), np.array([1.0, 2.0, 3.0]), 0) == []
    assert top_k(_corpus(2), np.array([0.0, -1.0]), 2, drop_nonpositive=True) == []
