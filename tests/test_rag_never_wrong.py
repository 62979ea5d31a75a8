"""Issue 39, the RAG categories: a setting given is applied or refused (1), a store or cache that
cannot match is never trusted (2), library errors name the input (5), document names get the
NFC/NFD and odd-file messages (6). Every expected value below is worked out from the documents
written by the test, not read back from evalpipe."""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from conftest import ROOT
from evalpipe.core.tiktoken_offline import load_encoding
from evalpipe.corpus.documents import read_documents
from evalpipe.evaluation import preflight
from evalpipe.inputs import fixture_memo
from evalpipe.safety.errors import EvalpipeError, FixtureError

# Two pages; every paragraph is long enough that tokens windows of 16 cut it into several chunks.
PAGES = {
    "guide.md": "# Guide\n\n"
    + " ".join(f"word{i}" for i in range(60))
    + "\n\n## Install\n\n"
    + " ".join(f"pip{i}" for i in range(40))
    + "\n",
    "faq.md": "# FAQ\n\n" + " ".join(f"answer{i}" for i in range(50)) + "\n",
}


def write_fixture(tmp: Path, pages=PAGES, cases=None, name: str | None = None) -> Path:
    docs = tmp / "docs"
    docs.mkdir(exist_ok=True)
    for rel, text in pages.items():
        (docs / rel).write_text(text, encoding="utf-8")
    cases = cases or [
        {
            "id": "q1",
            "tier": "concept",
            "query": "how to install",
            "expected_documents": ["guide.md"],
            "expected_sections": ["install"],
        },
        {"id": "q2", "tier": "concept", "query": "an answer", "expected_documents": ["faq.md"]},
    ]
    body = {"documents": "docs", "cases": cases, **({"name": name} if name else {})}
    (tmp / "my_docs.yaml").write_text(json.dumps(body), encoding="utf-8")
    return tmp / "my_docs.yaml"


def checked(tmp: Path, *overrides: str) -> preflight.Checked:
    fixture_memo.clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=["ranker=bm25", f"++fixture.chunk_cache={tmp / 'chunks'}", *overrides],
        )
    return preflight.check(cfg)


