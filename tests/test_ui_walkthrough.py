"""A new user's first hour, in a fresh shell: the README's and docs' commands copied as written,
a real MLflow UI (`mlflow ui` on 127.0.0.1) and headless Chromium on what the commands print.

The project is copied to a temporary folder (conf/, fixtures/, pyproject.toml, README, docs,
.gitignore; a git repository, so leftovers show up as untracked files) whose `.venv` is this
checkout's venv. Every command is looked up verbatim in a ```bash block of the README or a docs
page and run by `bash` with a minimal environment (no venv on PATH, no PYTHONPATH, no
MLFLOW_* variables) in that folder: the first as `.venv/bin/...`, the rest after `source
.venv/bin/activate`, as the README says. Then, in the browser:

- the runs table the runs print a link to lists each measured configuration once (no reused
  copies, no sweep parents), sorted by recall_at_5, headline columns on a 1600 px screen;
- a run page opens on its headline table, and a reused point's page links the run it reuses;
- `evalpipe compare` on a reused point answers with the run that measured it.

Skipped without Chromium. Slow (about 1.5 to 2.5 minutes here; most of it the 16 gold runs).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import answers_health
from waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import mlflow_ui  # noqa: E402

pytestmark = pytest.mark.slow
ML = "workflowType=machine_learning"


def doc_command(doc: str, command: str) -> str:
    """`command` as it is written in a ```bash block of `doc` (a trailing `# comment` dropped)."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    lines = [line.split("  #", 1)[0].rstrip() for block in blocks for line in block.splitlines()]
    assert command in lines, f"{doc} no longer documents `{command}`"
    return command


