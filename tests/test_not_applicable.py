"""A ranking figure with nothing to average is left out ("—"), never reported as 0.

Two ways a run has no judged case: every case is unanswerable, or the ranker answers with its
store's own record IDs (an existing collection, a service, a FAISS file), which no chunk label of
the fixture names. The RAG measures still judge those hits by document and section.
"""

from __future__ import annotations

from types import SimpleNamespace

from evalpipe.core.hit import Hit
from evalpipe.core.unit import Unit
from evalpipe.evaluation.measure import score
from evalpipe.evaluation.runner import run_case
from evalpipe.inputs.fixture import load_fixture
from evalpipe.scoring.results import CaseResult
from evalpipe.scoring.run import DEFAULT_FAMILIES, score_results

RANKING = ("recall_at_1", "recall_at_5", "mrr", "ndcg_at_5", "map_at_5", "bpref", "judged_at_5")


def test_no_judged_case_leaves_the_ranking_figures_out():
    unanswerable = {"answerability": "unanswerable", "citation_required": True}
    results = [CaseResult(f"c{i}", "t", "q", {}, (Hit("x"),), 1, 1, labels=unanswerable) for i in range(3)]
    scores = score_results(results, [1, 5], units={"x": {"id": "x", "document_id": "d"}})
    assert not set(RANKING) & set(scores.overall)
    assert scores.overall["judged_cases"] == 0 and scores.overall["cases"] == 3
    assert scores.rag["rag_citation_validity_rate"] == 0.0  # something was returned: not valid


DOCS = {"guide.md": "# Guide\n\nIntro.\n\n## Install\n\nRun it.\n", "faq.md": "# FAQ\n\nAsk.\n"}
FIXTURE = """\
name: mini
documents: docs
cases:
  - id: q1
    tier: concept
    query: install it
    expected_documents: [guide.md]
    expected_sections: [install]
  - id: q2
    tier: concept
    query: questions
    expected_documents: [faq.md]
"""


def test_a_stores_own_ids_are_judged_by_document_not_as_chunk_misses(tmp_path):
    for name, text in DOCS.items():
        (tmp_path / "docs").mkdir(exist_ok=True)
        (tmp_path / "docs" / name).write_text(text, encoding="utf-8")
    (tmp_path / "fx.yaml").write_text(FIXTURE, encoding="utf-8")
    fixture = load_fixture(tmp_path / "fx.yaml", chunk_cache=None)

    class Store:  # a collection of its own: record IDs r1, r2 that no label names
        foreign_units = {
            "r1": Unit("r1", "chunk", metadata={"document_id": "guide.md", "section": "install"}),
            "r2": Unit("r2", "chunk", metadata={"document_id": "faq.md", "section": "faq"}),
        }

        def search(self, query, k, constraints=None):
            return [Hit("r1")] if query.startswith("install") else [Hit("r1"), Hit("r2")]

    ranker = Store()
    results = [run_case(ranker, c, 5, fixture.corpus, len) for c in fixture.cases]
    checked = SimpleNamespace(ks=(1, 5), metrics=tuple(DEFAULT_FAMILIES))
    scores = score(checked, fixture, results, ranker)
    assert not set(RANKING) & set(scores.overall)  # not 0%: the chunk labels cannot name r1, r2
    # q1: guide at rank 1 with its section; q2: faq at rank 2
    assert scores.rag["rag_document_hit_rate"] == 1.0
    assert scores.rag["rag_mrr"] == (1 + 0.5) / 2
    assert scores.rag["rag_section_hit_rate"] == 1.0  # q1's install (q2 names no section)
    # a ranker over the fixture's own chunks keeps its chunk-level figures
    own = [run_case(SimpleNamespace(search=lambda q, k, c=None: [Hit("guide.md#install")]), c, 5,
                    fixture.corpus, len) for c in fixture.cases]  # fmt: skip
    assert score(checked, fixture, own, None).overall["recall_at_5"] == 0.5
