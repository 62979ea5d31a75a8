"""Richer RAG labels: graded documents and sections, and questions that need every section.

Every expected value is worked out by hand in the comment beside it.
"""

from __future__ import annotations

import math

import pytest

from evalpipe.core.hit import Hit
from evalpipe.evaluation.files import case_table
from evalpipe.evaluation.runner import run_case
from evalpipe.inputs.fixture import load_fixture
from evalpipe.reporting.report import ReportRow, rag_table
from evalpipe.safety.errors import FixtureError
from evalpipe.scoring.rag import Candidate, RagLabel, aggregate_rag, score_case
from evalpipe.scoring.run import score_results

GRADED = RagLabel(
    expected_documents=("main.md", "helps.md"),
    document_grades=(("helps.md", 1), ("main.md", 2), ("off.md", 0)),
)
BOTH = RagLabel(expected_documents=("g.md",), expected_sections=("a", "b"), section_match="all")


def test_document_ndcg_by_document_rank():
    # helps (gain 1) at document rank 1, an unlabelled doc at 2, main (gain 2) at 3 (its second chunk
    # adds nothing): DCG = 1/log2(2) + 2/log2(4) = 2; ideal = 2/log2(2) + 1/log2(3)
    cands = [Candidate("helps.md"), Candidate("x.md"), Candidate("main.md"), Candidate("main.md")]
    got = score_case(GRADED, cands).document_ndcg
    assert math.isclose(got, 2 / (2 + 1 / math.log2(3)))
    assert score_case(GRADED, [Candidate("main.md"), Candidate("helps.md")]).document_ndcg == 1.0
    assert score_case(GRADED, [Candidate("off.md")]).document_ndcg == 0.0  # grade 0 earns nothing
    # a plain list has no grades: no nDCG verdict, rather than a figure that only restates the hit
    assert score_case(RagLabel(expected_documents=("main.md",)), [Candidate("main.md")]).document_ndcg is None


def test_all_sections_needs_every_section_from_an_expected_document():
    one = score_case(BOTH, [Candidate("g.md", "a"), Candidate("other.md", "b")])  # b from the wrong doc
    assert (one.section_hit, one.all_sections_hit, one.section_recall) == (True, False, 0.5)
    both = score_case(BOTH, [Candidate("g.md", "b"), Candidate("x.md"), Candidate("g.md", "a")])
    assert (both.all_sections_hit, both.section_recall) == (True, 1.0)
    any_match = score_case(RagLabel(("g.md",), ("a", "b")), [Candidate("g.md", "a")])
    assert any_match.all_sections_hit is None and any_match.section_recall is None


def test_aggregate_reports_the_new_rates_only_where_they_apply():
    results = [
        score_case(BOTH, [Candidate("g.md", "a")]),  # 1 of 2 sections
        score_case(BOTH, [Candidate("g.md", "a"), Candidate("g.md", "b")]),  # both
        score_case(BOTH, [], error=True),  # an error has no section verdict
        score_case(GRADED, [Candidate("main.md")]),  # nDCG 2 / (2 + 1/log2 3)
    ]
    agg = aggregate_rag(results)
    assert agg["rag_all_sections_applicable_cases"] == 2
    assert agg["rag_all_sections_hit_rate"] == 0.5
    assert agg["rag_section_recall"] == 0.75
    assert agg["rag_document_ndcg_cases"] == 1
    assert math.isclose(agg["rag_document_ndcg"], 2 / (2 + 1 / math.log2(3)))
    plain = aggregate_rag([score_case(RagLabel(("g.md",)), [Candidate("g.md")])])
    assert not {k for k in plain if "ndcg" in k or "all_sections" in k or "section_recall" in k}


DOCS = {
    "guide.md": "# Guide\n\nIntro.\n\n## Install\n\nRun the installer.\n\n## Configure\n\nSet DEBUG.\n",
    "faq.md": "# FAQ\n\nQuestions.\n",
}
FIXTURE = """\
name: mini
documents: docs
cases:
  - id: q1
    tier: multi_section
    query: install and configure the tool
    expected_documents: {guide.md: 2, faq.md: 1}
    expected_sections: {install: 2, configure: 1}
    section_match: all
  - id: q2
    tier: concept
    query: questions people ask
    expected_documents: [faq.md]
"""


