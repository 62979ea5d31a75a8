"""Per-case results: what the runner measured for one case, before any aggregation.

Metrics, reports, MLflow tables and `evalpipe compare` all read these records, so
a run can be re-scored from its logged per-case table without re-running it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from operator import attrgetter

from evalpipe.core import Hit

_HIT_ID = attrgetter("id")


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
    # not a latency of its own, and latency percentiles leave it out (see evalpipe.evaluation.batching).
    latency_timed: bool = True
    # The hits' IDs in rank order. The runner has them in hand when it drops repeats, so it
    # passes them; scoring then reads IDs without touching a Hit per rank (filled if not given).
    ids: tuple[str, ...] = ()
    # The expected IDs (qrels with a positive grade) in qrels order. The runner passes the
    # case's own tuple, made once per case, so a miss refers to it instead of building a
    # list per miss while the run is scored (filled here if not given).
    expected: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.ids) != len(self.hits):
            object.__setattr__(self, "ids", tuple(map(_HIT_ID, self.hits)))
        if not self.expected and self.qrels:
            object.__setattr__(self, "expected", tuple(d for d, g in self.qrels.items() if g > 0))

    @property
    def ranked_ids(self) -> list[str]:
        return list(self.ids)

    @property
    def empty(self) -> bool:
        return self.error is None and not self.hits
