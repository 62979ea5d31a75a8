"""ranker=langchain and ranker=llamaindex with the real packages over real local stores (LangChain's
InMemoryVectorStore, LlamaIndex's VectorStoreIndex, both exact cosine) holding the flask fixture's
chunks under one deterministic embedding: the same hits as numpy's exact search, metadata mapped to
document / section / chunk, and each bad setting refused at build (one line, exit 2 from the CLI)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from evalpipe.rankers.external.retriever_object import RetrieverObjectError
from rag_retrievers import cached_fixture, document_hits, embed, exact_top, make_langchain_retriever

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from evalpipe.rankers.external.frameworks import LangChainRanker, LlamaIndexRanker  # noqa: E402

FIELDS = {"document_field": "doc", "section_field": "sec", "chunk_field": "idx"}


@pytest.fixture(scope="module")
def flask():
    return cached_fixture()


@pytest.fixture(scope="module")
def reference(flask):
    from rag_retrievers import Retriever

    retriever = Retriever(flask)
    return {c.query: exact_top(retriever.matrix, embed(c.query), 5) for c in flask.cases}


@pytest.mark.parametrize(
    ("cls", "factory", "prefix", "k_set_by"),
    [
        (LangChainRanker, "rag_retrievers.make_langchain_retriever", "lc", "invoke(k=...)"),
        (LlamaIndexRanker, "rag_retrievers.make_llamaindex_retriever", "li", "similarity_top_k"),
    ],
)
def test_same_hits_as_exact_search_with_metadata_mapped(flask, reference, cls, factory, prefix, k_set_by):
    ranker = cls(factory, retriever_kwargs={"k": 2}, concurrency=3, **FIELDS)  # its own k (2) is overridden
    assert ranker.stats()["k_set_by"] == k_set_by
    queries = [c.query for c in flask.cases]
    batched = ranker.search_batch(queries, 5)
    assert [[h.id for h in hits] for hits in batched] == [
        [f"{prefix}-{r}" for r in reference[q]] for q in queries
    ]
    assert [[h.id for h in ranker.search(q, 5)] for q in queries[:10]] == [
        [h.id for h in b] for b in batched[:10]
    ]
    units = ranker.foreign_units
    first = flask.corpus.units[reference[queries[0]][0]]
    mapped = units[batched[0][0].id]
    assert mapped.get("document_id") == first.get("document_id") and mapped.get("section") == first.get(
        "section"
    )
    assert mapped.get("chunk_index") == first.get("chunk_index")
    docs = [[units[h.id].get("document_id") for h in hits] for hits in batched]
    want = [[flask.corpus.units[r].get("document_id") for r in reference[q]] for q in queries]
    assert document_hits(flask, docs) == document_hits(flask, want)


def test_a_retriever_object_is_accepted_as_is_and_kwargs_then_refused():
    retriever = make_langchain_retriever(k=3)
    ranker = LangChainRanker(retriever, **FIELDS)
    assert len(ranker.search("register a blueprint", 3)) == 3
    with pytest.raises(RetrieverObjectError, match="is already a retriever"):
        LangChainRanker(retriever, retriever_kwargs={"k": 2}, **FIELDS)


@pytest.mark.parametrize(
    ("cls", "kwargs", "needle"),
    [
        (LangChainRanker, {"retriever": "no_such_pkg.make"}, "cannot import no_such_pkg"),
        (LangChainRanker, {"retriever": "rag_retrievers.nope"}, "rag_retrievers has no 'nope'"),
        (LangChainRanker, {"retriever": "make_it"}, "must be an import path like"),
        (
            LangChainRanker,
            {"retriever": "rag_retrievers.not_a_retriever"},
            "gave a dict, not a LangChain BaseRetriever",
        ),
        (
            LlamaIndexRanker,
            {"retriever": "rag_retrievers.make_langchain_retriever"},
            "gave a VectorStoreRetriever, not a LlamaIndex retriever",
        ),
        (
            LangChainRanker,
            {"retriever": "rag_retrievers.make_langchain_retriever", "document_field": "document_id"},
            "ranker.document_field 'document_id': no key 'document_id' (it has: doc, sec, idx)",
        ),
        (
            LlamaIndexRanker,
            {
                "retriever": "rag_retrievers.make_llamaindex_retriever",
                "section_field": "section",
                "document_field": "doc",
            },
            "section_field 'section': no key 'section'",
        ),
        (
            LangChainRanker,
            {"retriever": "rag_retrievers.make_langchain_retriever", "retriever_kwargs": {"size": 3}},
            "raised TypeError",
        ),
    ],
)
def test_bad_retriever_settings_are_one_line(cls, kwargs, needle):
    with pytest.raises(RetrieverObjectError) as info:
        cls(**kwargs)
    assert needle in str(info.value) and "\n" not in str(info.value), str(info.value)


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
        "ks=[1,5]",
        *args,
    ]
    return subprocess.run(command, cwd=tmp, capture_output=True, text=True, env=env, timeout=600)


def test_a_llamaindex_run_through_the_cli(tmp_path, flask, reference):
    proc = cli(
        tmp_path,
        "ranker=llamaindex",
        "ranker.retriever=rag_retrievers.make_llamaindex_retriever",
        "ranker.document_field=doc",
        "ranker.section_field=sec",
        "ranker.chunk_field=idx",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = [[flask.corpus.units[r].get("document_id") for r in reference[c.query]] for c in flask.cases]
    hits = document_hits(flask, want)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.data.metrics["rag/document_hit_rate"] == pytest.approx(sum(hits) / len(hits))
    assert run.data.metrics["rag/retrieval_error_rate"] == 0.0


def test_wrong_metadata_key_through_the_cli_is_one_line_exit_2(tmp_path):
    proc = cli(tmp_path, "ranker=langchain", "ranker.retriever=rag_retrievers.make_langchain_retriever")
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "ranker.document_field 'document_id': no key 'document_id'" in lines[0]
    assert not (tmp_path / "mlruns").exists()
