"""The runs a pool is made from: run folders (cases.jsonl + tags.json) or MLflow runs by ID.

A run folder is what every run saves before uploading (`tracking/record.py`): its
`cases.jsonl` holds each case's ranked IDs (`top`) and first-hit rank, its `tags.json`
the fixture's sha256 and the ranker. An MLflow run ID is read through its `cases.json`
artifact and tags; a sweep parent or a suite run stands for its child runs.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalpipe.safety.errors import EvalpipeError

CASES_JSONL = "cases.jsonl"
CASES_ARTIFACT = "cases.json"
FIXTURE_TAG = "evalpipe.fixture_sha256"


@dataclass(frozen=True)
class PooledRun:
    """One run's rankings: {case ID: ranked IDs}, and per-case figures (recall_at_K, ...)."""

    label: str
    source: str
    fixture_sha256: str
    ranked: Mapping[str, tuple[str, ...]]
    first_rank: Mapping[str, int]
    values: Mapping[str, Mapping[str, float]]


def _from_rows(rows: Sequence[Mapping[str, Any]], label: str, source: str, sha: str) -> PooledRun:
    ranked: dict[str, tuple[str, ...]] = {}
    first: dict[str, int] = {}
    values: dict[str, dict[str, float]] = {}
    for n, row in enumerate(rows, 1):
        try:
            cid = str(row["case_id"])
            top = row.get("top") or "[]"
            ranked[cid] = tuple(map(str, json.loads(top) if isinstance(top, str) else top))
        except (KeyError, TypeError, ValueError):
            raise EvalpipeError(
                f"{source}: row {n} has no case_id or no readable `top` (ranked IDs)"
            ) from None
        first[cid] = int(row.get("first_rank") or 0)
        for key, v in row.items():
            if (
                isinstance(v, int | float)
                and not isinstance(v, bool)
                and key not in ("first_rank", "latency_us")
            ):
                values.setdefault(key, {})[cid] = float(v)
    if not ranked:
        raise EvalpipeError(f"{source}: no cases in the run's per-case table")
    return PooledRun(label, source, sha, ranked, first, values)


def from_folder(folder: Path) -> PooledRun:
    cases = folder / CASES_JSONL
    if not cases.is_file():
        raise EvalpipeError(
            f"{folder}: no {CASES_JSONL} (give a run's output folder, e.g. outputs/<date>/<time>)"
        )
    try:
        rows = [json.loads(line) for line in cases.read_text(encoding="utf-8").splitlines() if line.strip()]
        tags = json.loads((folder / "tags.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EvalpipeError(
            f"{folder}: no tags.json beside {CASES_JSONL} (the fixture it ran on is unknown)"
        ) from None
    except (OSError, ValueError) as exc:
        raise EvalpipeError(f"{folder}: cannot read the run: {exc}") from None
    label = str(tags.get("evalpipe.ranker") or folder.name)
    return _from_rows(rows, label, str(folder), str(tags.get(FIXTURE_TAG) or ""))


def from_mlflow(tracking_uri: str, run_id: str) -> list[PooledRun]:
    """The run, or the children of a sweep parent / suite run (every child that has a per-case table)."""
    # lazy: mlflow, ~700 ms
    from mlflow.tracking import MlflowClient

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one summary, no bars
    client = MlflowClient(tracking_uri=tracking_uri)
    try:
        run = client.get_run(run_id)
    except Exception:
        raise EvalpipeError(f"run {run_id}: not found in {tracking_uri} (give --tracking-uri)") from None
    children = client.search_runs(
        [run.info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{run.info.run_id}'",
        max_results=5000,
    )
    out = []
    for r in children or [run]:
        if r.data.tags.get("evalpipe.skipped"):
            continue
        label = r.info.run_name or r.data.tags.get("evalpipe.ranker") or r.info.run_id[:8]
        with tempfile.TemporaryDirectory(prefix="evalpipe-pool-") as tmp:
            try:
                path = client.download_artifacts(r.info.run_id, CASES_ARTIFACT, tmp)
                table = json.loads(Path(path).read_text(encoding="utf-8"))
                rows = [dict(zip(table["columns"], row, strict=False)) for row in table["data"]]
            except Exception:
                if children:
                    continue  # a child without cases (a reused sweep point): its original is there
                raise EvalpipeError(f"run {run_id}: no {CASES_ARTIFACT} artifact (per-case table)") from None
        out.append(_from_rows(rows, label, f"run {r.info.run_id}", str(r.data.tags.get(FIXTURE_TAG) or "")))
    if not out:
        raise EvalpipeError(f"run {run_id}: neither it nor its child runs have a per-case table")
    return out


def unique_labels(runs: Sequence[PooledRun]) -> list[PooledRun]:
    """Runs with distinct labels (`bm25`, `bm25#2`), as a batch names runs by label."""
    seen: dict[str, int] = {}
    out = []
    for r in runs:
        n = seen.get(r.label, 0) + 1
        seen[r.label] = n
        out.append(
            r
            if n == 1
            else PooledRun(f"{r.label}#{n}", r.source, r.fixture_sha256, r.ranked, r.first_rank, r.values)
        )
    return out
