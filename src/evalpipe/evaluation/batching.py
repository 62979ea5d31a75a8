"""Batched search: many cases per ranker call when per-query latency is not what is measured.

A ranker that implements `search_batch` (bm25: all queries' postings summed in one
numpy call; semantic: queries encoded `batch_size` at a time) answers a chunk of
cases much faster than one call per case, with the same hits. What a batch cannot
give is each query's own latency, so batched runs time a *sample* of cases one by
one, with the per-query path, and take the latency percentiles from those alone;
the other cases carry their share of their batch's time, flagged
`latency_timed=False`, and stay out of the percentiles.

Config (conf/config.yaml):

* `batch: auto` (default) batches when the ranker supports it and the fixture has
  more cases than `latency_sample`; `true` batches whenever the ranker supports
  it; `false` times every query one by one (the pre-batching behaviour).
* `latency_sample: 100` is how many cases, evenly spread over the fixture, are
  timed one by one in a batched run (0: none, no latency figures).

Which mode ran is logged (metric `search_batched`, tag `evalpipe.search_mode`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalpipe.core import Hit
from evalpipe.evaluation.runner import as_hits, finish_case, run_case, run_cases
from evalpipe.heap import collector_paused
from evalpipe.inputs.fixture import Case, Fixture
from evalpipe.safety.errors import EvalpipeError
from evalpipe.scoring.results import CaseResult

#: Most cases per `search_batch` call.
MAX_BATCH = 256
#: Cap on one batch's score matrix (queries x corpus units), ~128 MB of float64.
MAX_BATCH_CELLS = 1 << 24


class SearchSettingError(EvalpipeError, ValueError):
    """A `batch` or `latency_sample` value that cannot be used."""


@dataclass(frozen=True)
class SearchPlan:
    """How a run searches: batched or not, and which cases (indices) are timed one by one."""

    batched: bool
    timed: frozenset[int]

    @property
    def mode(self) -> str:
        return "batched" if self.batched else "per_query"


def parse_settings(batch: Any, latency_sample: Any) -> tuple[str, int]:
    """(`auto`|`true`|`false`, sample size) from config values, or a one-line error naming the key."""
    if isinstance(batch, bool):
        mode = "true" if batch else "false"
    elif isinstance(batch, str) and batch.lower() in ("auto", "true", "false"):
        mode = batch.lower()
    else:
        raise SearchSettingError(f"batch must be auto, true or false, got {batch!r} (e.g. batch=false)")
    if isinstance(latency_sample, bool) or not isinstance(latency_sample, int) or latency_sample < 0:
        raise SearchSettingError(
            f"latency_sample must be a whole number >= 0, got {latency_sample!r} (e.g. latency_sample=100)"
        )
    return mode, latency_sample


def supports_batch(ranker: Any) -> bool:
    return callable(getattr(ranker, "search_batch", None))


def sample_indices(n: int, size: int) -> frozenset[int]:
    """`size` case indices spread evenly over `n` (first and last included); all when size >= n."""
    if size >= n:
        return frozenset(range(n))
    if size <= 0:
        return frozenset()
    return frozenset(np.linspace(0, n - 1, size).round().astype(int).tolist())


def plan_search(ranker: Any, n_cases: int, batch: Any = "auto", latency_sample: Any = 100) -> SearchPlan:
    mode, sample = parse_settings(batch, latency_sample)
    batched = supports_batch(ranker) and (mode == "true" or (mode == "auto" and n_cases > sample))
    if not batched:
        return SearchPlan(False, frozenset(range(n_cases)))
    return SearchPlan(True, sample_indices(n_cases, sample))


def batch_size(n_units: int) -> int:
    """Cases per batch: up to MAX_BATCH, fewer for a large corpus so one score matrix stays bounded."""
    return max(1, min(MAX_BATCH, MAX_BATCH_CELLS // max(n_units, 1)))


def run_search(
    ranker: Any,
    fixture: Fixture,
    k: int,
    count_tokens: Callable[[str], int],
    progress: Callable[[Iterable[Case]], Iterable[Case]] | None = None,
    batch: Any = "auto",
    latency_sample: Any = 100,
    into: list[CaseResult] | None = None,
    timeout_s: float | None = None,
) -> tuple[list[CaseResult], SearchPlan]:
    """Every case's result in fixture order, batched or one by one as `plan_search` decides.

    Results go into `into` (returned): one by one as cases finish in per-query mode; in a
    batched run, in fixture order when the run ends, or, if it is interrupted, those that
    finished (so a signal still leaves the measured cases behind).

    A per-query `timeout_s` needs each query on its own clock, so it runs per query."""
    results = [] if into is None else into
    plan = plan_search(ranker, len(fixture.cases), "false" if timeout_s else batch, latency_sample)
    if not plan.batched:
        return run_cases(ranker, fixture, k, count_tokens, progress, into=results, timeout_s=timeout_s), plan
    cases: Iterable[Case] = fixture.cases if progress is None else progress(fixture.cases)
    slots: list[CaseResult | None] = [None] * len(fixture.cases)
    pending: list[tuple[int, Case]] = []
    size = batch_size(len(fixture.corpus))

    def flush() -> None:
        for i, result in _run_batch(ranker, pending, k, fixture, count_tokens):
            slots[i] = result
        pending.clear()

    try:
        with collector_paused() as between_queries:
            for i, case in enumerate(cases):
                if i in plan.timed:
                    slots[i] = run_case(ranker, case, k, fixture.corpus, count_tokens)
                    between_queries()
                else:
                    pending.append((i, case))
                    if len(pending) >= size:
                        flush()
                        between_queries()
            if pending:
                flush()
    finally:
        results.extend(r for r in slots if r is not None)
    return results, plan


def _run_batch(
    ranker: Any,
    batch: Sequence[tuple[int, Case]],
    k: int,
    fixture: Fixture,
    count_tokens: Callable[[str], int],
) -> list[tuple[int, CaseResult]]:
    """One `search_batch` call; if it raises, the cases run one by one so each error is its own."""
    cases = [case for _, case in batch]
    start = time.perf_counter_ns()
    try:
        answers = list(
            ranker.search_batch([c.query for c in cases], k, [c.winnow_constraints or None for c in cases])
        )
        if len(answers) != len(cases):
            raise ValueError(f"search_batch returned {len(answers)} lists for {len(cases)} queries")
    except Exception:
        return [(i, run_case(ranker, case, k, fixture.corpus, count_tokens)) for i, case in batch]
    share_us = (time.perf_counter_ns() - start) // 1000 // len(cases)
    out = []
    for (i, case), raw in zip(batch, answers, strict=True):
        error = None
        try:
            hits: list[Hit] = as_hits(raw)
        except Exception as exc:
            hits, error = [], f"{type(exc).__name__}: {exc}"
        out.append(
            (
                i,
                finish_case(
                    case, hits, int(share_us), error, k, fixture.corpus, count_tokens, latency_timed=False
                ),
            )
        )
    return out
