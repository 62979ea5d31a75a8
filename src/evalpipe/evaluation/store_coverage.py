"""A store's records mapped to the fixture's labels before the first case, and the share shown.

An existing vector store (`ranker=chroma` on your collection) is judged by its own metadata: each
returned record's document and section are compared with the fixture's `expected_documents` and
`expected_sections`. When the store names its documents another way (`docs/guide.md` where the
labels say `guide.md`) or its sections by heading text (`Getting Started` where the labels are
anchors, `getting-started`), nothing can ever match and the run would record a document hit of 0%
as a measurement. So before the first case:

- every expected document and section is looked up among the store's records;
- none matching is refused (exit 2, one line, with the fix: a prefix to strip, the section
  format, a field to name); a share below `MIN_SHARE` is a warning printed with the run;
- the share is printed and recorded (`index/label_documents_matched` of `index/label_documents`).

The fix is worked out from the data: a prefix is offered when store documents end with
`/<expected document>`, and `ranker.section_format=heading` when the store's sections, slugified
the way the labels' anchors are, match.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from evalpipe.safety.errors import EvalpipeError

#: Below this share of expected documents (or sections) found in the store, the run warns.
MIN_SHARE = 0.8


class StoreCoverageError(EvalpipeError):
    """A store none of whose records can match the fixture's labels; the message says what to set."""


def _prefix_fix(expected: set[str], store: Sequence[str]) -> str:
    """`ranker.strip_prefix=<p>` when store documents are `<p><expected>` for a common `p`."""
    found: Counter[str] = Counter()
    for doc in store:
        for want in expected:
            if doc != want and doc.endswith(want) and doc[: -len(want)].endswith("/"):
                found[doc[: -len(want)]] += 1
    if not found:
        return ""
    prefix, _ = found.most_common(1)[0]
    return f"set ranker.strip_prefix={prefix}"


def _pct(n: int, d: int) -> str:
    return f"{n} of {d} ({100.0 * n / d:.0f}%)"


def check_store_coverage(ranker: Any, cases: Sequence[Any]) -> list[str]:
    """The notes to print (the share matched); a StoreCoverageError when nothing can match."""
    match = getattr(ranker, "match_labels", None)
    if match is None or not getattr(ranker, "foreign_units", None):
        return []
    documents = {d for c in cases for d in getattr(c, "expected_documents", ())}
    sections = [(set(c.expected_documents), s) for c in cases for s in getattr(c, "expected_sections", ())]
    if not documents:
        return []
    got = match(documents, sections)
    store_docs: list[str] = got["store_documents"]
    field = getattr(ranker, "document_field", "document_field")
    where = f"ranker.collection {getattr(ranker, 'collection_name', '')!r}"
    notes = []
    share = got["matched_documents"] / got["documents"]
    fix = _prefix_fix(documents, store_docs) or (
        f"set ranker.document_field to the metadata key holding each record's path relative to the "
        f"documents folder (now {field!r})"
    )
    example = f"the store's {field!r} holds e.g. {store_docs[0]!r}, the labels e.g. {min(documents)!r}"
    if share == 0:
        raise StoreCoverageError(
            f"{where}: none of the fixture's {len(documents)} expected documents is a document of the "
            f"store ({example}), so every document hit would be 0: {fix}"
        )
    notes.append(
        f"{where}: the store holds {_pct(got['matched_documents'], got['documents'])} expected documents"
    )
    if share < MIN_SHARE:
        notes.append(
            f"{where}: only {share:.0%} of the expected documents can match (below {MIN_SHARE:.0%}; "
            f"{example}): {fix}"
        )
    if "sections" in got:
        s_share = got["matched_sections"] / got["sections"]
        as_headings = got.get("matched_sections_as_headings", 0)
        section_field = getattr(ranker, "section_field", None)
        s_fix = (
            "set ranker.section_format=heading (the store names sections by heading text; they are "
            "slugified to anchors as the labels are)"
            if as_headings > got["matched_sections"]
            else f"set ranker.section_field to the key holding each record's heading anchor (now "
            f"{section_field!r}), or null (section hit is then not applicable)"
        )
        s_example = (
            f"the store's {section_field!r} holds e.g. {got['store_sections'][0]!r}"
            if got["store_sections"]
            else f"no record has a {section_field!r}"
        )
        if got["matched_sections"] == 0:
            raise StoreCoverageError(
                f"{where}: none of the fixture's {got['sections']} expected sections is a section of the "
                f"store ({s_example}; labels are heading anchors), so every section hit would be 0: {s_fix}"
            )
        notes.append(
            f"{where}: the store holds {_pct(got['matched_sections'], got['sections'])} expected sections"
        )
        if s_share < MIN_SHARE:
            notes.append(
                f"{where}: only {s_share:.0%} of the expected sections can match (below {MIN_SHARE:.0%}; "
                f"{s_example}): {s_fix}"
            )
    elif not getattr(ranker, "sections_known", True) and sections:
        notes.append(f"{where}: no ranker.section_field, so section hit is not applicable (n/a)")
    return notes
