"""The RAG readers fuzzed (issue 39), as tests/test_fuzz_readers.py fuzzes the others: documents
folders, chunk-cache entries and existing Chroma stores, each mutated from a valid one by the same
Hypothesis mutations (truncated, bytes flipped or inserted, nested, huge, another encoding, a line
twice or dropped, the file replaced by a folder or a FIFO, a symlink loop).

The property for each: the reader returns, or raises an EvalpipeError whose message is one line
naming the input; never a traceback, never a hang. Stronger where the right answer is known:
a chunk cache, however damaged, gives exactly the corpus a fresh chunking gives (never a wrong
one), and a Chroma store that opens maps every record to a document of the valid store.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalpipe.corpus.chunk_cache import chunked_corpus
from evalpipe.corpus.chunkers import HeadingChunker, TokenChunker
from evalpipe.corpus.documents import read_documents
from test_fuzz_readers import FUZZ_EXAMPLES, ODD, SETTINGS, holds, mutations, place

DOCS = {
    "guide.md": "# Guide\n\nIntro text.\n\n## Install\n\nRun `pip install x`.\n\n"
    "```\n## not a heading\n```\n",
    "ref/api.rst": "API\n===\n\nThe calls.\n\nclient::\n\n    ----\n    code\n\nErrors\n------\n\nRaised.\n",
    "notes.txt": "Plain notes, one section.\n",
}
CHUNKERS = (HeadingChunker(section_chars=40), TokenChunker(size=8, overlap=2))


def write_docs(root: Path) -> Path:
    for rel, text in DOCS.items():
        (root / "docs" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / rel).write_text(text, encoding="utf-8")
    return root / "docs"


def _sections_hold(docs) -> None:
    """The mapping invariant: every chunk names its document and a section of that document."""
    sections = docs.sections_of()
    for chunker in CHUNKERS:
        for unit in chunker.chunk(docs):
            assert unit.get("document_id") in sections
            assert unit.get("section") in sections[unit.get("document_id")]
            assert set(unit.get("sections")) <= sections[unit.get("document_id")]


@SETTINGS
@given(data=st.data())
def test_documents_folder_survives_mutation(data):
    tmp = Path(tempfile.mkdtemp(prefix="fzdocs"))
    try:
        folder = write_docs(tmp)
        rel = data.draw(st.sampled_from(sorted(DOCS)))
        odd = data.draw(st.sampled_from(["file"] * 16 + ["dir", "fifo", "loop", "broken"]))
        target = folder / rel
        if odd in ("loop", "broken"):
            target.unlink()
            target.symlink_to(target.name if odd == "loop" else "gone.md")
        else:
            place(target, data.draw(mutations(DOCS[rel].encode())), odd)

        def read() -> None:
            docs = read_documents(folder)
            _sections_hold(docs)
            if odd in ("fifo", "loop", "broken"):
                assert rel in docs.odd  # left out with its reason, never opened

        holds(read, folder)
    finally:
        shutil.rmtree(tmp)


@pytest.fixture(scope="module")
def cache_entry(tmp_path_factory):
    root = tmp_path_factory.mktemp("cache")
    docs = read_documents(write_docs(root))
    chunker = TokenChunker(size=8, overlap=2)
    fresh = chunked_corpus(docs, chunker, None, "x")
    chunked_corpus(docs, chunker, root / "c", "x")
    (entry,) = (root / "c").glob("*.jsonl")
    return docs, chunker, fresh, entry


@SETTINGS
@given(data=st.data())
def test_a_damaged_chunk_cache_entry_never_gives_another_corpus(cache_entry, data):
    docs, chunker, fresh, entry = cache_entry
    tmp = Path(tempfile.mkdtemp(prefix="fzcache"))
    try:
        shutil.copy2(entry, tmp / entry.name)
        shutil.copy2(entry.with_suffix(".json"), tmp / entry.with_suffix(".json").name)
        which = data.draw(st.sampled_from([entry.name, entry.with_suffix(".json").name]))
        place(tmp / which, data.draw(mutations((tmp / which).read_bytes())), data.draw(ODD))
        got = chunked_corpus(docs, chunker, tmp, "x")
        assert [u.id for u in got] == [u.id for u in fresh] and got.sha256 == fresh.sha256
        assert [u.text for u in got] == [u.text for u in fresh]
    finally:
        shutil.rmtree(tmp)


# -- existing Chroma stores, mutated from a valid one ---------------------------------------------------

STORE_EXAMPLES = max(5, FUZZ_EXAMPLES // 3)  # each example copies and opens a store (~0.2 s)


@pytest.fixture(scope="module")
def valid_store(tmp_path_factory):
    chromadb = pytest.importorskip("chromadb")
    from chromadb.api.shared_system_client import SharedSystemClient
    from chromadb.config import Settings

    root = tmp_path_factory.mktemp("store")
    client = chromadb.PersistentClient(
        path=str(root / "store"), settings=Settings(anonymized_telemetry=False)
    )
    collection = client.create_collection("kbase", embedding_function=None)
    vectors = np.random.default_rng(1).normal(size=(30, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    collection.add(
        ids=[f"r{i}" for i in range(30)],
        embeddings=vectors,
        metadatas=[{"source": f"docs/d{i % 5}.md", "chunk_id": i, "heading": f"Part {i}"} for i in range(30)],
    )
    client._system.stop()
    SharedSystemClient.clear_system_cache()
    files = sorted(str(p.relative_to(root / "store")) for p in (root / "store").rglob("*") if p.is_file())
    return root / "store", files


@settings(SETTINGS, max_examples=STORE_EXAMPLES)
@given(data=st.data())
def test_a_mutated_chroma_store_is_opened_right_or_refused_in_one_line(valid_store, data):
    from evalpipe.rankers.base import clear_built_cache
    from evalpipe.rankers.dense.chroma import ChromaRanker

    store, files = valid_store
    tmp = Path(tempfile.mkdtemp(prefix="fzstore"))
    try:
        shutil.copytree(store, tmp / "store")
        rel = data.draw(st.sampled_from(files))
        path = tmp / "store" / rel
        place(path, data.draw(mutations(path.read_bytes()[:200_000])), data.draw(ODD))

        def open_store() -> None:
            clear_built_cache()
            ranker = ChromaRanker(
                collection_path=str(tmp / "store"),
                collection="kbase",
                document_field="source",
                chunk_field="chunk_id",
                strip_prefix="docs/",
                store_dir=str(tmp / "unused"),
                cache_dir=None,
            )
            assert {u.get("document_id") for u in ranker.foreign_units.values()} <= {
                f"d{i}.md" for i in range(5)
            }

        holds(open_store, tmp / "store")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_the_store_fuzz_can_fail(valid_store, tmp_path):
    """Not vacuous: an untranslated library error would fail the property (it is not an EvalpipeError)."""
    from evalpipe.rankers.dense import chroma

    store, _ = valid_store
    shutil.copytree(store, tmp_path / "store")
    original = chroma.open_client

    def broken(path):
        raise RuntimeError("error returned from database: file is not a database")

    chroma.open_client = broken
    try:
        ranker = chroma.ChromaRanker(
            collection_path=str(tmp_path / "store"),
            collection="kbase",
            document_field="source",
            chunk_field="chunk_id",
            store_dir=str(tmp_path / "u"),
            cache_dir=None,
        )
    except chroma.ChromaError as exc:  # translated, naming the store: what the property asks
        assert str(tmp_path / "store") in str(exc) and "file is not a database" in str(exc)
    else:
        raise AssertionError(f"a store that cannot open was opened: {ranker!r}")
    finally:
        chroma.open_client = original
    with pytest.raises(RuntimeError):
        holds(lambda: broken(None), tmp_path)
    assert json.dumps(os.listdir(tmp_path))  # the tmp tree still there for the fixture
