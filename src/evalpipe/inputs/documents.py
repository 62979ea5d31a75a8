"""A fixture over a documents folder: labels by document and section, chunks by the chunker.

`documents: docs/` in a fixture (instead of `corpus:`) names a folder of Markdown,
reStructuredText and plain-text files (`evalpipe.corpus.documents`). Its cases are
labelled the way a RAG answer is judged, by `expected_documents` (relative paths) and
optionally `expected_sections` (heading anchors); chunk IDs are not written by hand,
since they change with every chunker. The labels are checked against the documents
themselves, before chunking, so a misspelt section fails whatever the chunker.

The ranking metrics (recall@K, MRR, ...) still need expected chunk IDs: a case's are the
chunks of the configured chunking that hold text of an expected section of an expected
document (every chunk of the document when the case names no section). That is the
set of chunks containing the answer, whatever the chunk size; the RAG measures read the
same documents and sections from each returned chunk.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from evalpipe.corpus import Corpus
from evalpipe.corpus.chunk_cache import chunked_corpus
from evalpipe.corpus.chunkers import Chunker, HeadingChunker
from evalpipe.corpus.documents import DocumentSet, read_documents
from evalpipe.paths import resolve_path
from evalpipe.safety.errors import EvalpipeError, FixtureError, normalisation_hint, shown


def _close(name: str, choices: Sequence[str]) -> str:
    match = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _quoted(text: str) -> str:
    """A label in a message: quoted, and with its escapes when it is not plain (NFD, blanks)."""
    return text_repr if (text_repr := shown(text)) != text else repr(text)


def _unknown_document(doc: str, docs: DocumentSet, sections: Mapping[str, Any]) -> str:
    """Why `doc` is not a document of the folder, in the words that lead to the fix: a file of that
    name that cannot be read (a symlink loop, a FIFO, ...), a name that differs only in Unicode
    normalisation (NFC label, NFD file name), else the closest name."""
    if doc in docs.odd:
        return f"expected document {_quoted(doc)} in the documents folder {docs.root} is {docs.odd[doc]}"
    form = normalisation_hint(doc, [*sections, *docs.odd])
    if form:
        return f"expected document {_quoted(doc)} is not in the documents folder {docs.root}: {form}"
    return (
        f"expected document {_quoted(doc)} is not in the documents folder {docs.root}"
        f"{_close(doc, list(sections))}"
    )


def check_labels(cases: Sequence[Any], docs: DocumentSet, where: str) -> None:
    """Every expected document is in the folder and every expected section in one of them."""
    sections = docs.sections_of()
    for case in cases:
        loc = f"{where}:{case.line}: case {case.id!r}" if case.line else f"{where}: case {case.id!r}"
        for doc in case.expected_documents:
            if doc not in sections:
                raise FixtureError(f"{loc}: {_unknown_document(doc, docs, sections)}")
        known = (
            set().union(*(sections[d] for d in case.expected_documents)) if case.expected_documents else set()
        )
        for section in case.expected_sections:
            if section not in known:
                form = normalisation_hint(section, known)
                raise FixtureError(
                    f"{loc}: expected section {_quoted(section)} is not a section of "
                    f"{', '.join(case.expected_documents) or 'any expected document'}"
                    + (f": {form}" if form else _close(section, sorted(known)))
                    + " (sections are heading anchors, e.g. 'quickstart')"
                )


def odd_notes(docs: DocumentSet) -> tuple[str, ...]:
    """One note per document-named file left out of the folder (the run's warnings show them)."""
    return tuple(
        f"documents folder {docs.root}: {rel} left out: it is {why}" for rel, why in docs.odd.items()
    )


def check_graded_labels(cases: Sequence[Any], docs: DocumentSet, where: str) -> None:
    """A document labelled with grade 0 (judged not relevant) must be in the folder too."""
    sections = docs.sections_of()
    for case in cases:
        for doc in case.document_grades:
            if doc not in sections:
                loc = f"{where}:{case.line}: case {case.id!r}" if case.line else f"{where}: case {case.id!r}"
                raise FixtureError(
                    f"{loc}: expected document {doc!r} (grade {case.document_grades[doc]}) is not in the "
                    f"documents folder {docs.root}{_close(doc, list(sections))}"
                )


def expected_chunks(case: Any, corpus: Corpus) -> dict[str, int]:
    """The chunks holding text of the case's expected sections (or documents), graded as labelled: a
    chunk's grade is its best section's grade (graded sections), else its document's (graded
    documents), else 1."""
    docs = set(case.expected_documents)
    wanted = set(case.expected_sections)
    section_grades = getattr(case, "section_grades", {}) or {}
    document_grades = getattr(case, "document_grades", {}) or {}
    out: dict[str, int] = {}
    for unit in corpus:
        doc = unit.get("document_id")
        if doc not in docs:
            continue
        touched = set(unit.get("sections") or [unit.get("section")])
        if wanted and not touched & wanted:
            continue
        if wanted and section_grades:
            grade = max(section_grades.get(t, 0) for t in touched & wanted)
        else:
            grade = document_grades.get(doc, 1)
        out[unit.id] = grade
    return out


def refuse_chunk_ids(raw_cases: Any, fpath: Path, lines: Sequence[int]) -> None:
    """`expected:` chunk IDs in a documents fixture are an error: they change with the chunker."""
    if not isinstance(raw_cases, list):
        return
    for i, item in enumerate(raw_cases):
        if isinstance(item, Mapping) and item.get("expected") is not None:
            line = f":{lines[i]}" if i < len(lines) else ""
            raise FixtureError(
                f"{fpath}{line}: case {item.get('id')!r}: a documents fixture is labelled with "
                "expected_documents / expected_sections, not 'expected' chunk IDs (they change with "
                "the chunker)"
            )


def chunked_cases(
    data: Mapping[str, Any],
    fpath: Path,
    cases: Sequence[Any],
    chunker: Chunker | None,
    chunk_cache: str | None,
) -> tuple[list[Any], Corpus, tuple[str, ...]]:
    """The parsed cases with their expected chunks filled in, the chunked corpus of the documents and
    the notes on what was left out of the folder."""
    raw = data.get("documents")
    if not isinstance(raw, str):
        raise FixtureError(f"{fpath}: 'documents' must be the path of a folder, got {raw!r}")
    if data.get("corpus") is not None:
        raise FixtureError(
            f"{fpath}: give either 'corpus' (a JSONL file) or 'documents' (a folder), not both"
        )
    if chunker is not None and not isinstance(chunker, Chunker):
        raise FixtureError(f"fixture.chunker must build a chunker (conf/chunker/*.yaml), got {chunker!r}")
    folder = resolve_path(raw, base=fpath.parent)
    try:
        docs = read_documents(folder)
    except EvalpipeError as exc:
        raise FixtureError(f"{exc} (the documents of fixture {fpath})") from None
    check_labels(cases, docs, str(fpath))
    check_graded_labels(cases, docs, str(fpath))
    corpus = chunked_corpus(docs, chunker or HeadingChunker(), chunk_cache, name=fpath.stem)
    return [replace(c, qrels=expected_chunks(c, corpus)) for c in cases], corpus, odd_notes(docs)
