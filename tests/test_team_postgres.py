"""The team stack for real: scripts/team_server.py on a real PostgreSQL (Debian's, started here as a
non-root user in a temp dir with initdb/pg_ctl), many writers at once, a Ray cluster, a server
stopped mid-sweep, two Optuna processes on one PostgreSQL study, and MLflow basic auth with the
password never written anywhere. Skips with the reason when PostgreSQL cannot be started here.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from test_ray import (
    ROOT,
    clean_env,
    parents_and_children,
    runs_of,
    sweep_cmd,
    two_node_cluster,  # noqa: F401 (a fixture)
    wait_for,
    write_fixture,
)
from waiting import HUNG_S, wait_until

# With tests/test_ray.py on one pytest-xdist worker: both start Ray clusters (see there).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]
SCRIPT = ROOT / "scripts" / "team_server.py"
_spec = importlib.util.spec_from_file_location("team_server", SCRIPT)
team_server = importlib.util.module_from_spec(_spec)
sys.modules["team_server"] = team_server  # dataclasses look their module up while it executes
_spec.loader.exec_module(team_server)

pytest.importorskip("psycopg", reason="psycopg is not installed (pip install -e '.[postgres]')")
_why = team_server.postgres_unavailable()
if _why:
    pytest.skip(f"no local PostgreSQL: {_why}", allow_module_level=True)


class ScriptServer:
    """scripts/team_server.py as a subprocess, exactly as docs/team.md starts it."""

    def __init__(self, backend: str, artifacts: Path, log: Path, *extra: str, env: dict | None = None):
        self.port = team_server.free_port()
        self.cmd = [sys.executable, str(SCRIPT), "--backend-store-uri", backend]
        self.cmd += ["--artifacts-destination", str(artifacts), "--port", str(self.port), *extra]
        self.env, self.log, self.proc = env or clean_env(), log, None
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> ScriptServer:
        seen = self.log.stat().st_size if self.log.exists() else 0  # a restart appends to the log
        self.out = self.log.open("a")
        self.proc = subprocess.Popen(
            self.cmd, env=self.env, stdout=self.out, stderr=subprocess.STDOUT, text=True
        )
        wait_until(
            "team_server.py to print 'ready: MLflow server'",
            lambda: "ready: MLflow server" in self.log.read_text()[seen:],
            self.proc,
            output=lambda: self.log.read_text()[-2000:],
            poll_s=0.3,
        )
        return self

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        self.out.close()
        return code


@pytest.fixture(scope="module")
def postgres():
    root = Path(tempfile.mkdtemp(prefix="evalpipe-pg-", dir="/tmp"))
    root.chmod(0o711)  # the postgres user must reach its data dir inside
    pg = team_server.LocalPostgres(root / "pg")
    try:
        pg.start()
    except team_server.StackError as exc:
        pytest.skip(f"no local PostgreSQL: {exc}")
    try:
        yield pg
    finally:
        pg.stop()
        subprocess.run(["rm", "-rf", str(root)], check=False)


@pytest.fixture(scope="module")
def team(postgres, tmp_path_factory):
    base = tmp_path_factory.mktemp("team")
    server = ScriptServer(
        postgres.create_database("mlflow"), base / "artifacts", base / "server.log", "--workers", "2"
    )
    server.start()
    yield server
    assert server.stop() == 0  # SIGTERM: a clean stop


def test_the_script_refuses_an_unreachable_database_in_one_line(tmp_path):
    port = team_server.free_port()
    cmd = [
        sys.executable,
        str(SCRIPT),
        "--backend-store-uri",
        f"postgresql://nobody:hunter2@127.0.0.1:{port}/x",
    ]
    cmd += ["--artifacts-destination", str(tmp_path / "a")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=HUNG_S, env=clean_env())
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(
        "team_server: error: cannot connect to the database postgresql://nobody@127.0.0.1:"
    )
    assert "hunter2" not in proc.stderr + proc.stdout


def single_run(fx: Path, uri: str, out: Path, *extra: str) -> list[str]:
    cmd = [sys.executable, "-m", "evalpipe", f"fixture.path={fx}", "fixture.name=tiny", f"tracking.uri={uri}"]
    return cmd + [f"hydra.run.dir={out}", "progress=false", *extra]


def test_sweep_single_runs_and_sync_at_once_against_the_postgres_server(tmp_path, team):
    fx = write_fixture(tmp_path / "fx")
    env = clean_env()
    offline = subprocess.run(
        single_run(fx, team.url, tmp_path / "offline", "tracking.offline=true", "run_name=synced"),
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=HUNG_S,
    )  # fmt: skip
    assert offline.returncode == 0, offline.stderr[-2000:]

    grid = [
        "ranker.k1=0.6,0.9,1.2,1.5",
        "ranker.b=0.3,0.6,0.9",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=4",
    ]
    sweep = [sys.executable, "-m", "evalpipe", "-m", f"fixture.path={fx}", "fixture.name=tiny"]
    sweep += [f"tracking.uri={team.url}", f"hydra.sweep.dir={tmp_path / 'multirun'}", "progress=false", *grid]
    procs = {
        "sweep": subprocess.Popen(
            sweep, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    }
    for i in range(3):
        cmd = single_run(fx, team.url, tmp_path / f"single{i}", f"run_name=single-{i}", f"ranker.k1={2 + i}")
        procs[f"single{i}"] = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    procs["sync"] = subprocess.Popen(
        [sys.executable, "-m", "evalpipe", "sync", str(tmp_path / "offline"), "--tracking-uri", team.url],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=HUNG_S)
        assert proc.returncode == 0, f"{name}: {err[-2000:]}"
        assert "Traceback" not in err, name

    client, runs = runs_of(team.url)
    assert not [r for r in runs if r.info.status != "FINISHED"]
    _, parents, kids = parents_and_children(team.url)
    (parent,) = parents
    children = kids[parent.info.run_id]
    combos = sorted(
        (k.data.tags["evalpipe.swept.ranker.k1"], k.data.tags["evalpipe.swept.ranker.b"]) for k in children
    )
    assert combos == sorted((k1, b) for k1 in ("0.6", "0.9", "1.2", "1.5") for b in ("0.3", "0.6", "0.9"))
    names = sorted(r.info.run_name for r in runs if r.data.tags.get("evalpipe.role") is None)
    assert names == ["single-0", "single-1", "single-2", "synced"]  # each exactly once
    assert len(runs) == 1 + 12 + 4
    for run in [*children, *(r for r in runs if r.info.run_name.startswith(("single", "synced")))]:
        # Both tiny cases are found at 5 by BM25 whatever k1 and b: c1 by "combine"/"dicts" in
        # merge_settings' text, c2 by its title Open.
        assert run.data.metrics["recall_at_5"] == 1.0 and run.data.metrics["mrr"] == 1.0
        assert run.data.tags["evalpipe.fixture"] == "tiny" and "evalpipe.config_hash" in run.data.tags
        assert run.data.params["fixture.name"] == "tiny"
        assert {"report.md", "cases.json", "run.trec"} <= {
            a.path for a in client.list_artifacts(run.info.run_id)
        }
    assert parent.data.metrics["sweep/points"] == 12.0
    compare = subprocess.run(
        [sys.executable, "-m", "evalpipe", "compare", "--tracking-uri", team.url,
         "--sweep", parent.data.tags["evalpipe.sweep_id"], "--metrics", "recall_at_5", "mrr"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=HUNG_S,
    )  # fmt: skip
    assert compare.returncode == 0, compare.stderr[-2000:]
    assert "12 runs" in compare.stdout + compare.stderr


def test_ray_cluster_sweep_logs_to_the_postgres_server_from_both_nodes(tmp_path, team, two_node_cluster):  # noqa: F811
    fx = write_fixture(tmp_path / "fx")
    cmd = sweep_cmd(
        fx, team.url, tmp_path / "multirun", "ranker.k1=0.7,0.8,1.1,1.3", "tracking.experiment=ray-team"
    )
    cmd += [f"++hydra.launcher.ray.init.address={two_node_cluster.address}"]
    proc = subprocess.run(cmd, cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=HUNG_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    nodes = {line.rsplit(" ", 1)[-1] for line in proc.stderr.splitlines() if " ran on node " in line}
    assert nodes == {n.node_id for n in two_node_cluster.list_all_nodes()}
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=team.url)
    exp = client.get_experiment_by_name("ray-team")
    assert exp.artifact_location.startswith("mlflow-artifacts:")  # served by the server, no shared folder
    runs = client.search_runs([exp.experiment_id])
    kids = [r for r in runs if r.data.tags.get("evalpipe.role") == "child"]
    assert sorted(r.data.tags["evalpipe.swept.ranker.k1"] for r in kids) == ["0.7", "0.8", "1.1", "1.3"]
    assert all(r.info.status == "FINISHED" for r in runs) and len(runs) == 5
    assert all("report.md" in {a.path for a in client.list_artifacts(r.info.run_id)} for r in kids)


def test_server_stopped_mid_sweep_nothing_is_lost(tmp_path, team):
    fx = write_fixture(tmp_path / "fx")
    marker = tmp_path / "held.pid"
    plugin = [
        "~ranker",
        "+ranker._target_=plugins_for_tests.HoldingRanker",
        f"+ranker.marker={marker}",
        "+ranker.once=true",
    ]
    args = [*plugin, "+ranker.hold_s=0,8,0.001", "tracking.experiment=stopped"]

    def sweep(sweep_dir: Path) -> list[str]:
        cmd = [sys.executable, "-m", "evalpipe", "-m", f"fixture.path={fx}", "fixture.name=tiny"]
        return cmd + [f"tracking.uri={team.url}", f"hydra.sweep.dir={sweep_dir}", "progress=false", *args]

    cmd = sweep(tmp_path / "multirun")
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    wait_for(marker, proc)  # point #1 has started its run on the server and holds
    team.stop()
    try:
        _, err = proc.communicate(timeout=HUNG_S)
    finally:
        team.start()
    assert "Traceback" not in err, err[-6000:]
    assert "evalpipe sync" in err  # the failed upload says how to finish it
    saved = sorted(p.parent.name for p in (tmp_path / "multirun").rglob("run_info.json"))
    assert "1" in saved  # point #1 finished locally

    sync = subprocess.run(
        [sys.executable, "-m", "evalpipe", "sync", str(tmp_path / "multirun"), "--tracking-uri", team.url],
        cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=HUNG_S,
    )  # fmt: skip
    assert sync.returncode == 0, sync.stderr[-2000:]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=team.url)
    exp = client.get_experiment_by_name("stopped")
    runs = client.search_runs([exp.experiment_id])
    held = [
        r
        for r in runs
        if r.data.tags.get("evalpipe.swept.ranker.hold_s") == "8" and r.info.status == "FINISHED"
    ]
    assert len(held) == 1 and held[0].data.metrics["recall_at_5"] == 0.5  # keyword_search misses c1
    assert "report.md" in {a.path for a in client.list_artifacts(held[0].info.run_id)}

    again = subprocess.run(
        sweep(tmp_path / "multirun2"), cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stderr[-2000:]
    summary = (tmp_path / "multirun2" / "summary.md").read_text(encoding="utf-8")
    assert "3 points · " in summary and " 0 failed" in summary


def test_two_optuna_processes_share_one_study_in_postgres(tmp_path, postgres, team):
    from test_optuna_sweeper import two_processes_share_one_study

    two_processes_share_one_study(tmp_path, team.url, postgres.create_database("optuna"))


def test_basic_auth_with_the_password_never_written(tmp_path, postgres):
    password = "pw-" + secrets.token_hex(12)
    env = clean_env(MLFLOW_AUTH_ADMIN_USERNAME="admin", MLFLOW_AUTH_ADMIN_PASSWORD=password)
    backend = postgres.create_database("mlflow_auth")
    log = tmp_path / "server.log"
    server = ScriptServer(backend, tmp_path / "artifacts", log, "--auth", "--workers", "1", env=env)
    server.start()
    try:
        import urllib.error
        import urllib.request

        with pytest.raises(urllib.error.HTTPError) as denied:
            urllib.request.urlopen(
                f"{server.url}/api/2.0/mlflow/experiments/search?max_results=1", timeout=10
            )
        assert denied.value.code == 401
        cmdlines = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in _descendants(server.proc.pid)]
        fx = write_fixture(tmp_path / "fx")
        client_env = clean_env(MLFLOW_TRACKING_USERNAME="admin", MLFLOW_TRACKING_PASSWORD=password)
        run = subprocess.run(
            single_run(fx, server.url, tmp_path / "run", "tracking=team", "run_name=authed"),
            cwd=ROOT, env=client_env, capture_output=True, text=True, timeout=HUNG_S,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-2000:]
        wrong = subprocess.run(
            single_run(fx, server.url, tmp_path / "wrong", "run_name=denied"),
            cwd=ROOT, env=clean_env(MLFLOW_TRACKING_USERNAME="admin", MLFLOW_TRACKING_PASSWORD="nope"),
            capture_output=True, text=True, timeout=HUNG_S,
        )  # fmt: skip
        assert wrong.returncode != 0 and "Traceback" not in wrong.stderr
    finally:
        assert server.stop() == 0
    assert all(password.encode() not in c for c in cmdlines)  # not on any command line
    for path in tmp_path.rglob("*"):  # not in the run's files, the artifacts, the server log
        if path.is_file():
            assert password.encode() not in path.read_bytes(), path
    pg_dump = [team_server.pg_bin("pg_dump") or "pg_dump", "-h", str(postgres.socket_dir)]
    pg_dump += ["-p", str(postgres.port), "-U", postgres.user, "mlflow_auth"]
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    # Not in the database either (MLflow stores a salted hash):
    dump = subprocess.run(as_postgres + pg_dump, capture_output=True, timeout=HUNG_S)
    assert dump.returncode == 0 and b"authed" in dump.stdout and password.encode() not in dump.stdout


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        for entry in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = entry.read_text().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if int(fields[1]) == current:
                todo.append(int(entry.parent.name))
    return out
