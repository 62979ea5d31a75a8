"""Shared by the retriever tests (http, LangChain, LlamaIndex, FAISS): the flask fixture's documents,
one deterministic embedding of them, the exact search over it, and a real retriever service.

The embedding is a signed hashed bag of words (256 dimensions, L2-normalised): no model, no
download, the same vectors in every process, and close enough to a real embedding that questions
find their pages. Every retriever under test is given these vectors, so where its search is exact
its document hits must be the ones `exact_top` finds here with numpy.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

from conftest import ROOT
from evalpipe.corpus.chunkers import TokenChunker
from evalpipe.inputs.fixture import Fixture, load_fixture

DIM = 256
_WORD = re.compile(r"[a-z0-9]+")


def embed(text: str) -> np.ndarray:
    """Signed hashed bag of words, L2-normalised (a zero text gives a zero vector)."""
    vector = np.zeros(DIM, dtype=np.float32)
    for word in _WORD.findall(text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        slot = int.from_bytes(digest[:4], "little") % DIM
        vector[slot] += 1.0 if digest[4] & 1 else -1.0
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def embed_all(texts: list[str]) -> np.ndarray:
    return np.stack([embed(t) for t in texts]) if texts else np.zeros((0, DIM), dtype=np.float32)


def unit_text(unit) -> str:
    return f"{unit.title}\n{unit.text}"


def flask_fixture(size: int = 256, overlap: int = 0) -> Fixture:
    """fixture=flask cut by `chunker=tokens` (192 chunks at 256 / 0), read from the repository."""
    chunker = TokenChunker(size=size, overlap=overlap)
    return load_fixture(ROOT / "fixtures" / "flask.yaml", name="flask", chunker=chunker, chunk_cache=None)


def exact_top(matrix: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    """Rows of the k highest inner products, ties by row order (the reference every exact path must meet)."""
    scores = matrix @ query
    return [int(i) for i in np.lexsort((np.arange(len(scores)), -scores))[:k]]


def document_hits(fixture: Fixture, docs_of_hits: list[list[str]]) -> list[bool]:
    """Per case: an expected document among its hits' documents (unanswerable: always False)."""
    return [
        bool(set(case.expected_documents) & set(docs))
        for case, docs in zip(fixture.cases, docs_of_hits, strict=True)
    ]


class Retriever:
    """What the test service answers: exact cosine top k over the chunk vectors, in a nested JSON shape
    of its own (`{"data": {"hits": [{"chunk_id", "similarity", "meta": {"doc", "sec", "idx"}}]}}`)."""

    def __init__(self, fixture: Fixture):
        self.units = list(fixture.corpus.units)
        self.matrix = embed_all([unit_text(u) for u in self.units])
        self.token: str | None = None
        self.fail_first: dict[str, int] = {}  # query -> how many 503s before answering
        self.calls: dict[str, int] = {}
        self.release = threading.Event()  # what /slow waits for
        self.barrier = threading.Barrier(2, timeout=120)  # a broken wait answers 500, never hangs
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()

    def answer(self, query: str, k: int) -> dict:
        rows = exact_top(self.matrix, embed(query), k)
        scores = self.matrix[rows] @ embed(query)
        return {
            "data": {
                "hits": [
                    {
                        "chunk_id": f"svc-{row}",
                        "similarity": float(score),
                        "meta": {
                            "doc": self.units[row].get("document_id"),
                            "sec": self.units[row].get("section"),
                            "idx": self.units[row].get("chunk_index"),
                        },
                    }
                    for row, score in zip(rows, scores, strict=True)
                ]
            }
        }


def _handler(retriever: Retriever) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            query, k = str(request.get("q", "")), int(request.get("top_k", 5))
            with retriever.lock:
                retriever.in_flight += 1
                retriever.max_in_flight = max(retriever.max_in_flight, retriever.in_flight)
                retriever.calls[query] = retriever.calls.get(query, 0) + 1
                calls = retriever.calls[query]
            try:
                if self.path == "/slow":
                    retriever.release.wait()
                if self.path == "/html":
                    return self._send(200, b"<html>maintenance</html>", "text/html")
                if retriever.token and self.headers.get("Authorization") != f"Bearer {retriever.token}":
                    return self._send(401, b'{"error": "unauthorized"}')
                if calls <= retriever.fail_first.get(query, 0):
                    return self._send(503, b'{"error": "busy"}')
                if self.path == "/gather":  # each request waits until `barrier.parties` are in flight
                    retriever.barrier.wait()
                self._send(200, json.dumps(retriever.answer(query, k)).encode())
            finally:
                with retriever.lock:
                    retriever.in_flight -= 1

    return Handler


