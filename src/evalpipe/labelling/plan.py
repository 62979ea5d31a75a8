"""From MDE to a plan: how many more cases each tier needs to detect a 5-point change, and the
labelling time that costs.

Per tier, the smallest change the paired test detects is `stats.power.one_run` on the first
run's per-case figure (its objective, R@K at the pool depth), and the cases it needs for a
change of `delta` is `stats.power.cases_needed` with that spread (docs/power.md). A new case
costs, in labels, the mean number of pool candidates per case of this batch (what judging a
new case's pool at this depth asks), at the measured seconds per label: the median time per
verdict given through `evalpipe label` in the labels files beside the batch, or a stated
assumption when none was timed yet.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from evalpipe.judge.batch import read_labels
from evalpipe.stats import power

DELTA = 0.05
#: Seconds per label assumed until one was timed through the page (said so wherever it is used).
ASSUMED_SECONDS = 30.0


@dataclass(frozen=True)
class TierPlan:
    tier: str
    cases: int
    mde: float
    needed: int | None  # total cases for DELTA (None: not within the limit)

    @property
    def more(self) -> int | None:
        return None if self.needed is None else max(0, self.needed - self.cases)


def tier_plans(
    values: Mapping[str, float], tier_of: Mapping[str, str], delta: float = DELTA
) -> list[TierPlan]:
    """One plan per tier from one run's per-case values {case: value} and the case tiers."""
    by_tier: dict[str, list[float]] = {}
    for cid, v in values.items():
        if cid in tier_of:
            by_tier.setdefault(tier_of[cid], []).append(v)
    out = []
    for tier, vals in by_tier.items():
        det = power.one_run(vals)
        out.append(TierPlan(tier, len(vals), det.mde, power.cases_needed(delta, det)))
    return out


def seconds_per_label(folder: Path) -> tuple[float, int]:
    """Median seconds per verdict given through the page in `folder`'s labels files, and how many
    were timed; (ASSUMED_SECONDS, 0) when none was."""
    times = [
        lab.seconds
        for path in sorted(folder.glob("*.labels.jsonl"))
        for lab in read_labels(path)
        if lab.how == "page" and lab.grade is not None and lab.seconds > 0
    ]
    return (statistics.median(times), len(times)) if times else (ASSUMED_SECONDS, 0)


def plan_lines(
    plans: Sequence[TierPlan], per_case: float, seconds: float, timed: int, metric: str, delta: float = DELTA
) -> list[str]:
    how = (
        f"{seconds:.1f} s per label (median of {timed} timed through evalpipe label)"
        if timed
        else (f"{seconds:.0f} s per label (assumed: none timed yet; `evalpipe label` measures it)")
    )
    lines = [
        f"to detect a {delta * 100:g}-point change of {metric} (power 0.8, alpha 0.05, one-run model, "
        f"docs/power.md), at {per_case:.1f} labels per new case and {how}:"
    ]
    for p in plans:
        if p.needed is None:
            lines.append(
                f"  {p.tier}: {p.cases} cases, detects {p.mde * 100:.1f} points; not within 200,000 cases"
            )
            continue
        hours = (p.more or 0) * per_case * seconds / 3600
        lines.append(
            f"  {p.tier}: {p.cases} cases, detects {p.mde * 100:.1f} points; needs {p.needed} "
            f"({p.more} more, ~{hours:.1f} h of labelling)"
        )
    return lines
