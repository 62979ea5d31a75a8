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


PARTIAL_MARK = "≥"
LEGEND = (
    f"{PARTIAL_MARK} marks a partial judged figure: not every candidate that could change it was judged "
    "(budget, errors or a stop), and an unjudged candidate counts as not relevant, so it is a lower "
    f"bound; MLflow logs it as partial_judged_*. {DASH}: nothing judged."
)


def comparison_table(outcome: Any, ks: Sequence[int]) -> tuple[list[str], list[list[str]]]:
    """One row for all cases and one per tier: strict and judged side by side at each K and MRR, and
    the judge's coverage; a judged figure below full coverage is marked partial, and shown as `—`
    when nothing of its slice was judged."""
    strict_overall, strict_tiers = outcome.scores.overall, outcome.scores.per_tier
    judged_overall, judged_tiers = outcome.judged.overall, outcome.judged.per_tier
    cov = outcome.coverage
    header = ["slice", "cases"]
    for k in ks:
        header += [f"R@{k}", f"judged R@{k}"]
    header += ["MRR", "judged MRR", "judge coverage"]
    n_all = strict_overall.get("judged_cases", strict_overall.get("cases", 0.0))
    rows = [("all", strict_overall, judged_overall, n_all, cov.overall)]
    for tier, figures in strict_tiers.items():
        if tier in judged_tiers:
            rows.append(
                (tier, figures, judged_tiers[tier], figures.get("cases", 0.0), cov.per_tier.get(tier))
            )
    body = []
    for name, strict, judged, n, part in rows:
        state = part.state if part is not None else "full"
        line = [name, f"{n:.0f}"]
        for k in ks:
            line += [
                _pct(strict.get(f"recall_at_{k}")),
                _judged(judged.get(f"judged_recall_at_{k}"), state, _pct),
            ]
        line += [_num(strict.get("mrr")), _judged(judged.get("judged_mrr"), state, _num)]
        line.append(_coverage(part))
        body.append(line)
    return header, body


def _judged(x: float | None, state: str, fmt: Any) -> str:
    if x is None or state == "none":
        return DASH
    return fmt(x).strip() if state == "full" else PARTIAL_MARK + fmt(x).strip()


def _coverage(part: Any) -> str:
    if part is None:
        return DASH
    return f"{part.coverage:.1%} ({part.judged:,}/{part.pairs:,})"


def _pct(x: float | None) -> str:
    return DASH if x is None else pct(x)


def _num(x: float | None) -> str:
    return DASH if x is None else f"{x:.3f}"


def summary_lines(outcome: Any) -> list[str]:
    """Who judged, how much it judged and cost, and (when asked) how it agreed with the labels."""
    st = outcome.stats
    scope = "every unlabelled top-K candidate (pool)" if outcome.pool else "the misses' unlabelled candidates"
    lines = [
        f"Judged by `{outcome.judge_label}` at `{outcome.server}` with prompt `{outcome.prompt_version}`, "
        f"asked about {scope}: {st.questions:,} questions, budget {st.budget:,}, {st.calls:,} calls, "
        f"{st.cache_hits:,} cached, {len(outcome.positives):,} relevant, {st.errors:,} errors, "
        f"{st.unjudged:,} not judged ({st.tokens_in:,} tokens in, {st.tokens_out:,} out, "
        f"{st.seconds:.1f} s).",
        outcome.coverage.line()
        + (
            ": the judged figures are complete."
            if outcome.coverage.overall.full
            else f": the judged figures are partial ({PARTIAL_MARK}, a lower bound)."
        ),
    ]
    if st.budget_reached:
        lines.append(
            f"The budget judge.max_calls={st.budget:,} covers {st.questions - st.over_budget:,} of "
            f"{st.questions:,} questions (taken in a fixed order, whatever the cache holds): "
            f"{st.over_budget:,} not judged; raise judge.max_calls to judge them."
        )
    if st.stopped:
        lines.append(st.stopped[0].upper() + st.stopped[1:] + ".")
    trust = getattr(outcome, "trust", None)
    if trust is not None:
        lines.append(trust.line())
    cal = outcome.calibration
    if cal is not None:
        lines.append(
            f"Calibration on {cal.n} labelled pairs: precision {cal.precision:.3f}, recall {cal.recall:.3f}, "
            f"Cohen's kappa {cal.kappa:.3f} (tp {cal.tp}, fp {cal.fp}, fn {cal.fn}, tn {cal.tn}, "
            f"{cal.errors} without a verdict)."
        )
    return lines


def markdown_section(outcome: Any, ks: Sequence[int]) -> str:
    table = comparison_table(outcome, ks)
    out = ["## Judged figures", ""]
    out += [
        "Strict figures count only the fixture's labels; judged figures also count a candidate "
        "the fixture does not label and the judge called relevant.",
        "",
    ]
    out += summary_lines(outcome) + [""] + markdown_table(*table) + [""]
    if not outcome.coverage.overall.full:
        out += [LEGEND, ""]
    return "\n".join(out)


def print_section(console: Any, outcome: Any, ks: Sequence[int]) -> None:
    # lazy: rich, ~27 ms
    from rich import box
    from rich.table import Table

    header, body = comparison_table(outcome, ks)
    full = outcome.coverage.overall.full
    title = "strict vs judged" if full else "strict vs judged (PARTIAL: judge coverage below 100%)"
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for i, h in enumerate(header):
        table.add_column(h, justify="left" if i == 0 else "right")
    for row in body:
        table.add_row(*row)
    console.print(table)
    for line in summary_lines(outcome) + ([] if full else [LEGEND]):
        console.print(line.replace("`", ""), highlight=False, soft_wrap=True)


def not_judged_lines(reason: str) -> list[str]:
    return [f"Not judged: {reason}. The strict figures are complete; no judged figure was computed."]


def judged_tsv(outcome: Any) -> str:
    """The judge's positive verdicts, qrels-style, for review: delete a line (or set grade 0) to reject it."""
    head = [
        f"# judge: {outcome.judge_label}; prompt: {outcome.prompt_version}; judged: {outcome.date}",
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
