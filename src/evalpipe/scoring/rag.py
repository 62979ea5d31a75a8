"""Labelled RAG retrieval quality: document/section hits, MRR, citation validity.

These measures judge a RAG retriever the way a reader of its answer would: did
it surface an expected document, the right section of it, and, for a question
that must be cited, something citable (or, for an unanswerable question,
nothing at all, since any result is the precondition for a fabricated citation).
They are retrieval-observable proxies; no generated text is scored.

A failed retrieval (`error=True`) and a legitimate empty result are kept apart
on purpose: an error is a total miss with no section or citation verdict and is
counted in `rag_retrieval_error_rate`; an empty result is a real answer that can
even be the correct one for an unanswerable question.

Aggregate names (the same strings in reports and MLflow): `rag_document_hit_rate`,
`rag_section_hit_rate`, `rag_mrr`, `rag_citation_validity_rate`,
`rag_empty_result_rate`, `rag_retrieval_error_rate`, and the denominators
`rag_cases`, `rag_section_applicable_cases`, `rag_citation_applicable_cases`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from evalpipe.core import Unit

Answerability = Literal["answerable", "unanswerable"]
ANSWERABILITY: tuple[str, ...] = ("answerable", "unanswerable")

DOCUMENT_HIT_RATE = "rag_document_hit_rate"
SECTION_HIT_RATE = "rag_section_hit_rate"
MRR = "rag_mrr"
CITATION_VALIDITY_RATE = "rag_citation_validity_rate"
EMPTY_RESULT_RATE = "rag_empty_result_rate"
RETRIEVAL_ERROR_RATE = "rag_retrieval_error_rate"
CASES = "rag_cases"
SECTION_APPLICABLE = "rag_section_applicable_cases"
CITATION_APPLICABLE = "rag_citation_applicable_cases"
#: Graded documents: nDCG over the distinct documents in the order they were first retrieved.
DOCUMENT_NDCG = "rag_document_ndcg"
DOCUMENT_NDCG_APPLICABLE = "rag_document_ndcg_cases"
#: `section_match: all` questions: every relevant section found, and the share found.
ALL_SECTIONS_HIT_RATE = "rag_all_sections_hit_rate"
SECTION_RECALL = "rag_section_recall"
ALL_SECTIONS_APPLICABLE = "rag_all_sections_applicable_cases"
#: Each rate's per-case column in a run's cases.json (1.0 / 0.0, empty where it does not apply):
#: what a paired comparison or a sweep's hold-out check of a RAG objective reads.
PER_CASE_COLUMN = {
    DOCUMENT_HIT_RATE: "rag_document_hit",
    SECTION_HIT_RATE: "rag_section_hit",
    MRR: "rag_reciprocal_rank",
    CITATION_VALIDITY_RATE: "rag_citation_validity",
    DOCUMENT_NDCG: "rag_document_ndcg",
    ALL_SECTIONS_HIT_RATE: "rag_all_sections_hit",
    SECTION_RECALL: "rag_section_recall",
}


@dataclass(frozen=True)
class RagLabel:
    """The gold label of one RAG question.

    `expected_sections` may be empty: the question then has no section verdict
    (section_hit is None) rather than an automatic miss.
    """

    expected_documents: tuple[str, ...]
    expected_sections: tuple[str, ...] = ()
    citation_required: bool = False
    answerability: Answerability = "answerable"
    #: ((document, grade), ...) when the documents were labelled with grades (then document nDCG is
    #: measured); empty for a plain list (every expected document grade 1, no nDCG).
    document_grades: tuple[tuple[str, int], ...] = ()
    #: "any": one expected section is a section hit; "all": the question needs every one of them.
    section_match: str = "any"

    def grades(self) -> dict[str, int]:
        """Each labelled document's grade (grade 1 for a plain list)."""
        return (
            dict(self.document_grades) if self.document_grades else dict.fromkeys(self.expected_documents, 1)
        )

    def __post_init__(self) -> None:
        if self.answerability not in ANSWERABILITY:
            raise ValueError(
                f"answerability must be 'answerable' or 'unanswerable', got {self.answerability!r}"
            )

    @classmethod
    def from_mapping(cls, labels: Mapping[str, Any], where: str = "") -> RagLabel:
        """Build a label from a case's label fields (e.g. `CaseResult.labels`).

        `where` (e.g. "fixture.yaml case c12") prefixes error messages.
        """
        prefix = f"{where}: " if where else ""

        def names(key: str) -> tuple[str, ...]:
            value = labels.get(key) or ()
            if isinstance(value, str):
                return (value,)
            if not isinstance(value, Iterable):
                raise ValueError(f"{prefix}{key} must be a list of strings, got {value!r}")
            return tuple(str(v) for v in value)

        answerability = str(labels.get("answerability", "answerable"))
        if answerability not in ANSWERABILITY:
            raise ValueError(
                f"{prefix}answerability must be 'answerable' or 'unanswerable', got {answerability!r}"
            )
        citation = labels.get("citation_required", False)
        if not isinstance(citation, bool):
            raise ValueError(f"{prefix}citation_required must be true or false, got {citation!r}")
        grades = labels.get("document_grades") or {}
        if not isinstance(grades, Mapping):
            raise ValueError(
                f"{prefix}document_grades must be a mapping of document to grade, got {grades!r}"
            )
        section_match = str(labels.get("section_match") or "any")
        if section_match not in ("any", "all"):
            raise ValueError(f"{prefix}section_match must be 'any' or 'all', got {section_match!r}")
        return cls(
            expected_documents=names("expected_documents"),
            expected_sections=names("expected_sections"),
            citation_required=citation,
            answerability=answerability,  # type: ignore[arg-type]
            document_grades=tuple(sorted((str(d), int(g)) for d, g in grades.items())),
            section_match=section_match,
        )


