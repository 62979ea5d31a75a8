"""Scoring a run: answerable-only ranking metrics, tiers, misses and RAG rates."""

from __future__ import annotations

import pytest

from evalpipe.core import Hit, Unit
from evalpipe.scoring.results import CaseResult
from evalpipe.scoring.run import flat_metrics, score_results

UNITS = {
    "a.md#x": Unit("a.md#x", "section", metadata={"document_id": "a.md", "section": "x"}),
    "b.md#y": Unit("b.md#y", "section", metadata={"document_id": "b.md", "section": "y"}),
}
RAG = {"citation_required": True}


def case(cid, tier, qrels, hits, error=None, labels=None):
    return CaseResult(
        cid,
        tier,
        "q",
        qrels,
        tuple(Hit(h, 1.0 / (i + 1)) for i, h in enumerate(hits)),
        10,
        1,
        error,
        labels or {},
    )


def test_unanswerable_cases_are_left_out_of_ranking_metrics_and_scored_by_rag():
    results = [
        case(
            "c1",
            "exact",
            {"a.md#x": 1},
            ["b.md#y", "a.md#x"],
            labels={**RAG, "expected_documents": ["a.md"], "expected_sections": ["x"]},
        ),
        case("c2", "concept", {"b.md#y": 1}, [], labels={**RAG, "expected_documents": ["b.md"]}),
        case("c3", "concept", {}, [], labels={**RAG, "answerability": "unanswerable"}),
        case("c4", "concept", {}, ["a.md#x"], labels={**RAG, "answerability": "unanswerable"}),
        case(
            "c5",
            "exact",
            {"a.md#x": 1},
            [],
            error="ConnectionError: down",
            labels={**RAG, "expected_documents": ["a.md"]},
        ),
    ]
    s = score_results(results, [1, 5], units=UNITS)
    # Answerable: c1 (first hit at rank 2), c2 (empty), c5 (error) -> R@1 0/3, R@5 1/3, MRR (1/2)/3.
    assert s.overall["judged_cases"] == 3 and s.overall["cases"] == 5
    assert s.overall["recall_at_1"] == 0.0
    assert s.overall["recall_at_5"] == pytest.approx(1 / 3)
    assert s.overall["mrr"] == pytest.approx(1 / 6)
    assert s.per_tier["concept"]["cases"] == 3 and s.per_tier["concept"]["recall_at_5"] == 0.0
    assert s.per_tier["exact"]["recall_at_5"] == pytest.approx(0.5)
    assert s.errors == 1 and s.empty == 2  # c2 and c3 returned nothing; c5 failed (not "empty")
    assert [(m.case_id, m.rank) for m in s.misses] == [("c1", 2), ("c2", 0), ("c5", 0)]
    # RAG over all 5: document hits c1 only; citation valid for c1 (found) and c3 (refused) -> 2/4
    # applicable (c5's error makes citation not applicable); sections: c1 hit x in a.md -> 1/1.
    assert s.rag["rag_document_hit_rate"] == pytest.approx(1 / 5)
    assert s.rag["rag_citation_validity_rate"] == pytest.approx(2 / 4)
    assert s.rag["rag_section_hit_rate"] == 1.0
    assert s.rag["rag_retrieval_error_rate"] == pytest.approx(1 / 5)
    assert s.rag["rag_empty_result_rate"] == pytest.approx(2 / 5)
    flat = flat_metrics(s)
    assert flat["tier/exact/cases"] == 2 and flat["rag/mrr"] == pytest.approx(0.5 / 5)


def test_misses_read_like_a_tuple_of_miss_records():
    from evalpipe.scoring.run import Miss, Misses

    rows = [
        Miss("c1", "exact", "q1", ("a",), 2, ("b", "a"), None, None),
        Miss("c2", "concept", "q2", ("x", "y"), 0, ("z",), "ValueError: boom", True),
        Miss("c3", "concept", "q3", ("y",), 0, (), None, False),
    ]
    misses = Misses.of(rows)
    assert len(misses) == 3 and list(misses) == rows and misses == rows
    assert misses[1] == rows[1] and misses[-1].judged_hit is False and misses[1].error == "ValueError: boom"
    assert list(misses[1:]) == rows[1:] and isinstance(misses[1:], Misses)
    assert [m._replace(judged_hit=True).judged_hit for m in misses] == [True] * 3
    assert Misses.of([]) == [] and len(Misses.of([])) == 0
    with pytest.raises(IndexError):
        misses[3]
    with pytest.raises(ValueError, match="columns of different lengths"):
        Misses([[1], [2, 3], [], [], [], [], [], []])
