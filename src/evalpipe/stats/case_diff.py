"""Which cases a change won and lost: the per-case view of `evalpipe compare --cases` and the gate.

A mean says how much a run moved; the cases say why. For one metric, each case where the
run is better than the baseline is a win, worse a loss; equal cases are counted, not listed.
`first_rank` (the rank of the first relevant hit, 0 = not found in the top K) counts as
better when lower, with 0 worse than any rank. Each listed case carries its query, expected
IDs and the top of both rankings, so a loss can be read without opening the run. How a diff is
shown (terminal, Markdown, the diff.json table) is `evalpipe.reporting.case_diff_view`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TOP = 3


@dataclass(frozen=True)
class CaseInfo:
    """What a run's cases.json says about one case beyond its metric values."""

    tier: str = ""
    query: str = ""
    expected: tuple[str, ...] = ()
    top: tuple[str, ...] = ()


@dataclass(frozen=True)
class CaseChange:
    case_id: str
    tier: str
    query: str
    expected: tuple[str, ...]
    baseline_value: float
    run_value: float
    baseline_top: tuple[str, ...]
    run_top: tuple[str, ...]
    won: bool


@dataclass(frozen=True)
class CaseDiff:
    """The cases `run` won and lost against `baseline` on `metric`, and counts per tier."""

    metric: str
    baseline: str
    run: str
    won: tuple[CaseChange, ...]
    lost: tuple[CaseChange, ...]
    unchanged: int
    #: tier -> (won, lost, unchanged)
    per_tier: Mapping[str, tuple[int, int, int]] = field(default_factory=dict)


def case_info(row: Mapping[str, Any]) -> CaseInfo:
    """A CaseInfo from one cases.json row ({column: value}); `expected` and `top` are JSON text."""

    def ids(text: Any, relevant_only: bool) -> tuple[str, ...]:
        try:
            value = json.loads(text) if isinstance(text, str) else text
        except ValueError:
            return ()
        if isinstance(value, dict):
            return tuple(str(k) for k, g in value.items() if not relevant_only or (g or 0) > 0)
        return tuple(str(x) for x in value or ())

    return CaseInfo(
        tier=str(row.get("tier") or ""),
        query=str(row.get("query") or ""),
        expected=ids(row.get("expected"), True),
        top=ids(row.get("top"), False),
    )


def _key(metric: str, value: float) -> float:
    """A value where higher is better: first_rank is negated, and 0 (not found) is worst."""
    if metric == "first_rank":
        return -math.inf if value <= 0 else -value
    return value


def case_diff(
    metric: str,
    baseline: str,
    base_values: Mapping[str, float],
    base_info: Mapping[str, CaseInfo],
    run: str,
    run_values: Mapping[str, float],
    run_info: Mapping[str, CaseInfo],
    top: int = TOP,
) -> CaseDiff:
    """Cases with a value in both runs, in the baseline's order, split into won / lost / unchanged."""
    won: list[CaseChange] = []
    lost: list[CaseChange] = []
    tiers: dict[str, list[int]] = {}
    unchanged = 0
    for case_id, b in base_values.items():
        if case_id not in run_values:
            continue
        r = run_values[case_id]
        bi = base_info.get(case_id, CaseInfo())
        ri = run_info.get(case_id, CaseInfo())
        tier = bi.tier or ri.tier
        counts = tiers.setdefault(tier, [0, 0, 0])
        kb, kr = _key(metric, b), _key(metric, r)
        if kr == kb:
            unchanged += 1
            counts[2] += 1
            continue
        change = CaseChange(
            case_id,
            tier,
            bi.query or ri.query,
            bi.expected or ri.expected,
            b,
            r,
            bi.top[:top],
            ri.top[:top],
            kr > kb,
        )
        (won if change.won else lost).append(change)
        counts[0 if change.won else 1] += 1
    per_tier = {t: (c[0], c[1], c[2]) for t, c in tiers.items()}
    return CaseDiff(metric, baseline, run, tuple(won), tuple(lost), unchanged, per_tier)
