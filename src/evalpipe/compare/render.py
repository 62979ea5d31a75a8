"""How a comparison is shown: the terminal table and the Markdown of compare.md."""

from __future__ import annotations

from typing import Any

from evalpipe.stats.comparison import Result


def _ci(mean: float, lo: float, hi: float, signed: bool = False) -> str:
    f = "{:+.4f}" if signed else "{:.4f}"
    return f"{f.format(mean)} [{f.format(lo)}, {f.format(hi)}]"


def table_rows(result: Result, alpha: float) -> tuple[list[str], list[list[str]]]:
    level = f"{(1 - alpha) * 100:g}%"
    header = ["metric", "run", f"mean [{level} CI]", f"Δ vs baseline [{level} CI]", "p", "sig"]
    body = []
    for c in result.comparisons:
        if c.is_baseline:
            body.append([c.metric, c.run.label, _ci(c.mean, c.lo, c.hi), "(baseline)", "", ""])
            continue
        assert c.diff is not None and c.diff_lo is not None and c.diff_hi is not None
        body.append(
            [
                c.metric,
                c.run.label,
                _ci(c.mean, c.lo, c.hi),
                _ci(c.diff, c.diff_lo, c.diff_hi, signed=True),
                f"{c.p_value:.4f}",
                "*" if c.significant else "",
            ]
        )
    return header, body


def caption(result: Result, resamples: int, alpha: float) -> str:
    return (
        f"{len(result.runs)} runs · {len(result.cases)} common cases · baseline {result.baseline.label} · "
        f"{resamples} resamples · * = paired randomization p < {alpha:g} "
        "(not corrected for multiple comparisons)"
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