@dataclass(frozen=True)
class Candidate:
    """One retrieved item as the RAG measures see it: which document, which section."""

    document_id: str
    section: str | None = None


def to_candidate(item: Candidate | Unit | Mapping[str, Any]) -> Candidate:
    """Adapt a corpus `Unit`, a unit record (dict) or a `Candidate`.

    The document is the `document_id` metadata field; a unit without one is taken
    to be a whole document (a BEIR passage), so its own id is the document id.
    The section is the `section` field, None when absent.
    """
    if isinstance(item, Candidate):
        return item
    if isinstance(item, Unit):
        doc, section = item.get("document_id"), item.get("section")
        fallback = item.id
    elif isinstance(item, Mapping):
        meta = item.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        doc = item.get("document_id", meta.get("document_id"))
        section = item.get("section", meta.get("section"))
        fallback = item.get("id")
    else:
        raise TypeError(f"cannot read a RAG candidate from {type(item).__name__}; pass a Unit or a dict")
    doc = doc if doc not in (None, "") else fallback
    if doc is None:
        raise ValueError(f"RAG candidate has neither 'document_id' nor 'id': {item!r}")
    return Candidate(document_id=str(doc), section=None if section in (None, "") else str(section))


@dataclass(frozen=True)
class RagResult:
    """The labelled-quality verdict for one retrieval."""

    document_hit: bool
    section_hit: bool | None  # None: label has no expected sections, or retrieval failed
    reciprocal_rank: float
    citation_validity: bool | None  # None: citation not required, or retrieval failed
    empty_result: bool
    retrieval_error: bool
    document_ndcg: float | None = None  # None: no expected document (unanswerable)
    all_sections_hit: bool | None = None  # None: not a section_match: all question, or failed
    section_recall: float | None = None  # share of the relevant sections found (same cases)


