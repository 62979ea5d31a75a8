"""How a comparison is shown: the terminal table and the Markdown of compare.md."""

from __future__ import annotations

from typing import Any

from evalpipe.stats.comparison import Result
from evalpipe.stats.corrections import DESCRIPTION, family_alpha
from evalpipe.stats.ties import METHOD


def _ci(mean: float, lo: float, hi: float, signed: bool = False) -> str:
    f = "{:+.4f}" if signed else "{:.4f}"
    return f"{f.format(mean)} [{f.format(lo)}, {f.format(hi)}]"


def table_rows(result: Result, alpha: float) -> tuple[list[str], list[list[str]]]:
    level = f"{(1 - alpha) * 100:g}%"
    if result.all_pairs:  # 3+ runs: one all-pairs family; its intervals are simultaneous
        header = ["metric", "run", f"mean [{level} CI]", f"Δ vs baseline [{level} simultaneous]", "won/lost"]
        header += ["p adj (family)", "detects ±", "sig", f"rank [{level} simultaneous]", "tied"]
    else:
        adj = f"p {result.correction}" if result.correction != "none" else "p (raw)"
        diff = (
            f"Δ vs baseline [{level} CI, not adjusted]"
            if result.family > 1
            else f"Δ vs baseline [{level} CI]"
        )
        header = ["metric", "run", f"mean [{level} CI]", diff, "won/lost", "p", adj, "detects ±", "sig"]
    body = []
    for c in result.comparisons:
        tail = [c.rank, "=" if c.tied else ""] if result.all_pairs else []
        if c.is_baseline:
            blanks = 4 if result.all_pairs else 5
            body.append([c.metric, c.run.label, _ci(c.mean, c.lo, c.hi), "(baseline)", *[""] * blanks, *tail])
            continue
        assert c.diff is not None and c.diff_lo is not None and c.diff_hi is not None
        p = [] if result.all_pairs else [f"{c.p_value:.4f}"]
        body.append(
            [
                c.metric,
                c.run.label,
                _ci(c.mean, c.lo, c.hi),
                _ci(c.diff, c.diff_lo, c.diff_hi, signed=True),
                f"{c.won}/{c.lost}",
                *p,
                "" if c.p_adj is None else f"{c.p_adj:.4f}",
                c.mde.text() if c.mde is not None else "",
                "*" if c.significant else "",
                *tail,
            ]
        )
    return header, body


def caption(result: Result, resamples: int, alpha: float) -> str:
    if result.all_pairs:
        mde_alpha = next((c.mde.alpha for c in result.comparisons if c.mde is not None), alpha)
        parts = [
            f"{len(result.runs)} runs · {len(result.cases)} common cases · baseline {result.baseline.label}",
            f"one family: all {result.pairs} pairs of runs on every metric, {METHOD} ({resamples} resamples "
            f"and permutations), family-wise alpha {alpha:g}",
            f"* = the simultaneous interval of the difference excludes 0 (family-adjusted p < {alpha:g})",
            "tied = = no run is surely better on that metric (rank interval contains 1)",
            f"means: plain {100 * (1 - alpha):g}% bootstrap CIs (they decide nothing)",
            f"detects ± = the smallest true difference detected with power {result.power:g} at the level "
            f"one pair is held to in the family, alpha {mde_alpha:.3g} (docs/power.md)",
        ]
        return " · ".join(parts)
    corrected = (
        "not corrected for multiple comparisons"
        if result.correction == "none"
        else f"p adjusted over the {result.family} comparisons: {DESCRIPTION[result.correction]}"
    )
    level = family_alpha(alpha, result.family, result.correction)
    return (
        f"{len(result.runs)} runs · {len(result.cases)} common cases · baseline {result.baseline.label} · "
        f"{resamples} resamples · * = paired randomization p < {alpha:g} ({corrected}) · intervals: "
        f"{100 * (1 - alpha):g}% per comparison · detects ± = the smallest true difference detected with "
        f"power {result.power:g} at alpha {level:.3g} (docs/power.md)"
    )


def markdown(result: Result, resamples: int, alpha: float) -> str:
    # lazy: evalpipe.reporting.report, yaml, ~46 ms
    from evalpipe.reporting.report import markdown_table

    lines = ["# evalpipe compare", "", f"_{caption(result, resamples, alpha)}_", ""]
    lines += markdown_table(*table_rows(result, alpha))
    if result.warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in result.warnings]
    return "\n".join(lines) + "\n"


def print_table(console: Any, result: Result, resamples: int, alpha: float) -> None:
    # lazy: rich, ~38 ms
    from rich.markup import escape
    from rich.table import Table

    header, body = table_rows(result, alpha)
    body = [[escape(cell) for cell in row] for row in body]  # run names like "fields=[title]"
    table = Table(title=escape(caption(result, resamples, alpha)), title_justify="left")
    for i, h in enumerate(header):
        table.add_column(h, justify="left" if i < 2 else "right", no_wrap=i != 1)
    previous = None
    for row, c in zip(body, result.comparisons, strict=True):
        if previous is not None and c.metric != previous:
            table.add_section()
        previous = c.metric
        style = "bold green" if c.significant and (c.diff or 0) > 0 else "bold red" if c.significant else None
        table.add_row(*row, style=style)
    console.print(table)
