"""One fixture of a suite: an ordinary `python -m evalpipe fixture=<name> ...` run, linked as a child.

A separate process per fixture, so each fixture's run is composed, checked, measured, saved
and uploaded exactly as a single run of that fixture is (its figures equal a single run's),
and its files land in their own output directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from evalpipe.tracking.sweep_job import link_env

MEMBER_ROLE = "suite_member"
SUITE_TAG = "evalpipe.suite"
SUITE_FIXTURE_TAG = "evalpipe.suite_fixture"
#: Overrides the suite sets for its members (a suite's own keys, the fixture choice, where to save).
NOT_PASSED = ("suite", "fixture", "objective_agg", "hydra.run.dir", "hydra.sweep.dir")


@dataclass(frozen=True)
class Member:
    fixture: str
    code: int
    run_id: str = ""
    status: str = ""
    metrics: Mapping[str, float] = field(default_factory=dict)


#: Hydra's own overrides a member needs to compose the same config (where configs are found).
PASSED_HYDRA = ("hydra.searchpath",)


def hydra_overrides(hydra_items: Sequence[str]) -> list[str]:
    """The overrides among Hydra's own (`hydra.overrides.hydra`) that a re-run must repeat."""
    return [o for o in hydra_items if o.partition("=")[0].strip().lstrip("+~") in PASSED_HYDRA]


def member_overrides(task: Sequence[str], fixture: str, out_dir: Path, experiment: str | None) -> list[str]:
    """The suite's command line for one fixture: its overrides, `fixture=<name>` and its own dir."""
    keep = [o for o in task if o.partition("=")[0].strip().lstrip("+~") not in NOT_PASSED]
    extra = [f"fixture={fixture}", f"hydra.run.dir={out_dir}"]
    if experiment and not any(o.lstrip("+~").startswith("tracking.experiment=") for o in keep):
        extra.append(f"tracking.experiment={experiment}")
    return [*keep, *extra]


def run_member(
    suite: str,
    fixture: str,
    task: Sequence[str],
    out_dir: Path,
    parent_run_id: str | None,
    tracking_uri: str | None,
    experiment: str | None,
) -> Member:
    """Run one fixture; its tables go nowhere (the suite prints one table), its stderr to ours."""
    cmd = [sys.executable, "-m", "evalpipe", *member_overrides(task, fixture, out_dir, experiment)]
    env = dict(os.environ)
    for key in ("EVALPIPE_LINK_PARENT", "EVALPIPE_LINK_SWEEP", "EVALPIPE_LINK_ROLE", "EVALPIPE_LINK_TAGS"):
        env.pop(key, None)
    if parent_run_id:
        env.update(link_env(parent_run_id, MEMBER_ROLE, tags={SUITE_TAG: suite, SUITE_FIXTURE_TAG: fixture}))
    if tracking_uri:
        env["MLFLOW_TRACKING_URI"] = tracking_uri
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env, check=False)
    run_id, status, metrics = saved(out_dir)
    return Member(fixture, proc.returncode, run_id, status, metrics)


def saved(out_dir: Path) -> tuple[str, str, dict[str, float]]:
    """(run ID, status, metrics) of the run saved in `out_dir` (its run_info.json and metrics.json)."""
    # lazy: evalpipe.reporting.local, ~8 ms
    from evalpipe.reporting.local import INFO_FILE

    try:
        info = json.loads((out_dir / INFO_FILE).read_text(encoding="utf-8"))
        metrics = json.loads((out_dir / "metrics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "", "", {}
    return (
        str(info.get("run_id") or info.get("local_id") or ""),
        str(info.get("status") or ""),
        {str(k): float(v) for k, v in metrics.items() if isinstance(v, int | float)},
    )
