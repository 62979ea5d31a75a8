"""Per-case results: what the runner measured for one case, before any aggregation.

Metrics, reports, MLflow tables and `evalpipe compare` all read these records, so
a run can be re-scored from its logged per-case table without re-running it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from evalpipe.rankers.base import Hit


@dataclass(frozen=True)
class CaseResult:
    """One evaluated case.

    `error` is set when the ranker raised for this case (a retrieval error); an
    empty `hits` with no error is a legitimate empty result. The two are never
    conflated.
    """

    case_id: str
    tier: str
    query: str
    qrels: Mapping[str, int]  # expected id -> relevance grade (> 0 relevant)
    hits: tuple[Hit, ...]
    latency_us: int
    tokens: int
    error: str | None = None
    labels: Mapping[str, object] = field(default_factory=dict)  # RAG label fields of the case
    # False when the case ran in a batch: latency_us is then its share of the batch's time,
    # not a latency of its own, and latency percentiles leave it out (see evalpipe.batching).
    latency_timed: bool = True

    @property
    def ranked_ids(self) -> list[str]:
        return [h.id for h in self.hits]

    @property
    def empty(self) -> bool:
        return self.error is None and not self.hits
