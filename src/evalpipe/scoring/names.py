"""Metric names as MLflow shows them: headline figures bare, everything else grouped by a prefix.

The MLflow UI lists metrics alphabetically (run page, column picker) and groups charts into
sections by the part before the first `/`. A run logs about a hundred figures, so the few
that decide between rankers (recall@K, MRR, nDCG@K) keep their bare names and form the
default chart section, and the rest are grouped:

- headline, bare: `recall_at_K`, `mrr`, `ndcg_at_K`;
- `ir/`: the other IR families (`ir/map_at_K`, `ir/precision_at_K`, `ir/frac_recall_at_K`,
  `ir/hits_at_K`, `ir/mrr_at_K`);
- `tier/<tier>/`: every per-tier figure under its bare name (`tier/exact/map_at_5`);
- `labels/`: how much of the ranking the labels see (`labels/judged_at_K`, `labels/bpref`,
  `labels/condensed_recall_at_K`, `labels/condensed_mrr`, `labels/condensed_ndcg_at_K`);
- `rag/`: RAG measures without their `rag_` prefix (`rag/document_hit_rate`, `rag/mrr`);
- `cost/`: latency, tokens, time and memory (`cost/latency_p95_us`, `cost/mean_tokens_returned`,
  `cost/index_build_seconds`, `cost/eval_seconds`, `cost/peak_memory_mb`);
- `count/`: `count/cases`, `count/judged_cases`, `count/retrieval_errors`, `count/empty_results`,
  `count/corpus_units`, `count/unknown_ids` (returned IDs not in the corpus);
- `index/`: the ranker's own statistics (unchanged).

Names that already contain `/` (`tier/...`, `index/...`, `best/...`, `sweep/...`) are left as
they are. A bare name given where a figure is looked up (`objective=map_at_5`) still finds it:
`lookup` tries the grouped name too. Per-case columns (`cases.json`, `evalpipe compare`) keep
the bare names, as they are one table and not a list.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

HEADLINE = re.compile(r"^(recall_at_\d+|mrr|ndcg_at_\d+)$")
IR = re.compile(r"^(map|precision|frac_recall|hits|mrr)_at_\d+$")
COST = (
    "latency_p50_us",
    "latency_p95_us",
    "latency_max_us",
    "latency_timed_cases",
    "search_batched",
    "mean_tokens_returned",
    "index_build_seconds",
    "eval_seconds",
    "peak_memory_mb",
)
#: Label completeness (`scoring.completeness`): judged@k, bpref, the condensed figures.
LABELS = re.compile(r"^(judged_at_\d+|bpref|condensed_.+)$")
COUNT = ("cases", "judged_cases", "retrieval_errors", "empty_results", "corpus_units", "unknown_ids")


def metric_name(name: str) -> str:
    """The MLflow (and report) name of an overall figure named `name` in `RunScores.overall`."""
    if "/" in name or HEADLINE.match(name):
        return name
    if IR.match(name):
        return f"ir/{name}"
    if LABELS.match(name):
        return f"labels/{name}"
    if name.startswith("rag_"):
        return f"rag/{name[len('rag_') :]}"
    if name in COST:
        return f"cost/{name}"
    if name in COUNT:
        return f"count/{name}"
    return name


def lookup(figures: Mapping[str, float], name: str, default: float | None = None) -> float | None:
    """`figures[name]`, accepting the bare name of a grouped figure (`map_at_5` for `ir/map_at_5`)."""
    if name in figures:
        return figures[name]
    return figures.get(metric_name(name), default)


def named(figures: Mapping[str, float]) -> dict[str, float]:
    """`figures` under their MLflow names."""
    return {metric_name(k): float(v) for k, v in figures.items()}
