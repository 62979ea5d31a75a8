"""Hand-built cases for the labelled RAG quality measures."""

from __future__ import annotations

import pytest

from evalpipe.core import Unit
from evalpipe.scoring.rag import Candidate, RagLabel, RagResult, aggregate_rag, score_case, to_candidate

LABEL = RagLabel(
    expected_documents=("guide",),
    expected_sections=("install",),
    citation_required=True,
    answerability="answerable",
)


def unit(uid: str, doc: str, section: str) -> Unit:
    return Unit(id=uid, kind="section", metadata={"document_id": doc, "section": section})


def test_document_and_section_hit_with_document_level_rank():
    cands = [unit("u1", "faq", "intro"), unit("u2", "guide", "usage"), unit("u3", "guide", "install")]
    r = score_case(LABEL, cands)
    # First candidate from "guide" is at rank 2 -> RR 1/2; "install" found in a guide candidate.
    assert r == RagResult(
        document_hit=True,
        section_hit=True,
        reciprocal_rank=0.5,
        citation_validity=True,
        empty_result=False,
        retrieval_error=False,
    )


def test_section_hit_on_non_expected_document_does_not_count():
    cands = [unit("u1", "faq", "install"), unit("u2", "guide", "usage")]
    r = score_case(LABEL, cands)
    assert r.document_hit is True and r.reciprocal_rank == 0.5
    assert r.section_hit is False  # "install" matched only in "faq"


def test_error_is_a_miss_but_not_an_empty_result():
    err = score_case(LABEL, [], error=True)
    assert err == RagResult(False, None, 0.0, None, empty_result=False, retrieval_error=True)
    # An error ignores whatever candidates were passed.
    assert score_case(LABEL, [unit("u", "guide", "install")], error=True) == err
    empty = score_case(LABEL, [])
    assert empty == RagResult(False, False, 0.0, False, empty_result=True, retrieval_error=False)


def test_unanswerable_valid_only_when_nothing_returned():
    label = RagLabel(expected_documents=(), citation_required=True, answerability="unanswerable")
    nothing = score_case(label, [])
    assert nothing.citation_validity is True and nothing.empty_result is True
    something = score_case(label, [unit("u1", "faq", "intro")])
    assert something.citation_validity is False and something.empty_result is False
    assert something.document_hit is False and something.section_hit is None


def test_label_without_sections_or_citation_has_no_verdict():
    label = RagLabel(expected_documents=("guide",))
    r = score_case(label, [unit("u1", "guide", "install")])
    assert r.section_hit is None and r.citation_validity is None
    assert r.document_hit is True and r.reciprocal_rank == 1.0


def test_adapter_reads_units_and_dicts():
    assert to_candidate(unit("u", "guide", "install")) == Candidate("guide", "install")
    # A unit record as written to JSONL (metadata flattened), and a nested-metadata dict.
    assert to_candidate({"id": "u", "document_id": "guide", "section": "s"}) == Candidate("guide", "s")
    assert to_candidate({"id": "u", "metadata": {"document_id": "g"}}) == Candidate("g", None)
    # A unit with no document_id is a whole document (BEIR passage): its id is the document.
    assert to_candidate(Unit(id="doc7", kind="document")) == Candidate("doc7", None)
    with pytest.raises(TypeError, match="pass a Unit or a dict"):
        to_candidate(42)  # type: ignore[arg-type]


def test_label_from_mapping_and_bad_values():
    label = RagLabel.from_mapping(
        {"expected_documents": ["guide"], "expected_sections": "install", "citation_required": True}
    )
    assert label == LABEL
    with pytest.raises(ValueError, match="c7: answerability must be"):
        RagLabel.from_mapping({"answerability": "maybe"}, where="c7")
    with pytest.raises(ValueError, match="citation_required must be true or false"):
        RagLabel.from_mapping({"citation_required": "yes"})


def test_aggregate_rates_use_applicable_denominators():
    unanswerable = RagLabel(expected_documents=(), citation_required=True, answerability="unanswerable")
    no_sections = RagLabel(expected_documents=("guide",))
    results = [
        score_case(LABEL, [unit("a", "guide", "install")]),  # doc hit, section hit, cite ok, RR 1
        score_case(LABEL, [unit("a", "faq", "x"), unit("b", "guide", "usage")]),  # RR 1/2, section miss
        score_case(LABEL, [], error=True),  # error: no section / citation verdict
        score_case(unanswerable, []),  # empty, citation valid
        score_case(no_sections, [unit("a", "guide", "x")]),  # RR 1, no section, no citation
        score_case(LABEL, [unit("a", "faq", "install")]),  # miss: section miss, citation invalid
    ]
    agg = aggregate_rag(results)
    assert agg["rag_cases"] == 6
    assert agg["rag_document_hit_rate"] == pytest.approx(3 / 6)
    assert agg["rag_mrr"] == pytest.approx((1 + 0.5 + 0 + 0 + 1 + 0) / 6)
    # Section applies to cases 1, 2 and 6 (the error has None): 1 of 3.
    assert agg["rag_section_applicable_cases"] == 3
    assert agg["rag_section_hit_rate"] == pytest.approx(1 / 3)
    # Citation applies to cases 1, 2, 4 and 6: valid, valid, valid, invalid.
    assert agg["rag_citation_applicable_cases"] == 4
    assert agg["rag_citation_validity_rate"] == pytest.approx(3 / 4)
    assert agg["rag_empty_result_rate"] == pytest.approx(1 / 6)
    assert agg["rag_retrieval_error_rate"] == pytest.approx(1 / 6)


def test_aggregate_omits_rates_without_applicable_cases():
    agg = aggregate_rag([score_case(RagLabel(expected_documents=("g",)), [])])
    assert "rag_section_hit_rate" not in agg and "rag_citation_validity_rate" not in agg
    assert agg["rag_section_applicable_cases"] == 0 and agg["rag_document_hit_rate"] == 0.0
    assert aggregate_rag([]) == {
        "rag_cases": 0.0,
        "rag_section_applicable_cases": 0.0,
        "rag_citation_applicable_cases": 0.0,
    }
