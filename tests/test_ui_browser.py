"""The MLflow UI as a user sees it: a lean `mlflow server` on a temporary store, pages rendered by
headless Chromium, assertions on the rendered DOM.

Checks what issue #9 promised: the experiment link opens the runs table (not the GenAI overview)
with the headline metric columns; a run page opens on its headline table (the description);
a sweep parent lists every point as a child, reused ones included.
Skipped when Chromium is not installed (`apt-get install -y chromium`).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from conftest import TINY_UNITS

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import mlflow_ui  # noqa: E402

pytestmark = pytest.mark.slow

FIXTURE = """\
name: tiny
corpus: corpus.jsonl
cases:
  - {id: c1, tier: concept, query: combine dicts, expected: ["pkg/a.py::merge_settings"]}
  - {id: c2, tier: exact, query: Open, expected: ["pkg/b.go::Open"]}
  - {id: c3, tier: exact, query: Install, expected: ["docs/guide.md#install"]}
"""


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    if mlflow_ui.chromium() is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium): the UI cannot be rendered")
    tmp = tmp_path_factory.mktemp("ui")
    (tmp / "corpus.jsonl").write_text("".join(json.dumps(u) + "\n" for u in TINY_UNITS), encoding="utf-8")
    (tmp / "fx.yaml").write_text(FIXTURE, encoding="utf-8")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    common = [f"fixture.path={tmp / 'fx.yaml'}", "fixture.name=tiny", f"tracking.uri={uri}", "progress=false"]
    common.append("plots=false")
    common.append(f"hydra.run.dir={tmp / 'out'}")
    single = mlflow_ui.evalpipe(*common)
    mlflow_ui.evalpipe(*common, "ranker=exact")
    mlflow_ui.evalpipe("-m", *common, "ranker.b=0.4,0.75", f"hydra.sweep.dir={tmp / 'sw1'}")
    sweep = mlflow_ui.evalpipe("-m", *common, "ranker.b=0.4,0.75,0.9", f"hydra.sweep.dir={tmp / 'sw2'}")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("evalpipe/tiny")
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    with mlflow_ui.lean_server(uri) as url:
        yield {"url": url, "exp": exp, "runs": runs, "client": client, "single": single, "sweep": sweep}


def test_printed_links_point_at_the_runs_table_and_the_run(store):
    exp_id = store["exp"].experiment_id
    out = store["single"].stdout
    bm25 = next(r for r in store["runs"] if r.info.run_name == "bm25")
    run_link = (
        f"http://127.0.0.1:5000/#/experiments/{exp_id}/runs/{bm25.info.run_id}?workflowType=machine_learning"
    )
    assert run_link in out
    assert f"/#/experiments/{exp_id}/runs?workflowType=machine_learning&viewStateShareKey=evalpipe" in out
    assert "mlflow ui --backend-store-uri sqlite:///" in out
    # The sweep: one line per point, then the summary (top points, best point, summary.md, parent).
    sweep = store["sweep"].stdout
    assert len(re.findall(r"^#\d ", sweep, re.M)) == 3 and sweep.count("reused (force=true re-runs)") == 2
    assert "top 3 of 3 points by recall_at_5" in sweep and "best recall_at_5 = " in sweep
    assert "summary.md" in sweep and "parent run: " in sweep


ML = "workflowType=machine_learning"


def test_experiment_link_opens_the_runs_table_with_headline_columns(store):
    exp_id = store["exp"].experiment_id
    html = mlflow_ui.dom(f"{store['url']}/#/experiments/{exp_id}/runs?{ML}&viewStateShareKey=evalpipe")
    text = text_of(html)
    assert "/overview/usage" not in html and "Traces 0" not in text  # not MLflow 3's GenAI landing page
    for column in ("recall_at_5", "mrr", "ndcg_at_5"):
        assert f'col-id="metrics.`{column}`"' in html, column
    assert "bm25" in text and "exact" in text
    assert re.search(r"Sort: recall_at_5", text)


def test_plain_experiment_url_says_where_the_runs_are(store):
    """Opened without the link (from the experiment list), MLflow shows its GenAI view, with
    evalpipe's description above it linking the runs table."""
    exp_id = store["exp"].experiment_id
    html = mlflow_ui.dom(f"{store['url']}/#/experiments/{exp_id}")
    assert f'href="#/experiments/{exp_id}/runs?{ML}&amp;viewStateShareKey=evalpipe"' in html
    assert "evalpipe runs." in text_of(html) and "Model training" in text_of(html)


def test_run_page_opens_on_the_headline_table(store):
    exp_id = store["exp"].experiment_id
    bm25 = next(r for r in store["runs"] if r.info.run_name == "bm25")
    html = mlflow_ui.dom(f"{store['url']}/#/experiments/{exp_id}/runs/{bm25.info.run_id}?{ML}")
    match = re.search(r'note-editor-preview-content"[^>]*>(.*?)</div>', html, re.S)
    assert match, "the run page shows no description"
    note = match.group(1)
    assert "<table" in note and "R@5" in text_of(note) and "MRR" in text_of(note)
    # By hand (tests/test_sweep.py's fixture): bm25 over title+text+identifiers finds all 3 at rank 1.
    assert "bm25 on tiny · R@5 100.0% · MRR 1.000 · nDCG@5 1.0000 · 3 cases · K = 1, 5, 20" in text_of(note)


def test_sweep_parent_lists_every_point_including_reused_ones(store):
    exp_id = store["exp"].experiment_id
    parents = [r for r in store["runs"] if r.data.tags.get("evalpipe.role") == "parent"]
    parent = parents[-1]
    kids = [r for r in store["runs"] if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(kids) == 3 and sum("evalpipe.reused_run_id" in k.data.tags for k in kids) == 2
    html = mlflow_ui.dom(f"{store['url']}/#/experiments/{exp_id}/runs/{parent.info.run_id}?{ML}")
    text = text_of(html)
    section = text[text.index("Child runs") : text.index("Child runs") + 2000]
    for kid in kids:
        assert kid.info.run_name in section, kid.info.run_name
    assert "best recall_at_5 = " in text  # the parent's description: the summary table


def test_runs_show_the_fixture_and_corpus_they_were_measured_on(store):
    """Issue #20: every run logs its fixture and corpus as MLflow datasets; the runs table's
    Datasets column and the run page show them, by name and digest (the sha256's first 36 digits)."""
    exp_id = store["exp"].experiment_id
    bm25 = next(r for r in store["runs"] if r.info.run_name == "bm25")
    fixture_digest = bm25.data.tags["evalpipe.fixture_sha256"][:36]
    corpus_digest = bm25.data.tags["evalpipe.corpus_sha256"][:36]
    html = mlflow_ui.dom(f"{store['url']}/#/experiments/{exp_id}/runs?{ML}&viewStateShareKey=evalpipe")
    assert 'col-id="attributes.`Dataset`"' in html
    text = text_of(html)
    assert f"tiny ({fixture_digest}) fixture" in text
    assert f"tiny-corpus ({corpus_digest}) corpus" in text
    html = mlflow_ui.dom(f"{store['url']}/#/experiments/{exp_id}/runs/{bm25.info.run_id}?{ML}")
    text = text_of(html)
    section = text[text.index("Datasets") : text.index("Datasets") + 300]
    assert f"tiny ({fixture_digest}) fixture" in section, section
