"""Measuring one run: every case through the prepared ranker, then scored, with its cost figures.

Reads the checked settings (`preflight.Checked`), never the Hydra config: ks, metric families,
the per-query timeout, batching and the progress line were all checked before the first case.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from evalpipe.evaluation.batching import run_search
from evalpipe.evaluation.runner import PreparedRanker, peak_memory_mb
from evalpipe.inputs.fixture import Fixture
from evalpipe.scoring.misses import split_misses
from evalpipe.scoring.outcome import unknown_ids
from evalpipe.scoring.results import CaseResult
from evalpipe.scoring.run import RunScores, score_results

if TYPE_CHECKING:
    from rich.console import Console

    from evalpipe.evaluation.preflight import Checked


def score(checked: Checked, fixture: Fixture, results: list[CaseResult], ranker: Any = None) -> RunScores:
    """Score the results; the RAG measures read each hit's document and section from its unit,
    the fixture's or, for a ranker over a store of its own (an existing Chroma collection),
    the ranker's `foreign_units`."""
    units = None
    if any(r.labels for r in results):
        units = {**{u.id: u for u in fixture.corpus}, **getattr(ranker, "foreign_units", {})}
    sections = getattr(ranker, "sections_known", True)  # a store without a section field: n/a, not 0
    foreign = getattr(ranker, "foreign_units", None) or {}
    if foreign and not any(h.id in fixture.corpus for r in results for h in r.hits):
        # The ranker answers with its store's own record IDs (an existing collection, a service, a
        # FAISS file): the fixture's chunk labels cannot name them, so the chunk-level ranking
        # metrics do not apply; the RAG measures judge the hits by document and section.
        results = [replace(r, qrels={}, expected=()) for r in results]
    return score_results(
        results, list(checked.ks), list(checked.metrics), tiers=fixture.tiers, units=units, sections=sections
    )


def miss_split(fixture: Fixture, results: list[CaseResult], ranker: Any) -> dict[str, float]:
    """For a vector-store ranker that also searched exactly (`exact_answers`), each document miss
    lost by the index or by the embedding (`scoring.misses`); nothing for any other ranker."""
    exact = getattr(ranker, "exact_answers", None)
    if not exact or not any(r.labels for r in results):
        return {}
    units = {**{u.id: u for u in fixture.corpus}, **getattr(ranker, "foreign_units", {})}
    return split_misses(results, exact, units)


def measure(
    checked: Checked,
    prepared: PreparedRanker,
    fixture: Fixture,
    count_tokens: Callable[[str], int],
    run_name: str,
    err: Console,
    results: list[CaseResult] | None = None,
) -> tuple[list[CaseResult], RunScores | None, dict[str, float]]:
    """Run and score every case (nothing for a skipped ranker); also the build/eval cost figures.

    Cases are appended to `results` as they finish (what an interrupted run still has)."""
    # lazy: rich, evalpipe.evaluation.progress, ~19 ms
    from rich.markup import escape

    from evalpipe.evaluation.progress import case_progress

    ks, timeout_s = list(checked.ks), checked.timeout_s
    figures = {"index_build_seconds": prepared.build_seconds, "corpus_units": float(len(fixture.corpus))}
    results = [] if results is None else results
    scores = None
    if not prepared.skipped:
        progress = None
        if checked.progress:

            def progress(cases):
                return case_progress(cases, escape(f"{run_name} on {fixture.name}"), err, timeout_s)

        start = time.perf_counter()
        batch, sample = checked.batch, checked.latency_sample
        _, plan = run_search(
            prepared.ranker,
            fixture,
            max(ks),
            count_tokens,
            progress,
            batch,
            sample,
            into=results,
            timeout_s=timeout_s,
        )
        figures["eval_seconds"] = time.perf_counter() - start
        figures["search_batched"] = float(plan.batched)
        scores = score(checked, fixture, results, prepared.ranker)
        figures.update(miss_split(fixture, results, prepared.ranker))
        # a store's own records (`foreign_units`: an existing collection's, a service's) are not unknown
        foreign = getattr(prepared.ranker, "foreign_units", None) or {}
        known = [
            r if not foreign else replace(r, hits=tuple(h for h in r.hits if h.id not in foreign))
            for r in results
        ]
        figures["unknown_ids"] = float(unknown_ids(known, fixture.corpus).count)
    figures["peak_memory_mb"] = peak_memory_mb()
    for key, value in run_stats(prepared).items():
        if isinstance(value, bool | int | float):
            figures[f"index/{key}"] = float(value)
    return results, scores, figures


def run_stats(prepared: PreparedRanker) -> dict[str, Any]:
    """Build figures plus what the ranker counted while serving (e.g. cases missing from a run file)."""
    stats = dict(prepared.stats)
    if not prepared.skipped and hasattr(prepared.ranker, "stats"):
        stats.update(prepared.ranker.stats())
    return stats


def result_tags(tags: dict[str, str], prepared: PreparedRanker | None, partial: bool) -> dict[str, str]:
    """The start tags plus what the run found out: ranker stats, why it was skipped, partial."""
    out = dict(tags)
    if prepared is not None:
        stats = run_stats(prepared).items()
        out.update({f"index.{k}": str(v) for k, v in stats if not isinstance(v, int | float)})
        if prepared.skipped:
            out["evalpipe.skipped"] = prepared.skipped[:5000]
    if partial:
        out["evalpipe.partial"] = "true"
    return out
