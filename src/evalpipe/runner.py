"""Runs every case of a fixture through a ranker and measures each one.

The runner only measures (ranked IDs, latency, tokens returned, errors); turning
those into metrics is `scoring`'s job, so a logged run can be re-scored later.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalpipe.corpus import Corpus
from evalpipe.fixture import Case, Fixture
from evalpipe.heap import collector_paused
from evalpipe.rankers.base import Hit, RankerUnavailable
from evalpipe.results import CaseResult


@dataclass(frozen=True)
class PreparedRanker:
    """A ranker after index build, or the reason it was skipped."""

    ranker: Any
    build_seconds: float = 0.0
    skipped: str = ""
    stats: Mapping[str, Any] = field(default_factory=dict)


def peak_memory_mb() -> float:
    """Peak resident memory of this process so far (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024.0 * 1024.0) if sys.platform == "darwin" else peak / 1024.0


def prepare_ranker(ranker: Any, corpus: Corpus) -> PreparedRanker:
    """Build the ranker's index, timing it; a backend that cannot load is skipped, not fatal."""
    if callable(ranker) and not hasattr(ranker, "search"):
        ranker = FunctionRanker(ranker)
    start = time.perf_counter()
    try:
        if hasattr(ranker, "prepare"):
            ranker.prepare(corpus)
    except RankerUnavailable as exc:
        return PreparedRanker(ranker, time.perf_counter() - start, skipped=str(exc) or type(exc).__name__)
    seconds = time.perf_counter() - start
    stats = dict(ranker.stats()) if hasattr(ranker, "stats") else {}
    if hasattr(ranker, "index_reused"):
        stats["index_reused"] = bool(ranker.index_reused)
    return PreparedRanker(ranker, seconds, stats=stats)


class FunctionRanker:
    """Adapts a plain function `f(query, k, constraints)` to the ranker protocol."""

    def __init__(self, fn: Callable[..., Iterable[Any]]):
        self.fn = fn

    def search(self, query: str, k: int, constraints: Mapping[str, Any] | None = None) -> Iterable[Any]:
        return self.fn(query, k, constraints)


def as_hits(raw: Iterable[Any]) -> list[Hit]:
    """Accept what plug-ins naturally return: Hits, IDs, (id, score) pairs or {'id', 'score'} dicts."""
    hits = []
    for item in raw or ():
        if isinstance(item, Hit):
            hits.append(item)
        elif isinstance(item, str):
            hits.append(Hit(item))
        elif isinstance(item, Mapping):
            score = item.get("score")
            hits.append(Hit(str(item["id"]), None if score is None else float(score)))
        elif isinstance(item, Sequence) and len(item) == 2:
            hits.append(Hit(str(item[0]), None if item[1] is None else float(item[1])))
        else:
            raise TypeError(f"ranker returned {type(item).__name__}; expected Hit, id, (id, score) or dict")
    return hits


def run_case(
    ranker: Any, case: Case, k: int, corpus: Corpus | None, count_tokens: Callable[[str], int]
) -> CaseResult:
    """Run one case; an exception is a retrieval error for this case, never an empty result."""
    constraints = case.winnow_constraints or None
    error = None
    start = time.perf_counter_ns()
    try:
        if hasattr(ranker, "search_case"):
            raw = ranker.search_case(case.id, case.query, k, constraints)
        else:
            raw = ranker.search(case.query, k, constraints)
        hits = as_hits(raw)
    except Exception as exc:  # a per-query failure must not stop the run
        hits = []
        error = f"{type(exc).__name__}: {exc}"
    latency_us = (time.perf_counter_ns() - start) // 1000
    return finish_case(case, hits, int(latency_us), error, k, corpus, count_tokens)


def finish_case(
    case: Case,
    hits: list[Hit],
    latency_us: int,
    error: str | None,
    k: int,
    corpus: Corpus | None,
    count_tokens: Callable[[str], int],
    latency_timed: bool = True,
) -> CaseResult:
    """A case's hits as its result: winnow enforced, duplicates dropped, cut to k, tokens counted."""
    constraints = case.winnow_constraints or None
    if constraints and corpus is not None:
        # Plug-ins may ignore constraints; enforce the allowed pool for every ranker.
        hits = [h for h in hits if corpus.allows(h.id, constraints)]
    seen: set[str] = set()
    hits = [h for h in hits if not (h.id in seen or seen.add(h.id))]  # first occurrence wins
    hits = hits[:k]
    payload = "".join(h.id + "\n" for h in hits)
    return CaseResult(
        case_id=case.id,
        tier=case.tier,
        query=case.query,
        qrels=dict(case.qrels),
        hits=tuple(hits),
        latency_us=int(latency_us),
        tokens=count_tokens(payload) if payload else 0,
        error=error,
        latency_timed=latency_timed,
        labels={
            "expected_documents": list(case.expected_documents),
            "expected_sections": list(case.expected_sections),
            "citation_required": case.citation_required,
            "answerability": case.answerability,
        }
        if case.has_rag_labels
        else {},
    )


def run_cases(
    ranker: Any,
    fixture: Fixture,
    k: int,
    count_tokens: Callable[[str], int],
    progress: Callable[[Iterable[Case]], Iterable[Case]] | None = None,
    into: list[CaseResult] | None = None,
) -> list[CaseResult]:
    """Run every case in fixture order, retrieving `k` (the largest K of the K list) each time.

    Results are appended to `into` as they finish, so a run interrupted by a signal still
    has the cases measured so far."""
    cases: Iterable[Case] = fixture.cases if progress is None else progress(fixture.cases)
    results = [] if into is None else into
    with collector_paused() as between_queries:
        for case in cases:
            results.append(run_case(ranker, case, k, fixture.corpus, count_tokens))
            between_queries()
    return results
