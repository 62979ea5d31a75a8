"""The same documents embedded once (the shared deterministic embedding of fixture=flask's chunks),
searched exactly through every retriever kind evalpipe reads: an HTTP service, a LangChain
retriever, a LlamaIndex retriever and a FAISS flat index give the same document hits, case by case,
as numpy's brute force over the same vectors."""

from __future__ import annotations

import pytest

from evalpipe.rankers.dense.faiss_store import FaissRanker
from evalpipe.rankers.external.http import HttpRanker
from rag_retrievers import (
    Retriever,
    cached_fixture,
    document_hits,
    embed,
    exact_top,
    serving,
    write_faiss_store,
)

pytest.importorskip("faiss")
pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from evalpipe.rankers.external.frameworks import LangChainRanker, LlamaIndexRanker  # noqa: E402

K = 5


def test_every_exact_path_gives_the_same_document_hits(tmp_path):
    flask = cached_fixture()
    queries = [c.query for c in flask.cases]
    retriever = Retriever(flask)
    want = [
        [flask.corpus.units[r].get("document_id") for r in exact_top(retriever.matrix, embed(q), K)]
        for q in queries
    ]
    keys = {"document_field": "doc", "section_field": "sec", "chunk_field": "idx"}
    index_path, records = write_faiss_store(tmp_path, "flat")
    with serving(retriever) as url:
        rankers = {
            "http": HttpRanker(
                url + "/search",
                body={"q": "{query}", "top_k": "{k}"},
                results_field="data.hits",
                id_field="chunk_id",
                score_field="similarity",
                document_field="meta.doc",
            ),
            "langchain": LangChainRanker("rag_retrievers.make_langchain_retriever", **keys),
            "llamaindex": LlamaIndexRanker("rag_retrievers.make_llamaindex_retriever", **keys),
            "faiss": FaissRanker(
                str(index_path), str(records), id_field="rid", encoder="rag_retrievers.embed_texts", **keys
            ),
        }
        got = {}
        for name, ranker in rankers.items():
            hits = ranker.search_batch(queries, K)
            units = ranker.foreign_units
            got[name] = [[units[h.id].get("document_id") for h in hs] for hs in hits]
    reference = document_hits(flask, want)
    for name, docs in got.items():
        assert docs == want, name  # the same documents, in the same order
        assert document_hits(flask, docs) == reference, name
    assert 0 < sum(reference) < len(reference)
