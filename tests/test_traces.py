"""Opt-in per-case traces (`traces=true`): one retriever trace per case, linked to the run, with the
expected IDs and first_rank as assessments. Off by default (they cost more than the run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import TINY_UNITS

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import mlflow_ui  # noqa: E402

# The fixture of tests/test_sweep.py: BM25 over title+text+identifiers ranks every expected unit
# first (c1 by the text "combine ... dicts", c2 and c3 by their titles), so first_rank is 1 each.
FIXTURE = """\
name: tiny
corpus: corpus.jsonl
cases:
  - {id: c1, tier: concept, query: combine dicts, expected: ["pkg/a.py::merge_settings"]}
  - {id: c2, tier: exact, query: Open, expected: ["pkg/b.go::Open"]}
  - {id: c3, tier: exact, query: Install, expected: ["docs/guide.md#install"]}
"""


def test_traces_opt_in_one_retriever_trace_per_case(tmp_path):
    from mlflow.tracking import MlflowClient

    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps(u) + "\n" for u in TINY_UNITS), encoding="utf-8"
    )
    (tmp_path / "fx.yaml").write_text(FIXTURE, encoding="utf-8")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    common = [f"fixture.path={tmp_path / 'fx.yaml'}", "fixture.name=tiny", f"tracking.uri={uri}"]
    common += ["progress=false", "plots=false", f"hydra.run.dir={tmp_path / 'out'}"]
    mlflow_ui.evalpipe(*common)  # default: no traces
    mlflow_ui.evalpipe(*common, "traces=true")
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("evalpipe/tiny")
    plain, traced = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    traces = client.search_traces(locations=[exp.experiment_id], max_results=100)
    assert len(traces) == 3
    assert {t.info.trace_metadata.get("mlflow.sourceRun") for t in traces} == {traced.info.run_id}
    by_case = {t.info.tags["evalpipe.case_id"]: t for t in traces}
    assert set(by_case) == {"c1", "c2", "c3"}
    c1 = by_case["c1"]
    (span,) = c1.data.spans
    assert span.span_type == "RETRIEVER" and span.inputs == {"query": "combine dicts"}
    assert span.outputs[0]["metadata"]["doc_uri"] == "pkg/a.py::merge_settings"
    assessments = {a.name: a for a in c1.info.assessments}
    assert assessments["expected_ids"].expectation.value == ["pkg/a.py::merge_settings"]
    assert assessments["first_rank"].feedback.value == 1
    # traces is not part of what was measured: the same config hash, and not a param.
    assert plain.data.tags["evalpipe.config_hash"] == traced.data.tags["evalpipe.config_hash"]
    assert "traces" not in traced.data.params
