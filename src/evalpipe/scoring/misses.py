"""Why each document miss happened: lost by the index, or by the embedding.

A vector store answers with approximate search. For a ranker that also searches the same vectors
exactly (brute force, `exact_answers`: query -> the exact top k IDs), every answerable case the
store missed (no expected document in its hits) is put in one of two bins:

- **lost by the index**: the exact search over the same vectors has an expected document in its
  top k, so the embedding placed the answer near enough and the ANN search skipped it;
- **lost by the embedding**: the exact search misses it too; no index setting would have found it.

Retrieval errors are neither (they are counted as errors), and unanswerable cases have nothing to
miss. The two bins add up to `rag_misses`. Names: `rag_misses`, `rag_misses_lost_by_index`,
`rag_misses_lost_by_embedding` (`rag/...` in MLflow).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evalpipe.core import Unit
from evalpipe.scoring.rag import to_candidate
from evalpipe.scoring.results import CaseResult

MISSES = "rag_misses"
LOST_BY_INDEX = "rag_misses_lost_by_index"
LOST_BY_EMBEDDING = "rag_misses_lost_by_embedding"


def _documents(ids: Sequence[str], units: Mapping[str, Unit]) -> set[str]:
    return {to_candidate(units[i]).document_id if i in units else i for i in ids}


def split_misses(
    results: Sequence[CaseResult], exact_answers: Mapping[str, Sequence[str]], units: Mapping[str, Unit]
) -> dict[str, float]:
    """Counts of document misses and their split (see the module docstring); cases whose query has
    no exact answer (not searched exactly) are left out of all three."""
    misses = by_index = by_embedding = 0
    for result in results:
        expected = set(result.labels.get("expected_documents") or ()) if result.labels else set()
        if not expected or result.error is not None or result.query not in exact_answers:
            continue
        if _documents([h.id for h in result.hits], units) & expected:
            continue
        misses += 1
        if _documents(exact_answers[result.query], units) & expected:
            by_index += 1
        else:
            by_embedding += 1
    return {MISSES: float(misses), LOST_BY_INDEX: float(by_index), LOST_BY_EMBEDDING: float(by_embedding)}
