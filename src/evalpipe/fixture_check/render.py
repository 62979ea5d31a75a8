"""The checker's output: rich tables for a person, a JSON document for tools and review."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from evalpipe.fixture_check.check import CaseCheck, FixtureCheck
from evalpipe.fixture_check.detectable import CHANGES, method_line, tier_power

QUERY_WIDTH = 70


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _short(text: str, width: int = QUERY_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def tier_table(report: FixtureCheck) -> Table:
    title = Text(f"Fixture check: {report.name} ({report.source})")
    table = Table(title=title, title_justify="left")
    for col in (
        "tier",
        "kind",
        "cases",
        "overlap",
        "overlap stemmed",
        "phrase ≥2",
        "name leak full/part",
        "needs relation",
        "expected mean/max",
        "with candidates",
        "flagged",
    ):
        table.add_column(col, justify="left" if col == "tier" else "right")
    for t in report.tiers:
        table.add_row(
            Text(t.tier),
            t.kind,
            str(t.cases),
            f"{t.mean_overlap:.2f}",
            f"{t.mean_overlap_stemmed:.2f}",
            _pct(t.phrase_share),
            f"{_pct(t.full_leak_share)} / {_pct(t.partial_leak_share)}",
            _pct(t.needs_relation_share),
            f"{t.mean_expected:.1f} / {t.max_expected}",
            str(t.candidates) if report.ambiguity else "-",
            f"{t.flagged} ({_pct(t.flagged_share)})",
        )
    return table


def _tier_power(report: FixtureCheck):
    return tier_power([(t.tier, t.cases) for t in report.tiers])


def power_table(report: FixtureCheck) -> Table:
    """Per tier: the smallest change it detects, and the cases a 5- and a 2-point change need."""
    table = Table(title=Text(f"What each tier can detect: {method_line()}"), title_justify="left")
    for col in ("tier", "cases", "detects >=", *(f"cases for {c * 100:g} points" for c in CHANGES)):
        table.add_column(col, justify="left" if col == "tier" else "right")
    for t in _tier_power(report):
        needed = [str(t.needed[c]) if t.needed[c] is not None else "> 200000" for c in CHANGES]
        table.add_row(Text(t.tier), str(t.cases), t.mde.text(), *needed)
    return table


def cases_table(checks: list[CaseCheck], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("case (line)")
    table.add_column("tier")
    table.add_column("query", max_width=QUERY_WIDTH)
    table.add_column("stem ovl", justify="right")
    table.add_column("phrase")
    table.add_column("leak")
    table.add_column("flags")
    for c in checks:
        leak = c.leak_level if c.leak_level == "none" or c.leak is None else f"{c.leak_level}: {c.leak.name}"
        flags = "; ".join(c.flags) or ("name match: " + c.name_matched if c.name_matched else "")
        cells = (
            f"{c.case_id} ({c.line})" if c.line else c.case_id,
            c.tier,
            _short(c.query),
            f"{c.overlap_stemmed:.2f}",
            " ".join(c.phrase),
            leak,
            flags,
        )
        table.add_row(*(Text(cell) for cell in cells))  # Text: a query's [brackets] are not markup
    return table


def candidates_table(checks: list[CaseCheck], strong_only: bool) -> Table:
    title = "Strong ambiguity candidates (judge them: add to expected, or list with grade 0)"
    table = Table(title=title if strong_only else "Ambiguity candidates for review", title_justify="left")
    table.add_column("case")
    table.add_column("candidate unit")
    table.add_column("reasons")
    table.add_column("rank", justify="right")
    for c in checks:
        for cand in c.candidates:
            if strong_only and not cand.strong:
                continue
            cells = (c.case_id, cand.unit_id, ", ".join(cand.reasons), str(cand.rank or ""))
            table.add_row(*(Text(cell) for cell in cells))
    return table


def print_report(
    console: Console, report: FixtureCheck, show_all: bool = False, show_candidates: bool = False
) -> None:
    console.print(tier_table(report))
    console.print(power_table(report))
    flagged = report.flagged_cases
    if show_all:
        console.print(cases_table(list(report.cases), "Every case"))
    elif flagged:
        console.print(cases_table(flagged, f"Flagged cases ({len(flagged)})"))
    if report.ambiguity:
        with_strong = [c for c in report.cases if any(f.startswith("ambiguous:") for f in c.flags)]
        with_any = [c for c in report.cases if c.candidates]
        if show_candidates and with_any:
            console.print(candidates_table(with_any, strong_only=False))
        elif with_strong:
            console.print(candidates_table(with_strong, strong_only=True))
        shown = sum(1 for c in with_strong for x in c.candidates if x.strong)
        others = sum(len(c.candidates) for c in report.cases) - shown
        if others and not show_candidates:
            console.print(
                f"{others} weaker candidate(s) not shown: --candidates lists them, --json keeps all."
            )
    else:
        console.print("ambiguity candidates not computed (--no-ambiguity)")
    for line in report.tier_flags:
        console.print(Text.assemble(("tier flag: ", "red"), line))
    if not flagged and not report.tier_flags:
        console.print("[green]no flags[/]")


def report_json(report: FixtureCheck) -> dict[str, Any]:
    """Everything measured, per case and per tier, with the thresholds that were applied."""
    cases = []
    for c in report.cases:
        item = asdict(c)
        item.update(
            overlap=c.overlap,
            overlap_stemmed=c.overlap_stemmed,
            phrase=list(c.phrase),
            phrase_words=c.phrase_words,
            name_leak=c.leak_level,
            needs_relation=c.needs_relation if report.kinds.get(c.tier) == "relational" else None,
        )
        cases.append(item)
    summaries = []
    for t in report.tiers:
        item = asdict(t)
        item["flagged_share"] = t.flagged_share
        summaries.append(item)
    return {
        "fixture": report.name,
        "source": report.source,
        "sha256": report.sha256,
        "version": report.version,
        "ambiguity_rankers": list(report.ambiguity),
        "ambiguity_ranker_config": dict(report.ambiguity_config),
        "tier_kinds": dict(report.kinds),
        "thresholds": {t: asdict(limits) for t, limits in report.thresholds.items()},
        "tiers": summaries,
        "tier_flags": report.tier_flags,
        "detectable": {
            "method": method_line(),
            "tiers": [
                {
                    "tier": t.tier,
                    "cases": t.cases,
                    "mde": t.mde.mde if t.mde.detectable else None,
                    "cases_needed": {f"{c:g}": t.needed[c] for c in CHANGES},
                }
                for t in _tier_power(report)
            ],
        },  # fmt: skip
        "flagged_cases": [c.case_id for c in report.flagged_cases],
        "cases": cases,
    }


def write_json(report: FixtureCheck, path: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(report_json(report), fh, indent=2, ensure_ascii=False)
        fh.write("\n")
