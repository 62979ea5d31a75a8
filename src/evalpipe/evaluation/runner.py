"""Runs every case of a fixture through a ranker and measures each one.

The runner only measures (ranked IDs, latency, tokens returned, errors); turning
those into metrics is `scoring`'s job, so a logged run can be re-scored later.
"""

from __future__ import annotations

import math
import numbers
import resource
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalpipe.core import Hit
from evalpipe.corpus import Corpus
from evalpipe.heap import collector_paused
from evalpipe.inputs.fixture import Case, Fixture
from evalpipe.rankers.base import RankerUnavailable
from evalpipe.safety.timeouts import SearchTimeout, call_with_timeout
from evalpipe.scoring.results import CaseResult


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


EXPECTED_SHAPE = "a list of hits: unit ID strings, (id, score) pairs, {'id', 'score'} dicts or Hit objects"


class BadResult(TypeError):
    """A plug-in returned something that is not a ranked list; the message says what and what is expected."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _hit(uid: Any, score: Any, item: Any) -> Hit:
    if not isinstance(uid, str) or not uid:
        raise BadResult(
            f"ranker returned a hit whose id is {_shown(uid)} in {_shown(item)}; ids must be strings"
        )
    if score is None:
        return Hit(uid)
    if isinstance(score, bool | str) or not isinstance(score, int | float | numbers.Real):
        raise BadResult(f"ranker returned score {_shown(score)} for {uid!r}; scores must be numbers or None")
    value = float(score)
    if math.isnan(value):
        raise BadResult(f"ranker returned score nan for {uid!r}; scores must be numbers or None")
    return Hit(uid, value)


def as_hits(raw: Iterable[Any]) -> list[Hit]:
    """Accept what plug-ins naturally return: Hits, IDs, (id, score) pairs or {'id', 'score'} dicts.

    Anything else is a BadResult naming what came back: a bare string would otherwise be split
    into one-letter "IDs", a single dict into its keys, and a forgotten `return` into no hits.
    """
    if raw is None:
        raise BadResult(f"ranker returned None (a missing return?); expected {EXPECTED_SHAPE}")
    if isinstance(raw, str | bytes | Mapping | Hit) or not isinstance(raw, Iterable):
        raise BadResult(
            f"ranker returned a single {type(raw).__name__} {_shown(raw)}; expected {EXPECTED_SHAPE}"
        )
    hits = []
    for item in raw:
        if isinstance(item, Hit):  # the built-in rankers' own hits pass through as they are
            ok = isinstance(item.id, str) and item.id and (item.score is None or type(item.score) is float)
            hits.append(item if ok and item.score == item.score else _hit(item.id, item.score, item))
        elif isinstance(item, str):
            hits.append(_hit(item, None, item))
        elif isinstance(item, Mapping):
            if "id" not in item:
                raise BadResult(
                    f"ranker returned a dict without 'id': {_shown(dict(item))}; expected {EXPECTED_SHAPE}"
                )
            hits.append(_hit(item["id"], item.get("score"), item))
        elif isinstance(item, Sequence) and not isinstance(item, bytes) and len(item) == 2:
            hits.append(_hit(item[0], item[1], item))
        else:
            raise BadResult(
                f"ranker returned an item {_shown(item)} ({type(item).__name__}); expected {EXPECTED_SHAPE}"
            )
    return hits


def run_case(
    ranker: Any,
    case: Case,
    k: int,
    corpus: Corpus | None,
    count_tokens: Callable[[str], int],
    timeout_s: float | None = None,
) -> CaseResult:
    """Run one case; an exception is a retrieval error for this case, never an empty result."""
    constraints = case.winnow_constraints or None
    error = None

    def search() -> list[Hit]:
        if hasattr(ranker, "search_case"):
            return as_hits(ranker.search_case(case.id, case.query, k, constraints))
        return as_hits(ranker.search(case.query, k, constraints))

    start = time.perf_counter_ns()
    try:
        hits = call_with_timeout(search, timeout_s)
    except SearchTimeout as exc:  # the search is abandoned in its thread (see evalpipe.safety.timeouts)
        hits = []
        error = str(exc)
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
    kept: list[Hit] = []
    ids: list[str] = []
    seen: set[str] = set()
    for hit in hits:  # first occurrence wins, cut to k
        if len(kept) >= k:
            break
        if hit.id not in seen:
            seen.add(hit.id)
            kept.append(hit)
            ids.append(hit.id)
    payload = "".join(i + "\n" for i in ids)
    return CaseResult(
        case_id=case.id,
        tier=case.tier,
        query=case.query,
        qrels=dict(case.qrels),
        hits=tuple(kept),
        ids=tuple(ids),
        expected=case.expected_ids,
        latency_us=int(latency_us),
        tokens=count_tokens(payload) if payload else 0,
        error=error,
        latency_timed=latency_timed,
        labels={
            "expected_documents": list(case.expected_documents),
            "expected_sections": list(case.expected_sections),
            "citation_required": case.citation_required,
            "answerability": case.answerability,
            "document_grades": dict(case.document_grades),
            "section_match": case.section_match,
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
    timeout_s: float | None = None,
) -> list[CaseResult]:
    """Run every case in fixture order, retrieving `k` (the largest K of the K list) each time.

    Results are appended to `into` as they finish, so a run interrupted by a signal still
    has the cases measured so far."""
    cases: Iterable[Case] = fixture.cases if progress is None else progress(fixture.cases)
    results = [] if into is None else into
    with collector_paused() as between_queries:
        for case in cases:
            results.append(run_case(ranker, case, k, fixture.corpus, count_tokens, timeout_s))
            between_queries()
    return results
