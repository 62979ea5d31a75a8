"""ranker=faiss over FAISS index files of the flask fixture's chunks (one deterministic embedding):
a flat index gives exactly numpy's hits; an HNSW index's misses split into lost by the index / by the
embedding, worked out here independently, adding up to the misses; the files stay byte-identical;
bad stores and settings are one line (exit 2 from the CLI)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT
from evalpipe.rankers.dense.faiss_store import FaissRanker, FaissStoreError, file_sha256
from evalpipe.scoring.misses import split_misses
from evalpipe.scoring.results import CaseResult
from rag_retrievers import cached_fixture, embed, embed_all, exact_top, unit_text, write_faiss_store

faiss = pytest.importorskip("faiss")

FIELDS = {"id_field": "rid", "document_field": "doc", "section_field": "sec", "chunk_field": "idx"}
ENCODER = "rag_retrievers.embed_texts"


@pytest.fixture(scope="module")
def flask():
    return cached_fixture()


@pytest.fixture(scope="module")
def matrix(flask):
    return embed_all([unit_text(u) for u in flask.corpus.units])


def results_of(flask, hits) -> list[CaseResult]:
    return [
        CaseResult(
            case_id=c.id,
            tier=c.tier,
            query=c.query,
            qrels=c.qrels,
            hits=tuple(h),
            latency_us=0,
            tokens=0,
            labels={"expected_documents": list(c.expected_documents)} if c.expected_documents else {},
        )
        for c, h in zip(flask.cases, hits, strict=True)
    ]


def test_flat_index_gives_numpys_exact_hits_and_loses_nothing_to_the_index(tmp_path, flask, matrix):
    index_path, records = write_faiss_store(tmp_path, "flat")
    ranker = FaissRanker(str(index_path), str(records), encoder=ENCODER, **FIELDS)
    queries = [c.query for c in flask.cases]
    hits = ranker.search_batch(queries, 5)
    assert [[h.id for h in hs] for hs in hits] == [
        [f"fx-{r}" for r in exact_top(matrix, embed(q), 5)] for q in queries
    ]
    assert np.allclose(
        [h.score for h in hits[0]], sorted((matrix @ embed(queries[0])).tolist(), reverse=True)[:5], atol=1e-5
    )
    stats = ranker.stats()
    assert stats["recall_vs_exact"] == 1.0 and stats["index_type"] == "IndexFlatIP"
    assert stats["score_scale"] == "inner_product" and stats["vectors"] == len(flask.corpus)
    split = split_misses(results_of(flask, hits), ranker.exact_answers, ranker.foreign_units)
    answerable = [c for c in flask.cases if c.expected_documents]
    found = sum(
        bool({ranker.units[h.id].get("document_id") for h in hs} & set(c.expected_documents))
        for c, hs in zip(flask.cases, hits, strict=True)
        if c.expected_documents
    )
    assert split["rag_misses"] == len(answerable) - found > 0
    assert (
        split["rag_misses_lost_by_index"] == 0
        and split["rag_misses_lost_by_embedding"] == split["rag_misses"]
    )


def test_hnsw_misses_split_into_index_and_embedding_and_add_up(tmp_path, flask, matrix):
    index_path, records = write_faiss_store(tmp_path, "hnsw", m=4, ef_construction=8)
    before = {p: file_sha256(p) for p in (index_path, records)}
    ranker = FaissRanker(str(index_path), str(records), encoder=ENCODER, ef_search=2, **FIELDS)
    queries = [c.query for c in flask.cases]
    hits = ranker.search_batch(queries, 5)
    # independently: FAISS's own answer read with faiss here, the exact answer with numpy
    index = faiss.read_index(str(index_path))
    faiss.ParameterSpace().set_index_parameter(index, "efSearch", 2)
    _, labels = index.search(embed_all(queries), 5)
    docs = [u.get("document_id") for u in flask.corpus.units]
    by_index = by_embedding = overlap = 0
    for n, case in enumerate(flask.cases):
        exact = exact_top(matrix, embed(case.query), 5)
        overlap += len(set(exact) & set(labels[n].tolist()))
        if not case.expected_documents or {docs[i] for i in labels[n] if i >= 0} & set(
            case.expected_documents
        ):
            continue
        if {docs[i] for i in exact} & set(case.expected_documents):
            by_index += 1
        else:
            by_embedding += 1
    assert [[h.id for h in hs] for hs in hits] == [
        [f"fx-{i}" for i in row if i >= 0] for row in labels.tolist()
    ]
    split = split_misses(results_of(flask, hits), ranker.exact_answers, ranker.foreign_units)
    assert split["rag_misses_lost_by_index"] == by_index > 0
    assert split["rag_misses_lost_by_embedding"] == by_embedding > 0
    assert split["rag_misses"] == by_index + by_embedding
    assert ranker.stats()["recall_vs_exact"] == pytest.approx(overlap / (5 * len(queries)))
    assert ranker.stats()["recall_vs_exact"] < 1.0 and ranker.stats()["ef_search"] == 2
    assert {p: file_sha256(p) for p in (index_path, records)} == before


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"ef_search": 8, "kind": "flat"}, "ranker.ef_search=8 does not apply to the index"),
        ({"nprobe": 4, "kind": "hnsw"}, "ranker.nprobe=4 does not apply"),
        ({"kind": "pq"}, "is a IndexPQ, whose stored codes are not the vectors"),
        ({"garbage": True}, "is not a FAISS index"),
        ({"records_short": True}, "describes 191 vectors but the index"),
        ({"document_field": "document_id"}, "no key(s) 'document_id' (it has: doc, idx, rid, sec)"),
        ({"encoder": "numpy.nope"}, "is not a function of a list of texts"),
        (
            {"encoder": "rag_retrievers.embed_small"},
            "holds 256-dimensional vectors but the query encoder makes 8",
        ),
    ],
)
def test_bad_store_or_setting_is_one_line(tmp_path, change, needle):
    change = dict(change)
    index_path, records = write_faiss_store(tmp_path, change.pop("kind", "flat"))
    if change.pop("garbage", False):
        index_path.write_bytes(b"not an index\n" * 10)
    if change.pop("records_short", False):
        records.write_text("".join(records.read_text().splitlines(keepends=True)[:-1]))
    with pytest.raises(FaissStoreError) as info:
        FaissRanker(str(index_path), str(records), **{"encoder": ENCODER, **FIELDS, **change})
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
        "ranker=faiss",
        f"ranker.encoder={ENCODER}",
        "ranker.id_field=rid",
        "ranker.document_field=doc",
        "ranker.section_field=sec",
        "ranker.chunk_field=idx",
        *args,
    ]
    return subprocess.run(command, cwd=tmp, capture_output=True, text=True, env=env, timeout=600)


def test_a_run_through_the_cli_logs_the_split_and_recall(tmp_path):
    index_path, records = write_faiss_store(tmp_path / "store", "hnsw", m=4, ef_construction=8)
    before = {p: file_sha256(p) for p in (index_path, records)}
    proc = cli(
        tmp_path, f"ranker.index_path={index_path}", f"ranker.records_path={records}", "ranker.ef_search=2"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    m = run.data.metrics
    answerable = sum(bool(c.expected_documents) for c in cached_fixture().cases)
    assert m["rag/misses"] == m["rag/misses_lost_by_index"] + m["rag/misses_lost_by_embedding"]
    assert m["rag/misses"] == pytest.approx(answerable - m["rag/document_hit_rate"] * m["rag/cases"])
    assert m["rag/misses_lost_by_index"] > 0 and 0 < m["index/recall_vs_exact"] < 1
    assert run.data.tags["index.score_scale"] == "inner_product"
    assert {p: file_sha256(p) for p in (index_path, records)} == before


def test_not_an_index_through_the_cli_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "x.faiss"
    bad.write_text("hello")
    (tmp_path / "r.jsonl").write_text("")
    proc = cli(tmp_path, f"ranker.index_path={bad}", f"ranker.records_path={tmp_path / 'r.jsonl'}")
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "is not a FAISS index" in lines[0] and str(bad) in lines[0]
    assert not (tmp_path / "mlruns").exists()


def test_query_encoder_from_the_semantic_model_matches_in_process_dense_search(tmp_path, flask):
    """encoder: null -> the semantic ranker's packaged MiniLM embeds the queries; an index of the same
    model's vectors then gives the in-process dense ranker's exact hits and cosines."""
    pytest.importorskip("sentence_transformers")
    import json

    from evalpipe.corpus import Corpus
    from evalpipe.rankers.dense.semantic import SemanticRanker

    corpus = Corpus(list(flask.corpus.units[:12]))
    dense = SemanticRanker(template="{title}\n{text}", cache_dir=None, test_prior="off")
    dense.prepare(corpus)
    index = faiss.IndexFlatIP(int(dense._embeddings.shape[1]))
    index.add(np.ascontiguousarray(dense._embeddings, dtype=np.float32))
    faiss.write_index(index, str(tmp_path / "minilm.faiss"))
    rows = [{"id": u.id, "document_id": u.get("document_id")} for u in corpus.units]
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ranker = FaissRanker(str(tmp_path / "minilm.faiss"), str(tmp_path / "records.jsonl"))
    ranker.prepare(corpus)
    for query in ("what is the application context for?", "register a blueprint"):
        want, got = dense.search(query, 3), ranker.search(query, 3)
        assert [h.id for h in got] == [h.id for h in want]
        assert np.allclose([h.score for h in got], [h.score for h in want], atol=1e-5)
    small = faiss.IndexFlatIP(8)
    small.add(np.eye(8, dtype=np.float32)[:4])
    faiss.write_index(small, str(tmp_path / "small.faiss"))
    (tmp_path / "small.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:4]))
    with pytest.raises(FaissStoreError, match="holds 8-dimensional vectors but the query encoder makes 384"):
        FaissRanker(str(tmp_path / "small.faiss"), str(tmp_path / "small.jsonl"))


def test_ivf_index_probing_every_list_is_exact_and_fewer_lists_lose_answers(tmp_path, flask, matrix):
    """IVF-Flat with 8 lists: nprobe=8 scans every list, so its hits are the exact search's (recall
    1.0, nothing lost by the index); nprobe=1 scans one list and loses some to the index. The
    vectors for the exact search come back through the index's direct map, built in memory only."""
    index_path, records = write_faiss_store(tmp_path, "ivf")
    before = file_sha256(index_path)
    queries = [c.query for c in flask.cases]
    full = FaissRanker(str(index_path), str(records), encoder=ENCODER, nprobe=8, **FIELDS)
    hits = full.search_batch(queries, 5)
    assert [[h.id for h in hs] for hs in hits] == [
        [f"fx-{r}" for r in exact_top(matrix, embed(q), 5)] for q in queries
    ]
    assert full.stats()["recall_vs_exact"] == 1.0 and full.stats()["nprobe"] == 8
    one = FaissRanker(str(index_path), str(records), encoder=ENCODER, nprobe=1, **FIELDS)
    narrow = one.search_batch(queries, 5)
    split = split_misses(results_of(flask, narrow), one.exact_answers, one.foreign_units)
    assert one.stats()["recall_vs_exact"] < 1.0 and split["rag_misses_lost_by_index"] > 0
    assert split["rag_misses"] == split["rag_misses_lost_by_index"] + split["rag_misses_lost_by_embedding"]
    assert file_sha256(index_path) == before
