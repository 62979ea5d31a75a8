"""Which cases a change won and lost: the per-case view of `evalpipe compare --cases`.

A mean says how much a run moved; the cases say why. For one metric, each case where the
run is better than the baseline is a win, worse a loss; equal cases are counted, not listed.
`first_rank` (the rank of the first relevant hit, 0 = not found in the top K) counts as
better when lower, with 0 worse than any rank. Each listed case carries its query, expected
IDs and the top of both rankings, so a loss can be read without opening the run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
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


# --- output ------------------------------------------------------------------------------------


def _value(metric: str, value: float) -> str:
    if metric == "first_rank":
        return "not found" if value <= 0 else f"rank {value:.0f}"
    return f"{value:.4g}"


def tier_rows(diff: CaseDiff) -> tuple[list[str], list[list[str]]]:
    header = ["tier", "won", "lost", "unchanged"]
    body = [[t, str(w), str(lo), str(u)] for t, (w, lo, u) in diff.per_tier.items()]
    total = [str(len(diff.won)), str(len(diff.lost)), str(diff.unchanged)]
    return header, body + [["all", *total]]


def case_rows(diff: CaseDiff, sep: str = ", ") -> tuple[list[str], list[list[str]]]:
    """Losses first (what a change breaks is what needs reading), each by tier in case order."""
    header = ["outcome", "tier", "case", "query", "expected", "baseline", "run", "baseline top", "run top"]
    body = []
    for change in sorted(diff.lost, key=lambda c: c.tier) + sorted(diff.won, key=lambda c: c.tier):
        body.append(
            [
                "won" if change.won else "lost",
                change.tier,
                change.case_id,
                change.query,
                sep.join(change.expected),
                _value(diff.metric, change.baseline_value),
                _value(diff.metric, change.run_value),
                sep.join(change.baseline_top),
                sep.join(change.run_top),
            ]
        )
    return header, body


def title(diff: CaseDiff) -> str:
    return (
        f"{diff.run} vs {diff.baseline} on {diff.metric}: {len(diff.won)} won, {len(diff.lost)} lost, "
        f"{diff.unchanged} unchanged"
    )


def markdown(diffs: Sequence[CaseDiff]) -> str:
    from evalpipe.reporting.report import markdown_table

    out = ["# evalpipe compare: cases won and lost", ""]
    for diff in diffs:
        out += [f"## {_md(title(diff))}", ""]
        out += markdown_table(*tier_rows(diff)) + [""]
        header, body = case_rows(diff)
        if body:
            out += markdown_table(header, [[_md(c) for c in row] for row in body]) + [""]
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(diffs: Sequence[CaseDiff]) -> dict[str, list[Any]]:
    """One row per won/lost case of every diff, as columns for mlflow.log_table (diff.json)."""
    columns: dict[str, list[Any]] = {
        k: []
        for k in (  # what a reader scans first leads: the UI shows the first columns
            "outcome",
            "tier",
            "case_id",
            "query",
            "expected",
            "baseline_value",
            "run_value",
            "baseline_top",
            "run_top",
            "metric",
            "run",
            "baseline",
        )
    }
    for diff in diffs:
        for change in diff.lost + diff.won:
            for key, value in (
                ("run", diff.run),
                ("baseline", diff.baseline),
                ("metric", diff.metric),
                ("outcome", "won" if change.won else "lost"),
                ("tier", change.tier),
                ("case_id", change.case_id),
                ("query", change.query),
                ("expected", ", ".join(change.expected)),
                ("baseline_value", change.baseline_value),
                ("run_value", change.run_value),
                ("baseline_top", ", ".join(change.baseline_top)),
                ("run_top", ", ".join(change.run_top)),
            ):
                columns[key].append(value)
    return columns


def print_diffs(console: Any, diffs: Sequence[CaseDiff], limit: int = 40) -> None:
    """Per tier counts, then the cases (losses first, at most `limit` per diff; diff.md has all)."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    for diff in diffs:
        console.print(f"[bold]{escape(title(diff))}[/]", highlight=False)
        counts = Table(box=box.SIMPLE_HEAD)
        header, body = tier_rows(diff)
        for i, h in enumerate(header):
            counts.add_column(h, justify="left" if i == 0 else "right")
        for row in body:
            counts.add_row(*(escape(c) for c in row))
        console.print(counts)
        header, body = case_rows(diff, sep="\n")
        if not body:
            continue
        cases = Table(box=box.SIMPLE_HEAD, show_lines=True)
        for h in header:
            cases.add_column(h, overflow="fold")
        for row in body[:limit]:
            style = "green" if row[0] == "won" else "red"
            cases.add_row(*(escape(c) for c in row), style=style)
        console.print(cases)
        if len(body) > limit:
            console.print(
                f"... {len(body) - limit} more cases (all of them: --markdown, or diff.md with --log)"
            )
