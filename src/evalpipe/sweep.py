"""Job-side sweep support: which parent run a job belongs to, and resume.

The parent run is opened by `evalpipe.callbacks.MLflowSweepCallback` before any
job starts. A job finds it through EVALPIPE_PARENT_RUN_ID (set by the callback
and inherited by local and joblib workers) or, on launchers that do not pass the
environment on, by the sweep ID tag derived from `hydra.sweep.dir`.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Any

PARENT_ENV = "EVALPIPE_PARENT_RUN_ID"
SWEEP_ENV = "EVALPIPE_SWEEP_ID"
ROLE_TAG = "evalpipe.role"
SWEEP_TAG = "evalpipe.sweep_id"
HASH_TAG = "evalpipe.config_hash"


@dataclass(frozen=True)
class JobContext:
    """Where a job sits in a sweep: parent run, sweep ID and its own swept values."""

    parent_run_id: str | None = None
    sweep_id: str | None = None
    job_num: int | None = None
    overrides: dict[str, str] = field(default_factory=dict)

    @property
    def tags(self) -> dict[str, str]:
        tags: dict[str, str] = {}
        if self.parent_run_id:
            tags["mlflow.parentRunId"] = self.parent_run_id
        if self.sweep_id:
            tags[SWEEP_TAG] = self.sweep_id
            tags[ROLE_TAG] = "child"
        if self.job_num is not None:
            tags["evalpipe.job_num"] = str(self.job_num)
        for key, value in self.overrides.items():
            tags[f"evalpipe.swept.{key}"] = value[:5000]
        return tags


def sweep_id_for(sweep_dir: str) -> str:
    """A short stable ID for one multirun invocation (its sweep directory is unique)."""
    return hashlib.sha256(os.path.abspath(sweep_dir).encode()).hexdigest()[:12]


def find_parent(tracker: Any, experiment_id: str, sweep_id: str) -> str | None:
    runs = tracker.client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{SWEEP_TAG}` = '{sweep_id}' and tags.`{ROLE_TAG}` = 'parent'",
        max_results=1,
    )
    return runs[0].info.run_id if runs else None


def job_context(tracker: Any, experiment_id: str) -> JobContext:
    """The sweep context of the current Hydra job (empty for a single run)."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
    except Exception:
        return JobContext()
    if hc.mode != RunMode.MULTIRUN:
        return JobContext()
    sweep_id = os.environ.get(SWEEP_ENV) or sweep_id_for(str(hc.sweep.dir))
    parent = os.environ.get(PARENT_ENV) or find_parent(tracker, experiment_id, sweep_id)
    overrides = {}
    for item in hc.overrides.task:
        key, _, value = item.partition("=")
        overrides[key.lstrip("+~")] = value
    num = hc.job.get("num")
    return JobContext(parent, sweep_id, int(num) if num is not None else None, overrides)


def find_finished(tracker: Any, experiment_id: str, config_hash: str) -> Any | None:
    """The latest FINISHED run with this config hash, if any (sweep resume)."""
    runs = tracker.client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{HASH_TAG}` = '{config_hash}' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    return runs[0] if runs else None
