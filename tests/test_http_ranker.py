"""ranker=http against a real HTTP server on 127.0.0.1 (stdlib http.server in a thread) serving exact
search over the flask fixture's chunks: the same hits as that search, requests in flight together,
retries, the token from the environment and masked, and each bad setting one line before the first case."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from evalpipe.rankers.external.http import HttpRanker, HttpRetrieverError, RequestFailed, fill
from evalpipe.safety.secrets import mask_text
from rag_retrievers import Retriever, document_hits, embed, exact_top, flask_fixture, free_port_url, serving

FIELDS = {
    "body": {"q": "{query}", "top_k": "{k}"},
    "results_field": "data.hits",
    "id_field": "chunk_id",
    "score_field": "similarity",
    "document_field": "meta.doc",
    "section_field": "meta.sec",
    "chunk_field": "meta.idx",
}


@pytest.fixture(scope="module")
def flask():
    return flask_fixture()


@pytest.fixture
def service(flask):
    retriever = Retriever(flask)
    with serving(retriever) as url:
        yield retriever, url


def test_fill_puts_query_and_k_in_and_keeps_k_a_number():
    body = fill({"q": "{query}", "k": "{k}", "opts": [{"note": "top {k} for {query}"}], "x": 1}, "why", 5)
    assert body == {"q": "why", "k": 5, "opts": [{"note": "top 5 for why"}], "x": 1}


def test_same_hits_and_documents_as_exact_search(flask, service):
    retriever, url = service
    ranker = HttpRanker(url + "/search", concurrency=3, **FIELDS)
    queries = [c.query for c in flask.cases]
    batched = ranker.search_batch(queries, 5)
    want = [exact_top(retriever.matrix, embed(q), 5) for q in queries]
    assert [[h.id for h in hits] for hits in batched] == [[f"svc-{r}" for r in rows] for rows in want]
    one_by_one = [ranker.search(q, 5) for q in queries[:20]]
    assert [[h.id for h in hits] for hits in one_by_one] == [[h.id for h in hits] for hits in batched[:20]]
    units = ranker.foreign_units
    got_docs = [[units[h.id].get("document_id") for h in hits] for hits in batched]
    want_docs = [[flask.corpus.units[r].get("document_id") for r in rows] for rows in want]
    assert got_docs == want_docs
    assert units[batched[0][0].id].get("section") == flask.corpus.units[want[0][0]].get("section")
    hit = document_hits(flask, got_docs)
    assert 0 < sum(hit) < len(flask.cases)  # a real retriever: some found, some missed
    assert ranker.stats()["requests"] == len(queries) + 20


def test_requests_are_in_flight_together(service):
    retriever, url = service
    ranker = HttpRanker(url + "/search", concurrency=2, **FIELDS)  # probe on /search: no barrier
    ranker.url = url + "/gather"  # every request there waits until two are in flight
    hits = ranker.search_batch(["blueprint", "template", "session", "config"], 2)
    assert all(len(h) == 2 for h in hits)
    assert retriever.max_in_flight == 2


def test_5xx_is_retried_with_backoff_then_a_retrieval_error(service):
    retriever, url = service
    ranker = HttpRanker(url + "/search", retries=2, backoff_s=0.0, **FIELDS)
    retriever.fail_first = {"busy one": 2, "always busy": 99}
    assert len(ranker.search("busy one", 3)) == 3
    assert ranker.stats()["retried_requests"] == 2
    with pytest.raises(RequestFailed, match=r"HTTP 503 after 3 attempt\(s\)"):
        ranker.search("always busy", 3)


def test_token_comes_from_the_environment_and_is_masked(service, monkeypatch):
    retriever, url = service
    retriever.token = "s3cr3t-token-value"
    monkeypatch.delenv("RETRIEVER_TOKEN", raising=False)
    with pytest.raises(HttpRetrieverError, match="environment variable RETRIEVER_TOKEN, which is not set"):
        HttpRanker(url + "/search", token_env="RETRIEVER_TOKEN", **FIELDS)
    with pytest.raises(HttpRetrieverError, match="HTTP 401"):  # no token: the probe is refused
        HttpRanker(url + "/search", **FIELDS)
    monkeypatch.setenv("RETRIEVER_TOKEN", retriever.token)
    ranker = HttpRanker(url + "/search", token_env="RETRIEVER_TOKEN", **FIELDS)
    assert len(ranker.search("register a blueprint", 2)) == 2
    assert mask_text(f"sent Authorization: Bearer {retriever.token}") == "sent Authorization: Bearer ***"
    assert retriever.token not in repr(ranker) + repr(ranker.stats())


@pytest.mark.parametrize(
    ("path", "override", "needles"),
    [
        ("/html", {}, ["the answer is not JSON (text/html)", "maintenance"]),
        ("/search", {"results_field": "hits"}, ["ranker.results_field 'hits': no key 'hits' (it has: data)"]),
        (
            "/search",
            {"id_field": "id"},
            ["ranker.id_field 'id': no key 'id' (it has: chunk_id, similarity, meta)"],
        ),
        (
            "/search",
            {"document_field": "meta.document"},
            ["document_field 'meta.document': no key 'document'"],
        ),
        ("/search", {"results_field": "data"}, ["holds a dict, not a list of results"]),
        (
            "/slow",
            {"request_timeout_s": 0.3, "retries": 0},
            ["no answer within ranker.request_timeout_s=0.3s"],
        ),
    ],
)
def test_bad_service_or_fields_fail_at_the_probe(service, path, override, needles):
    _, url = service
    with pytest.raises(HttpRetrieverError) as info:
        HttpRanker(url + path, **{**FIELDS, **override})
    message = str(info.value)
    assert message.startswith("http ranker: the probe query to") and "\n" not in message
    for needle in needles:
        assert needle in message, message


def test_server_down_is_refused_after_retries():
    with pytest.raises(HttpRetrieverError, match=r"cannot reach .* after 2 attempt\(s\)"):
        HttpRanker(free_port_url(), retries=1, backoff_s=0.0, **FIELDS)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"url": "localhost:8000"}, "ranker.url must be an http:// or https:// URL"),
        ({"url": "http://x", "body": {"q": "fixed"}}, "ranker.body never mentions {query}"),
        ({"url": "http://x", "concurrency": 0}, "ranker.concurrency must be a whole number >= 1"),
        ({"url": "http://x", "section_field": "s"}, "need ranker.document_field"),
    ],
)
def test_bad_settings_are_refused_before_any_request(kwargs, needle):
    with pytest.raises(HttpRetrieverError, match=needle.replace("(", r"\(").replace("{", r"\{")):
        HttpRanker(**kwargs)


def cli(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    for key in ("MLFLOW_TRACKING_URI", "HYDRA_FULL_ERROR"):
        env.pop(key, None)
    command = [
        sys.executable,
        "-m",
        "evalpipe",
        f"hydra.run.dir={tmp / 'out'}",
        f"tracking.uri=sqlite:///{tmp / 'mlruns' / 'mlflow.db'}",
        "plots=false",
        "progress=false",
        "fixture=flask",
        f"fixture.path={ROOT / 'fixtures' / 'flask.yaml'}",
        "fixture.chunk_cache=null",
        "chunker=tokens",
        "chunker.size=256",
        "chunker.overlap=0",
        "ranker=http",
        "ks=[1,5]",
        *args,
    ]
    return subprocess.run(command, cwd=tmp, capture_output=True, text=True, env=env, timeout=600)


def field_args(url: str) -> list[str]:
    return [
        f"ranker.url={url}",
        "ranker.body={q:'{query}',top_k:'{k}'}",
        "ranker.results_field=data.hits",
        "ranker.id_field=chunk_id",
        "ranker.score_field=similarity",
        "ranker.document_field=meta.doc",
        "ranker.section_field=meta.sec",
        "ranker.chunk_field=meta.idx",
    ]


def test_a_run_through_the_cli_scores_the_services_records(tmp_path, flask, service):
    retriever, url = service
    broken = flask.cases[3].query
    retriever.fail_first = {broken: 10**6}  # this case's requests always fail: its retrieval error
    proc = cli(tmp_path, *field_args(url + "/search"), "ranker.retries=0", "batch=true")
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = [exact_top(retriever.matrix, embed(c.query), 5) for c in flask.cases]
    hits = document_hits(flask, [[flask.corpus.units[r].get("document_id") for r in rows] for rows in want])
    hits[3] = False  # the failed case is a miss
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    metrics = run.data.metrics
    assert metrics["rag/document_hit_rate"] == pytest.approx(sum(hits) / len(hits))
    assert metrics["rag/retrieval_error_rate"] == pytest.approx(1 / len(flask.cases))
    assert metrics["rag/cases"] == len(flask.cases)
    assert metrics["count/unknown_ids"] == 0  # the service's own records are known, not unknown IDs


def test_server_down_through_the_cli_is_one_line_exit_2(tmp_path):
    proc = cli(tmp_path, *field_args(free_port_url()), "ranker.retries=0")
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "http ranker: the probe query to" in lines[0] and "cannot reach" in lines[0]
    assert not (tmp_path / "mlruns").exists()
