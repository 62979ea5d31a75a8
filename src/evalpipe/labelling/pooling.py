"""Which unlabelled candidates to judge, and in which order: the pool of several runs.

For each case, the union of every run's unlabelled candidates in its top `depth`, each
with the rank at which each run retrieved it. A candidate matters for a *comparison* only
as far as labelling it relevant would move the runs differently. So each candidate gets a
**priority**: the spread, across runs, of the reciprocal-rank gain a positive label would
give each run,

    gain_r = 1/rank_r - 1/first_r   when run r has it at rank_r above its first hit first_r
             (1/first_r = 0 when r found nothing), else 0
    priority = max_r gain_r - min_r gain_r          (one run: its gain)

A candidate only one run retrieved, high up, where that run missed, comes first; one that
every run has at the same rank, or below every run's first hit, changes no difference
and comes last (priority 0). Ties: higher best gain, then case and candidate ID.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evalpipe.judge.batch import Item
from evalpipe.labelling.runs import PooledRun


def gain(rank: int | None, first: int) -> float:
    """Reciprocal-rank gain of run with a candidate at `rank` (None: not retrieved), first hit `first`."""
    if rank is None or (first and rank >= first):
        return 0.0
    return 1.0 / rank - (1.0 / first if first else 0.0)


def _reason(ranks: Mapping[str, int | None]) -> str:
    have = [f"{label} @{r}" for label, r in ranks.items() if r is not None]
    lack = [label for label, r in ranks.items() if r is None]
    return "retrieved by " + ", ".join(have) + (f"; not by {', '.join(lack)}" if lack else "")


def pool(
    runs: Sequence[PooledRun],
    cases: Sequence[tuple[str, str, str, Mapping[str, int]]],
    depth: int,
) -> list[Item]:
    """The batch items for `cases` ((id, tier, query, labels) each), ordered by priority.

    Only cases every run scored are pooled (a pool of a case one run lacks would favour the
    others); a candidate the case already labels (any grade) is not asked again."""
    items: list[Item] = []
    for case_id, tier, query, labels in cases:
        if not all(case_id in r.ranked for r in runs):
            continue
        ranks: dict[str, dict[str, int]] = {}
        for r in runs:
            for pos, uid in enumerate(r.ranked[case_id][:depth], 1):
                if uid not in labels:
                    ranks.setdefault(uid, {}).setdefault(r.label, pos)
        for uid, have in ranks.items():
            per_run = {r.label: have.get(r.label) for r in runs}
            gains = [gain(per_run[r.label], r.first_rank.get(case_id, 0)) for r in runs]
            priority = max(gains) - (min(gains) if len(gains) > 1 else 0.0)
            items.append(Item(case_id, tier, query, uid, per_run, priority, _reason(per_run)))
    items.sort(
        key=lambda it: (-it.priority, -max(1.0 / r for r in it.runs.values() if r), it.case_id, it.candidate)
    )
    return items
