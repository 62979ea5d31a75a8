"""A ranked result: the value every ranker returns and every scorer, writer and reader of run
files shares, so it lives below all of them (a TREC run-file reader needs it without rankers)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked result. `score` is None when a ranker only returns an order.

    Slotted: a 100k-case run holds millions of hits, and without a per-hit `__dict__`
    they take half the memory and scoring reads their IDs about twice as fast.
    """

    id: str
    score: float | None = None
