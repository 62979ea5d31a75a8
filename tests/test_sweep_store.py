"""A sweep's store work through the warm upload worker (evalpipe.tracking.sweep_store).

Real sweeps in real processes on real SQLite stores: a fully reused sweep whose parent asks the
worker records exactly what the same sweep records in its own process (EVALPIPE_UPLOAD_WORKER=0),
without importing MLflow in the parent; a damaged store is still exit 2 in one line before any
job runs; a sweep's parent killed with SIGKILL leaves its parent run KILLED, not RUNNING; and a
worker that dies is replaced by the store opened in the parent.
"""

from __future__ import annotations

import csv
import inspect
import json
import signal
import subprocess
import sys
from pathlib import Path

from cli_helpers import (
    all_runs,
    cli_env,
    client_for,
    cmdline,
    error_lines,
    popen_cli,
    slow_ranker,
    wait_for_lines,
    write_tiny,
)
from evalpipe.safety.signals import child_pids
from evalpipe.tracking.reuse import REUSED_TAG
from evalpipe.tracking.sweep_store import LocalStore, SweepStore, WorkerStore
from evalpipe.tracking.upload_worker import UploadWorker, wanted_sweep
from waiting import wait_gone, wait_until

AXIS = ["ranker=bm25", "ranker.k1=0.9,1.2,1.5", "progress=false"]


def _sweep(tmp: Path, fx: Path, uri: str, sweep_dir: Path, *extra: str, worker: bool = True):
    env = cli_env() if worker else cli_env(EVALPIPE_UPLOAD_WORKER="0")
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "evalpipe", "-m", f"fixture.path={fx}",
         f"tracking.uri={uri}", f"hydra.sweep.dir={sweep_dir}", *AXIS, *extra],
        cwd=tmp, capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _imported(stderr: str) -> set[str]:
    return {
        line.split("|", 2)[2].strip().split(".")[0]
        for line in stderr.splitlines()
        if line.startswith("import time:") and line.count("|") >= 2
    }


def _reused_sweep(uri: str, parent) -> dict:
    """What a reused sweep recorded: its parent, its children by job, its summary and markers."""
    client = client_for(uri)
    runs = all_runs(uri)
    by_id = {r.info.run_id: r for r in runs}
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    return {
        "status": parent.info.status,
        "metrics": {k: v for k, v in parent.data.metrics.items() if k.startswith(("sweep/", "best/"))},
        "artifacts": sorted(a.path for a in client.list_artifacts(parent.info.run_id))
        + sorted(a.path for a in client.list_artifacts(parent.info.run_id, "plots")),
        "children": {
            c.data.tags["evalpipe.job_num"]: {
                "status": c.info.status,
                "reuses": c.data.tags[REUSED_TAG],
                # the child carries the figures of the run it stands for
                "same_metrics": c.data.metrics == by_id[c.data.tags[REUSED_TAG]].data.metrics,
                "swept": c.data.tags.get("evalpipe.swept.ranker.k1"),
            }
            for c in children
        },
    }


def _markers(sweep_dir: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sweep_dir.glob("*/reused_run.json")}


