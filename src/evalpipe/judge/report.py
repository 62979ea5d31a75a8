"""How judged figures are shown: strict beside judged, with who judged and how far to trust it.

The same table goes to the terminal and report.md; the positive verdicts go to
`judged.tsv`, a file meant to be reviewed by a person and merged into the fixture
(`evalpipe merge-judgements`), and every verdict with its reason or error to
`judgements.jsonl`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from evalpipe.reporting.report import DASH, markdown_table, pct

TSV_COLUMNS = ("case_id", "unit_id", "grade", "rank", "reason")


def comparison_table(
    strict_overall: Mapping[str, float],
    strict_tiers: Mapping[str, Mapping[str, float]],
    judged_overall: Mapping[str, float],
    judged_tiers: Mapping[str, Mapping[str, float]],
    ks: Sequence[int],
) -> tuple[list[str], list[list[str]]]:
    """One row for all cases and one per tier; strict and judged side by side at each K and MRR."""
    header = ["slice", "cases"]
    for k in ks:
        header += [f"R@{k}", f"judged R@{k}"]
    header += ["MRR", "judged MRR"]
    n_all = strict_overall.get("judged_cases", strict_overall.get("cases", 0.0))
    rows = [("all", strict_overall, judged_overall, n_all)]
    for tier, figures in strict_tiers.items():
        if tier in judged_tiers:
            rows.append((tier, figures, judged_tiers[tier], figures.get("cases", 0.0)))
    body = []
    for name, strict, judged, n in rows:
        line = [name, f"{n:.0f}"]
        for k in ks:
            line += [_pct(strict.get(f"recall_at_{k}")), _pct(judged.get(f"judged_recall_at_{k}"))]
        line += [_num(strict.get("mrr")), _num(judged.get("judged_mrr"))]
        body.append(line)
    return header, body


def _pct(x: float | None) -> str:
    return DASH if x is None else pct(x)


def _num(x: float | None) -> str:
    return DASH if x is None else f"{x:.3f}"


def summary_lines(outcome: Any) -> list[str]:
    """Who judged, how much it cost, and (when asked) how it agreed with the labels."""
    st = outcome.stats
    scope = "every unlabelled top-K candidate (pool)" if outcome.pool else "the misses' unlabelled candidates"
    lines = [
        f"Judged by `{outcome.judge_label}` with prompt `{outcome.prompt_version}`, asked about {scope}: "
        f"{st.questions} questions, {st.calls} calls, {st.cache_hits} cached, "
        f"{len(outcome.positives)} relevant, {st.errors} errors, {st.unjudged} not judged "
        f"({st.tokens_in} tokens in, {st.tokens_out} out, {st.seconds:.1f} s).",
    ]
    if st.budget_reached:
        lines.append(
            f"The budget judge.max_calls={outcome.max_calls} was reached: {st.unjudged} left unjudged."
        )
    if st.stopped:
        lines.append(st.stopped)
    cal = outcome.calibration
    if cal is not None:
        lines.append(
            f"Calibration on {cal.n} labelled pairs: precision {cal.precision:.3f}, recall {cal.recall:.3f}, "
            f"Cohen's kappa {cal.kappa:.3f} (tp {cal.tp}, fp {cal.fp}, fn {cal.fn}, tn {cal.tn}, "
            f"{cal.errors} without a verdict)."
        )
    return lines


def markdown_section(outcome: Any, ks: Sequence[int]) -> str:
    table = comparison_table(
        outcome.scores.overall, outcome.scores.per_tier, outcome.judged.overall, outcome.judged.per_tier, ks
    )
    out = ["## Judged figures", ""]
    out += [
        "Strict figures count only the fixture's labels; judged figures also count a candidate "
        "the fixture does not label and the judge called relevant.",
        "",
    ]
    out += summary_lines(outcome) + [""] + markdown_table(*table) + [""]
    return "\n".join(out)


def print_section(console: Any, outcome: Any, ks: Sequence[int]) -> None:
    from rich import box
    from rich.table import Table

    header, body = comparison_table(
        outcome.scores.overall, outcome.scores.per_tier, outcome.judged.overall, outcome.judged.per_tier, ks
    )
    table = Table(title="strict vs judged", title_justify="left", box=box.SIMPLE_HEAD)
    for i, h in enumerate(header):
        table.add_column(h, justify="left" if i == 0 else "right")
    for row in body:
        table.add_row(*row)
    console.print(table)
    for line in summary_lines(outcome):
        console.print(line.replace("`", ""), highlight=False)


def judged_tsv(outcome: Any) -> str:
    """The judge's positive verdicts, qrels-style, for review: delete a line (or set grade 0) to reject it."""
    head = [
        f"# Positive verdicts of {outcome.judge_label}, prompt {outcome.prompt_version}, on the fixture's",
        "# unlabelled candidates. Review, delete rows you reject (or set grade 0), then merge:",
        "#   evalpipe merge-judgements FIXTURE.yaml judged.tsv -o FIXTURE_vN.yaml",
        "\t".join(TSV_COLUMNS),
    ]
    rows = [
        "\t".join([p.case_id, p.unit_id, "1", str(p.rank), " ".join(p.reason.split()) or "-"])
        for p in outcome.positives
    ]
    return "\n".join(head + rows) + "\n"


def judgements_jsonl(records: Sequence[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(dict(r), ensure_ascii=False) + "\n" for r in records)
