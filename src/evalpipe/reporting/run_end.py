"""What a sweep point prints when it ends: one line (a single run's links: `tracking.links.print_links`).

A sweep of 12 points used to print 12 full reports; the sweep's own summary (printed by the
parent when it ends) is where its points are compared, so each point prints one line.
Run names are printed literally (`fields=[title]` is not rich markup).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rich.markup import escape


def _ks(metrics: Mapping[str, float], family: str) -> list[int]:
    pattern = re.compile(rf"^{family}_at_(\d+)$")
    return sorted(int(m.group(1)) for name in metrics if (m := pattern.match(name)))


def point_line(job_num: int | None, name: str, metrics: Mapping[str, float], run_id: str) -> str:
    """`#3 bm25 k1=0.9 b=0.4  R@1 48.3% R@5 85.0% MRR 0.632 nDCG@5 0.6038  run 61c84495` (rich markup)."""
    figures = [f"R@{k} {metrics[f'recall_at_{k}'] * 100:.1f}%" for k in _ks(metrics, "recall")]
    if "mrr" in metrics:
        figures.append(f"MRR {metrics['mrr']:.3f}")
    ndcg = _ks(metrics, "ndcg")
    if ndcg:
        k = 5 if 5 in ndcg else ndcg[len(ndcg) // 2]
        figures.append(f"nDCG@{k} {metrics[f'ndcg_at_{k}']:.4f}")
    head = f"#{job_num} " if job_num is not None else ""
    return f"{head}[bold]{escape(name)}[/]  {' '.join(figures) or '(no figures)'}  run {run_id[:8]}"


def print_point(console: Any, job: Any, run_name: str, row: Any, run_id: str) -> None:
    """A sweep point's one line."""
    # lazy: evalpipe.scoring.run, numpy, ~84 ms
    from evalpipe.scoring.run import flat_metrics

    metrics = flat_metrics(row.scores) if row.scores is not None else {}
    skipped = f" [yellow]skipped:[/] {escape(row.skipped)}" if row.skipped else ""
    console.print(point_line(job.job_num, run_name, metrics, run_id) + skipped, highlight=False)
