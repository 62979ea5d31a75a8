"""Opt-in per-case MLflow traces (`traces=true`): one trace per case, so MLflow's own trace and
evaluation views can show and compare runs case by case.

Each trace is one RETRIEVER span (the query in, the ranked documents out, with their scores),
tagged with the case ID and tier, with two assessments: the expected IDs (an expectation)
and the case's first_rank (feedback). Off by default because it is slow next to the run it
describes: on BM25 over SciFact (300 cases) the traces cost more than the run itself (a
trace is several database writes; see docs/tracking.md for the measured ratio). The
per-case table `cases.json` and `evalpipe compare --cases` cover the same ground for free.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: Retrieved documents recorded per span (the run's depth can be 100 or more).
MAX_DOCS = 20


def log_case_traces(tracker: Any, experiment_id: str, run_id: str, results: Sequence[Any], first_rank) -> int:
    """Log one trace per case, linked to `run_id`; returns how many were logged."""
    # lazy: mlflow, pandas, scipy, ..., ~2676 ms
    import mlflow
    from mlflow.entities import AssessmentSource, Document, SpanType

    client = tracker.client
    source = AssessmentSource(source_type="CODE", source_id="evalpipe")
    trace_ids = []
    for result in results:
        span = client.start_trace(
            name="retrieve",
            span_type=SpanType.RETRIEVER,
            inputs={"query": result.query},
            attributes={"evalpipe.case_id": result.case_id, "evalpipe.tier": result.tier},
            tags={"evalpipe.case_id": result.case_id, "evalpipe.tier": result.tier},
            experiment_id=experiment_id,
            run_id=run_id,
        )
        docs = [
            Document(
                page_content="", metadata={"doc_uri": h.id, "chunk_id": h.id, "score": h.score}
            ).to_dict()
            for h in result.hits[:MAX_DOCS]
        ]
        status = "ERROR" if result.error else "OK"
        client.end_trace(span.trace_id, outputs=docs, status=status)
        trace_ids.append(span.trace_id)
    mlflow.flush_trace_async_logging()  # traces are exported in the background; assessments need them stored
    for trace_id, result, rank in zip(trace_ids, results, first_rank, strict=True):
        expected = [d for d, g in result.qrels.items() if g > 0]
        mlflow.log_expectation(trace_id=trace_id, name="expected_ids", value=expected, source=source)
        mlflow.log_feedback(trace_id=trace_id, name="first_rank", value=int(rank), source=source)
    return len(trace_ids)
