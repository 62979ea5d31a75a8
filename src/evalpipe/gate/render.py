"""The gate's report: a Markdown table (metric, tier, baseline, candidate, delta, CI, p, verdict)
plus the cases lost and won, for the terminal, a file, a GitHub step summary and MLflow.

The same rows feed all of them, so the PR comment, the CI log and the MLflow gate run agree.
Both halves of a verdict are shown: the delta beside the allowed drop, the p beside alpha.
"""

from __future__ import annotations

import json
from typing import Any

from evalpipe.gate.verdict import FixtureGate, GateResult, Row
from evalpipe.stats.corrections import DESCRIPTION, family_alpha
from evalpipe.stats.power import RHO, min_changed

VERDICT_TEXT = {
    "regression": "REGRESSION",
    "noise": "drop within noise",
    "untestable": "drop, too few cases to test",
    "allowed": "within allowed drop",
    "improved": "improved",
    "better": "better (not significant)",
    "unchanged": "unchanged",
}
#: The most lost/won cases printed per fixture in the terminal (the file has every one).
PRINT_LIMIT = 40


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def headline(result: GateResult) -> str:
    n = len(result.regressions)
    if n:
        where = "; ".join(f"{r.metric} on {r.key.fixture}/{r.tier}" for r in result.regressions[:4])
        more = f" and {n - 4} more" if n > 4 else ""
        return f"FAIL: {n} regression{'s' if n != 1 else ''} ({where}{more})"
    return "PASS: no regression beyond the allowed drop that the paired test calls real"


def rules_line(result: GateResult) -> str:
    rules = result.rules
    drops = ", ".join(f"{m} {d:g}" for m, d in sorted(rules.max_drops.items()))
    drop = f"allowed drop {rules.max_drop:g}" + (f" ({drops})" if drops else "")
    return (
        f"{drop} · alpha {rules.alpha:g} (paired randomization test, two-sided, {rules.resamples} "
        f"resamples, seed {rules.seed}; p adjusted over the {len(result.rows)} rows: "
        f"{DESCRIPTION[rules.correction]}) · CI {(1 - rules.alpha) * 100:g}% paired bootstrap per row (not "
        f"adjusted over the rows; the verdict uses the adjusted p) · "
        f"scope {rules.scope}"
    )


def mde_line(result: GateResult) -> str:
    """How the 'detects drops >=' column was computed (docs/power.md)."""
    rules = result.rules
    level = family_alpha(rules.alpha, len(result.rows), rules.correction)
    return (
        "detects >=: this gate can detect drops of at least this size: the smallest true drop the "
        f"row detects with power {rules.power:g} at alpha "
        f"{level:.3g} (the level a row is held to after the correction); 0/1 metrics: exact sign test on "
        "the discordant cases, graded: normal approximation on the per-case differences; spread from "
        f"the paired differences, or from the baseline with correlation {RHO:g} when fewer than "
        f"{min_changed(level)} cases changed (docs/power.md)"
    )


def _num(x: float) -> str:
    return f"{x:.4f}"


def row_cells(row: Row, with_fixture: bool) -> list[str]:
    cells = [str(row.key)] if with_fixture else []
    cells += [
        row.metric,
        row.tier,
        str(row.cases),
        _num(row.baseline),
        _num(row.candidate),
        f"{row.delta:+.4f}",
        f"[{row.ci[0]:+.4f}, {row.ci[1]:+.4f}]",
        f"{row.won}/{row.lost}",
        f"{row.p:.4f}",
        "" if row.p_adj is None else f"{row.p_adj:.4f}",
        f"{row.allowed:g}",
        row.mde.text() if row.mde is not None else "",
        VERDICT_TEXT.get(row.verdict, row.verdict),
    ]
    return cells


def header(result: GateResult) -> list[str]:
    adjusted = len(result.rows) > 1 and result.rules.correction != "none"
    # the verdict uses the p adjusted over the rows; the interval is per row: said on the row
    level = f"{(1 - result.rules.alpha) * 100:g}% CI" + (", not adjusted" if adjusted else "")
    cols = [
        "metric",
        "tier",
        "cases",
        "baseline",
        "candidate",
        "delta",
        level,
        "won/lost",
        "p",
        f"p {result.rules.correction}" if result.rules.correction != "none" else "p (raw)",
        "allowed drop",
        "detects >=",
        "verdict",
    ]
    return (["fixture"] if _suite(result) else []) + cols


