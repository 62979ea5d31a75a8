"""How a case diff (`evalpipe.stats.case_diff`) is shown: the terminal tables, the Markdown of
diff.md and the columns of the diff.json table, shared by `evalpipe compare --cases` and the gate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalpipe.stats.case_diff import CaseDiff


def value_text(metric: str, value: float) -> str:
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
                value_text(diff.metric, change.baseline_value),
                value_text(diff.metric, change.run_value),
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
    # lazy: evalpipe.reporting.report, numpy, yaml, ~106 ms
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
    # lazy: rich, ~44 ms
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
