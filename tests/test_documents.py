"""Documents folders as fixture input and the three chunkers: sections, windows, labels, cache."""

from __future__ import annotations

import pytest

from evalpipe.core.tiktoken_offline import load_encoding
from evalpipe.corpus.chunk_cache import cache_key, chunked_corpus
from evalpipe.corpus.chunkers import ChunkerError, HeadingChunker, RecursiveChunker, TokenChunker
from evalpipe.corpus.documents import DocumentsError, read_documents
from evalpipe.corpus.markdown import parse_markdown
from evalpipe.inputs.fixture import load_fixture
from evalpipe.safety.errors import FixtureError

RST = """\
.. _top:

=========
The Guide
=========

Intro paragraph of the guide.

Install
-------

Run the installer. Then check it::

    $ tool --version
    ----------------
    not a heading, a literal block

Configure
---------

Options
~~~~~~~

Set ``DEBUG``.

Install
-------

A second section with a repeated title.
"""

MD = """\
# Title

Intro text.

## Usage

Call `run()` first.

### Details

More words here.
"""


def write(tmp_path, files):
    for name, text in files.items():
        path = tmp_path / "docs" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text, encoding="utf-8")
    return tmp_path / "docs"


def test_rst_sections_levels_slugs_and_literal_blocks(tmp_path):
    docs = read_documents(write(tmp_path, {"guide.rst": RST}))
    (doc,) = docs.documents
    # The `.. _top:` label before the title is the top-of-page section "".
    assert [(s.slug, s.level) for s in doc.sections] == [
        ("", 0),
        ("the-guide", 1),
        ("install", 2),
        ("configure", 2),
        ("options", 3),
        ("install-1", 2),  # repeats numbered like GitHub anchors
    ]
    install = doc.sections[2]
    assert install.heading_path == ("The Guide", "Install")
    assert "not a heading, a literal block" in doc.section_text(install)
    assert doc.sections[4].heading_path == ("The Guide", "Configure", "Options")


def test_markdown_sections_and_heading_chunks_match_the_markdown_builder(tmp_path):
    docs = read_documents(write(tmp_path, {"a/readme.md": MD, "notes.txt": "plain words\n"}))
    assert [d.id for d in docs.documents] == ["a/readme.md", "notes.txt"]
    units = HeadingChunker().chunk(docs)
    built = parse_markdown(MD, "a/readme.md")
    md_units = [u for u in units if u.get("document_id") == "a/readme.md"]
    assert [u.id for u in md_units] == [u.id for u in built]
    assert [u.text for u in md_units] == [u.text for u in built]
    assert [u.get("section") for u in md_units] == [u.get("section") for u in built]
    # A plain-text file is one section: the top of the page.
    (txt,) = [u for u in units if u.get("document_id") == "notes.txt"]
    assert txt.id == "notes.txt#" and txt.get("section") == "" and txt.text == "plain words"


