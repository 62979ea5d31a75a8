"""Job-side sweep support: which parent run a job belongs to, and resume.

The parent run is opened by `evalpipe.sweeps.callback.MLflowSweepCallback` before any
job starts. A job finds it through EVALPIPE_PARENT_RUN_ID (set by the callback
and inherited by local and joblib workers) or, on launchers that do not pass the
environment on, by the sweep ID tag derived from `hydra.sweep.dir`.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PARENT_ENV = "EVALPIPE_PARENT_RUN_ID"
SWEEP_ENV = "EVALPIPE_SWEEP_ID"
SWEPT_ENV = "EVALPIPE_SWEPT_KEYS"
#: Written into the sweep dir by the parent: how jobs that do not inherit its environment
#: (remote launchers sharing the folder) find their sweep.
SWEEP_FILE = ".evalpipe_sweep.json"
ROLE_TAG = "evalpipe.role"
SWEEP_TAG = "evalpipe.sweep_id"
HASH_TAG = "evalpipe.config_hash"
#: A run started by another evalpipe run (a sweep's hold-out re-run, a suite's per-fixture run) is
#: a single run, not a multirun job: the starter passes its run ID, the role and extra tags here.
LINK_PARENT_ENV = "EVALPIPE_LINK_PARENT"
LINK_SWEEP_ENV = "EVALPIPE_LINK_SWEEP"
LINK_ROLE_ENV = "EVALPIPE_LINK_ROLE"
LINK_TAGS_ENV = "EVALPIPE_LINK_TAGS"
LINK_ENV = (LINK_PARENT_ENV, LINK_SWEEP_ENV, LINK_ROLE_ENV, LINK_TAGS_ENV)


def link_env(parent_run_id: str, role: str, sweep_id: str = "", tags: dict[str, str] | None = None):
    """The environment a linked run is started with (see `job_context`)."""
    return {
        LINK_PARENT_ENV: parent_run_id,
        LINK_SWEEP_ENV: sweep_id,
        LINK_ROLE_ENV: role,
        LINK_TAGS_ENV: json.dumps(tags or {}),
    }


@dataclass(frozen=True)
class JobContext:
    """Where a job sits in a sweep: parent run, sweep ID and its own swept values."""

    parent_run_id: str | None = None
    sweep_id: str | None = None
    job_num: int | None = None
    overrides: dict[str, str] = field(default_factory=dict)
    #: child (a sweep point), holdout (a sweep's re-run on the test split), suite_member
    role: str = "child"
    extra_tags: dict[str, str] = field(default_factory=dict)

    @property
    def tags(self) -> dict[str, str]:
        tags: dict[str, str] = {}
        if self.parent_run_id:
            tags["mlflow.parentRunId"] = self.parent_run_id
        if self.sweep_id:
            tags[SWEEP_TAG] = self.sweep_id
        if self.sweep_id or self.role != "child":
            tags[ROLE_TAG] = self.role
        tags.update(self.extra_tags)
        if self.job_num is not None:
            tags["evalpipe.job_num"] = str(self.job_num)
        for key, value in self.overrides.items():
            tags[f"evalpipe.swept.{key}"] = value[:5000]
        return tags


def sweep_id_for(sweep_dir: str, started_ns: int | None = None) -> str:
    """A short ID for one multirun invocation: its sweep directory plus its start time (a fixed
    `hydra.sweep.dir` reused by two sweeps must not merge them)."""
    key = os.path.abspath(sweep_dir) + ("" if started_ns is None else f"@{started_ns}")
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def read_sweep_file(sweep_dir: str) -> dict[str, Any]:
    try:
        return json.loads((Path(sweep_dir) / SWEEP_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def find_parent(tracker: Any, experiment_id: str, sweep_id: str) -> str | None:
    runs = tracker.client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{SWEEP_TAG}` = '{sweep_id}' and tags.`{ROLE_TAG}` = 'parent'",
        max_results=1,
    )
    return runs[0].info.run_id if runs else None


def linked_context() -> JobContext:
    """A single run started by another run (`link_env`), or an empty context."""
    parent = os.environ.get(LINK_PARENT_ENV)
    if not parent:
        return JobContext()
    try:
        extra = {str(k): str(v) for k, v in json.loads(os.environ.get(LINK_TAGS_ENV) or "{}").items()}
    except (ValueError, AttributeError):
        extra = {}
    return JobContext(
        parent_run_id=parent,
        sweep_id=os.environ.get(LINK_SWEEP_ENV) or None,
        role=os.environ.get(LINK_ROLE_ENV) or "child",
        extra_tags=extra,
    )


def job_context(tracker: Any, experiment_id: str) -> JobContext:
    """The sweep context of the current Hydra job (empty for a single run not started by another)."""
    try:
        # lazy: hydra, omegaconf, yaml, ~260 ms (in a try)
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
    except Exception:
        return linked_context()
    if hc.mode != RunMode.MULTIRUN:
        return linked_context()
    shared = {} if os.environ.get(SWEEP_ENV) else read_sweep_file(str(hc.sweep.dir))
    sweep_id = os.environ.get(SWEEP_ENV) or shared.get("sweep_id") or sweep_id_for(str(hc.sweep.dir))
    parent = (
        os.environ.get(PARENT_ENV)
        or shared.get("parent_run_id")
        or (find_parent(tracker, experiment_id, sweep_id) if tracker is not None else None)
    )
    swept = os.environ.get(SWEPT_ENV, ",".join(shared.get("swept_keys", [])))
    keys = set(filter(None, swept.split(",")))
    overrides = {}
    for item in hc.overrides.task:
        key, _, value = item.partition("=")
        key = key.lstrip("+~")
        if not keys or key in keys:  # tag the swept values, not the fixed overrides
            overrides[key] = value
    num = hc.job.get("num")
    return JobContext(parent, sweep_id, int(num) if num is not None else None, overrides)


def reusable(run: Any) -> bool:
    """Whether a FINISHED run can stand for a point with its config hash.

    A run whose ranker was skipped measured nothing: after installing the backend, run again.
    A reuse child (evalpipe.tracking.reuse) stands for another run: reuse that one instead."""
    return "evalpipe.skipped" not in run.data.tags and "evalpipe.reused_run_id" not in run.data.tags


def find_finished(tracker: Any, experiment_id: str, config_hash: str) -> Any | None:
    """The latest FINISHED run with this config hash, if any (sweep resume)."""
    runs = tracker.client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{HASH_TAG}` = '{config_hash}' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
        max_results=20,
    )
    return next((r for r in runs if reusable(r)), None)