def fresh_env() -> dict[str, str]:
    """A login shell's environment: no venv, no PYTHONPATH, no tracking settings."""
    keep = ("HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "TERM")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    env["MLFLOW_DISABLE_TELEMETRY"] = "true"
    env["HF_HUB_OFFLINE"] = "1"
    return env


class Shell:
    def __init__(self, cwd: Path):
        self.cwd = cwd
        self.log: list[str] = []

    def run(self, command: str, activate: bool = True, ok: bool = True) -> subprocess.CompletedProcess:
        script = ("source .venv/bin/activate && " if activate else "") + command
        t0 = time.monotonic()
        proc = subprocess.run(
            ["bash", "-c", script], cwd=self.cwd, env=fresh_env(), capture_output=True, text=True, timeout=600
        )
        self.log.append(f"{time.monotonic() - t0:6.1f} s  {command}")
        if ok:
            assert proc.returncode == 0, f"`{command}` exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        return proc


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    if mlflow_ui.chromium() is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium): the UI cannot be rendered")
    started = time.monotonic()
    work = tmp_path_factory.mktemp("firsthour") / "evalpipe"
    work.mkdir()
    for name in ("conf", "fixtures", "docs"):
        shutil.copytree(ROOT / name, work / name)
    for name in ("pyproject.toml", "README.md", ".gitignore"):
        shutil.copy2(ROOT / name, work / name)
    (work / ".venv").symlink_to(ROOT / ".venv")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=work, check=True)
    subprocess.run([*git, "add", "-A"], cwd=work, check=True)
    subprocess.run([*git, "commit", "-qm", "copy"], cwd=work, check=True)
    sh = Shell(work)
    out: dict[str, subprocess.CompletedProcess] = {}
    # The README's first command, after its install step (the venv exists): .venv/bin/..., no activation.
    first = doc_command(
        "README.md",
        "python3 -m venv .venv && .venv/bin/pip install -q -e . && "
        ".venv/bin/python -m evalpipe ranker=bm25 fixture=gold",
    )
    out["first"] = sh.run(first.split(" && ", 2)[2], activate=False)
    out["help"] = sh.run(doc_command("README.md", "python -m evalpipe --help"))
    out["grid4"] = sh.run(
        doc_command("README.md", "python -m evalpipe -m ranker.k1=0.9,1.2 ranker.b=0.4,0.75")
    )
    out["grid12"] = sh.run(doc_command("README.md", "python -m evalpipe -m +sweep=bm25_grid"))
    sweep_id = re.search(r"sweep ([0-9a-f]{12})", out["grid12"].stdout)
    assert sweep_id, out["grid12"].stdout[-2000:]
    compare = doc_command("README.md", "evalpipe compare --sweep <sweep_id> --metrics recall_at_5 mrr")
    out["compare_sweep"] = sh.run(compare.replace("<sweep_id>", sweep_id.group(1)))
    offline = doc_command(
        "docs/tracking.md", "python -m evalpipe tracking.offline=true hydra.run.dir=runs/bm25"
    )
    out["offline"] = sh.run(offline)
    out["sync"] = sh.run(doc_command("docs/tracking.md", "evalpipe sync runs/bm25"))
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{work / 'mlruns' / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("evalpipe/gold")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    reused = [r for r in runs if "evalpipe.reused_run_id" in r.data.tags]
    point = next(
        r for r in reused if r.data.params.get("ranker.k1") == "0.9" and r.data.params["ranker.b"] == "0.4"
    )
    other = next(
        r for r in runs
        if "evalpipe.reused_run_id" not in r.data.tags and r.data.params.get("ranker.method") == "robertson"
    )  # fmt: skip
    cases = doc_command("docs/sweeps.md", "evalpipe compare --runs 782aff8c 5a53a16d --cases --log")
    cases = cases.replace("782aff8c", point.info.run_id[:8]).replace("5a53a16d", other.info.run_id[:8])
    out["compare_reused"] = sh.run(cases)
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=work, capture_output=True, text=True
    )
    # The documented `mlflow ui`, on a free port (5000 may be taken on a shared machine), one worker.
    ui = doc_command("README.md", "mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db")
    port = mlflow_ui.free_port()
    env = {**fresh_env(), "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", **mlflow_ui.server_env(port)}
    server = subprocess.Popen(
        ["bash", "-c", f"source .venv/bin/activate && exec {ui} --port {port} --workers 1"],
        cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(f"mlflow ui {base} to answer /health", lambda: answers_health(base), server, poll_s=0.5)
        sh.log.append(f"{time.monotonic() - started:6.1f} s  total before the browser")
        yield {
            "out": out, "base": base, "exp": exp, "runs": runs, "point": point, "other": other,
            "client": client, "status": status.stdout, "sh": sh, "work": work, "started": started,
        }  # fmt: skip
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        print("\n".join(sh.log), f"\nwalkthrough total {time.monotonic() - started:.1f} s")


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def on(walk, url: str) -> str:
    """A printed link (for `mlflow ui`'s default port) on the server this test started."""
    return url.replace("http://127.0.0.1:5000", walk["base"])


def test_every_command_works_from_a_fresh_shell_and_leaves_nothing_untracked(walk):
    out = walk["out"]
    assert "commands:" in out["help"].stdout and "merge-judgements" in out["help"].stdout
    assert out["grid12"].stdout.count("reused (force=true re-runs)") == 5  # the 4-point grid and bm25
    assert "run page: http://127.0.0.1:5000/#/experiments/" in out["sync"].stdout
    assert walk["status"] == "", walk["status"]  # mlruns/, outputs/, multirun/, runs/ are ignored


def test_compare_on_a_reused_point_answers_with_the_measured_run(walk):
    point, proc = walk["point"], walk["out"]["compare_reused"]
    original = point.data.tags["evalpipe.reused_run_id"]
    err = " ".join(proc.stderr.split())
    assert f"(reused {original[:8]} -> measured run {original})" in err
    out = " ".join(proc.stdout.split())
    assert "won" in out and "lost" in out  # the per-case view
    logged = re.search(r"logged the comparison as run ([0-9a-f]{32}) \((\S+)\)", proc.stdout)
    assert logged and logged.group(2).endswith(f"/runs/{logged.group(1)}?{ML}")
    sweep = " ".join(walk["out"]["compare_sweep"].stderr.split())
    assert sweep.count("-> measured run ") == 5
    assert "12 runs" in " ".join(walk["out"]["compare_sweep"].stdout.split())


def test_the_printed_runs_table_lists_each_measured_configuration_once_sorted(walk):
    link = re.search(r"runs table: (\S+)", walk["out"]["first"].stdout).group(1)
    html = mlflow_ui.dom(on(walk, link))
    text = text_of(html)
    measured = [
        r for r in walk["runs"]
        if "evalpipe.reused_run_id" not in r.data.tags and "recall_at_5" in r.data.metrics
    ]  # fmt: skip
    # 1 default + 4 + 7 new grid points + the synced offline run (a second bm25 measurement).
    assert len(measured) == 13
    assert re.search(rf"\b{len(measured)} matching runs\b", text), text[-500:]
    assert "Sort: recall_at_5" in text
    for column in (
        "recall_at_1",
        "recall_at_5",
        "recall_at_20",
        "mrr",
        "ndcg_at_1",
        "ndcg_at_5",
        "ndcg_at_20",
    ):
        assert f'col-id="metrics.`{column}`"' in html, column
    # The rows as rendered, in row order: each measured run once, by recall_at_5, best first.
    rows = table_rows(html)
    by_id = {r.info.run_id: r for r in walk["runs"]}
    assert sorted(rows.values()) == sorted(r.info.run_id for r in measured)
    shown = [by_id[rows[i]] for i in sorted(rows)]
    assert not any("(reused" in r.info.run_name or r.info.run_name.startswith("sweep ") for r in shown)
    values = [r.data.metrics["recall_at_5"] for r in shown]
    assert values == sorted(values, reverse=True)


def table_rows(html: str) -> dict[int, str]:
    """{row index: run ID} of the runs table's rendered rows (the Run Name cell's link)."""
    marks = list(re.finditer(r'row-index="(\d+)"', html))
    rows: dict[int, str] = {}
    for m, nxt in zip(marks, [*marks[1:], None], strict=True):
        chunk = html[m.end() : nxt.start() if nxt else len(html)]
        link = re.search(r'href="#/experiments/\d+/runs/([0-9a-f]{32})"', chunk)
        if link:
            rows.setdefault(int(m.group(1)), link.group(1))
    return rows


def test_a_run_page_opens_on_its_headline_table_and_a_reused_point_links_its_original(walk):
    link = re.search(r"run page: {3}(\S+)", walk["out"]["first"].stdout).group(1)
    html = mlflow_ui.dom(on(walk, link))
    note = re.search(r'note-editor-preview-content"[^>]*>(.*?)</div>', html, re.S)
    assert note, "the run page shows no description"
    body = note.group(1)
    assert "<table" in body and body.index("<table") < body.index("Ranker")  # the table before the settings
    point = walk["point"]
    original = point.data.tags["evalpipe.reused_run_id"]
    exp_id = walk["exp"].experiment_id
    html = mlflow_ui.dom(f"{walk['base']}/#/experiments/{exp_id}/runs/{point.info.run_id}?{ML}")
    assert f'href="#/experiments/{exp_id}/runs/{original}?{ML}"' in html