def _suite(result: GateResult) -> bool:
    return len(result.fixtures) > 1


def data_lines(result: GateResult) -> list[str]:
    out = []
    for f in result.fixtures:
        d = f.baseline.data
        out.append(
            f"{f.key}: fixture sha256 {d.fixture_sha256[:12] or '?'}, corpus sha256 "
            f"{d.corpus_sha256[:12] or '?'}, split {d.split}"
            + (f", version {d.version}" if d.version else "")
            + f", {f.cases} cases"
        )
    return out


def _case_table(fixture: FixtureGate, limit: int | None = None) -> tuple[list[str], list[list[str]]]:
    # lazy: evalpipe.reporting.case_diff_view, ~2 ms
    from evalpipe.reporting.case_diff_view import case_rows

    head, body = case_rows(fixture.diff)
    head = ["candidate" if h == "run" else "candidate top" if h == "run top" else h for h in head]
    return head, body[:limit] if limit is not None else body


def _diff_title(fixture: FixtureGate) -> str:
    diff = fixture.diff
    return (
        f"{fixture.key}: cases lost and won on {diff.metric}: {len(diff.lost)} lost, {len(diff.won)} won, "
        f"{diff.unchanged} unchanged"
    )


#: Lost/won cases listed per fixture in $GITHUB_STEP_SUMMARY (GitHub caps a step summary at 1 MiB).
SUMMARY_CASES = 200


def markdown(result: GateResult, case_limit: int | None = None) -> str:
    """The report as Markdown; `case_limit` lists at most that many lost/won cases per fixture."""
    # lazy: evalpipe.reporting.case_diff_view, evalpipe.reporting.report, yaml, ~47 ms
    from evalpipe.reporting.case_diff_view import tier_rows
    from evalpipe.reporting.report import markdown_table

    lines = [f"## evalpipe gate: {headline(result)}", ""]
    lines.append(f"Candidate **{_md(result.candidate.label)}** vs baseline **{_md(result.baseline.label)}**")
    lines += ["", f"_{_md(rules_line(result))}_", ""]
    if result.different_data:
        lines += ["> **Warning: compared on different data** (`--allow-different-data`):"]
        lines += [f"> - {_md(d)}" for f in result.fixtures for d in f.data_differences] + [""]
    body = []
    for row in result.rows:
        cells = [_md(c) for c in row_cells(row, _suite(result))]
        if row.failed:
            cells = [f"**{c}**" for c in cells]
        body.append(cells)
    lines += markdown_table(header(result), body) + [""]
    lines += [f"_{_md(mde_line(result))}_", ""]
    lines += [f"Data: {_md(line)}  " for line in data_lines(result)] + [""]
    for fixture in result.fixtures:
        lines += [f"### {_md(_diff_title(fixture))}", ""]
        head, counts = tier_rows(fixture.diff)
        lines += markdown_table(head, counts) + [""]
        head, cases = _case_table(fixture)
        if cases:
            shown = cases if case_limit is None else cases[:case_limit]
            lines += ["<details open><summary>lost and won cases</summary>", ""]
            lines += markdown_table(head, [[_md(c) for c in row] for row in shown])
            if len(shown) < len(cases):
                lines += [
                    "",
                    f"... {len(cases) - len(shown)} more cases in the full report (`--markdown` file)",
                ]
            lines += ["", "</details>", ""]
    if result.warnings:
        lines += ["### Warnings", ""] + [f"- {_md(w)}" for w in result.warnings] + [""]
    return "\n".join(lines)


