"""`evalpipe compare --log`: the comparison recorded as its own MLflow run (role compare)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from evalpipe.reporting import case_diff_view
from evalpipe.stats.comparison import Result


def log_comparison(
    tracker: Any,
    result: Result,
    text: str,
    experiment_id: str,
    args: argparse.Namespace,
    diffs: Sequence[Any] = (),
) -> str:
    """Record the comparison as its own MLflow run (role compare) so it sits beside the runs it judges."""
    # lazy: evalpipe.tracking, ~23 ms
    from evalpipe.tracking import mlflow_store

    tags = {
        "evalpipe.role": "compare",
        "evalpipe.compare.baseline": result.baseline.run_id,
        "evalpipe.compare.runs": ",".join(r.run_id for r in result.runs)[:5000],
    }
    name = f"compare {len(result.runs)} runs vs {result.baseline.name or result.baseline.run_id[:8]}"
    payload = [
        {
            "metric": c.metric,
            "run_id": c.run.run_id,
            "run_name": c.run.name,
            "mean": c.mean,
            "ci": [c.lo, c.hi],
            "baseline": c.is_baseline,
            "diff": c.diff,
            "diff_ci": None if c.diff is None else [c.diff_lo, c.diff_hi],
            "p_value": c.p_value,
            "p_adjusted": c.p_adj,
            "won": c.won,
            "lost": c.lost,
            "mde": c.mde.mde if c.mde is not None and c.mde.detectable else None,
            "mde_method": c.mde.method if c.mde is not None else None,
            "significant": c.significant,
            "tied_with_best": c.tied,
            "rank": c.rank or None,
            "diff_ci_level": None if c.diff is None else _level(result, args.alpha),
        }
        for c in result.comparisons
    ]
    with mlflow_store.tracked_run(tracker, experiment_id, name, tags) as run_id:
        params = {
            "metrics": json.dumps(result.metrics),
            "alpha": str(args.alpha),
            "correction": result.correction,
            "family": _family(result),
            "power": str(result.power),
            "resamples": str(args.resamples),
            "seed": str(args.seed),
            "cases": str(len(result.cases)),
        }
        mlflow_store.log_batch(tracker, run_id, params=params)
        mlflow_store.log_artifact_files(
            tracker, run_id, {"compare.md": text, "compare.json": json.dumps(payload, indent=1)}
        )
        if diffs:  # the per-case view: Markdown, and a table the MLflow artifact view renders
            mlflow_store.log_artifact_files(tracker, run_id, {"diff.md": case_diff_view.markdown(diffs)})
            mlflow_store.log_table(tracker, run_id, case_diff_view.table(diffs), "diff.json")
    return run_id


def _level(result: Any, alpha: float) -> str:
    """What level a difference's interval is at: simultaneous over the family, or per comparison."""
    return f"{100 * (1 - alpha):g}% {'simultaneous' if result.all_pairs else 'per comparison'}"


def _family(result: Any) -> str:
    if result.all_pairs:
        return f"all {result.pairs} pairs of runs x metrics, max-T (family-wise)"
    return f"{result.family} cells vs the baseline, {result.correction}"
