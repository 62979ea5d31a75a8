"""A run's MLflow description (`mlflow.note.content`): its headline tables in Markdown.

The MLflow run page shows the description above the long alphabetical metric list, so
the figures that decide between rankers are read first: the ranker and its key parameters,
the K list, then the report's own overall, per-tier and IR tables (the same code as
`report.md`, so the numbers and their formats match the terminal and the report).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evalpipe.reporting.report import (
    ReportRow,
    case_count,
    ir_table,
    markdown_table,
    overall_table,
    pct,
    tier_columns,
    tier_detail_table,
    tier_k,
)

NOTE_TAG = "mlflow.note.content"
#: MLflow's limit on a run tag value.
MAX_NOTE = 8000


def ranker_settings(params: Mapping[str, str]) -> str:
    """`k1=1.5 · b=0.75 · ...` from the logged `ranker.*` params."""
    items = [f"`{k[len('ranker.') :]}={v}`" for k, v in params.items() if k.startswith("ranker.")]
    return " · ".join(items) or "(no parameters)"


def clip(text: str, limit: int = MAX_NOTE) -> str:
    """Keep whole lines under MLflow's tag limit, saying so when something was cut."""
    if len(text) <= limit:
        return text
    note = "\n\n_(cut to fit MLflow's description limit; the full tables are in report.md)_\n"
    return text[: limit - len(note)].rsplit("\n", 1)[0] + note


def run_description(
    fixture: str,
    row: ReportRow,
    ks: Sequence[int],
    tier_counts: Mapping[str, int],
    params: Mapping[str, str],
    objective: str = "",
    objective_value: float | None = None,
) -> str:
    ks = sorted(ks)
    head = f"**{row.name}** on `{fixture}`"
    if row.scores is not None:  # the first line is what the collapsed description shows
        k = tier_k(ks)
        overall = row.scores.overall
        figures = [
            f"R@{k} **{pct(overall[f'recall_at_{k}']).strip()}**" if f"recall_at_{k}" in overall else "",
            f"MRR **{overall['mrr']:.3f}**" if "mrr" in overall else "",
            f"nDCG@{k} **{overall[f'ndcg_at_{k}']:.4f}**" if f"ndcg_at_{k}" in overall else "",
        ]
        head += "".join(f" · {f}" for f in figures if f)
    head += f" · {case_count([row], tier_counts)} · K = {', '.join(map(str, ks))}"
    if objective and objective_value is not None:
        head += f" · objective `{objective}` = {objective_value:.4f}"
    # The headline table right under the first line: the collapsed description (about four lines
    # before "Show more") shows the line and the table's head; the ranker's settings come last.
    out = [head, ""]
    out += ["#### Overall", ""] + markdown_table(*overall_table([row], ks)) + [""]
    if row.scores is not None:
        tiers = tier_columns([row], tier_counts)
        out += ["#### Per tier", ""] + markdown_table(*tier_detail_table([row], ks, tiers)) + [""]
        ir = ir_table([row], ks)
        if ir:
            out += ["#### IR metrics", ""] + markdown_table(*ir) + [""]
    out += [f"Ranker `{params.get('ranker', row.name)}`: {ranker_settings(params)}", ""]
    out += [
        "_All figures: the Metrics table below (headline names bare; `ir/`, `tier/`, `cost/`, ... grouped)._"
    ]
    return clip("\n".join(out))