def payload(result: GateResult) -> dict[str, Any]:
    """The result as JSON (gate.json): what a script reads instead of the table."""
    return {
        "passed": result.passed,
        "exit_code": result.exit_code,
        "headline": headline(result),
        "baseline": {"label": result.baseline.label, "run_id": result.baseline.run_id,
                     "origin": result.baseline.origin, "reference": result.baseline.reference},
        "candidate": {"label": result.candidate.label, "run_id": result.candidate.run_id,
                      "origin": result.candidate.origin, "reference": result.candidate.reference},
        "rules": result.rules.to_json(),
        "different_data": result.different_data,
        "rows": [
            {"fixture": r.key.fixture, "split": r.key.split, "metric": r.metric, "tier": r.tier,
             "cases": r.cases, "changed": r.changed, "baseline": r.baseline, "candidate": r.candidate,
             "delta": r.delta, "ci": list(r.ci), "won": r.won, "lost": r.lost, "p": r.p,
             "p_adjusted": r.p_adj, "allowed_drop": r.allowed, "verdict": r.verdict,
             "mde": r.mde.mde if r.mde is not None and r.mde.detectable else None,
             "mde_method": r.mde.method if r.mde is not None else None}
            for r in result.rows
        ],
        "fixtures": [
            {"fixture": f.key.fixture, "split": f.key.split, "baseline_run": f.baseline.run_id,
             "candidate_run": f.candidate.run_id, "data": f.baseline.data.to_json(),
             "data_differences": list(f.data_differences), "metric": f.diff.metric,
             "lost": [c.case_id for c in f.diff.lost], "won": [c.case_id for c in f.diff.won]}
            for f in result.fixtures
        ],
        "warnings": list(result.warnings),
    }  # fmt: skip


def to_json(result: GateResult) -> str:
    return json.dumps(payload(result), indent=1, ensure_ascii=False) + "\n"


def print_result(console: Any, result: GateResult, limit: int = PRINT_LIMIT) -> None:
    # lazy: rich, evalpipe.reporting.case_diff_view, ~46 ms
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from evalpipe.reporting.case_diff_view import tier_rows

    style = "bold red" if not result.passed else "bold green"
    console.print(f"[{style}]evalpipe gate: {escape(headline(result))}[/]", highlight=False)
    console.print(
        f"candidate {escape(result.candidate.label)} vs baseline {escape(result.baseline.label)}",
        highlight=False,
    )
    console.print(escape(rules_line(result)), highlight=False, soft_wrap=True)
    if result.different_data:
        console.print("[bold yellow]compared on DIFFERENT DATA (--allow-different-data):[/]")
        for f in result.fixtures:
            for d in f.data_differences:
                console.print(f"  [yellow]{escape(d)}[/]", soft_wrap=True)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for i, h in enumerate(header(result)):
        h = {"allowed drop": "allowed", "candidate": "cand."}.get(h, h)  # the CI log's 160 columns
        table.add_column(h, justify="left" if i < (3 if _suite(result) else 2) else "right", no_wrap=True)
    previous = None
    for row in result.rows:
        if previous is not None and (row.key, row.metric) != previous:
            table.add_section()
        previous = (row.key, row.metric)
        color = {"regression": "bold red", "noise": "yellow", "untestable": "yellow", "improved": "green"}
        table.add_row(*(escape(c) for c in row_cells(row, _suite(result))), style=color.get(row.verdict))
    console.print(table)
    console.print(escape(mde_line(result)), highlight=False, soft_wrap=True)
    for line in data_lines(result):
        console.print(f"data: {escape(line)}", highlight=False, soft_wrap=True)
    for fixture in result.fixtures:
        console.print(f"\n[bold]{escape(_diff_title(fixture))}[/]", highlight=False)
        counts = Table(box=box.SIMPLE_HEAD)
        head, body = tier_rows(fixture.diff)
        for i, h in enumerate(head):
            counts.add_column(h, justify="left" if i == 0 else "right")
        for r in body:
            counts.add_row(*(escape(c) for c in r))
        console.print(counts)
        changes = case_lines(fixture)
        for line in changes[:limit]:
            color = "green" if line.startswith("won") else "red"
            console.print(f"  [{color}]{escape(line)}[/]", highlight=False, soft_wrap=True)
        if len(changes) > limit:
            console.print(f"  ... {len(changes) - limit} more cases in the Markdown file")
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)


def case_lines(fixture: FixtureGate) -> list[str]:
    """One plain line per lost then won case (no table: a CI log must not fold case IDs)."""
    # lazy: evalpipe.reporting.case_diff_view, ~2 ms
    from evalpipe.reporting.case_diff_view import value_text

    diff = fixture.diff
    out = []
    for change in sorted(diff.lost, key=lambda c: c.tier) + sorted(diff.won, key=lambda c: c.tier):
        out.append(
            f"{'won ' if change.won else 'lost'} [{change.tier}] {change.case_id}: {change.query!r} · "
            f"baseline {value_text(diff.metric, change.baseline_value)} -> candidate "
            f"{value_text(diff.metric, change.run_value)} · expected {', '.join(change.expected) or '-'} · "
            f"candidate top {', '.join(change.run_top) or '(nothing)'}"
        )
    return out