def _write(tmp_path, fixture: str):
    for name, text in DOCS.items():
        path = tmp_path / "docs" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (tmp_path / "fx.yaml").write_text(fixture, encoding="utf-8")
    return tmp_path / "fx.yaml"


def test_documents_fixture_grades_reach_the_chunks_and_the_figures(tmp_path):
    fixture = load_fixture(_write(tmp_path, FIXTURE), chunk_cache=None)
    q1, q2 = fixture.cases
    # heading chunks: the install section's chunk grade 2, configure's 1; faq.md is not in q1's
    # chunks because q1 names sections (only sections of the expected documents count)
    assert dict(q1.qrels) == {"guide.md#install": 2, "guide.md#configure": 1}
    assert q1.section_match == "all" and dict(q1.document_grades) == {"guide.md": 2, "faq.md": 1}
    assert q2.document_grades == {} and dict(q2.qrels) == {"faq.md#faq": 1}

    class Fixed:  # q1: faq first, then install only; q2: the faq
        def search(self, query, k, constraints=None):
            if query.startswith("install"):
                return [Hit("faq.md#faq"), Hit("guide.md#install")]
            return [Hit("faq.md#faq")]

    results = [run_case(Fixed(), c, 5, fixture.corpus, len) for c in fixture.cases]
    units = {u.id: u for u in fixture.corpus}
    scores = score_results(results, [1, 5], units=units)
    # q1: documents faq (1) at rank 1, guide (2) at rank 2: DCG = 1 + 2/log2(3); ideal = 2 + 1/log2(3)
    assert math.isclose(scores.rag["rag_document_ndcg"], (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))
    assert scores.rag["rag_all_sections_hit_rate"] == 0.0 and scores.rag["rag_section_recall"] == 0.5
    assert scores.rag["rag_section_hit_rate"] == 1.0  # any-match still finds install
    table = case_table(results, scores)
    assert table["rag_all_sections_hit"] == [0.0, None] and table["rag_section_recall"] == [0.5, None]
    header, body = rag_table([ReportRow("fixed", scores)])
    assert header[-3:] == ["doc nDCG", "all sections", "sections found"]
    assert [x.strip() for x in body[0][-2:]] == ["0.0%", "50.0%"]


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("expected_sections: {install: 2, configure: 1}", "expected_sections: [install]",
         "section_match: all needs at least two expected_sections"),
        ("section_match: all", "section_match: both", "section_match must be 'any' or 'all'"),
        ("{guide.md: 2, faq.md: 1}", "{guide.md: high}", "the grade of 'guide.md' must be an integer"),
        ("{guide.md: 2, faq.md: 1}", "{guide.md: 2, nope.md: 0}",
         "expected document 'nope.md' (grade 0) is not in the documents folder"),
    ],
)  # fmt: skip
def test_bad_graded_labels_are_one_line(tmp_path, old, new, needle):
    with pytest.raises(FixtureError) as info:
        load_fixture(_write(tmp_path, FIXTURE.replace(old, new)), chunk_cache=None)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_check_fixture_knows_a_multi_section_tier(tmp_path):
    from evalpipe.fixture_check.check import check_fixture

    fixture = load_fixture(_write(tmp_path, FIXTURE), chunk_cache=None)
    report = check_fixture(fixture)
    assert report.kinds == {"concept": "paraphrase", "multi_section": "multi_section"}
    tier = next(t for t in report.tiers if t.tier == "multi_section")
    assert tier.tier_flags == ()  # its one case needs both sections
    # declared multi_section, but its case needs only one section: the tier is flagged
    declared = FIXTURE.replace("cases:", "tier_kinds: {concept: multi_section}\ncases:", 1)
    report = check_fixture(load_fixture(_write(tmp_path, declared), chunk_cache=None))
    concept = next(t for t in report.tiers if t.tier == "concept")
    assert concept.kind == "multi_section"
    assert (
        concept.tier_flags
        and "only 0% of concept cases need every one of their sections" in concept.tier_flags[0]
    )
