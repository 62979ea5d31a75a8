"""The tracking store as a destination, not a dependency: unreachable, read-only, offline + sync,
and a real `mlflow server` killed mid-run. Real processes, real stores; every case asserts the exit
code, one line on stderr, no traceback, no RUNNING run and what was saved locally."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from cli_helpers import (
    all_runs,
    cli,
    client_for,
    error_lines,
    free_port,
    popen_cli,
    slow_ranker,
    start_server,
    stop_server,
    wait_for_lines,
    write_tiny,
)
from waiting import wait_until

PLUGIN = ["~ranker", "+ranker._target_=plugins_for_tests.keyword_search", "+ranker._partial_=true"]
SAVED = {"report.md", "cases.jsonl", "misses.jsonl", "run.trec", "config.yaml", "metrics.json"}
SAVED |= {"params.json", "tags.json", "run_info.json"}


def test_unreachable_server_fails_fast_with_one_line(tmp_path):
    fx = write_tiny(tmp_path)
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    # A timeout, not a timing assertion: MLflow's own retries would take ~4 minutes.
    proc = cli(
        tmp_path, f"fixture.path={fx}", f"tracking.uri={uri}", f"hydra.run.dir={tmp_path / 'out'}", timeout=30
    )
    assert proc.returncode == 2, proc.stderr
    lines = error_lines(proc.stderr)
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"evalpipe: error: tracking server {uri} is unreachable")
    assert "tracking.offline=true" in lines[0]
    assert not (tmp_path / "out" / "run_info.json").exists()  # nothing was scored


def test_offline_run_then_sync_uploads_once_with_the_saved_values(tmp_path):
    fx = write_tiny(tmp_path)
    db = tmp_path / "store" / "mlflow.db"
    uri = f"sqlite:///{db}"
    out = tmp_path / "out"
    proc = cli(
        tmp_path,
        f"fixture.path={fx}",
        f"tracking.uri={uri}",
        "tracking.offline=true",
        f"hydra.run.dir={out}",
        *PLUGIN,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"evalpipe sync {out}" in proc.stdout
    assert not db.exists()  # offline: the store was never touched
    assert {p.name for p in out.iterdir()} >= SAVED
    info = json.loads((out / "run_info.json").read_text())
    assert info["status"] == "FINISHED" and info["upload"] == "offline" and info["tracking_uri"] == uri
    metrics = json.loads((out / "metrics.json").read_text())
    params = json.loads((out / "params.json").read_text())
    tags = json.loads((out / "tags.json").read_text())
    # keyword_search: c1..c3 found at rank 1, c4..c6 nothing (see cli_helpers.FIXTURE).
    assert metrics["recall_at_1"] == pytest.approx(0.5) and metrics["count/cases"] == 6

    env_sync = cli(tmp_path, "sync", str(out))
    assert env_sync.returncode == 0, env_sync.stderr
    assert env_sync.stdout.startswith(f"uploaded {out} -> run ")
    runs = all_runs(uri)
    assert len(runs) == 1
    run = runs[0]
    client = client_for(uri)
    assert client.get_experiment(run.info.experiment_id).name == "evalpipe/fx"
    assert run.info.status == "FINISHED" and run.info.run_name == info["run_name"]
    assert run.info.start_time == info["start_time_ms"] and run.info.end_time == info["end_time_ms"]
    assert run.data.metrics == pytest.approx(metrics)
    assert run.data.params == params
    assert {k: v for k, v in run.data.tags.items() if k in tags} == tags
    assert run.data.tags["evalpipe.local_id"] == info["local_id"]
    assert run.data.tags["evalpipe.upload"] == "complete"
    history = client.get_metric_history(run.info.run_id, "recall_at_1")
    assert [m.timestamp for m in history] == [info["end_time_ms"]]
    arts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"report.md", "config.yaml", "misses.jsonl", "run.trec", "cases.json"} <= arts
    dl = Path(client.download_artifacts(run.info.run_id, "", str(tmp_path / "dl")))
    for name in ("report.md", "config.yaml", "misses.jsonl", "run.trec"):
        assert (dl / name).read_text() == (out / name).read_text()
    table = json.loads((dl / "cases.json").read_text())
    rows = [dict(zip(table["columns"], r, strict=True)) for r in table["data"]]
    assert rows == [json.loads(x) for x in (out / "cases.jsonl").read_text().splitlines()]
    assert json.loads((out / "run_info.json").read_text())["uploads"] == {uri: run.info.run_id}

    again = cli(tmp_path, "sync", str(tmp_path))  # a parent dir is searched; the run is already there
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"already uploaded: {out} is run {run.info.run_id}")
    assert len(all_runs(uri)) == 1
    assert len(client.get_metric_history(run.info.run_id, "recall_at_1")) == 1


def test_sync_of_a_dir_without_saved_runs_is_bad_input(tmp_path):
    proc = cli(tmp_path, "sync", str(tmp_path))
    assert proc.returncode == 2
    assert error_lines(proc.stderr) == [f"evalpipe: error: no saved run (run_info.json) in {tmp_path}"]


def _make_read_only(path: Path) -> None:
    if os.geteuid() == 0:  # root ignores permission bits: make it immutable instead
        if shutil.which("chattr") is None:
            pytest.skip("running as root without chattr: cannot make a read-only directory")
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"chattr +i not supported here: {done.stderr.decode().strip()}")
    else:
        path.chmod(0o555)


def _make_writable(path: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)
    else:
        path.chmod(0o755)


@pytest.mark.parametrize("existing", [False, True], ids=["new-store", "existing-store"])
def test_read_only_store_directory_says_read_only(tmp_path, existing):
    fx = write_tiny(tmp_path)
    store = tmp_path / "store"
    store.mkdir()
    uri = f"sqlite:///{store / 'mlflow.db'}"
    if existing:
        first = cli(
            tmp_path, f"fixture.path={fx}", f"tracking.uri={uri}", f"hydra.run.dir={tmp_path / 'o1'}", *PLUGIN
        )
        assert first.returncode == 0, first.stderr
    _make_read_only(store)
    try:
        proc = cli(
            tmp_path,
            f"fixture.path={fx}",
            f"tracking.uri={uri}",
            f"hydra.run.dir={tmp_path / 'o2'}",
            timeout=30,
        )
    finally:
        _make_writable(store)
    assert proc.returncode == 2, proc.stderr
    lines = error_lines(proc.stderr)
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"evalpipe: error: tracking store {store / 'mlflow.db'} is read-only")
    assert "not writable" in lines[0] and "tracking.offline=true" in lines[0]
    if existing:
        assert [r.info.status for r in all_runs(uri)] == ["FINISHED"]


def wait_for_running_run(uri: str, proc) -> None:
    wait_until(
        "a RUNNING run in the store", lambda: any(r.info.status == "RUNNING" for r in all_runs(uri)), proc
    )


def test_server_killed_mid_run_saves_results_and_sync_repairs_the_store(tmp_path):
    fx = write_tiny(tmp_path)
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    server = start_server(tmp_path, port)
    out = tmp_path / "out"
    progress = tmp_path / "progress.txt"
    try:
        run = popen_cli(
            tmp_path,
            f"fixture.path={fx}",
            f"tracking.uri={uri}",
            f"hydra.run.dir={out}",
            *slow_ranker(progress, 0.8),
        )
        wait_for_lines(progress, 1, run)
        # The run is opened by the upload worker while the cases run: kill the server once it is.
        wait_for_running_run(uri, run)
        stop_server(server, signal.SIGKILL)
        stdout, stderr = run.communicate(timeout=120)
    finally:
        stop_server(server)
    assert run.returncode == 1, stderr
    lines = error_lines(stderr)
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("evalpipe: error: logging to MLflow failed")
    assert f"the results are saved in {out}" in lines[0] and f"evalpipe sync {out}" in lines[0]
    info = json.loads((out / "run_info.json").read_text())
    assert info["status"] == "FINISHED" and info["upload"] == "failed" and info["cases_completed"] == 6
    assert {p.name for p in out.iterdir()} >= SAVED
    half = info["run_id"]

    server = start_server(tmp_path, port)  # the store comes back (same database)
    try:
        assert client_for(uri).get_run(half).info.status == "RUNNING"  # the dead store could not be told
        synced = cli(tmp_path, "sync", str(out))
        assert synced.returncode == 0, synced.stderr
        assert f"marked the half-logged run(s) ['{half}'] FAILED" in synced.stdout
        runs = {r.info.run_id: r for r in all_runs(uri)}
        assert runs[half].info.status == "FAILED"
        new = [r for rid, r in runs.items() if rid != half]
        assert len(new) == 1 and new[0].info.status == "FINISHED"
        assert runs[half].data.tags["evalpipe.superseded_by"] == new[0].info.run_id
        assert new[0].data.metrics["recall_at_1"] == pytest.approx(0.5)
        again = cli(tmp_path, "sync", str(out))
        assert again.returncode == 0 and again.stdout.startswith("already uploaded")
        assert len(all_runs(uri)) == 2
    finally:
        stop_server(server)
