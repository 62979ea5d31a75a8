"""What a run prints when it ends: the tables and links for a single run, one line for a sweep point.

A sweep of 12 points used to print 12 full reports; the sweep's own summary (printed by the
parent when it ends) is where its points are compared, so each point prints one line.
Run names are printed literally (`fields=[title]` is not rich markup).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
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


def print_run_end(
    console: Any,
    tracker: Any,
    experiment: str,
    experiment_id: str,
    run_id: str,
    run_name: str,
    row: Any,
    fixture: Any,
    ks: Sequence[int],
    notes: Sequence[str],
    job: Any,
    after_tables: Callable[[Any], None] | None = None,
) -> None:
    """A single run: its tables (then `after_tables(console)`, e.g. the judge's), notes and links;
    a sweep point: one line."""
    from evalpipe.reporting.report import print_tables
    from evalpipe.scoring.run import flat_metrics
    from evalpipe.tracking.links import ui_lines

    if job.sweep_id:
        metrics = flat_metrics(row.scores) if row.scores is not None else {}
        skipped = f" [yellow]skipped:[/] {escape(row.skipped)}" if row.skipped else ""
        console.print(point_line(job.job_num, run_name, metrics, run_id) + skipped, highlight=False)
        return
    print_tables(console, fixture.label, [row], ks, fixture.tier_counts())
    if after_tables is not None:
        after_tables(console)
    for n in notes:
        console.print(f"[yellow]note:[/] {escape(n)}")
    console.print(
        f"MLflow: experiment [bold]{escape(experiment)}[/] · run [bold]{run_id}[/] ({escape(run_name)})",
        highlight=False,
    )
    for line in ui_lines(tracker.uri, experiment_id, run_id, tracker.ui_command):
        console.print(escape(line), highlight=False, soft_wrap=True)


def print_point(console: Any, job: Any, run_name: str, row: Any, run_id: str) -> None:
    """A sweep point's one line."""
    from evalpipe.scoring.run import flat_metrics

    metrics = flat_metrics(row.scores) if row.scores is not None else {}
    skipped = f" [yellow]skipped:[/] {escape(row.skipped)}" if row.skipped else ""
    console.print(point_line(job.job_num, run_name, metrics, run_id) + skipped, highlight=False)


def print_links(
    console: Any, tracker: Any, experiment: str, experiment_id: str, run_id: str, run_name: str
) -> None:
    """Where a single run is in MLflow (printed after its tables, once it is uploaded)."""
    from evalpipe.tracking.links import ui_lines

    console.print(
        f"MLflow: experiment [bold]{escape(experiment)}[/] · run [bold]{run_id}[/] ({escape(run_name)})",
        highlight=False,
    )
    for line in ui_lines(tracker.uri, experiment_id, run_id, tracker.ui_command):
        console.print(escape(line), highlight=False, soft_wrap=True)
