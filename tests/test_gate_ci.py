"""The CI example of docs/gate.md, run as written: its workflow's evaluate and gate steps (read from
the page, run in bash) on the gold fixture, against a baseline recorded and exported as the page
says, for a pull request that breaks one tier (exit 1, its lost cases listed) and one that changes
nothing (exit 0). The install step is the test environment itself (its venv, linked as .venv)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cli_helpers import cli_env
from conftest import ROOT

pytestmark = pytest.mark.slow

DOC = ROOT / "docs" / "gate.md"
EVALUATE = "Evaluate the pull request's retriever"
GATE = "Gate against the baseline"


def workflow() -> dict:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    docs = [yaml.safe_load(b) for b in blocks if "jobs:" in b]
    assert len(docs) == 1, "docs/gate.md should hold exactly one workflow"
    return docs[0]


def baseline_commands() -> list[str]:
    """The page's commands that record and export the baseline (the bash block before the workflow)."""
    text = DOC.read_text(encoding="utf-8")
    block = next(
        b for b in re.findall(r"```bash\n(.*?)```", text, re.S) if "baseline export" in b and "git add" in b
    )
    return [line for line in block.splitlines() if line.startswith(".venv/")]


def workspace(tmp: Path, name: str) -> Path:
    """A checkout: the venv at .venv (as the Install step leaves it), the fixture under eval/."""
    ws = tmp / name
    (ws / "eval").mkdir(parents=True)
    venv = Path(sys.executable).parent.parent
    (ws / ".venv").symlink_to(venv, target_is_directory=True)
    return ws


def bash(ws: Path, script: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-e", "-c", script], cwd=ws, env=env, capture_output=True, text=True, timeout=600
    )


def job_env(wf: dict, **values: str) -> dict[str, str]:
    job = wf["jobs"]["gate"]
    env = cli_env(**{k: str(v) for k, v in job["env"].items()})
    env.update(values)
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


@pytest.fixture(scope="module")
def baseline_file(tmp_path_factory) -> Path:
    """main's retriever evaluated, named `main` and exported, with the page's own commands."""
    tmp = tmp_path_factory.mktemp("main")
    ws = workspace(tmp, "main")
    env = cli_env()
    env.pop("MLFLOW_TRACKING_URI", None)
    for command in baseline_commands():
        command = command.replace("mypackage.retriever.MyRetriever", "plugins_gate.UnchangedRetriever")
        command = command.replace(
            "fixture.path=eval/fixture.yaml", f"fixture.path={ROOT / 'fixtures' / 'gold.yaml'}"
        )
        proc = bash(ws, command + " progress=false" if "-m evalpipe" in command else command, env)
        assert proc.returncode == 0, f"{command}\n{proc.stderr[-2000:]}"
    path = ws / "eval" / "baseline.json"
    doc = json.loads(path.read_text())
    assert doc["name"] == "main" and doc["fixtures"][0]["fixture"] == "gold"
    assert len(doc["fixtures"][0]["cases"]) == 204
    return path


def run_pull_request(tmp: Path, retriever: str, baseline: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """The workflow's evaluate and gate steps, as written, in a fresh checkout (no store yet)."""
    wf = workflow()
    steps = {s.get("name"): s for s in wf["jobs"]["gate"]["steps"]}
    ws = workspace(tmp, retriever.rsplit(".", 1)[-1])
    (ws / "eval" / "baseline.json").write_text(baseline.read_text())
    summary = ws / "summary.md"
    env = job_env(wf, RETRIEVER=retriever, FIXTURE=str(ROOT / "fixtures" / "gold.yaml"),
                  GITHUB_STEP_SUMMARY=str(summary))  # fmt: skip
    proc = bash(ws, steps[EVALUATE]["run"], env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    gate = bash(ws, steps[GATE]["run"], env)
    assert "Traceback" not in gate.stderr, gate.stderr
    return gate, ws


def test_a_pull_request_that_breaks_a_tier_fails_with_its_lost_cases(tmp_path, baseline_file):
    gate, ws = run_pull_request(tmp_path, "plugins_gate.RegressedRetriever", baseline_file)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    result = json.loads((ws / "eval-out" / "gate.json").read_text())
    failing = {(r["metric"], r["tier"]) for r in result["rows"] if r["verdict"] == "regression"}
    # The exact tier (81 short symbol queries) collapses, which drags the overall mean with it;
    # concept is untouched; multi_hop's few short queries move it within noise.
    assert failing == {
        ("recall_at_5", "exact"),
        ("recall_at_5", "overall"),
        ("mrr", "exact"),
        ("mrr", "overall"),
    }
    rows = {(r["metric"], r["tier"]): r for r in result["rows"]}
    assert (
        rows[("recall_at_5", "exact")]["baseline"] == 1.0
        and rows[("recall_at_5", "exact")]["candidate"] == 0.0
    )
    assert rows[("recall_at_5", "concept")]["verdict"] == "unchanged"
    # Every exact case is lost; each is listed with its query, in the log and in the posted table.
    gold = yaml.safe_load((ROOT / "fixtures" / "gold.yaml").read_text())
    exact = [c for c in gold["cases"] if c["tier"] == "exact"]
    assert len(exact) == 81
    lost = set(result["fixtures"][0]["lost"])
    assert {c["id"] for c in exact} <= lost
    table = (ws / "eval-out" / "gate.md").read_text()
    for case in exact[:5]:
        assert f"lost [exact] {case['id']}: {case['query']!r}" in gate.stdout
        assert f"| lost | exact | {case['id']} | {case['query']} |" in table
    assert table in (ws / "summary.md").read_text()
    # The gate run sits in the checkout's store beside the candidate run, linked to it.
    from cli_helpers import client_for

    client = client_for(f"sqlite:///{ws / 'mlruns' / 'mlflow.db'}")
    info = json.loads((ws / "eval-out" / "candidate" / "run_info.json").read_text())
    cand = client.get_run(info["run_id"])
    gate_run = client.get_run(cand.data.tags["evalpipe.gate.run"])
    assert gate_run.data.tags["evalpipe.gate.verdict"] == "fail"
    assert gate_run.data.tags["evalpipe.gate.baseline"] == json.loads(baseline_file.read_text())["run_id"]
    assert gate_run.data.tags["evalpipe.gate.baseline_source"] == "file: eval/baseline.json"


def test_a_pull_request_that_changes_nothing_passes(tmp_path, baseline_file):
    gate, ws = run_pull_request(tmp_path, "plugins_gate.UnchangedRetriever", baseline_file)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert "evalpipe gate: PASS" in gate.stdout and "0 lost, 0 won, 204 unchanged" in gate.stdout
    result = json.loads((ws / "eval-out" / "gate.json").read_text())
    assert {r["verdict"] for r in result["rows"]} == {"unchanged"}
    assert "## evalpipe gate: PASS" in (ws / "summary.md").read_text()
    assert os.path.getsize(ws / "eval-out" / "gate.md") > 0
