"""`evalpipe pool --runs`: runs read from an MLflow store (their cases.json artifact and tags); a parent
run (a sweep or a suite) stands for its children."""

from __future__ import annotations

import json

import pytest

from conftest import TINY_UNITS
from evalpipe.corpus import file_sha256
from evalpipe.judge.batch import read_batch
from evalpipe.labelling import pool_cli

mlflow = pytest.importorskip("mlflow")
pytestmark = pytest.mark.slow  # a fresh SQLite store (MLflow's migrations): seconds on a quiet machine

FIXTURE = """\
name: tiny
corpus: corpus.jsonl
cases:
  - {id: c1, tier: concept, query: combine dicts, expected: ["pkg/a.py::merge_settings"]}
"""


def log_run(client, exp, name, sha, top, first, parent=None, tmp=None):
    tags = {"evalpipe.fixture_sha256": sha, "evalpipe.ranker": name}
    if parent:
        tags["mlflow.parentRunId"] = parent
    run = client.create_run(exp, run_name=name, tags=tags)
    table = {"columns": ["case_id", "top", "first_rank"], "data": [["c1", json.dumps(top), first]]}
    path = tmp / f"{name}" / "cases.json"
    path.parent.mkdir()
    path.write_text(json.dumps(table), encoding="utf-8")
    client.log_artifact(run.info.run_id, str(path))
    client.set_terminated(run.info.run_id)
    return run.info.run_id


def test_pool_from_a_parent_run_and_from_run_ids(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps(u) + "\n" for u in TINY_UNITS), encoding="utf-8"
    )
    fx = tmp_path / "fx.yaml"
    fx.write_text(FIXTURE, encoding="utf-8")
    sha = file_sha256(fx)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.tracking.MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("evalpipe/tiny", artifact_location=str(tmp_path / "artifacts"))
    parent = client.create_run(exp, run_name="sweep").info.run_id
    a = log_run(
        client, exp, "bm25", sha, ["pkg/a.py::Session.merge", "pkg/a.py::merge_settings"], 2, parent, tmp_path
    )
    b = log_run(client, exp, "exact", sha, ["pkg/a.py::merge_settings"], 1, parent, tmp_path)
    out = tmp_path / "b.jsonl"
    assert pool_cli.main(["--fixture", str(fx), "--runs", parent, "--tracking-uri", uri, "-o", str(out)]) == 0
    batch = read_batch(out)
    assert {r["label"] for r in batch.header["runs"]} == {"bm25", "exact"}
    assert [(it.candidate, dict(it.runs)) for it in batch.items] == [
        ("pkg/a.py::Session.merge", {"bm25": 1, "exact": None})
    ]
    assert pool_cli.main(["--fixture", str(fx), "--runs", a, b, "--tracking-uri", uri, "-o", str(out)]) == 0
    assert len(read_batch(out).items) == 1
    # A run on another fixture: one line, exit 2.
    other = log_run(client, exp, "bm25f", "0" * 64, ["pkg/a.py"], 0, None, tmp_path)
    capsys.readouterr()
    assert pool_cli.main(["--fixture", str(fx), "--runs", other, "--tracking-uri", uri, "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ran on fixture sha256 000000000000" in err[0]