def _summary(sweep_dir: Path) -> list[dict]:
    with open(sweep_dir / "summary.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_reused_sweep_through_the_worker_records_what_the_in_process_one_records(tmp_path):
    fx = write_tiny(tmp_path)
    uri = f"sqlite:///{tmp_path / 'ml' / 'mlflow.db'}"
    _sweep(tmp_path, fx, uri, tmp_path / "m0", worker=False)  # measures the 3 points
    measured = {
        r.data.tags["evalpipe.swept.ranker.k1"]: r.info.run_id
        for r in all_runs(uri)
        if r.data.tags.get("evalpipe.role") == "child"
    }
    assert sorted(measured) == ["0.9", "1.2", "1.5"]

    through_worker = _sweep(tmp_path, fx, uri, tmp_path / "m1")
    assert "mlflow" not in _imported(through_worker.stderr)  # the worker asked the store
    assert through_worker.stdout.count(" reused (force=true re-runs)") == 3
    _sweep(tmp_path, fx, uri, tmp_path / "m2", worker=False)

    parents = sorted(
        (r for r in all_runs(uri) if r.data.tags.get("evalpipe.role") == "parent"),
        key=lambda r: r.info.start_time,
    )
    assert len(parents) == 3
    worker_side, in_process = _reused_sweep(uri, parents[1]), _reused_sweep(uri, parents[2])
    assert worker_side == in_process
    assert worker_side["status"] == "FINISHED"
    assert worker_side["metrics"]["sweep/points"] == 3 and worker_side["metrics"]["sweep/reused"] == 3
    assert (
        "summary.md" in worker_side["artifacts"] and "plots/sweep_ranker.k1.png" in worker_side["artifacts"]
    )
    # job n swept k1 = 0.9, 1.2, 1.5 in order and reuses the run that measured that k1
    assert {
        job: (c["swept"], c["reuses"], c["status"], c["same_metrics"])
        for job, c in worker_side["children"].items()
    } == {str(n): (k1, measured[k1], "FINISHED", True) for n, k1 in enumerate(["0.9", "1.2", "1.5"])}
    # every marker names the run reused and the child that records it in this sweep
    for sweep_dir, parent in ((tmp_path / "m1", parents[1]), (tmp_path / "m2", parents[2])):
        children = {
            r.data.tags["evalpipe.job_num"]: r.info.run_id
            for r in all_runs(uri)
            if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id
        }
        markers = _markers(sweep_dir)
        assert {job: m["child_run_id"] for job, m in markers.items()} == children
        assert {job: m["run_id"] for job, m in markers.items()} == {
            str(n): measured[k1] for n, k1 in enumerate(["0.9", "1.2", "1.5"])
        }
    assert _summary(tmp_path / "m1") == _summary(tmp_path / "m2")
    assert not [r for r in all_runs(uri) if r.info.status == "RUNNING"]


def test_damaged_store_is_exit_2_in_one_line_before_any_job(tmp_path):
    """The database is an SQLite file MLflow made only half of (its version table, no runs tables:
    the parent's quick checks pass) that MLflow cannot open: the worker says so while Hydra
    composes, and the sweep stops before its first job. (A file that is not SQLite at all is
    refused by the quick checks: tests/test_reliability_round4.py.)"""
    import sqlite3

    from evalpipe.tracking.store_check import head_revision

    fx = write_tiny(tmp_path)
    (tmp_path / "ml").mkdir()
    con = sqlite3.connect(tmp_path / "ml" / "mlflow.db")
    con.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
    con.execute("INSERT INTO alembic_version VALUES (?)", (head_revision(),))
    con.execute("CREATE TABLE experiments (experiment_id INTEGER, name TEXT, lifecycle_stage TEXT)")
    con.commit()
    con.close()
    sweep_dir = tmp_path / "multirun"
    proc = subprocess.run(
        [sys.executable, "-m", "evalpipe", "-m", f"fixture.path={fx}",
         f"tracking.uri=sqlite:///{tmp_path / 'ml' / 'mlflow.db'}", f"hydra.sweep.dir={sweep_dir}", *AXIS],
        cwd=tmp_path, capture_output=True, text=True, env=cli_env(), timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = error_lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("evalpipe: error: cannot open MLflow store"), proc.stderr
    assert "mlflow.db" in lines[0]
    assert not sweep_dir.exists() or not [d for d in sweep_dir.iterdir() if d.is_dir()]  # no job started


def test_sweep_killed_with_sigkill_leaves_its_parent_run_killed(tmp_path):
    """No handler runs in a SIGKILLed parent: the worker, seeing its pipe close, ends the parent run."""
    fx = write_tiny(tmp_path)
    uri = f"sqlite:///{tmp_path / 'ml' / 'mlflow.db'}"
    progress = tmp_path / "progress.txt"
    sweep_dir = tmp_path / "multirun"
    proc = popen_cli(
        tmp_path, "-m", f"fixture.path={fx}", f"tracking.uri={uri}", f"hydra.sweep.dir={sweep_dir}",
        *slow_ranker(progress, delay=1.0), "+ranker.variant=1,2", "progress=false", "plots=false",
    )  # fmt: skip
    wait_for_lines(progress, 1, proc)  # the parent run exists: the first point is measuring
    workers = [p for p in child_pids(proc.pid) if "upload_worker" in cmdline(p)]
    assert len(workers) == 1, "the sweep started no upload worker"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)

    def parent_status() -> str:
        (parent,) = [r for r in all_runs(uri) if r.data.tags.get("evalpipe.role") == "parent"]
        return parent.info.status

    # the worker ends the parent run: wait while it lives (a dead worker with the run RUNNING fails)
    wait_until(
        "the upload worker to end the parent run",
        lambda: parent_status() != "RUNNING",
        alive=lambda: "upload_worker" in cmdline(workers[0]),
        poll_s=0.2,
    )
    assert parent_status() == "KILLED"
    wait_gone("the upload worker", lambda: "upload_worker" in cmdline(workers[0]))
    assert "upload_worker" not in cmdline(workers[0]), "the worker outlived its sweep"


def test_a_worker_that_dies_is_replaced_by_the_store_opened_here(tmp_path):
    uri = f"sqlite:///{tmp_path / 'ml' / 'mlflow.db'}"
    (tmp_path / "ml").mkdir()
    store = WorkerStore(UploadWorker.spawn(), uri)
    pending = store.begin(
        "exp", [1, 5], "recall_at_5", "sweep x", {"evalpipe.role": "parent"}, {"objective": "r"}
    )
    opened = pending.wait()
    (parent,) = all_runs(uri)
    assert parent.info.run_id == opened.parent_run_id and parent.info.status == "RUNNING"
    assert parent.data.params == {"objective": "r"}
    store.worker.proc.kill()
    store.worker.proc.wait()
    store.log(opened.parent_run_id, metrics={"sweep/points": 2.0}, files={"summary.md": "# two points\n"})
    store.end_run(opened.parent_run_id, "FINISHED")
    (parent,) = all_runs(uri)
    assert parent.info.status == "FINISHED" and parent.data.metrics == {"sweep/points": 2.0}
    artifact = client_for(uri).download_artifacts(parent.info.run_id, "summary.md", str(tmp_path))
    assert Path(artifact).read_text() == "# two points\n"


def test_which_command_lines_start_a_worker_for_a_sweep(monkeypatch):
    monkeypatch.delenv("EVALPIPE_UPLOAD_WORKER", raising=False)
    assert wanted_sweep(["-m", "ranker.k1=1,2"])
    assert wanted_sweep(["--multirun", "+sweep=bm25_grid"])
    for argv in (
        ["ranker=bm25"],  # a single run (`wanted`)
        ["-m", "x=1,2", "--cfg", "job"],
        ["-m", "x=1,2", "--help"],
        ["-m", "x=1,2", "tracking.offline=true"],
        ["compare", "-m", "a"],
    ):
        assert not wanted_sweep(argv), argv
    monkeypatch.setenv("EVALPIPE_UPLOAD_WORKER", "0")
    assert not wanted_sweep(["-m", "x=1,2"])


def test_both_store_kinds_implement_the_sweep_store_protocol() -> None:
    """The sweep callback holds a `SweepStore`: every member of the protocol exists on both kinds
    with the same parameters, so no caller needs to ask which kind it holds."""
    members = [m for m in vars(SweepStore) if not m.startswith("_")]
    assert {"uri", "find", "log", "end_run", "read_client", "collect_rows"} <= set(members)
    for kind in (LocalStore, WorkerStore):
        for name in members:
            assert hasattr(kind, name), f"{kind.__name__} lacks {name}"
            mine, declared = getattr(kind, name), vars(SweepStore)[name]
            if callable(declared) and name != "find":  # find: keywords, forwarded by WorkerStore
                assert list(inspect.signature(mine).parameters) == list(
                    inspect.signature(declared).parameters
                ), f"{kind.__name__}.{name}"
