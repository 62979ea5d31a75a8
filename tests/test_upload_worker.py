"""The upload worker (evalpipe.tracking.upload_worker): a single run's MLflow side in a warm child.

Real processes and real stores: a run through the worker logs the same MLflow run as one that
uploads in its own process (EVALPIPE_UPLOAD_WORKER=0); a parent killed with SIGKILL (no
handler runs) leaves no RUNNING run, because the worker ends it KILLED when the pipe closes;
a store that passes the quick checks but cannot be opened costs no results (saved, exit 1,
`evalpipe sync` later); and no worker outlives its run.
"""

from __future__ import annotations

import json
import re
import signal
import time

import pytest

from cli_helpers import (
    all_runs,
    cli,
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
from evalpipe.tracking.mlflow_store import schema_lock
from evalpipe.tracking.upload_worker import wanted
from waiting import wait_gone, wait_until

PLUGIN = ["~ranker", "+ranker._target_=plugins_for_tests.keyword_search", "+ranker._partial_=true"]
#: Tags that differ between two runs of the same configuration by construction.
PER_RUN_TAGS = {"evalpipe.local_id", "mlflow.runName", "mlflow.source.name", "mlflow.user"}


def _run_content(uri: str, run) -> dict:
    client = client_for(uri)
    arts = sorted(a.path for a in client.list_artifacts(run.info.run_id))
    plots = sorted(a.path for a in client.list_artifacts(run.info.run_id, "plots"))
    metrics = {k: v for k, v in run.data.metrics.items() if not k.startswith(("latency", "cost/", "peak_"))}
    return {
        "status": run.info.status,
        "metrics": metrics,
        "params": run.data.params,
        # the description quotes the measured latency and cost: its words must match, not its figures
        "tags": {
            k: re.sub(r"[\d.]+", "#", v) if k == "mlflow.note.content" else v
            for k, v in run.data.tags.items()
            if k not in PER_RUN_TAGS
        },
        "artifacts": arts,
        "plots": plots,
        "inputs": sorted(d.dataset.name for d in run.inputs.dataset_inputs),
    }


def test_run_through_the_worker_logs_what_the_in_process_upload_logs(tmp_path):
    fx = write_tiny(tmp_path)
    contents = {}
    for mode in ("1", "0"):
        uri = f"sqlite:///{tmp_path / f'ml{mode}' / 'mlflow.db'}"
        out = tmp_path / f"out{mode}"
        proc = cli(
            tmp_path,
            f"fixture.path={fx}",
            f"tracking.uri={uri}",
            f"hydra.run.dir={out}",
            "run_name=same",
            *PLUGIN,
            env=cli_env(EVALPIPE_UPLOAD_WORKER=mode),
        )
        assert proc.returncode == 0, proc.stderr
        assert error_lines(proc.stderr) == [], proc.stderr
        (run,) = all_runs(uri)
        info = json.loads((out / "run_info.json").read_text())
        assert info["upload"] == "complete" and info["run_id"] == run.info.run_id
        assert info["uploads"] == {uri: run.info.run_id}
        # the tables come first, then where the run is in MLflow
        assert proc.stdout.index("R@1") < proc.stdout.index(f"run {run.info.run_id}")
        contents[mode] = _run_content(uri, run)
    assert contents["1"]["status"] == "FINISHED"
    saved = ["cases.json", "config.yaml", "misses.jsonl", "plots", "report.md", "run.trec"]
    assert contents["1"]["artifacts"] == saved
    assert contents["1"]["plots"] == ["plots/recall_at_k.svg"]
    assert contents["1"]["metrics"]["recall_at_1"] == pytest.approx(0.5)  # c1..c3 of 6 at rank 1
    assert contents["1"] == contents["0"]


def test_parent_killed_with_sigkill_leaves_no_running_run(tmp_path):
    fx = write_tiny(tmp_path)
    uri = f"sqlite:///{tmp_path / 'ml' / 'mlflow.db'}"
    progress = tmp_path / "progress.txt"
    proc = popen_cli(
        tmp_path, f"fixture.path={fx}", f"tracking.uri={uri}", f"hydra.run.dir={tmp_path / 'out'}",
        *slow_ranker(progress, delay=1.0),
    )  # fmt: skip
    wait_for_lines(progress, 1, proc)
    workers = [p for p in child_pids(proc.pid) if "upload_worker" in cmdline(p)]
    assert len(workers) == 1, "the run started no upload worker"
    db = tmp_path / "ml" / "mlflow.db"
    db.parent.mkdir(exist_ok=True)

    def opened() -> bool:  # the worker opens the store and the run while the cases run
        with schema_lock(db):  # not while the worker creates the schema
            return bool(all_runs(uri))

    wait_until("the upload worker to open the run", opened, proc)
    assert [r.info.status for r in all_runs(uri)] == ["RUNNING"]
    proc.send_signal(signal.SIGKILL)  # no handler, no record stage: only the worker can end the run
    proc.communicate(timeout=60)
    wait_until(
        "the upload worker to end the run",
        lambda: all_runs(uri)[0].info.status != "RUNNING",
        alive=lambda: "upload_worker" in cmdline(workers[0]),
    )
    assert [r.info.status for r in all_runs(uri)] == ["KILLED"]
    wait_gone("the upload worker", lambda: bool(cmdline(workers[0])))
    assert "upload_worker" not in cmdline(workers[0]), "the worker outlived its run"


def test_store_that_cannot_be_opened_after_the_checks_costs_no_results(tmp_path):
    """An SQLite file MLflow made only half of (its version table, no runs tables) passes the quick
    checks and fails in MLflow: the results are saved, the line names the real cause and does not
    blame an unreachable store, and `evalpipe sync` to a good store uploads them."""
    import sqlite3

    from evalpipe.tracking.store_check import head_revision

    fx = write_tiny(tmp_path)
    store = tmp_path / "ml"
    store.mkdir()
    con = sqlite3.connect(store / "mlflow.db")
    con.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
    con.execute("INSERT INTO alembic_version VALUES (?)", (head_revision(),))
    con.execute("CREATE TABLE experiments (experiment_id INTEGER, name TEXT, lifecycle_stage TEXT)")
    con.commit()
    con.close()
    out = tmp_path / "out"
    uri = f"sqlite:///{store / 'mlflow.db'}"
    proc = cli(tmp_path, f"fixture.path={fx}", f"tracking.uri={uri}", f"hydra.run.dir={out}", *PLUGIN)
    assert proc.returncode == 1, proc.stderr
    lines = error_lines(proc.stderr)
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("evalpipe: error: logging to MLflow failed (")
    assert f"the results are saved in {out}" in lines[0]
    assert "once the store is back" not in lines[0] and "the store answered and refused them" in lines[0]
    assert "R@1" in proc.stdout  # the tables were printed from the saved run
    info = json.loads((out / "run_info.json").read_text())
    assert info["status"] == "FINISHED" and info["upload"] == "failed" and info["run_id"] is None
    good = f"sqlite:///{tmp_path / 'good' / 'mlflow.db'}"
    synced = cli(tmp_path, "sync", "--tracking-uri", good, str(out))
    assert synced.returncode == 0, synced.stderr
    (run,) = all_runs(good)
    assert run.info.status == "FINISHED" and run.data.metrics["recall_at_1"] == pytest.approx(0.5)


def test_no_worker_for_commands_that_are_not_single_online_runs(monkeypatch):
    monkeypatch.delenv("EVALPIPE_UPLOAD_WORKER", raising=False)
    assert wanted(["ranker=bm25", "fixture=gold"])
    assert wanted([])
    for argv in (
        ["-m", "ranker.k1=1,2"],
        ["--multirun", "x=1"],
        ["--cfg", "job"],
        ["--help"],
        ["tracking.offline=true"],
        ["compare", "a", "b"],
        ["sync", "dir"],
    ):
        assert not wanted(argv), argv
    monkeypatch.setenv("EVALPIPE_UPLOAD_WORKER", "0")
    assert not wanted(["ranker=bm25"])


def test_bad_input_run_leaves_no_worker_behind(tmp_path):
    proc = popen_cli(tmp_path, "fixture.path=/nonexistent/fx.yaml")
    time.sleep(0.2)
    workers = [p for p in child_pids(proc.pid) if "upload_worker" in cmdline(p)]
    proc.communicate(timeout=120)
    assert proc.returncode == 2
    for pid in workers:  # ended with its parent, not left importing MLflow
        assert "upload_worker" not in cmdline(pid)
