"""Look at an MLflow store the way a user does: a lean `mlflow server` and headless Chromium.

Used by tests/test_ui_browser.py (DOM assertions) and by `python scripts/mlflow_ui.py OUT_DIR`,
which builds a small demo store (runs, a sweep with a reused point, a compare run with the
per-case view) and saves the screenshots used in docs/tracking.md.

The server runs without its job runner (MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false) and with one
worker, which is all a local UI needs and keeps its start-up to a few seconds.

MLflow 3.17 opens its Assistant side panel by itself on the first visit of a server at
localhost / 127.0.0.1 (a fresh browser profile, as headless Chromium always is), which takes a
quarter of a 1600 px screen; a user closes it once (its x) and the browser remembers. The pages
are therefore rendered at the name `UI_HOST` mapped to 127.0.0.1 (Chromium's host resolver
rules; the server is told to accept that name), which MLflow does not count as local: the
pages are what a user sees after closing the panel.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The host name pages are rendered at (see the module docstring): 127.0.0.1 under another name.
UI_HOST = "evalpipe-ui"
#: The screen the docs' screenshots and DOM checks assume.
SCREEN = "1600,1000"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def chromium() -> str | None:
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def lean_server(uri: str, timeout: float = 120.0) -> Iterator[str]:
    """`mlflow server` on `uri` at a free local port; yields its base URL and stops it afterwards."""
    port = free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.update(server_env(port))
    cmd = [sys.executable, "-m", "mlflow", "server", "--workers", "1", "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--backend-store-uri", uri]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"mlflow server exited with {proc.returncode}: {proc.stderr.read()[-2000:]}"
                )
            with contextlib.suppress(OSError), urllib.request.urlopen(base + "/health", timeout=2) as resp:
                if resp.status == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server did not answer on {base} within {timeout:.0f} s")
            time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def server_env(port: int) -> dict[str, str]:
    """What an MLflow server at `port` needs to serve pages at `UI_HOST` too (host and origin checks)."""
    return {
        "MLFLOW_SERVER_ALLOWED_HOSTS": f"127.0.0.1:{port},localhost:{port},{UI_HOST}:{port}",
        "MLFLOW_SERVER_CORS_ALLOWED_ORIGINS": f"http://{UI_HOST}:{port}",
    }


def as_ui_host(url: str) -> str:
    """`url` on 127.0.0.1 (or localhost) at `UI_HOST` instead: the page without the Assistant panel."""
    for local in ("http://127.0.0.1:", "http://localhost:"):
        if url.startswith(local):
            return f"http://{UI_HOST}:" + url[len(local) :]
    return url


def _chromium(url: str, *flags: str, size: str = SCREEN, budget_ms: int = 20000) -> str:
    exe = chromium()
    if exe is None:
        raise RuntimeError("chromium not found (apt-get install -y chromium)")
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={size}"]
    cmd += [f"--host-resolver-rules=MAP {UI_HOST} 127.0.0.1"]
    cmd += [f"--virtual-time-budget={budget_ms}", *flags, as_ui_host(url)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    return proc.stdout


def dom(url: str, size: str = SCREEN) -> str:
    """The page's DOM after the app has rendered (the UI is a single-page app: the HTML alone is empty)."""
    return _chromium(url, "--dump-dom", size=size)


def screenshot(url: str, path: Path, size: str = SCREEN) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    _chromium(url, f"--screenshot={path}", size=size)
    return path


# --- the demo store ------------------------------------------------------------------------------


def evalpipe(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run `python -m evalpipe ...` with this checkout's code (from the checkout, where fixtures/ is)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_TRACKING", "EVALPIPE_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    env["MLFLOW_DISABLE_TELEMETRY"] = "true"
    proc = subprocess.run(
        [sys.executable, "-m", "evalpipe", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"evalpipe {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return proc


def main(out_dir: str) -> int:
    """Screenshots of the landing page, the runs table, a run page, a sweep parent, a reused
    point's page and a case diff (of a compare run on a reused point)."""
    import tempfile

    from mlflow.tracking import MlflowClient

    out = Path(out_dir).resolve()
    with tempfile.TemporaryDirectory(prefix="evalpipe-ui-") as tmp:
        work = Path(tmp)
        uri = f"sqlite:///{work / 'mlflow.db'}"
        common = [f"tracking.uri={uri}", "progress=false", "plots=false", f"hydra.run.dir={work / 'out'}"]
        evalpipe(*common)
        evalpipe(*common, "ranker=exact")
        evalpipe(*common, "ranker.fields=[title,text]")
        evalpipe(*common, "ranker=graph", "ranker@ranker.base=bm25f")  # named graph(base=bm25f)
        evalpipe("-m", *common, "ranker.k1=0.9,1.2", f"hydra.sweep.dir={work / 'sw1'}")
        evalpipe("-m", *common, "ranker.k1=0.9,1.2,1.5", f"hydra.sweep.dir={work / 'sw2'}")  # 2 reused
        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name("evalpipe/gold")
        runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
        by_name = {r.info.run_name: r for r in runs}
        base, other = by_name["bm25"].info.run_id, by_name["bm25 fields=[title,text]"].info.run_id
        parent = [r for r in runs if r.data.tags.get("evalpipe.role") == "parent"][-1].info.run_id
        reused = next(r for r in runs if "evalpipe.reused_run_id" in r.data.tags).info.run_id
        cmp = evalpipe("compare", "--tracking-uri", uri, "--runs", reused[:8], other[:8], "--cases", "--log")
        compare_run = cmp.stdout.rsplit("logged the comparison as run", 1)[1].split()[0]
        with lean_server(uri) as url:
            app = f"{url}/#/experiments/{exp.experiment_id}"
            ml = "workflowType=machine_learning"
            screenshot(app, out / "ui_landing.png")
            screenshot(f"{app}/runs?{ml}&viewStateShareKey=evalpipe", out / "ui_runs_table.png")
            screenshot(f"{app}/runs/{base}?{ml}", out / "ui_run_page.png")
            screenshot(f"{app}/runs/{parent}?{ml}", out / "ui_sweep_parent.png")
            screenshot(f"{app}/runs/{reused}?{ml}", out / "ui_reused_point.png")
            screenshot(f"{app}/runs/{compare_run}/artifacts/diff.json?{ml}", out / "ui_case_diff.png")
    names = (
        "ui_landing",
        "ui_runs_table",
        "ui_run_page",
        "ui_sweep_parent",
        "ui_reused_point",
        "ui_case_diff",
    )
    for name in names:
        print(out / f"{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "docs" / "img")))
