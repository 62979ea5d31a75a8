"""End to end through the CLI into a temporary SQLite store, read back with MlflowClient."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, TINY_UNITS

FIXTURE = """\
name: tiny
corpus: corpus.jsonl
cases:
  - id: c1
    tier: exact
    query: merge_settings
    expected: [pkg/a.py::merge_settings]
  - id: c2
    tier: concept
    query: combine another session
    expected: [pkg/a.py::Session.merge]
  - id: c3
    tier: multi_hop
    query: open a file with pip
    expected: [pkg/b.go::Open, docs/guide.md#install]
  - id: c4
    tier: di
    query: zebra
    expected: [pkg/a.py]
"""


def run_cli(tmp: Path, *args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    # This checkout's src first: the venv's editable install may point at another worktree.
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONPATH": path}
    env.pop("MLFLOW_TRACKING_URI", None)
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "evalpipe", f"hydra.run.dir={tmp / 'out'}", *args],
        cwd=tmp,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(u) + "\n" for u in TINY_UNITS))
    (tmp_path / "fx.yaml").write_text(FIXTURE)
    return tmp_path


def client_for(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def test_bm25_run_is_logged_and_consistent_with_printout(tiny, tracking_uri):
    proc = run_cli(tiny, f"fixture.path={tiny / 'fx.yaml'}", f"tracking.uri={tracking_uri}")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    run_id = re.search(r"run ([0-9a-f]{32})", out).group(1)
    assert "mlflow ui --backend-store-uri" in out

    client = client_for(tracking_uri)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    exp = client.get_experiment(run.info.experiment_id)
    assert exp.name == "evalpipe/fx"
    m = run.data.metrics
    # By hand: c1 finds merge_settings at rank 1 (exact name), c2 ("combine another session")
    # shares 'session' only with Session.merge, c3 shares 'open'/'file' with Open and 'pip' with
    # the install section (both expected), c4 ("zebra") matches nothing -> 3 of 4 at rank 1.
    assert m["recall_at_1"] == pytest.approx(0.75)
    assert m["recall_at_20"] == pytest.approx(0.75)
    assert m["mrr"] == pytest.approx(0.75)
    assert m["ir/hits_at_5"] == 3
    assert m["tier/exact/recall_at_5"] == 1.0 and m["tier/di/recall_at_5"] == 0.0
    assert m["tier/di/cases"] == 1
    assert m["count/cases"] == 4 and m["count/retrieval_errors"] == 0 and m["count/empty_results"] == 1
    assert m["cost/latency_p95_us"] >= m["cost/latency_p50_us"] > 0
    assert "ndcg_at_5" in m and "ir/map_at_20" in m
    assert "cost/index_build_seconds" in m and "cost/peak_memory_mb" in m
    # The printed table shows the same figures.
    assert re.search(r"bm25\s+75\.0%\s+75\.0%\s+75\.0%\s+0\.750", out)

    p = run.data.params
    assert p["ranker.k1"] == "1.5" and p["ks"] == "[1, 5, 20]" and p["ranker"] == "bm25"
    assert not any("_target_" in k for k in p) and "tracking.uri" not in p and "progress" not in p
    t = run.data.tags
    assert len(t["evalpipe.fixture_sha256"]) == 64 and len(t["evalpipe.corpus_sha256"]) == 64
    assert (
        t["evalpipe.version"]
        and t["evalpipe.git_revision"]
        and t["evalpipe.token_counter"] == "tiktoken:cl100k_base"
    )

    arts = {a.path for a in client.list_artifacts(run_id)}
    assert {"report.md", "misses.jsonl", "config.yaml", "cases.json"} <= arts
    local = Path(client.download_artifacts(run_id, "", str(tiny / "dl")))
    report = (local / "report.md").read_text()
    assert "| bm25 |  75.0% |  75.0% |  75.0% | 0.750 |" in report
    misses = [json.loads(line) for line in (local / "misses.jsonl").read_text().splitlines()]
    assert [(x["case_id"], x["rank"], x["top"]) for x in misses] == [("c4", 0, [])]
    table = json.loads((local / "cases.json").read_text())
    cols = table["columns"]
    rows = [dict(zip(cols, r, strict=True)) for r in table["data"]]
    assert [r["case_id"] for r in rows] == ["c1", "c2", "c3", "c4"]
    assert [r["first_rank"] for r in rows] == [1, 1, 1, 0]


def test_plugin_with_failing_query_records_retrieval_error(tiny, tracking_uri):
    fx = tiny / "fx.yaml"
    fx.write_text(fx.read_text().replace("query: zebra", "query: boom"))
    answers = "{merge_settings:['pkg/a.py::Session.merge','pkg/a.py::merge_settings']}"
    proc = run_cli(
        tiny,
        f"fixture.path={fx}",
        f"tracking.uri={tracking_uri}",
        "~ranker",
        "+ranker._target_=plugins_for_tests.ScriptedRanker",
        f"+ranker.answers={answers}",
    )
    assert proc.returncode == 0, proc.stderr
    run = client_for(tracking_uri).search_runs(
        [client_for(tracking_uri).get_experiment_by_name("evalpipe/fx").experiment_id]
    )[0]
    m = run.data.metrics
    # c1 found at rank 2; c2, c3 get nothing (empty results); c4 raised (an error, not an empty result).
    assert m["count/retrieval_errors"] == 1 and m["count/empty_results"] == 2
    assert (
        m["recall_at_1"] == 0.0
        and m["recall_at_5"] == pytest.approx(0.25)
        and m["mrr"] == pytest.approx(0.125)
    )


def test_function_plugin(tiny, tracking_uri):
    proc = run_cli(
        tiny,
        f"fixture.path={tiny / 'fx.yaml'}",
        f"tracking.uri={tracking_uri}",
        "~ranker",
        "+ranker._target_=plugins_for_tests.keyword_search",
        "+ranker._partial_=true",
    )
    assert proc.returncode == 0, proc.stderr
    # keyword_search: c1 'merge_settings' -> merge_settings at 1; c2 'session' -> Session.merge at 1;
    # c3 'open' -> Open at 1; c4 nothing.
    assert re.search(r"75\.0%\s+75\.0%\s+75\.0%\s+0\.750", proc.stdout)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["fixture.path=nope.yaml"], "fixture file not found"),
        (["ks=[0,5]"], "ks must hold positive integers, got 0"),
        (["ranker.method=nosuch"], "nosuch"),
        (["+ranker.bogus=1"], "bogus"),
        (["tracking.uri=some/dir"], "file-store path"),
        (["ranker=runfile"], "missing value for ranker.path"),
        (["ranker.k1=abc"], "BM25Ranker: k1 must be a number, got 'abc'"),
    ],
)
def test_bad_input_exits_2_with_one_line(tiny, tracking_uri, args, needle):
    base = [f"fixture.path={tiny / 'fx.yaml'}", f"tracking.uri={tracking_uri}"]
    proc = run_cli(tiny, *base, *args)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("evalpipe: error:") and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    db = Path(tracking_uri[len("sqlite:///") :])
    if db.exists():
        runs = client_for(tracking_uri).search_runs(
            [e.experiment_id for e in client_for(tracking_uri).search_experiments()]
        )
        assert all(r.info.status != "RUNNING" for r in runs)


def test_cfg_job_prints_composed_config(tiny):
    proc = run_cli(tiny, "--cfg", "job")
    assert proc.returncode == 0, proc.stderr
    assert "ks:" in proc.stdout and "_target_: evalpipe.rankers.lexical.bm25.BM25Ranker" in proc.stdout


def test_help_lists_groups(tiny):
    proc = run_cli(tiny, "--help")
    assert proc.returncode == 0
    assert "ranker: " in proc.stdout and "bm25" in proc.stdout and "fixture: " in proc.stdout


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["ranker=semantic", "ranker.model=/nonexistent/model"], "/nonexistent/model"),
        (["ranker=rrf", "ranker.components.semantic.model=/nonexistent/model"], "component 'semantic'"),
    ],
)
def test_unloadable_ranker_is_reported_as_skipped(tiny, tracking_uri, args, reason):
    proc = run_cli(tiny, f"fixture.path={tiny / 'fx.yaml'}", f"tracking.uri={tracking_uri}", *args)
    assert proc.returncode == 3, proc.stderr  # measured nothing: not a success (allow_skipped=true: 0)
    assert "skipped" in proc.stderr and reason in proc.stderr
    client = client_for(tracking_uri)
    run = client.search_runs([client.get_experiment_by_name("evalpipe/fx").experiment_id])[0]
    assert run.info.status == "FAILED"
    assert reason in run.data.tags["evalpipe.skipped"]
    assert "recall_at_5" not in run.data.metrics  # no zero-filled figures pretending to be results
    report = Path(client.download_artifacts(run.info.run_id, "report.md", str(tiny / "dl"))).read_text()
    assert "(skipped: " in report and reason in report


@pytest.mark.parametrize("fmt", ["trec", "jsonl"])
def test_runfile_replay_through_cli(tiny, tracking_uri, fmt):
    if fmt == "trec":
        run = tiny / "run.trec"
        run.write_text(
            "c1 Q0 pkg/a.py::Session.merge 1 2.0 ext\n"
            "c1 Q0 pkg/a.py::merge_settings 2 1.0 ext\n"
            "c2 Q0 pkg/a.py::Session.merge 1 5.0 ext\n"
        )
    else:
        run = tiny / "run.jsonl"
        run.write_text(
            json.dumps(
                {
                    "qid": "c1",
                    "hits": [
                        {"id": "pkg/a.py::Session.merge", "score": 2.0},
                        {"id": "pkg/a.py::merge_settings", "score": 1.0},
                    ],
                }
            )
            + "\n"
            + json.dumps({"qid": "c2", "hits": [{"id": "pkg/a.py::Session.merge", "score": 5.0}]})
            + "\n"
        )
    proc = run_cli(
        tiny,
        f"fixture.path={tiny / 'fx.yaml'}",
        f"tracking.uri={tracking_uri}",
        "ranker=runfile",
        f"ranker.path={run}",
    )
    assert proc.returncode == 0, proc.stderr
    client = client_for(tracking_uri)
    m = client.search_runs([client.get_experiment_by_name("evalpipe/fx").experiment_id])[0].data.metrics
    # c1 first hit at rank 2, c2 at rank 1, c3/c4 absent from the run file (empty results).
    assert m["recall_at_1"] == pytest.approx(0.25) and m["recall_at_5"] == pytest.approx(0.5)
    assert m["mrr"] == pytest.approx((0.5 + 1.0) / 4)
    assert m["count/empty_results"] == 2 and m["count/retrieval_errors"] == 0


def test_runfile_missing_file_exits_2(tiny, tracking_uri):
    proc = run_cli(
        tiny,
        f"fixture.path={tiny / 'fx.yaml'}",
        f"tracking.uri={tracking_uri}",
        "ranker=runfile",
        f"ranker.path={tiny / 'absent.trec'}",
    )
    assert proc.returncode == 2 and "absent.trec" in proc.stderr and "Traceback" not in proc.stderr
    # The run file is read before the first case, so no run (not even the store) was created.
    assert not Path(tracking_uri[len("sqlite:///") :]).exists()
