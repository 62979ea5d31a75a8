"""Sweeps end to end through the CLI: parent/child runs, summary artifacts, joblib, resume, Optuna.

The tiny fixture is built so the sweep has a known winner: case c1 ("combine
dicts") matches only the *text* of its unit, so BM25 over `ranker.fields=[title]`
misses it (an empty result) while `[title,text]` finds it. Hence, worked out by hand:
  fields=[title]       -> recall_at_5 = 2/3 (c2 "Open" and c3 "Install" match titles)
  fields=[title,text]  -> recall_at_5 = 3/3
and BM25's b does not change a single-match ranking, so every point's value
is fixed by its fields alone.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TINY_UNITS

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = """\
name: tiny
corpus: corpus.jsonl
cases:
  - {id: c1, tier: concept, query: combine dicts, expected: ["pkg/a.py::merge_settings"]}
  - {id: c2, tier: exact, query: Open, expected: ["pkg/b.go::Open"]}
  - {id: c3, tier: exact, query: Install, expected: ["docs/guide.md#install"]}
"""
TITLE, TITLE_TEXT = "[title]", "[title,text]"
EXPECTED_R5 = {TITLE: 2 / 3, TITLE_TEXT: 1.0}


@pytest.fixture(scope="module")
def fixture_path(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fx")
    (root / "corpus.jsonl").write_text("".join(json.dumps(u) + "\n" for u in TINY_UNITS), encoding="utf-8")
    (root / "fx.yaml").write_text(FIXTURE, encoding="utf-8")
    return root / "fx.yaml"


def run_cli(tmp: Path, fixture: Path, uri: str, sweep_dir: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_TRACKING", "EVALPIPE_"))}
    env["MLFLOW_DISABLE_TELEMETRY"] = "true"
    cmd = [
        sys.executable,
        "-m",
        "evalpipe",
        "-m",
        f"fixture.path={fixture}",
        "fixture.name=tiny",
        f"tracking.uri={uri}",
        f"hydra.sweep.dir={tmp / sweep_dir}",
        f"hydra.run.dir={tmp / 'out'}",
        "progress=false",
        *args,
    ]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def client_for(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def all_runs(client) -> list:
    exp = client.get_experiment_by_name("evalpipe/tiny")
    assert exp is not None
    return client.search_runs([exp.experiment_id], max_results=1000)


def parents(runs) -> list:
    return [r for r in runs if r.data.tags.get("evalpipe.role") == "parent"]


def children_of(runs, parent) -> list:
    return [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]


def artifact_text(client, run_id: str, path: str, tmp: Path) -> str:
    return Path(client.download_artifacts(run_id, path, str(tmp))).read_text(encoding="utf-8")


def summary_rows(client, parent, tmp: Path) -> list[dict[str, str]]:
    dst = tmp / f"dl-{parent.info.run_id}"
    dst.mkdir()
    return list(csv.DictReader(io.StringIO(artifact_text(client, parent.info.run_id, "summary.csv", dst))))


FIELDS = "ranker.fields"
GRID = [f"{FIELDS}={TITLE},{TITLE_TEXT}", "ranker.b=0.4,0.75"]


def test_grid_sweep_parent_children_summary_resume_and_force(tmp_path, fixture_path):
    uri = f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    run_cli(tmp_path, fixture_path, uri, "multirun_a", *GRID)
    client = client_for(uri)
    runs = all_runs(client)
    (parent,) = parents(runs)
    kids = children_of(runs, parent)
    assert parent.info.status == "FINISHED"
    assert len(kids) == 4 and len(runs) == 5
    swept = sorted(
        (k.data.tags[f"evalpipe.swept.{FIELDS}"], k.data.tags["evalpipe.swept.ranker.b"]) for k in kids
    )
    assert swept == sorted((f, b) for f in (TITLE, TITLE_TEXT) for b in ("0.4", "0.75"))
    for kid in kids:
        assert kid.info.status == "FINISHED"
        assert kid.data.tags["evalpipe.sweep_id"] == parent.data.tags["evalpipe.sweep_id"]
        field = kid.data.tags[f"evalpipe.swept.{FIELDS}"]
        assert kid.data.metrics["recall_at_5"] == pytest.approx(EXPECTED_R5[field])

    # Best point: the highest recall_at_5 (1.0), ties to the earliest job among the [title,text] points.
    winners = [k for k in kids if k.data.tags[f"evalpipe.swept.{FIELDS}"] == TITLE_TEXT]
    first = min(winners, key=lambda k: int(k.data.tags["evalpipe.job_num"]))
    assert parent.data.metrics["best/recall_at_5"] == 1.0
    assert parent.data.tags["best/recall_at_5.run_id"] == first.info.run_id
    assert parent.data.metrics["sweep/points"] == 4 and parent.data.metrics["sweep/failed"] == 0
    assert parent.data.params[f"sweep.{FIELDS}"] == f"{TITLE},{TITLE_TEXT}"
    names = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"summary.md", "summary.csv", "multirun.yaml", "plots"} <= names
    plots = {a.path for a in client.list_artifacts(parent.info.run_id, "plots")}
    assert plots == {"plots/sweep_ranker.fields.png", "plots/sweep_ranker.b.png"}
    rows = summary_rows(client, parent, tmp_path)
    assert [r["job"] for r in rows] == ["0", "1", "2", "3"]  # stable: the sweeper's job order
    assert {r["status"] for r in rows} == {"FINISHED"}
    md = (tmp_path / "multirun_a" / "summary.md").read_text(encoding="utf-8")
    assert "| job | ranker.fields | ranker.b | R@1 | R@5 | R@20 | MRR |" in md
    assert " 66.7% " in md and "100.0%" in md

    # Compare the sweep's points: [title,text] beats [title] on exactly one case of three, so the
    # only non-zero paired difference flips sign freely: p = 1 exactly, nothing is significant.
    from evalpipe.compare.cli import main as compare_main

    out = tmp_path / "compare.md"
    code = compare_main(
        ["--sweep", parent.data.tags["evalpipe.sweep_id"], "--tracking-uri", uri, "--metrics", "recall_at_5"]
        + ["--resamples", "200", "--markdown", str(out)]
    )
    assert code == 0
    text = out.read_text(encoding="utf-8")
    assert text.count("+0.3333") == 2 and text.count("| 1.0000 |") == 3 and "| * |" not in text

    # Resume: a wider grid re-measures only its 2 new points; the 4 finished ones are reused.
    run_cli(
        tmp_path, fixture_path, uri, "multirun_b", f"{FIELDS}={TITLE},{TITLE_TEXT}", "ranker.b=0.4,0.75,1.0"
    )
    runs = all_runs(client)
    parent_b = next(p for p in parents(runs) if p.info.run_id != parent.info.run_id)
    new_kids = children_of(runs, parent_b)
    # Every point is a child of the new parent: 2 measured, 4 standing for the runs they reuse
    # (tag evalpipe.reused_run_id, the original's metrics and params, name "... (reused <id8>)").
    measured = [k for k in new_kids if "evalpipe.reused_run_id" not in k.data.tags]
    reused = [k for k in new_kids if "evalpipe.reused_run_id" in k.data.tags]
    assert sorted(k.data.tags["evalpipe.swept.ranker.b"] for k in measured) == ["1.0", "1.0"]
    original = {k.info.run_id: k for k in kids}
    assert {k.data.tags["evalpipe.reused_run_id"] for k in reused} == set(original)
    for k in reused:
        old = original[k.data.tags["evalpipe.reused_run_id"]]
        assert k.info.status == "FINISHED" and k.data.metrics == old.data.metrics
        assert k.data.params == old.data.params
        assert k.info.run_name == f"{old.info.run_name} (reused {old.info.run_id[:8]})"
        assert "evalpipe.config_hash" not in k.data.tags  # never itself found by resume
    rows = summary_rows(client, parent_b, tmp_path)
    assert sorted(r["status"] for r in rows) == ["FINISHED"] * 2 + ["REUSED"] * 4
    assert {r["run_id"] for r in rows if r["status"] == "REUSED"} == {k.info.run_id for k in kids}
    assert parent_b.data.metrics["sweep/reused"] == 4
    assert len([r for r in runs if r.data.tags.get("evalpipe.role") == "child"]) == 10

    # force=true re-measures finished points.
    run_cli(tmp_path, fixture_path, uri, "multirun_c", *GRID, "force=true")
    runs = all_runs(client)
    (parent_c,) = [
        p for p in parents(runs) if p.info.run_id not in (parent.info.run_id, parent_b.info.run_id)
    ]
    assert len(children_of(runs, parent_c)) == 4
    assert len([r for r in runs if r.data.tags.get("evalpipe.role") == "child"]) == 14


def test_joblib_two_workers_on_a_fresh_store(tmp_path, fixture_path):
    db = tmp_path / "fresh" / "mlflow.db"
    assert not db.exists()
    uri = f"sqlite:///{db}"
    run_cli(
        tmp_path, fixture_path, uri, "multirun", f"{FIELDS}={TITLE},{TITLE_TEXT}",
        "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
    )  # fmt: skip
    client = client_for(uri)
    runs = all_runs(client)
    (parent,) = parents(runs)
    kids = children_of(runs, parent)
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["evalpipe.launcher"] == "JoblibLauncher"
    assert sorted(k.data.tags[f"evalpipe.swept.{FIELDS}"] for k in kids) == sorted([TITLE, TITLE_TEXT])
    assert [k.info.status for k in kids] == ["FINISHED", "FINISHED"]
    assert len(runs) == 3
    for kid in kids:  # each worker logged its full run, including the per-case table
        assert "cases.json" in {a.path for a in client.list_artifacts(kid.info.run_id)}


def test_optuna_preset_three_trials(tmp_path, fixture_path):
    uri = f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    run_cli(tmp_path, fixture_path, uri, "multirun", "+sweep=bm25_optuna", "hydra.sweeper.n_trials=3")
    client = client_for(uri)
    runs = all_runs(client)
    (parent,) = parents(runs)
    kids = children_of(runs, parent)
    assert len(kids) == 3 and parent.info.status == "FINISHED"
    assert parent.data.tags["evalpipe.sweeper"] == "OptunaSweeper"
    assert parent.data.params["sweep.ranker.k1"] == "interval(0.3, 2.5)"
    for kid in kids:
        assert 0.3 <= float(kid.data.tags["evalpipe.swept.ranker.k1"]) <= 2.5
        assert kid.data.tags["evalpipe.swept.ranker.method"] in ("lucene", "robertson", "atire")
    best = max(k.data.metrics["recall_at_5"] for k in kids)
    assert parent.data.metrics["best/recall_at_5"] == best
    assert "optimization_results.yaml" in {a.path for a in client.list_artifacts(parent.info.run_id)}