@contextmanager
def serving(retriever: Retriever) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 (a free port) in a thread; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(retriever))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        retriever.release.set()
        server.shutdown()
        server.server_close()


def free_port_url() -> str:
    """A URL where nothing listens (a port bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/search"


# -- the same vectors in LangChain and LlamaIndex stores (factories named by import path in tests) --


@functools.lru_cache(maxsize=2)
def cached_fixture(size: int = 256, overlap: int = 0) -> Fixture:
    return flask_fixture(size, overlap)


def chunk_metadata(unit) -> dict:
    return {"doc": unit.get("document_id"), "sec": unit.get("section"), "idx": unit.get("chunk_index")}


def make_langchain_retriever(k: int = 4):
    """LangChain's InMemoryVectorStore (exact cosine) over the flask chunks, as a VectorStoreRetriever."""
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import InMemoryVectorStore

    class HashEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [embed(t).tolist() for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return embed(text).tolist()

    store = InMemoryVectorStore(HashEmbeddings())
    units = cached_fixture().corpus.units
    store.add_documents(
        [
            Document(page_content=unit_text(u), metadata=chunk_metadata(u), id=f"lc-{i}")
            for i, u in enumerate(units)
        ]
    )
    return store.as_retriever(search_kwargs={"k": k})


def make_llamaindex_retriever(k: int = 4):
    """LlamaIndex's VectorStoreIndex (its SimpleVectorStore: exact cosine) over the flask chunks."""
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.schema import TextNode

    class HashEmbedding(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return embed(query).tolist()

        def _get_text_embedding(self, text: str) -> list[float]:
            return embed(text).tolist()

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

    units = cached_fixture().corpus.units
    # the vectors computed once here (LlamaIndex would otherwise embed each node's metadata too)
    nodes = [
        TextNode(
            text=unit_text(u),
            id_=f"li-{i}",
            metadata=chunk_metadata(u),
            embedding=embed(unit_text(u)).tolist(),
        )
        for i, u in enumerate(units)
    ]
    index = VectorStoreIndex(nodes, embed_model=HashEmbedding(embed_batch_size=64))
    return index.as_retriever(similarity_top_k=k)


def not_a_retriever():
    return {"what": "a dict"}


# -- a FAISS store as an application writes one: the index file and a JSON Lines file of its records --


def embed_texts(texts: list[str]) -> np.ndarray:
    """The encoder function a FAISS ranker is given by import path (`rag_retrievers.embed_texts`)."""
    return embed_all(list(texts))


def write_faiss_store(
    folder: Path, kind: str = "flat", m: int = 4, ef_construction: int = 8
) -> tuple[Path, Path]:
    """flask chunks' vectors in a FAISS index (`flat`: IndexFlatIP, exact; `ivf`: IndexIVFFlat, 8
    lists; `hnsw`: IndexHNSWFlat with inner product; `pq`: IndexPQ, compressed) and records.jsonl
    beside it (line n = vector n)."""
    import faiss

    units = cached_fixture().corpus.units
    vectors = embed_all([unit_text(u) for u in units])
    if kind == "flat":
        index = faiss.IndexFlatIP(DIM)
    elif kind == "ivf":
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(DIM), DIM, 8, faiss.METRIC_INNER_PRODUCT)
        index.train(vectors)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(DIM, m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = ef_construction
    else:
        index = faiss.IndexPQ(DIM, 8, 4, faiss.METRIC_INNER_PRODUCT)
        index.train(vectors)
    index.add(vectors)
    folder.mkdir(parents=True, exist_ok=True)
    faiss.write_index(index, str(folder / "chunks.faiss"))
    with open(folder / "records.jsonl", "w", encoding="utf-8") as out:
        for i, u in enumerate(units):
            out.write(json.dumps({"rid": f"fx-{i}", **chunk_metadata(u)}) + "\n")
    return folder / "chunks.faiss", folder / "records.jsonl"


def embed_small(texts: list[str]) -> np.ndarray:
    """An encoder of another dimension (8) than the stores' (256)."""
    return embed_all(list(texts))[:, :8]