def score_case(
    label: RagLabel,
    candidates: Sequence[Candidate | Unit | Mapping[str, Any]],
    error: bool = False,
) -> RagResult:
    """Score one retrieval of `label`'s question.

    reciprocal_rank is document-level: 1 / rank of the first candidate from an
    expected document. section_hit is an any-match over candidates that are from
    an expected document (a matching section name in some other document says
    nothing about grounding). Citation validity: unanswerable -> valid iff nothing
    was returned; answerable -> valid iff an expected document was returned.
    """
    if error:
        return RagResult(
            document_hit=False,
            section_hit=None,
            reciprocal_rank=0.0,
            citation_validity=None,
            empty_result=False,
            retrieval_error=True,
            document_ndcg=0.0 if label.document_grades else None,
        )
    cands = [to_candidate(c) for c in candidates]
    expected_docs = set(label.expected_documents)
    expected_sections = set(label.expected_sections)
    document_hit = False
    reciprocal_rank = 0.0
    section_hit: bool | None = False if expected_sections else None
    for rank, cand in enumerate(cands, start=1):
        if cand.document_id not in expected_docs:
            continue
        if not document_hit:
            document_hit = True
            reciprocal_rank = 1.0 / rank
        if section_hit is False and cand.section in expected_sections:
            section_hit = True
    citation: bool | None = None
    if label.citation_required:
        citation = not cands if label.answerability == "unanswerable" else document_hit
    all_sections: bool | None = None
    recall: float | None = None
    if label.section_match == "all" and expected_sections:
        found = {c.section for c in cands if c.document_id in expected_docs} & expected_sections
        recall = len(found) / len(expected_sections)
        all_sections = found == expected_sections
    return RagResult(
        document_hit=document_hit,
        section_hit=section_hit,
        reciprocal_rank=reciprocal_rank,
        citation_validity=citation,
        empty_result=not cands,
        retrieval_error=False,
        document_ndcg=document_ndcg(label, cands) if label.document_grades else None,
        all_sections_hit=all_sections,
        section_recall=recall,
    )


def document_ndcg(label: RagLabel, cands: Sequence[Candidate]) -> float:
    """nDCG over the distinct documents in the order they first appear (a document's later chunks add
    nothing: the reader already has it). Gain = the document's grade (negative counts 0), discount
    1/log2(rank + 1) by document rank; the ideal orders every labelled document by grade."""
    grades = label.grades()
    seen: list[str] = []
    for c in cands:
        if c.document_id not in seen:
            seen.append(c.document_id)
    dcg = sum(max(grades.get(d, 0), 0) / math.log2(rank + 1) for rank, d in enumerate(seen, start=1))
    ideal_gains = sorted((max(g, 0) for g in grades.values()), reverse=True)
    ideal = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal_gains, start=1))
    return dcg / ideal if ideal > 0 else 0.0


def aggregate_rag(results: Sequence[RagResult]) -> dict[str, float]:
    """Rates over scored cases, plus the case counts they are rates of.

    Document hit, MRR, empty and error rates are over all cases (an error or an
    unanswerable question counts as a document miss). Section hit and citation
    validity rates are over the cases where they apply (not None). A rate whose
    denominator is 0 is left out rather than reported as a misleading 0%; the
    `rag_*_cases` counts are always present.
    """
    n = len(results)
    sections = [r.section_hit for r in results if r.section_hit is not None]
    citations = [r.citation_validity for r in results if r.citation_validity is not None]
    out: dict[str, float] = {
        CASES: float(n),
        SECTION_APPLICABLE: float(len(sections)),
        CITATION_APPLICABLE: float(len(citations)),
    }
    if n:
        out[DOCUMENT_HIT_RATE] = sum(r.document_hit for r in results) / n
        out[MRR] = sum(r.reciprocal_rank for r in results) / n
        out[EMPTY_RESULT_RATE] = sum(r.empty_result for r in results) / n
        out[RETRIEVAL_ERROR_RATE] = sum(r.retrieval_error for r in results) / n
    if sections:
        out[SECTION_HIT_RATE] = sum(sections) / len(sections)
    if citations:
        out[CITATION_VALIDITY_RATE] = sum(citations) / len(citations)
    ndcgs = [r.document_ndcg for r in results if r.document_ndcg is not None]
    if ndcgs:
        out[DOCUMENT_NDCG_APPLICABLE] = float(len(ndcgs))
        out[DOCUMENT_NDCG] = sum(ndcgs) / len(ndcgs)
    every = [r for r in results if r.all_sections_hit is not None]
    if every:
        out[ALL_SECTIONS_APPLICABLE] = float(len(every))
        out[ALL_SECTIONS_HIT_RATE] = sum(bool(r.all_sections_hit) for r in every) / len(every)
        out[SECTION_RECALL] = sum(float(r.section_recall or 0.0) for r in every) / len(every)
    return out
