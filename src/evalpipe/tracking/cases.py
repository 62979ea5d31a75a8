"""A run's per-case table (`cases.json`) read back from the store: as `RunCases` for compare and
the gate, and as {case ID: objective value} for a sweep's tie and hold-out checks. In the store
layer so a sweep can ask the warm upload worker for it (`SweepStore.per_case`) and its own
process never imports MLflow."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from evalpipe.scoring import rag
from evalpipe.scoring.names import metric_name
from evalpipe.stats.comparison import CASES_ARTIFACT, CompareError, RunCases, cases_from_rows
from evalpipe.tracking.measured import MissingOriginal, follow
from evalpipe.tracking.reuse import is_reuse


def load_cases(client: Any, run: Any) -> RunCases:
    """The run's cases.json as {metric: {case_id: value}} (every numeric column except bookkeeping).

    A reused sweep point is read as the run it reuses (through any chain of reuses): its figures
    are that run's and its per-case table is there; `aliases` and `reuse_line` record the point."""

    if is_reuse(run):
        try:
            point = follow(client, run)
        except MissingOriginal as exc:
            raise CompareError(str(exc)) from None
        cases = load_cases(client, point.measured)
        aliases = (run.info.run_id, run.info.run_name or "", *cases.aliases)
        return replace(cases, aliases=aliases, reuse_line=point.line())
    label = f"{run.info.run_name} ({run.info.run_id})"
    with tempfile.TemporaryDirectory(prefix="evalpipe-compare-") as tmp:
        try:
            path = client.download_artifacts(run.info.run_id, CASES_ARTIFACT, tmp)
            table = json.loads(Path(path).read_text(encoding="utf-8"))
        except Exception:
            raise CompareError(
                f"run {label} has no {CASES_ARTIFACT} artifact (per-case table); "
                "re-run it with a current evalpipe or leave it out"
            ) from None
    try:
        columns = list(table["columns"])
        rows = [dict(zip(columns, row, strict=False)) for row in table["data"]]
    except (KeyError, TypeError, ValueError):
        raise CompareError(f"run {label}: {CASES_ARTIFACT} has no case_id column") from None
    return cases_from_rows(
        rows,
        run_id=run.info.run_id,
        name=run.info.run_name or "",
        label=label,
        start_time=int(run.info.start_time or 0),
        objective=str(run.data.params.get("objective") or run.data.tags.get("evalpipe.objective", "")),
    )


def per_case(client: Any, run_id: str, objective: str) -> dict[str, float] | None:
    """{case ID: objective value} from the run's cases.json; None when the run has none (a suite)."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no bars in the summary
    try:
        cases = load_cases(client, client.get_run(run_id))
    except (CompareError, Exception):
        return None
    name, tier = objective, None
    if objective.startswith("tier/"):
        _, tier, name = objective.split("/", 2)
    column = rag.PER_CASE_COLUMN.get(name) or rag.PER_CASE_COLUMN.get(f"rag_{name.removeprefix('rag/')}")
    # a RAG rate before the bare-name fallback: `rag/mrr` is not the ranking `mrr`
    for candidate in (name, *([column] if column else []), metric_name(name).rpartition("/")[2]):
        values = cases.values.get(candidate)
        if values is not None:
            if tier is not None:
                values = {c: v for c, v in values.items() if c in cases.info and cases.info[c].tier == tier}
            return dict(values)
    return None
