"""The Markdown report and terminal tables.

Stable order and fixed number formats so two reports diff cleanly: the same
layout as the seed harness (an overall table, a per-tier table), one row per
evaluated ranker, plus the standard IR and RAG figures when they were computed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from evalpipe.inputs.fixture import STOCK_TIERS
from evalpipe.scoring.run import RunScores

DASH = "—"
#: A measure that does not apply to a run (shown instead of a misleading 0).
NA = "n/a"


@dataclass(frozen=True)
class ReportRow:
    """One ranker's line in a report; `scores` is None when the ranker was skipped."""

    name: str
    scores: RunScores | None
    skipped: str = ""
    notes: Sequence[str] = field(default_factory=tuple)


def pct(x: float) -> str:
    return f"{x * 100:5.1f}%"


def tier_k(ks: Sequence[int]) -> int:
    """The cutoff shown in the per-tier table: 5 like the seed when present, else the middle K."""
    ks = sorted(ks)
    return 5 if 5 in ks else ks[len(ks) // 2]


def tier_columns(rows: Sequence[ReportRow], tier_counts: Mapping[str, int] | None = None) -> list[str]:
    """Stock tiers always (stable table shape), then extra tiers seen, sorted."""
    seen: set[str] = set(tier_counts or {})
    for r in rows:
        if r.scores is not None:
            seen.update(t for t, f in r.scores.per_tier.items() if f.get("cases", 0))
    return list(STOCK_TIERS) + sorted(seen - set(STOCK_TIERS))


def markdown_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("-" * (len(h) + 2) for h in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return lines


def overall_table(rows: Sequence[ReportRow], ks: Sequence[int]) -> tuple[list[str], list[list[str]]]:
    header = ["ranker"] + [f"R@{k}" for k in ks] + ["MRR", "p50 µs", "p95 µs", "max µs", "tokens/q", "errors"]
    body = []
    for r in sorted(rows, key=lambda r: r.name):
        s = r.scores
        if s is None:
            body.append([r.name] + [DASH] * (len(header) - 2) + [f"{DASH} (skipped: {r.skipped})"])
            continue
        body.append(
            [r.name]
            + [pct(s.overall[f"recall_at_{k}"]) if f"recall_at_{k}" in s.overall else DASH for k in ks]
            + [
                f"{s.overall['mrr']:.3f}" if "mrr" in s.overall else DASH,
                str(s.latency_us[0]),
                str(s.latency_us[1]),
                str(s.latency_us[2]),
                f"{s.mean_tokens:.0f}",
                str(s.errors),
            ]
        )
    return header, body


def tier_table(
    rows: Sequence[ReportRow], ks: Sequence[int], tiers: Sequence[str]
) -> tuple[list[str], list[list[str]]]:
    k = tier_k(ks)
    header = ["ranker"] + list(tiers)
    body = []
    for r in sorted(rows, key=lambda r: r.name):
        if r.scores is None:
            body.append([r.name] + [DASH] * len(tiers))
            continue
        body.append(
            [r.name]
            + [
                pct(r.scores.per_tier[t][f"recall_at_{k}"])
                if f"recall_at_{k}" in r.scores.per_tier.get(t, {})
                else DASH
                for t in tiers
            ]
        )
    return header, body


IR_FAMILIES = (("ndcg", "nDCG"), ("map", "MAP"), ("precision", "P"), ("frac_recall", "Recall"))


def ir_table(rows: Sequence[ReportRow], ks: Sequence[int]) -> tuple[list[str], list[list[str]]] | None:
    """nDCG / MAP / P / fractional recall: one line per ranker and metric, one column per K."""
    present = [
        (fam, label)
        for fam, label in IR_FAMILIES
        if any(r.scores is not None and f"{fam}_at_{ks[0]}" in r.scores.overall for r in rows)
    ]
    if not present:
        return None
    header = ["ranker", "metric"] + [f"@{k}" for k in ks]
    body = []
    for r in sorted(rows, key=lambda r: r.name):
        for fam, label in present:
            if r.scores is None:
                body.append([r.name, label] + [DASH] * len(ks))
            else:
                body.append([r.name, label] + [f"{r.scores.metric(f'{fam}_at_{k}'):.4f}" for k in ks])
    return header, body


def tier_detail_table(
    rows: Sequence[ReportRow], ks: Sequence[int], tiers: Sequence[str]
) -> tuple[list[str], list[list[str]]]:
    """Every tier at every K, with MRR: where the seed's R@5 table is too coarse."""
    header = ["ranker", "tier", "cases"] + [f"R@{k}" for k in ks] + ["MRR"]
    body = []
    for r in sorted(rows, key=lambda r: r.name):
        if r.scores is None:
            continue
        for t in tiers:
            figures = r.scores.per_tier.get(t, {})
            if not figures.get("cases"):
                continue
            body.append(
                [r.name, t, f"{figures['cases']:.0f}"]
                + [pct(figures[f"recall_at_{k}"]) if f"recall_at_{k}" in figures else DASH for k in ks]
                + [f"{figures['mrr']:.3f}" if "mrr" in figures else DASH]
            )
    return header, body


def labels_table(
    rows: Sequence[ReportRow], ks: Sequence[int], tiers: Sequence[str]
) -> tuple[list[str], list[list[str]]] | None:
    """How much of each ranking the labels see, beside the strict figures: judged@K (share of the
    top K with a label, positive or grade 0), bpref, the condensed R@K and MRR (unlabelled items
    removed), and judged@K of each tier at the per-tier cutoff (docs/metrics.md#label-completeness)."""
    if not any(r.scores is not None and f"judged_at_{ks[0]}" in r.scores.overall for r in rows):
        return None
    k = tier_k(ks)
    shown = [
        t
        for t in tiers
        if any(
            r.scores is not None and r.scores.per_tier.get(t, {}).get(f"judged_at_{k}") is not None
            for r in rows
        )
    ]
    header = (
        ["ranker"] + [f"judged@{x}" for x in ks] + ["bpref"] + [f"cond. R@{x}" for x in ks] + ["cond. MRR"]
    )
    header += [f"{t} judged@{k}" for t in shown]
    body = []
    for r in sorted(rows, key=lambda r: r.name):
        s = r.scores
        if s is None or f"judged_at_{ks[0]}" not in s.overall:
            body.append([r.name] + [DASH] * (len(header) - 1))
            continue

        def cell(table: Mapping[str, float], name: str) -> str:
            return pct(table[name]) if name in table else DASH

        body.append(
            [r.name]
            + [cell(s.overall, f"judged_at_{x}") for x in ks]
            + [f"{s.overall['bpref']:.4f}" if "bpref" in s.overall else DASH]
            + [cell(s.overall, f"condensed_recall_at_{x}") for x in ks]
            + [f"{s.overall['condensed_mrr']:.3f}" if "condensed_mrr" in s.overall else DASH]
            + [cell(s.per_tier.get(t, {}), f"judged_at_{k}") for t in shown]
        )
    return header, body


RAG_COLUMNS = (
    ("rag_document_hit_rate", "doc hit"),
    ("rag_section_hit_rate", "section hit"),
    ("rag_mrr", "doc MRR"),
    ("rag_citation_validity_rate", "citation valid"),
    ("rag_empty_result_rate", "empty"),
    ("rag_retrieval_error_rate", "error"),
)
#: Shown only when some row measured them (graded documents; `section_match: all` questions).
RAG_OPTIONAL_COLUMNS = (
    ("rag_document_ndcg", "doc nDCG"),
    ("rag_all_sections_hit_rate", "all sections"),
    ("rag_section_recall", "sections found"),
)


def _rag_figure(key: str, figures: Mapping[str, float]) -> str:
    # a rate left out of a scored run does not apply (no case names a section, no store section
    # field, no citation required): n/a, never a 0
    if key not in figures:
        return NA
    return f"{figures[key]:.4f}" if key == "rag_document_ndcg" else pct(figures[key])


def rag_table(rows: Sequence[ReportRow]) -> tuple[list[str], list[list[str]]] | None:
    if not any(r.scores is not None and r.scores.rag for r in rows):
        return None
    columns = list(RAG_COLUMNS) + [
        (key, label)
        for key, label in RAG_OPTIONAL_COLUMNS
        if any(r.scores is not None and key in r.scores.rag for r in rows)
    ]
    header = ["ranker"] + [label for _, label in columns]
    body = []
    for r in sorted(rows, key=lambda r: r.name):
        if r.scores is None or not r.scores.rag:
            body.append([r.name] + [DASH] * len(columns))
            continue
        body.append([r.name] + [_rag_figure(key, r.scores.rag) for key, _ in columns])
    return header, body


def markdown_report(
    fixture: str,
    rows: Sequence[ReportRow],
    ks: Sequence[int],
    tier_counts: Mapping[str, int],
    revision: str = "",
    notes: Sequence[str] = (),
) -> str:
    """The diffable Markdown report: overall, per tier, IR metrics, RAG measures."""
    ks = sorted(ks)
    out = ["# evalpipe retrieval report", ""]
    rev = f" · rev: `{revision}`" if revision else ""
    out += [f"_Fixture: `{fixture}`{rev} · {case_count(rows, tier_counts)}_", ""]
    out += ["Tier distribution:" + "".join(f" `{t}`={n}" for t, n in sorted(tier_counts.items())), ""]
    out += ["## Overall", ""] + markdown_table(*overall_table(rows, ks)) + [""]
    tiers = tier_columns(rows, tier_counts)
    out += [f"## Per tier (R@{tier_k(ks)})", ""] + markdown_table(*tier_table(rows, ks, tiers)) + [""]
    out += ["## Per tier, all cutoffs", ""] + markdown_table(*tier_detail_table(rows, ks, tiers)) + [""]
    ir = ir_table(rows, ks)
    if ir:
        out += ["## Standard IR metrics", ""] + markdown_table(*ir) + [""]
    lt = labels_table(rows, ks, tiers)
    if lt:
        out += ["## Label completeness (judged@K; condensed: unlabelled items removed)", ""]
        out += markdown_table(*lt) + [""]
    rt = rag_table(rows)
    if rt:
        out += ["## RAG quality", ""] + markdown_table(*rt) + [""]
    all_notes = list(notes) + [f"{r.name}: {n}" for r in sorted(rows, key=lambda r: r.name) for n in r.notes]
    if all_notes:
        out += ["## Notes", ""] + [f"- {n}" for n in all_notes] + [""]
    return "\n".join(out)


def case_count(rows: Sequence[ReportRow], tier_counts: Mapping[str, int]) -> str:
    """'N cases', plus how many were judged when unanswerable cases are left out of the means."""
    total = sum(tier_counts.values())
    judged = {int(r.scores.overall.get("judged_cases", total)) for r in rows if r.scores is not None}
    return f"{total} cases" + (f", {judged.pop()} judged" if len(judged) == 1 and total not in judged else "")


def print_tables(
    console,
    fixture: str,
    rows: Sequence[ReportRow],
    ks: Sequence[int],
    tier_counts: Mapping[str, int],
) -> None:
    """The same tables as the Markdown report, drawn with rich for the terminal."""
    # lazy: rich, ~46 ms
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    ks = sorted(ks)
    tiers = tier_columns(rows, tier_counts)
    sections = [
        (f"{fixture}: overall ({case_count(rows, tier_counts)})", overall_table(rows, ks)),
        ("per tier", tier_detail_table(rows, ks, tiers)),
    ]
    ir = ir_table(rows, ks)
    if ir:
        sections.append(("standard IR metrics", ir))
    lt = labels_table(rows, ks, tiers)
    if lt:
        sections.append(("label completeness (judged@K; condensed: unlabelled items removed)", lt))
    rt = rag_table(rows)
    if rt:
        sections.append(("RAG quality", rt))
    for title, (header, body) in sections:
        table = Table(title=escape(title), title_justify="left", box=box.SIMPLE_HEAD)
        for i, h in enumerate(header):
            table.add_column(h, justify="left" if i == 0 else "right")
        for row in body:  # literally: a run name such as `bm25 fields=[title]` is not markup
            table.add_row(*(escape(cell) for cell in row))
        console.print(table)