def test_token_windows_cover_the_document_with_the_given_overlap(tmp_path):
    body = "\n\n".join(f"Sentence number {i} talks about topic {i % 7}." for i in range(120))
    docs = read_documents(write(tmp_path, {"long.md": "# Long\n\n" + body + "\n\n## Tail\n\nLast words.\n"}))
    enc = load_encoding("cl100k_base")
    chunker = TokenChunker(size=50, overlap=10)
    tokens, owners = chunker._section_tokens(docs.documents[0])
    units = chunker.chunk(docs)
    n, step = len(tokens), 40
    assert len(units) == -(-(n - 50) // step) + 1  # windows start at 0, 40, 80, ... until the end
    assert [u.get("chunk_tokens") for u in units[:-1]] == [50] * (len(units) - 1)
    for i, unit in enumerate(units):
        assert enc.encode(unit.text, disallowed_special=()) == tokens[i * step : i * step + 50]
        assert unit.id == f"long.md@{i}" and unit.get("chunk_index") == i
    # The last window holds the "Tail" section; it is that chunk's section only where it has most tokens.
    tail = [u for u in units if "tail" in u.get("sections")]
    assert tail and all(u.get("section") in ("long", "tail") for u in tail)
    assert units[0].get("section") == "long" and units[0].get("sections") == ["long"]
    assert set(owners) == {"long", "tail"}


def test_majority_section_and_ties():
    assert TokenChunker.majority(["a", "b", "b"]) == "b"
    assert TokenChunker.majority(["a", "a", "b", "b"]) == "a"  # a tie goes to the first


def test_recursive_chunks_stay_within_size_and_keep_short_paragraphs_whole(tmp_path):
    paragraphs = ["Short paragraph one.", "Short paragraph two.", " ".join(["A long sentence here."] * 60)]
    docs = read_documents(write(tmp_path, {"r.rst": "Top\n===\n\n" + "\n\n".join(paragraphs) + "\n"}))
    enc = load_encoding("cl100k_base")
    units = RecursiveChunker(size=40).chunk(docs)
    assert all(len(enc.encode(u.text)) <= 40 for u in units)
    assert all(u.get("chunk_tokens") <= 40 for u in units)
    assert "Short paragraph one.\n\nShort paragraph two." in units[0].text  # packed together, not split
    assert sum(u.text.count("A long sentence here.") for u in units) == 60  # nothing lost


@pytest.mark.parametrize(
    ("build", "needle"),
    [
        (lambda: TokenChunker(size=0), "chunker.size must be an integer >= 1, got 0"),
        (lambda: TokenChunker(size=64, overlap=64), "chunker.overlap (64) must be smaller than chunker.size"),
        (lambda: TokenChunker(size=64, overlap=100), "chunker.overlap (100) must be smaller"),
        (lambda: TokenChunker(size=64, overlap=-1), "chunker.overlap must be an integer >= 0"),
        (lambda: RecursiveChunker(size=0), "chunker.size must be an integer >= 1"),
        (lambda: HeadingChunker(section_chars=0), "chunker.section_chars must be an integer >= 1"),
    ],
)
def test_bad_chunker_parameters(build, needle):
    with pytest.raises(ChunkerError) as info:
        build()
    assert needle in str(info.value)


def test_empty_folder_and_undecodable_file_are_named(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "image.png").write_bytes(b"\x89PNG")
    with pytest.raises(DocumentsError, match="holds no non-empty document"):
        read_documents(tmp_path / "empty")
    folder = write(tmp_path, {"ok.md": "# Fine\n", "bad.rst": b"Title\n=====\n\ncaf\xe9 au lait\n"})
    with pytest.raises(DocumentsError) as info:
        read_documents(folder)
    assert f"{folder / 'bad.rst'}:4: not UTF-8 text (byte 0xe9" in str(info.value)
    with pytest.raises(DocumentsError, match="does not exist"):
        read_documents(tmp_path / "nope")


FIXTURE = """\
name: mini
documents: docs
cases:
  - id: q1
    tier: concept
    query: how do I set the options?
    expected_documents: [guide.rst]
    expected_sections: [options]
  - id: q2
    tier: concept
    query: what is in the readme?
    expected_documents: [a/readme.md]
  - id: q3
    tier: concept
    query: what is the capital of Peru?
    answerability: unanswerable
    citation_required: true
"""


def test_documents_fixture_expected_chunks_follow_the_chunker(tmp_path):
    write(tmp_path, {"guide.rst": RST, "a/readme.md": MD})
    (tmp_path / "fx.yaml").write_text(FIXTURE, encoding="utf-8")
    heading = load_fixture(tmp_path / "fx.yaml", chunk_cache=None)
    q1, q2, q3 = heading.cases
    assert dict(q1.qrels) == {"guide.rst#options": 1}
    assert set(q2.qrels) == {"a/readme.md#title", "a/readme.md#usage", "a/readme.md#details"}
    assert dict(q3.qrels) == {} and q3.answerability == "unanswerable"
    windows = load_fixture(tmp_path / "fx.yaml", chunker=TokenChunker(size=8, overlap=2), chunk_cache=None)
    by_id = {u.id: u for u in windows.corpus}
    w1 = windows.cases[0]
    assert w1.qrels and all("options" in by_id[i].get("sections") for i in w1.qrels)
    # every chunk touching "options" is expected, and no other
    assert set(w1.qrels) == {u.id for u in windows.corpus if "options" in u.get("sections")}
    assert heading.sha256 != windows.sha256  # the chunking is part of what is measured


@pytest.mark.parametrize(
    ("replace", "needle"),
    [
        ("expected_sections: [options]", "expected section 'option' is not a section of guide.rst"),
        ("expected_documents: [guide.rst]", "expected document 'guid.rst' is not in the documents folder"),
    ],
)
def test_documents_fixture_labels_checked_against_the_documents(tmp_path, replace, needle):
    write(tmp_path, {"guide.rst": RST, "a/readme.md": MD})
    bad = FIXTURE.replace(replace, replace.replace("options", "option").replace("guide.rst", "guid.rst"))
    (tmp_path / "fx.yaml").write_text(bad, encoding="utf-8")
    with pytest.raises(FixtureError) as info:
        load_fixture(tmp_path / "fx.yaml", chunk_cache=None)
    assert needle in str(info.value) and "did you mean" in str(info.value)
    assert f"{tmp_path / 'fx.yaml'}:4: case 'q1'" in str(info.value)


def test_documents_fixture_refuses_chunk_ids_in_expected(tmp_path):
    write(tmp_path, {"guide.rst": RST})
    text = FIXTURE.replace("    expected_sections: [options]\n", "    expected: [guide.rst#options]\n")
    (tmp_path / "fx.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(FixtureError, match="labelled with expected_documents / expected_sections"):
        load_fixture(tmp_path / "fx.yaml", chunk_cache=None)


def test_chunk_cache_keyed_by_documents_and_chunker(tmp_path):
    folder = write(tmp_path, {"guide.rst": RST, "a/readme.md": MD})
    cache = tmp_path / "cache"
    docs = read_documents(folder)
    first = chunked_corpus(docs, TokenChunker(size=16, overlap=4), cache, "x")
    files = sorted(cache.glob("*.jsonl"))
    assert [f.name for f in files] == [f"{cache_key(docs, TokenChunker(size=16, overlap=4))}.jsonl"]
    again = chunked_corpus(docs, TokenChunker(size=16, overlap=4), cache, "x")
    assert again.source == str(files[0]) and again.sha256 == first.sha256 and again.ids == first.ids
    assert [u.to_record() for u in again] == [u.to_record() for u in first]
    chunked_corpus(docs, TokenChunker(size=16, overlap=8), cache, "x")
    assert len(list(cache.glob("*.jsonl"))) == 2  # another overlap, another corpus
    (folder / "guide.rst").write_text(RST + "\nOne more line.\n", encoding="utf-8")
    changed = read_documents(folder)
    assert changed.sha256 != docs.sha256
    assert cache_key(changed, TokenChunker(size=16, overlap=4)) != cache_key(
        docs, TokenChunker(size=16, overlap=4)
    )


def test_rag_per_case_columns_are_numbers_that_compare_and_the_holdout_read(tmp_path, monkeypatch):
    """cases.json's rag_* columns are 1.0 / 0.0 (empty where no verdict), read back as per-case
    figures, and the hold-out check finds them for objective=rag_document_hit_rate."""
    from types import SimpleNamespace

    from evalpipe.core.hit import Hit
    from evalpipe.evaluation.files import case_table
    from evalpipe.evaluation.runner import run_case
    from evalpipe.scoring.run import score_results
    from evalpipe.stats.comparison import cases_from_rows
    from evalpipe.tracking import cases as case_tables

    write(tmp_path, {"guide.rst": RST, "a/readme.md": MD})
    (tmp_path / "fx.yaml").write_text(FIXTURE, encoding="utf-8")
    fixture = load_fixture(tmp_path / "fx.yaml", chunk_cache=None)

    class Fixed:  # q1: another document first, its answer second; q2: another document; q3: something
        def search(self, query, k, constraints=None):
            answer = {"how do I set the options?": ["a/readme.md#usage", "guide.rst#options"]}
            return [Hit(i) for i in answer.get(query, ["guide.rst#configure"])]

    results = [run_case(Fixed(), c, 5, fixture.corpus, len) for c in fixture.cases]
    units = {u.id: u for u in fixture.corpus}
    table = case_table(results, score_results(results, [1, 5], units=units))
    assert table["rag_document_hit"] == [1.0, 0.0, 0.0]
    assert table["rag_reciprocal_rank"] == [0.5, 0.0, 0.0]
    assert table["rag_section_hit"] == [1.0, None, None]  # q2 names no section, q3 is unanswerable
    rows = [dict(zip(table, values, strict=True)) for values in zip(*table.values(), strict=True)]
    cases = cases_from_rows(rows, run_id="r" * 32, name="r", label="r", start_time=0, objective="")
    assert cases.values["rag_document_hit"] == {"q1": 1.0, "q2": 0.0, "q3": 0.0}
    monkeypatch.setattr(case_tables, "load_cases", lambda client, run: cases)
    client = SimpleNamespace(get_run=lambda run_id: None)
    assert case_tables.per_case(client, "r", "rag_document_hit_rate") == {"q1": 1.0, "q2": 0.0, "q3": 0.0}
    assert case_tables.per_case(client, "r", "rag/mrr") == {"q1": 0.5, "q2": 0.0, "q3": 0.0}
    assert case_tables.per_case(client, "r", "rag_section_hit_rate") == {"q1": 1.0}
