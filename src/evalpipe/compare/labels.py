"""Could a strict difference between two runs be the labels' doing? judged@k beside the comparison.

A strict figure counts every unlabelled item as wrong, so a run whose top k holds more
unlabelled items is held down by the labels, not (only) by its ranking: the pooling bias
against the ranker least like the labeller. Each compared metric at cutoff k (`mrr`: at
the depth, the largest k with a judged@k column) is checked against the runs' judged@k,
the share of their top k that carries a label, averaged over the compared cases.

The rule (docs/metrics.md#label-completeness): a run is flagged against the baseline on a
metric when their judged@k differ by at least `GAP` (5 points) **and** the strict
difference points the same way as the judged@k difference (the run with more labels in
its top k is the one that scores higher). Then the strict difference may be partly or
wholly the labels' doing; the warning gives both gaps and the condensed difference
(unlabelled items removed) when the runs have it. The completeness figures themselves
(judged@k, condensed, bpref, which ignores unlabelled items) are not checked. A difference
against the labels' lean (the less-labelled run wins) is not flagged: more labels could only
widen it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from evalpipe.stats.comparison import Result, RunCases

#: judged@k gap (share of the top k) from which a same-direction strict difference is flagged.
GAP = 0.05
_AT = re.compile(r"_at_(\d+)$")


def _mean(run: RunCases, column: str, cases: Sequence[str]) -> float | None:
    values = run.values.get(column)
    if values is None:
        return None
    got = [values[c] for c in cases if c in values and values[c] is not None]
    return sum(got) / len(got) if got else None


def cutoff(metric: str, run: RunCases) -> int | None:
    """The k whose judged@k speaks for `metric`: its own cutoff, or the depth for `mrr`."""
    m = _AT.search(metric)
    if m:
        return int(m.group(1))
    if metric == "mrr" or metric.endswith("/mrr"):
        ks = [int(name[len("judged_at_") :]) for name in run.values if re.fullmatch(r"judged_at_\d+", name)]
        return max(ks) if ks else None
    return None


def label_warnings(result: Result) -> list[str]:
    """One warning per (run, metric) whose strict difference from the baseline may be the labels'."""
    out = []
    base = result.baseline
    for c in result.comparisons:
        if (
            c.is_baseline
            or c.diff is None
            or c.diff == 0
            or c.metric.startswith(("judged_at_", "condensed_", "bpref"))
        ):
            continue
        k = cutoff(c.metric.rpartition("/")[2], base)
        if k is None:
            continue
        column = f"judged_at_{k}"
        mine, theirs = _mean(c.run, column, result.cases), _mean(base, column, result.cases)
        if mine is None or theirs is None:
            continue
        gap = mine - theirs
        if abs(gap) < GAP or (gap > 0) != (c.diff > 0):
            continue
        condensed = f"condensed_{c.metric}"
        cm, cb = _mean(c.run, condensed, result.cases), _mean(base, condensed, result.cases)
        cond = (
            f"; condensed {condensed} differs by {cm - cb:+.4f}" if cm is not None and cb is not None else ""
        )
        out.append(
            f"{c.metric}: {c.run.label} differs from {base.label} by {c.diff:+.4f}, and its judged@{k} is "
            f"{mine:.1%} against {theirs:.1%} ({gap * 100:+.1f} points, the same direction){cond}: "
            "the strict "
            f"difference may be the labels' doing (label the pool: evalpipe pool, docs/growing_fixtures.md)"
        )
    return out
