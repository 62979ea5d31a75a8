"""Sweeps on Ray (hydra/launcher=ray, src/hydra_plugins/evalpipe_ray_launcher), for real.

A local instance the launcher starts itself, logging to an MLflow server over HTTP; a real
two-node cluster on this machine (ray.cluster_utils.Cluster: two raylets, one CPU each) joined
by address and by `auto`, with the points spread over both nodes; a Ray worker killed with
SIGKILL in the middle of a point; SIGTERM and Ctrl-C on the sweep's driver. Sweeps stay tiny
(BM25 and a plug-in on a 6-unit corpus): the machine has 2 cores.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TINY_UNITS

ray = pytest.importorskip("ray", reason="ray is not installed (pip install -e '.[ray]'; [dev] includes it)")

# One group with tests/test_team_postgres.py: both start Ray clusters on this machine, and a
# head node writes /tmp/ray/ray_current_cluster, which a later `ray.init()` would join.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]
ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
FIXTURE = """\
name: tiny
corpus: corpus.jsonl
cases:
  - {id: c1, tier: concept, query: combine dicts, expected: ["pkg/a.py::merge_settings"]}
  - {id: c2, tier: exact, query: Open, expected: ["pkg/b.go::Open"]}
"""
OBJECT_STORE = 80 * 2**20


from cli_helpers import answers_health, default_signals  # noqa: E402
from store_template import seed  # noqa: E402
from waiting import HUNG_S, wait_until  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_fixture(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(u) + "\n" for u in TINY_UNITS), encoding="utf-8")
    (root / "fx.yaml").write_text(FIXTURE, encoding="utf-8")
    return root / "fx.yaml"


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MLFLOW_TRACKING", "EVALPIPE_", "RAY_ADDRESS"))
    }
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(TESTS)])
    env["MLFLOW_DISABLE_TELEMETRY"] = "true"
    env.update(extra)
    return env


def sweep_cmd(fx: Path, uri: str, sweep_dir: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "evalpipe",
        "-m",
        f"fixture.path={fx}",
        "fixture.name=tiny",
        f"tracking.uri={uri}",
        f"hydra.sweep.dir={sweep_dir}",
        "progress=false",
        "hydra/launcher=ray",
        *args,
    ]


def runs_of(uri: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("evalpipe/tiny")
    return client, (client.search_runs([exp.experiment_id]) if exp else [])


def parents_and_children(uri: str):
    _, runs = runs_of(uri)
    parents = [r for r in runs if r.data.tags.get("evalpipe.role") == "parent"]
    kids = {
        p.info.run_id: [r for r in runs if r.data.tags.get("mlflow.parentRunId") == p.info.run_id]
        for p in parents
    }
    return runs, parents, kids


def start_mlflow_server(tmp_path: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true"}
    cmd = [sys.executable, "-m", "mlflow", "server", "--workers", "1", "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--backend-store-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"]
    cmd += ["--artifacts-destination", str(tmp_path / "artifacts")]
    seed(tmp_path / "mlflow.db")  # the schema MLflow's migrations build, copied (tests/store_template.py)
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:  # ready when it answers, however long a loaded machine takes; failed when it has exited
        wait_until(
            f"mlflow server {url} to answer /health",
            lambda: answers_health(url),
            proc,
            output=lambda: (tmp_path / "server.log").read_text()[-2000:],
            poll_s=0.25,
        )
    except AssertionError:
        proc.terminate()
        raise
    return proc, url


@pytest.fixture
def mlflow_server(tmp_path):
    proc, url = start_mlflow_server(tmp_path)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module", autouse=True)
def ray_home(tmp_path_factory):
    """Ray writes ~/.ray/auth_token when it starts a local instance (token auth by default); a token
    left in the user's home turns token auth on for every later `ray start` there, which no driver
    then joins. Every Ray this module starts (in-process and in the sweeps it runs: clean_env copies
    the environment) gets a home of its own."""
    home = tmp_path_factory.mktemp("ray-home")
    saved = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    try:
        yield home
    finally:
        if saved is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = saved


def test_a_local_sweep_starts_a_local_instance_despite_a_dead_recorded_cluster(tmp_path, mlflow_server):
    """Issue 32, category 8: a `ray start` cluster that has gone left its address in
    <ray temp>/ray/ray_current_cluster; ray.init() without an address would join it (and refuse
    num_cpus). address: null must start a local instance."""
    import shutil
    import tempfile

    short = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))  # Ray's socket paths must stay short
    try:
        (short / "ray").mkdir()
        (short / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{free_port()}\n")
        fx = write_fixture(tmp_path / "fx")
        cmd = sweep_cmd(fx, mlflow_server, tmp_path / "multirun", "ranker.fields=[title],[title,text]")
        cmd += [
            "+hydra.launcher.ray.init.num_cpus=2",
            f"+hydra.launcher.ray.init.object_store_memory={OBJECT_STORE}",
        ]
        env = clean_env(RAY_TMPDIR=str(short))
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=HUNG_S)
    finally:
        shutil.rmtree(short, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "[ray] joining" not in proc.stderr
    _, parents, _ = parents_and_children(mlflow_server)
    assert [p.info.status for p in parents][-1] == "FINISHED"


def test_joining_on_purpose_names_the_cluster(monkeypatch):
    from hydra_plugins.evalpipe_ray_launcher._core import cluster_named

    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert cluster_named({}) == "10.0.0.1:6379 (from RAY_ADDRESS)"
    monkeypatch.delenv("RAY_ADDRESS")
    assert cluster_named({"address": "auto"}).endswith(
        "recorded by the last `ray start` (/tmp/ray/ray_current_cluster)"
    )
    assert cluster_named({"address": "10.0.0.2:6379"}) == "10.0.0.2:6379"


@pytest.fixture(scope="module")
def two_node_cluster():
    """A head and a worker raylet on this machine, one CPU each (so 2 points run at once, one per node).

    Workers inherit this process's environment: PYTHONPATH must name the tests' plug-ins."""
    from ray.cluster_utils import Cluster

    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(TESTS)])
    args = {"num_cpus": 1, "object_store_memory": OBJECT_STORE}
    cluster = Cluster(initialize_head=True, head_node_args={**args, "include_dashboard": False})
    try:
        cluster.add_node(**args)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def test_init_options_for_a_cluster_drop_what_sizes_a_new_instance(monkeypatch):
    from hydra_plugins.evalpipe_ray_launcher._core import init_options, joins_cluster

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    kwargs, dropped = init_options({"address": "auto", "object_store_memory": 75_000_000, "num_cpus": 2})
    assert kwargs == {"address": "auto"} and dropped == ["num_cpus", "object_store_memory"]
    kwargs, dropped = init_options({"address": None, "num_cpus": 2})
    assert kwargs == {"num_cpus": 2, "include_dashboard": False, "address": "local"} and dropped == []
    assert not joins_cluster({"address": "local"}) and joins_cluster({"address": "10.0.0.1:6379"})
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")  # ray.init() joins it even with address: null
    assert init_options({"address": None, "object_store_memory": 1}) == ({}, ["object_store_memory"])


def test_two_point_sweep_on_a_local_instance_logs_to_the_server(tmp_path, mlflow_server):
    fx = write_fixture(tmp_path / "fx")
    cmd = sweep_cmd(fx, mlflow_server, tmp_path / "multirun", "ranker.fields=[title],[title,text]")
    cmd += [
        "+hydra.launcher.ray.init.num_cpus=2",
        f"+hydra.launcher.ray.init.object_store_memory={OBJECT_STORE}",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=HUNG_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr

    _, parents, kids = parents_and_children(mlflow_server)
    (parent,) = parents
    children = kids[parent.info.run_id]
    assert parent.info.status == "FINISHED" and parent.data.tags["evalpipe.launcher"] == "RayLauncher"
    # [title] misses c1 (its words are only in the text): recall 1/2; [title,text] finds both.
    by_fields = {k.data.tags["evalpipe.swept.ranker.fields"]: k.data.metrics["recall_at_5"] for k in children}
    assert by_fields == {"[title]": 0.5, "[title,text]": 1.0}
    assert parent.data.metrics["best/recall_at_5"] == 1.0
    # Artifacts went through the server (--artifacts-destination), not to a client-side path.
    client, _ = runs_of(mlflow_server)
    assert {"report.md", "cases.json"} <= {a.path for a in client.list_artifacts(children[0].info.run_id)}


@pytest.mark.parametrize("how", ["address", "auto"])
def test_sweep_on_a_running_two_node_cluster_spreads_over_both_nodes(tmp_path, two_node_cluster, how):
    fx = write_fixture(tmp_path / "fx")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = clean_env()
    if how == "address":
        address = two_node_cluster.address
    else:  # `auto`: Ray finds the cluster (here through RAY_ADDRESS, as a job on the cluster would)
        address, env["RAY_ADDRESS"] = "auto", two_node_cluster.address
    cmd = sweep_cmd(fx, uri, tmp_path / "multirun", "ranker.k1=0.6,0.9,1.2,1.5")
    # The two options hydra-ray-launcher passed to every cluster, which Ray refuses there:
    cmd += [
        f"++hydra.launcher.ray.init.address={address}",
        f"+hydra.launcher.ray.init.object_store_memory={OBJECT_STORE}",
    ]
    cmd += ["+hydra.launcher.ray.init.num_cpus=2"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=HUNG_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "init.object_store_memory ignored" in proc.stderr and "Traceback" not in proc.stderr

    nodes = {line.rsplit(" ", 1)[-1] for line in proc.stderr.splitlines() if " ran on node " in line}
    assert nodes == {n.node_id for n in two_node_cluster.list_all_nodes()}
    _, parents, kids = parents_and_children(uri)
    (parent,) = parents
    children = kids[parent.info.run_id]
    assert parent.info.status == "FINISHED"
    assert sorted(k.data.tags["evalpipe.swept.ranker.k1"] for k in children) == ["0.6", "0.9", "1.2", "1.5"]
    assert all(k.info.status == "FINISHED" for k in children)


def holding_args(marker: Path, *extra: str) -> list[str]:
    return ["~ranker", "+ranker._target_=plugins_for_tests.HoldingRanker", f"+ranker.marker={marker}", *extra]


def wait_for(path: Path, proc: subprocess.Popen) -> None:
    """Wait until the held point has written `path`, failing (and killing the sweep) if the sweep
    ends first or hangs."""
    try:
        wait_until(f"{path.name} from the held point", path.exists, proc, poll_s=0.2)
    except AssertionError:
        proc.kill()
        raise


def test_worker_killed_mid_point_fails_that_point_only_and_a_rerun_measures_it(tmp_path, two_node_cluster):
    fx = write_fixture(tmp_path / "fx")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    marker = tmp_path / "held.pid"
    args = holding_args(marker, "+ranker.once=true", "+ranker.hold_s=0,120")
    args += [f"++hydra.launcher.ray.init.address={two_node_cluster.address}"]
    cmd = sweep_cmd(fx, uri, tmp_path / "multirun", *args)
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    wait_for(marker, proc)
    os.kill(int(marker.read_text()), signal.SIGKILL)  # the Ray worker running point #1
    out, err = proc.communicate(timeout=HUNG_S)
    assert proc.returncode == 0, err[-3000:]
    lost = [line for line in err.splitlines() if "lost on Ray" in line]
    assert len(lost) == 1 and "sweep point #1 (+ranker.hold_s=120)" in lost[0], err[-3000:]
    assert "WorkerCrashedError" in lost[0] and "Traceback" not in err

    runs, parents, kids = parents_and_children(uri)
    (parent,) = parents
    by_job = {k.data.tags["evalpipe.job_num"]: k for k in kids[parent.info.run_id]}
    assert {j: r.info.status for j, r in by_job.items()} == {"0": "FINISHED", "1": "FAILED"}
    assert "worker process ended" in by_job["1"].data.tags["evalpipe.failure"]
    assert not [r for r in runs if r.info.status == "RUNNING"]
    assert parent.info.status == "FAILED" and parent.data.metrics["sweep/failed"] == 1.0
    summary = (tmp_path / "multirun" / "summary.md").read_text(encoding="utf-8")
    (row,) = [line for line in summary.splitlines() if line.startswith("| 1 |")]
    assert "failed" in row

    # The same command again: the finished point is reused, only #1 is measured.
    again = subprocess.run(
        sweep_cmd(fx, uri, tmp_path / "multirun2", *args),
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=HUNG_S,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    summary = (tmp_path / "multirun2" / "summary.md").read_text(encoding="utf-8")
    assert "2 points · 1 reused · 0 failed" in summary
    _, parents, kids = parents_and_children(uri)
    (second,) = [p for p in parents if p.info.run_id != parent.info.run_id]
    assert second.info.status == "FINISHED"
    measured = [k for k in kids[second.info.run_id] if "evalpipe.reused_run_id" not in k.data.tags]
    assert [k.data.tags["evalpipe.swept.ranker.hold_s"] for k in measured] == ["120"]
    assert measured[0].data.metrics["recall_at_5"] == 0.5  # keyword_search finds c2's Open, not c1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_on_the_driver_cancels_the_remaining_tasks(tmp_path, two_node_cluster, signum):
    fx = write_fixture(tmp_path / "fx")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    marker = tmp_path / "held.pid"
    # 0 and 300: point #0 finishes at once, #1 holds; #2 and #3 queue behind it on the other CPU.
    args = holding_args(marker, "+ranker.hold_s=0,300,301,302")
    args += [
        f"++hydra.launcher.ray.init.address={two_node_cluster.address}",
        "hydra.launcher.cancel_grace_s=60",
    ]
    proc = subprocess.Popen(
        sweep_cmd(fx, uri, tmp_path / "multirun", *args),
        cwd=ROOT,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,
    )
    wait_for(marker, proc)

    def first_point_finished() -> bool:
        _, parents, kids = parents_and_children(uri)
        return bool(parents) and any(k.info.status == "FINISHED" for k in kids[parents[0].info.run_id])

    wait_until("point #0 FINISHED before the signal", first_point_finished, proc, poll_s=0.5)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=HUNG_S)
    assert proc.returncode == 128 + signum, err[-3000:]
    assert "Traceback" not in err and f"interrupted by {signal.Signals(signum).name}" in err

    runs, parents, kids = parents_and_children(uri)
    (parent,) = parents
    assert not [r for r in runs if r.info.status == "RUNNING"]
    assert parent.info.status == "KILLED"
    statuses = sorted(k.info.status for k in kids[parent.info.run_id])
    assert statuses.count("FINISHED") == 1 and "KILLED" in statuses  # #0 kept; the held point KILLED
    assert len(statuses) <= 3  # a queued point cancelled before it started has no run at all
