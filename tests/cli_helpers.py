"""Helpers for tests that run evalpipe as real processes: env, tiny fixture, store queries, a server."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from conftest import ROOT, TINY_UNITS
from store_template import seed
from waiting import wait_until

# 6 cases so a slow ranker can be interrupted part-way; keyword_search (see plugins_for_tests)
# finds merge_settings for c1, Session.merge for c2, Open for c3 and nothing for the others.
FIXTURE = """\
name: tiny
corpus: corpus.jsonl
cases:
  - {id: c1, tier: exact, query: merge_settings, expected: ["pkg/a.py::merge_settings"]}
  - {id: c2, tier: concept, query: session, expected: ["pkg/a.py::Session.merge"]}
  - {id: c3, tier: exact, query: open a file, expected: ["pkg/b.go::Open"]}
  - {id: c4, tier: concept, query: install with pip, expected: ["docs/guide.md#install"]}
  - {id: c5, tier: concept, query: module helpers, expected: ["pkg/a.py"]}
  - {id: c6, tier: concept, query: zebra, expected: ["pkg/a.py"]}
"""


def write_tiny(tmp: Path) -> Path:
    (tmp / "corpus.jsonl").write_text("".join(json.dumps(u) + "\n" for u in TINY_UNITS), encoding="utf-8")
    (tmp / "fx.yaml").write_text(FIXTURE, encoding="utf-8")
    return tmp / "fx.yaml"


def cli_env(**extra: str) -> dict[str, str]:
    """This checkout's src first (not the venv's editable install), the test plug-ins importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_TRACKING", "EVALPIPE_"))}
    env.update(
        MLFLOW_DISABLE_TELEMETRY="true",
        HF_HUB_OFFLINE="1",
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")]),
    )
    env.update(extra)
    return env


def cli(tmp: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300):
    return subprocess.run(
        [sys.executable, "-m", "evalpipe", *args],
        cwd=tmp,
        capture_output=True,
        text=True,
        env=env or cli_env(),
        timeout=timeout,
    )


def default_signals() -> None:
    """In the child before it runs: the terminating signals at their default action, as in a shell
    on a terminal. A suite started by `nohup` or as a background job (`cmd &`) would otherwise hand
    SIGHUP, SIGINT and SIGQUIT down ignored, and evalpipe rightly keeps an ignored signal ignored."""
    import signal

    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)


def popen_cli(tmp: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "evalpipe", *args],
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or cli_env(),
        preexec_fn=default_signals,
    )


def slow_ranker(progress: Path, delay: float = 0.4) -> list[str]:
    return [
        "~ranker",
        "+ranker._target_=plugins_for_tests.SlowRanker",
        f"+ranker.delay={delay}",
        f"+ranker.progress_file={progress}",
    ]


def wait_for_lines(path: Path, n: int, proc: subprocess.Popen) -> None:
    """Wait until `path` has `n` lines (cases done), failing if the process ends first."""
    wait_until(
        f"{n} lines in {path}",
        lambda: path.is_file() and len(path.read_text().splitlines()) >= n,
        proc,
        poll_s=0.05,
    )


def check_fixture_json(tmp: Path, fixture: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    """`evalpipe check-fixture FIXTURE --json` through the real CLI: (the process, the JSON report
    or {} when none was written)."""
    out = tmp / "check.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "evalpipe", "check-fixture", str(fixture), "--json", str(out), *extra],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    return proc, json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}


def cmdline(pid: int) -> str:
    """A process's command line from /proc ("" once it has gone)."""
    try:
        return (
            (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def client_for(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def all_runs(uri: str) -> list:
    client = client_for(uri)
    ids = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(ids) if ids else []


def error_lines(stderr: str) -> list[str]:
    """stderr without MLflow's own INFO log lines (schema creation) and blank lines."""
    return [ln for ln in stderr.splitlines() if ln.strip() and " INFO mlflow" not in ln]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(tmp: Path, port: int) -> subprocess.Popen:
    """A lean real `mlflow server` on 127.0.0.1:port over a SQLite file in tmp (reusable after a kill)."""
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true"}
    cmd = [sys.executable, "-m", "mlflow", "server", "--workers", "1", "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--backend-store-uri", f"sqlite:///{tmp / 'server.db'}"]
    cmd += ["--artifacts-destination", str(tmp / "server-artifacts")]
    seed(tmp / "server.db")  # the schema MLflow's migrations build, copied (tests/store_template.py)
    log = (tmp / "server.log").open("a")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(
            f"mlflow server on port {port} to answer /health",
            lambda: answers_health(f"http://127.0.0.1:{port}"),
            proc,
            output=lambda: (tmp / "server.log").read_text()[-2000:],
            poll_s=0.25,
        )
    except AssertionError:
        stop_server(proc)
        raise
    return proc


def answers_health(url: str) -> bool:
    """Whether the MLflow server at `url` answers /health with 200 now."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def stop_server(proc: subprocess.Popen, sig: int | None = None) -> None:
    """Kill the server and its uvicorn worker (its own process group)."""
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig or signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
