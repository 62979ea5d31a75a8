"""A sweep on a local Ray instance, workers logging to one MLflow tracking server over HTTP.

Needs the `ray` extra (hydra-ray-launcher + ray). It pins cloudpickle<3, which
breaks joblib>=1.5 in the main environment, so it usually lives in its own venv:
this test skips cleanly without it. Ray workers may not share the driver's
working directory or files, hence a tracking *server*
(`tracking.uri=http://host:5000`) rather than a SQLite file.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import TINY_UNITS

pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install 'evalpipe[ray]')")
pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason="hydra-ray-launcher is not installed")

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
FIXTURE = """\
name: tiny
corpus: corpus.jsonl
cases:
  - {id: c1, tier: concept, query: combine dicts, expected: ["pkg/a.py::merge_settings"]}
  - {id: c2, tier: exact, query: Open, expected: ["pkg/b.go::Open"]}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mlflow_server(tmp_path):
    port = free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true"}
    cmd = [sys.executable, "-m", "mlflow", "server", "--workers", "1", "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--backend-store-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"]
    cmd += ["--default-artifact-root", str(tmp_path / "artifacts")]
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
            if proc.poll() is not None:
                pytest.fail(f"mlflow server exited: {(tmp_path / 'server.log').read_text()[-2000:]}")
        else:
            pytest.fail("mlflow server did not answer /health within 60 s")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_two_point_sweep_on_local_ray_logs_to_the_server(tmp_path, mlflow_server):
    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps(u) + "\n" for u in TINY_UNITS), encoding="utf-8"
    )
    (tmp_path / "fx.yaml").write_text(FIXTURE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_TRACKING", "EVALPIPE_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cmd = [
        sys.executable,
        "-m",
        "evalpipe",
        "-m",
        f"fixture.path={tmp_path / 'fx.yaml'}",
        "fixture.name=tiny",
    ]
    cmd += [f"tracking.uri={mlflow_server}", f"hydra.sweep.dir={tmp_path / 'multirun'}", "progress=false"]
    cmd += ["ranker.fields=[title],[title,text]", "hydra/launcher=ray", "+hydra.launcher.ray.init.num_cpus=2"]
    cmd += ["+hydra.launcher.ray.init.include_dashboard=false"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_server)
    exp = client.get_experiment_by_name("evalpipe/tiny")
    runs = client.search_runs([exp.experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("evalpipe.role") == "parent"]
    kids = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert parent.info.status == "FINISHED" and parent.data.tags["evalpipe.launcher"] == "RayLauncher"
    assert sorted(k.data.tags["evalpipe.swept.ranker.fields"] for k in kids) == ["[title,text]", "[title]"]
    # [title] misses c1 (its words are only in the text): recall 1/2; [title,text] finds both.
    by_fields = {k.data.tags["evalpipe.swept.ranker.fields"]: k.data.metrics["recall_at_5"] for k in kids}
    assert by_fields == {"[title]": 0.5, "[title,text]": 1.0}
    assert parent.data.metrics["best/recall_at_5"] == 1.0
