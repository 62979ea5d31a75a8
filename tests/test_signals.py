"""SIGTERM and SIGINT sent to real evalpipe processes mid-run: the run ends KILLED with the cases
measured so far saved (marked partial), one line on stderr, no traceback, exit 128+signal; a killed
joblib sweep ends parent and children KILLED and leaves no worker behind."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

from cli_helpers import all_runs, client_for, cmdline, popen_cli, slow_ranker, wait_for_lines, write_tiny
from evalpipe.safety.signals import child_pids
from waiting import wait_gone


@pytest.mark.parametrize(
    ("sig", "code", "name"),
    [
        (signal.SIGTERM, 143, "SIGTERM"),
        (signal.SIGINT, 130, "SIGINT"),
        (signal.SIGHUP, 129, "SIGHUP"),  # a closed terminal or a dropped ssh session
        (signal.SIGQUIT, 131, "SIGQUIT"),
        (signal.SIGUSR1, 138, "SIGUSR1"),
    ],
)
def test_signal_mid_run_saves_partial_results_and_ends_killed(tmp_path, sig, code, name):
    fx = write_tiny(tmp_path)
    uri = f"sqlite:///{tmp_path / 'ml' / 'mlflow.db'}"
    progress = tmp_path / "progress.txt"
    out = tmp_path / "out"
    proc = popen_cli(
        tmp_path, f"fixture.path={fx}", f"tracking.uri={uri}", f"hydra.run.dir={out}", *slow_ranker(progress)
    )
    wait_for_lines(progress, 2, proc)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr
    lines = [ln for ln in stderr.splitlines() if ln.startswith("evalpipe:")]
    assert len(lines) == 1 and lines[0].startswith(f"evalpipe: interrupted by {name} after "), stderr
    assert "KILLED" in lines[0] and str(out) in lines[0]

    info = json.loads((out / "run_info.json").read_text())
    done = info["cases_completed"]
    # The signal came after case 2 finished; the 0.4 s sleep of case 3 may or may not have ended.
    assert 2 <= done < 6 and info["cases_total"] == 6
    assert info["status"] == "KILLED" and info["partial"] is True and info["interrupted_by"] == name
    cases = [json.loads(x) for x in (out / "cases.jsonl").read_text().splitlines()]
    assert [c["case_id"] for c in cases] == ["c1", "c2", "c3", "c4", "c5", "c6"][:done]
    assert "PARTIAL: interrupted by" in (out / "report.md").read_text()
    metrics = json.loads((out / "metrics.json").read_text())
    # keyword_search finds c1..c3 at rank 1 (see cli_helpers.FIXTURE): all measured cases so far hit.
    assert metrics["count/cases"] == done and metrics["recall_at_1"] == pytest.approx(min(done, 3) / done)

    runs = all_runs(uri)
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "KILLED" and run.info.run_id == info["run_id"]
    assert run.data.tags["evalpipe.partial"] == "true" and run.data.metrics["count/cases"] == done
    assert "cases.json" in {a.path for a in client_for(uri).list_artifacts(run.info.run_id)}


def _alive(pid: int) -> bool:
    """Running (a zombie awaiting its reaper is gone for our purpose)."""
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def test_sigterm_to_a_joblib_sweep_kills_parent_children_and_workers(tmp_path):
    fx = write_tiny(tmp_path)
    uri = f"sqlite:///{tmp_path / 'ml' / 'mlflow.db'}"
    progress = tmp_path / "progress.txt"
    sweep_dir = tmp_path / "multirun"
    proc = popen_cli(
        tmp_path,
        "-m",
        f"fixture.path={fx}",
        f"tracking.uri={uri}",
        f"hydra.sweep.dir={sweep_dir}",
        *slow_ranker(progress, delay=0.5),
        "+ranker.variant=1,2,3,4",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "progress=false",
        "plots=false",
    )
    wait_for_lines(progress, 3, proc)  # both workers are measuring
    workers = [p for p in child_pids(proc.pid) if "loky" in cmdline(p)]
    assert workers, "the joblib launcher started no loky worker"
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr
    assert "evalpipe: interrupted by SIGTERM" in stderr

    # No loky worker of this sweep survives it.
    wait_gone("the sweep's loky workers", lambda: any(_alive(p) for p in workers), poll_s=0.2)
    assert [p for p in workers if _alive(p)] == []

    runs = all_runs(uri)
    parents = [r for r in runs if r.data.tags.get("evalpipe.role") == "parent"]
    children = [r for r in runs if r.data.tags.get("evalpipe.role") == "child"]
    assert len(parents) == 1 and parents[0].info.status == "KILLED"
    # A point that ended before the signal (a loaded machine is slow to start the other) is FINISHED.
    assert children and {r.info.status for r in children} <= {"KILLED", "FINISHED"}, [
        (r.info.run_name, r.info.status) for r in children
    ]
    assert any(r.info.status == "KILLED" for r in children)
    assert not [r for r in runs if r.info.status == "RUNNING"]
    # Each started job saved what it measured before its worker was torn down.
    saved = [json.loads(p.read_text()) for p in sweep_dir.glob("*/run_info.json")]
    saved = [s for s in saved if s["status"] != "FINISHED"]
    assert saved and all(s["status"] == "KILLED" and s["partial"] for s in saved)
    assert sum(s["cases_completed"] for s in saved) >= 3
    # ... and is in the store too: every saved point's run holds its metrics (uploaded by the
    # worker, or by the parent once the workers are gone), or the parent said how to sync it.
    by_id = {r.info.run_id: r for r in runs}
    for s in saved:
        run = by_id[s["run_id"]]
        if run.data.tags.get("evalpipe.upload") == "complete":
            assert run.data.metrics.get("count/cases") == s["cases_completed"], (s, run.data.metrics)
        else:  # a worker torn down mid-upload and the store busy: nothing lost, the parent says how to sync
            assert f"upload them with `evalpipe sync {sweep_dir}`" in stderr, (s, run.data.tags, stderr)
    assert "Traceback" not in stderr


def test_sighup_ignored_at_start_stays_ignored_as_under_nohup(tmp_path):
    """`nohup evalpipe ...` asks for the run to outlive the terminal: SIGHUP must not end it."""
    import subprocess

    fx = write_tiny(tmp_path)
    uri = f"sqlite:///{tmp_path / 'ml' / 'mlflow.db'}"
    progress = tmp_path / "progress.txt"
    out = tmp_path / "out"

    def ignore_hup() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    from cli_helpers import cli_env

    proc = subprocess.Popen(
        [sys.executable, "-m", "evalpipe", f"fixture.path={fx}", f"tracking.uri={uri}",
         f"hydra.run.dir={out}", *slow_ranker(progress, delay=0.2)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(),
        preexec_fn=ignore_hup,
    )  # fmt: skip
    wait_for_lines(progress, 2, proc)
    proc.send_signal(signal.SIGHUP)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    info = json.loads((out / "run_info.json").read_text())
    assert info["status"] == "FINISHED" and info["cases_completed"] == 6
    (run,) = all_runs(uri)
    assert run.info.status == "FINISHED"