def window_count(text: str, size: int, overlap: int) -> int:
    """Windows of `size` tokens stepping `size - overlap` over the whole text (the last one partial)."""
    n = len(load_encoding("cl100k_base").encode(text, disallowed_special=()))
    step = size - overlap
    return 1 + max(0, -(-(n - size) // step))


# -- category 1: a setting given is applied or refused -----------------------------------------------------


def test_chunker_group_applies_to_a_documents_fixture_given_by_path(tmp_path):
    fx = write_fixture(tmp_path)
    heading = checked(tmp_path, f"fixture.path={fx}")
    tokens = checked(tmp_path, f"fixture.path={fx}", "chunker=tokens", "chunker.size=16", "chunker.overlap=0")
    # heading: one chunk per non-empty section (guide#guide, guide#install, faq#faq)
    assert sorted(u.id for u in heading.fixture.corpus) == [
        "faq.md#faq",
        "guide.md#guide",
        "guide.md#install",
    ]
    want = sum(window_count(text, 16, 0) for text in PAGES.values())
    assert len(tokens.fixture.corpus) == want > 3
    assert all(u.get("chunk_tokens") <= 16 for u in tokens.fixture.corpus)
    # the chunking measured is the one recorded (params and config hash read `resolved`)
    assert tokens.resolved["fixture"]["chunker"]["size"] == 16
    # its runs carry the fixture file's own name, not a borrowed config's
    assert tokens.fixture.name == "my_docs"
    named = write_fixture(tmp_path / "n", name="handbook") if (tmp_path / "n").mkdir() is None else None
    assert checked(tmp_path, f"fixture.path={named}", "chunker=tokens").fixture.name == "handbook"


def test_flask_config_with_another_path_is_named_after_that_file(tmp_path):
    fx = write_fixture(tmp_path)
    got = checked(tmp_path, "fixture=flask", f"fixture.path={fx}", "chunker=recursive", "chunker.size=20")
    assert got.fixture.name == "my_docs"
    assert all(u.get("chunk_tokens") <= 20 for u in got.fixture.corpus)


def test_a_chunker_that_cannot_apply_is_refused_in_one_line(tmp_path):
    with pytest.raises(FixtureError, match=r"no 'documents:' folder to cut: remove chunker=\.\.\.") as exc:
        checked(tmp_path, "chunker=tokens")  # the default fixture: a prepared corpus
    assert "\n" not in str(exc.value)
    with pytest.raises(EvalpipeError, match=r"chunker=TokenChunker cuts the documents .*load_beir"):
        checked(tmp_path, "fixture=beir", f"fixture.path={tmp_path}", "chunker=tokens")


def test_the_input_size_limit_applies_to_documents(tmp_path, monkeypatch):
    from evalpipe.core import files

    write_fixture(tmp_path)
    size = (tmp_path / "docs" / "guide.md").stat().st_size
    monkeypatch.setattr(files, "MAX_FILE_BYTES", size - 1)
    with pytest.raises(EvalpipeError, match=r"guide\.md: document of .* larger than the input size limit"):
        read_documents(tmp_path / "docs")
    monkeypatch.setattr(files, "MAX_FILE_BYTES", size)
    assert len(read_documents(tmp_path / "docs").documents) == 2


# -- category 6: document names get the NFC/NFD hint and the odd-file messages ------------------------------


def test_nfc_label_against_an_nfd_file_name_says_so(tmp_path):
    nfd = unicodedata.normalize("NFD", "café.md")
    nfc = unicodedata.normalize("NFC", "café.md")
    assert nfd != nfc
    fx = write_fixture(
        tmp_path,
        pages={nfd: "# Menu\n\nCoffee.\n"},
        cases=[{"id": "q1", "tier": "concept", "query": "coffee", "expected_documents": [nfc]}],
    )
    if nfd not in os.listdir(tmp_path / "docs"):
        pytest.skip("this file system normalises names")
    with pytest.raises(FixtureError) as exc:
        checked(tmp_path, f"fixture.path={fx}")
    msg = str(exc.value)
    assert "differ only in Unicode normalisation" in msg and "is NFC" in msg and "is NFD" in msg
    assert "\n" not in msg


@pytest.mark.parametrize("kind", ["loop", "fifo", "broken"])
def test_odd_document_files_say_what_they_are(tmp_path, kind):
    fx = write_fixture(
        tmp_path,
        cases=[{"id": "q1", "tier": "concept", "query": "x", "expected_documents": ["odd.md"]}],
    )
    odd = tmp_path / "docs" / "odd.md"
    if kind == "loop":
        odd.symlink_to("odd.md")
        want = "is a symbolic link loop"
    elif kind == "fifo":
        os.mkfifo(odd)
        want = "is a named pipe (FIFO), not a regular file"
    else:
        odd.symlink_to("gone.md")
        want = "is a broken symbolic link (to 'gone.md')"
    with pytest.raises(FixtureError) as exc:
        checked(tmp_path, f"fixture.path={fx}")
    assert want in str(exc.value) and "odd.md" in str(exc.value)
    assert "not in the documents folder" not in str(exc.value)
    # unlabelled, the same file is left out with a note the run prints
    write_fixture(tmp_path)
    got = checked(tmp_path, f"fixture.path={fx}")
    assert [n for n in got.warnings if "odd.md left out" in n and want.split(" ", 1)[1] in n]


# -- category 2: a cache entry is verified before it is trusted -------------------------------------------


def test_a_truncated_chunk_cache_entry_is_rebuilt_not_measured(tmp_path, caplog):
    from evalpipe.corpus.chunk_cache import chunked_corpus
    from evalpipe.corpus.chunkers import TokenChunker

    write_fixture(tmp_path)
    docs = read_documents(tmp_path / "docs")
    chunker = TokenChunker(size=16, overlap=0)
    want = sum(window_count(text, 16, 0) for text in PAGES.values())
    first = chunked_corpus(docs, chunker, tmp_path / "c", "x")
    assert len(first) == want
    (entry,) = (tmp_path / "c").glob("*.jsonl")
    lines = entry.read_bytes().splitlines(keepends=True)
    entry.write_bytes(b"".join(lines[:3]))  # cut short on a line boundary: still valid JSONL
    again = chunked_corpus(docs, chunker, tmp_path / "c", "x")
    assert len(again) == want and again.sha256 == first.sha256
    assert "holds 3 chunks" in caplog.text and f"written with {want}" in caplog.text
    assert len(entry.read_bytes().splitlines()) == want  # and the entry was rewritten whole
    # an entry without its record (e.g. from an older evalpipe) is not trusted either
    entry.with_suffix(".json").unlink()
    entry.write_bytes(b"".join(lines[:3]))
    assert len(chunked_corpus(docs, chunker, tmp_path / "c", "x")) == want
    # a record and its entry intact: read from the cache (the same units, no rebuild)
    caplog.clear()
    assert [u.id for u in chunked_corpus(docs, chunker, tmp_path / "c", "x")] == [u.id for u in first]
    assert "rebuilding" not in caplog.text


def test_a_measure_that_does_not_apply_is_shown_n_a_not_zero():
    from evalpipe.core import Hit
    from evalpipe.reporting.report import ReportRow, rag_table
    from evalpipe.scoring.results import CaseResult
    from evalpipe.scoring.run import score_results

    results = [
        CaseResult(
            case_id="q1",
            tier="concept",
            query="q",
            qrels={"a#x": 1},
            hits=(Hit("a#y", 0.5),),
            latency_us=1,
            tokens=1,
            labels={"expected_documents": ["a"], "expected_sections": ["x"]},
        )
    ]
    units = {"a#y": {"id": "a#y", "document_id": "a"}}  # a store record with no section field
    applies = score_results(results, [1], ["recall"], units=units)
    assert applies.rag["rag_section_hit_rate"] == 0.0  # sections named and known: a real miss
    na = score_results(results, [1], ["recall"], units=units, sections=False)
    assert "rag_section_hit_rate" not in na.rag and na.rag["rag_document_hit_rate"] == 1.0
    header, body = rag_table([ReportRow(name="store", scores=na)])
    assert body[0][header.index("section hit")] == "n/a"
