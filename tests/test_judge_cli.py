"""End to end: `python -m evalpipe ... judge=openai` against a local OpenAI-compatible server.

The server (tests/judge_server.py, in this process) calls a unit relevant iff its ID
contains "Session". BM25 on the tiny corpus, worked out by hand:
  d1 "merge_settings" -> merge_settings at rank 1 (hit).
  d2 "merge", labelled (wrongly) with Open: Session.merge ("merge" twice) then
     merge_settings; Open is absent, a strict miss. The judge accepts Session.merge
     at rank 1 and rejects merge_settings: judged hit at rank 1.
  d3 "open a file" -> Open at rank 1 (hit).
Strict R@1 = R@5 = 2/3, MRR 2/3; judged R@1 = R@5 = 3/3, MRR 1. Two questions.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, TINY_UNITS
from judge_server import JudgeServer

FIXTURE = """\
name: tinyjudge
corpus: corpus.jsonl
cases:
  - id: d1
    tier: exact
    query: merge_settings
    expected: [pkg/a.py::merge_settings]
  - id: d2
    tier: concept
    query: merge
    expected: [pkg/b.go::Open]
  - id: d3
    tier: concept
    query: open a file
    expected: [pkg/b.go::Open]
"""
SECRET = "sk-test-never-written-anywhere"


def run_cli(tmp: Path, out: str, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")]),
        "OPENAI_API_KEY": SECRET,
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    cmd = [sys.executable, "-m", "evalpipe", f"hydra.run.dir={tmp / out}", "progress=false", "plots=false"]
    return subprocess.run([*cmd, *args], cwd=tmp, capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(u) + "\n" for u in TINY_UNITS))
    (tmp_path / "fx.yaml").write_text(FIXTURE)
    return tmp_path


@pytest.mark.slow
def test_judged_figures_beside_strict_ones_logged_and_cached(tiny, tracking_uri):
    from mlflow.tracking import MlflowClient

    with JudgeServer(marker="Session") as server:
        args = [
            "ranker=bm25",
            f"fixture.path={tiny / 'fx.yaml'}",
            "ks=[1,5]",
            "judge=openai",
            f"judge.base_url={server.url}/v1",
            "judge.model=m",
            f"judge.cache_dir={tiny / 'judge-cache'}",
            f"tracking.uri={tracking_uri}",
        ]
        first = run_cli(tiny, "out1", *args)
        assert first.returncode == 0, first.stderr
        assert server.calls("/v1/chat/completions") == 1 + 2  # the probe, then two questions
        second = run_cli(tiny, "out2", *args)
        assert second.returncode == 0, second.stderr
        assert server.calls() == 3  # the identical second run: every judgement cached, no call at all

    out = first.stdout
    assert "strict vs judged" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("all "))
    assert row.split() == [
        "all",
        "3",
        "66.7%",
        "100.0%",
        "66.7%",
        "100.0%",
        "0.667",
        "1.000",
        "100.0%",
        "(2/2)",
    ]
    assert f"Judged by openai:m at {server.url}/v1 with prompt relevance_v1@" in out
    assert "2 questions, budget 500, 2 calls, 0 cached, 1 relevant" in out
    assert "2 questions, budget 500, 0 calls, 2 cached, 1 relevant" in second.stdout
    assert "judge/coverage 100.0% (2 of 2 pairs; exact 100.0%, concept 100.0%)" in out
    assert f"judge: 2 questions for openai:m at {server.url}/v1, budget 500" in first.stderr

    client = MlflowClient(tracking_uri=tracking_uri)
    ids = [re.search(r"run ([0-9a-f]{32})", p.stdout).group(1) for p in (first, second)]
    runs = [client.get_run(i) for i in ids]
    m1, m2 = runs[0].data.metrics, runs[1].data.metrics
    assert runs[0].info.status == runs[1].info.status == "FINISHED"
    assert m1["recall_at_1"] == pytest.approx(2 / 3) and m1["judged_recall_at_1"] == 1.0
    assert m1["mrr"] == pytest.approx(2 / 3) and m1["judged_mrr"] == 1.0
    assert m1["tier/concept/recall_at_5"] == 0.5 and m1["tier/concept/judged_recall_at_5"] == 1.0
    assert (m1["judge/calls"], m1["judge/cache_hits"], m1["judge/relevant"]) == (2, 0, 1)
    assert (m2["judge/calls"], m2["judge/cache_hits"], m2["judge/cache_hit_rate"]) == (0, 2, 1.0)
    assert m2["judged_recall_at_1"] == 1.0
    tags = runs[0].data.tags
    assert tags["evalpipe.judge"] == "openai:m" and tags["evalpipe.judge_prompt"].startswith("relevance_v1@")
    arts = {a.path for a in client.list_artifacts(ids[0])}
    assert {"judged.tsv", "judgements.jsonl", "report.md", "misses.jsonl"} <= arts

    local = tiny / "out1"
    misses = [json.loads(x) for x in (local / "misses.jsonl").read_text().splitlines()]
    assert [(x["case_id"], x["rank"], x["judged_hit"]) for x in misses] == [("d2", 0, True)]
    cases = {
        json.loads(x)["case_id"]: json.loads(x) for x in (local / "cases.jsonl").read_text().splitlines()
    }
    assert [cases[c]["judged_hit"] for c in ("d1", "d2", "d3")] == [None, True, None]
    assert cases["d2"]["recall_at_1"] == 0.0 and cases["d2"]["judged_recall_at_1"] == 1.0
    tsv = (local / "judged.tsv").read_text().splitlines()
    assert tsv[-1].split("\t")[:4] == ["d2", "pkg/a.py::Session.merge", "1", "1"]
    report = (local / "report.md").read_text()
    assert "## Judged figures" in report and "| all | 3 |  66.7% | 100.0% |" in report

    # The API key (read from the environment) is written nowhere: outputs, artifacts, the store.
    for path in [*tiny.rglob("*")]:
        if path.is_file() and "judge-cache" not in path.parts:
            assert SECRET.encode() not in path.read_bytes(), path


def test_bad_judge_settings_exit_2_before_any_run(tiny, tracking_uri):
    base = ["ranker=bm25", f"fixture.path={tiny / 'fx.yaml'}", f"tracking.uri={tracking_uri}", "judge=openai"]
    missing = run_cli(tiny, "o1", *base)
    assert missing.returncode == 2
    assert (
        missing.stderr.strip().splitlines()[-1].startswith("evalpipe: error: missing value for judge.model")
    )
    bad = run_cli(tiny, "o2", *base, "judge.model=m", "judge.max_calls=-5")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "evalpipe: error: judge.max_calls must be an integer >= 0, got -5"
    ]
    (tiny / "a-file").write_text("not a folder")
    cache = run_cli(
        tiny, "o3", *base, "judge.model=m", "judge.base_url=http://127.0.0.1:9/v1", "judge.cache_dir=a-file"
    )
    assert cache.returncode == 2
    [line] = cache.stderr.strip().splitlines()
    assert line.startswith("evalpipe: error: cannot write the judge cache") and "judge.cache_dir" in line
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    assert all(not client.search_runs([e.experiment_id]) for e in client.search_experiments())
