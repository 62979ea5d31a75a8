"""One configuration scored on one loaded fixture, in this process: no MLflow, no files.

What a script needs that compares many configurations at once (`scripts/tune_suite.py`,
`bench_rankers.py`, `bench_fusion.py`): the fixture is loaded once and every
configuration's ranker is built, run over every case and scored the way a CLI run
scores it (same `prepare_ranker`, `run_cases` and `score_results`), so the figures equal
the CLI's for the same config.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evalpipe.evaluation.runner import PreparedRanker, prepare_ranker, run_cases
from evalpipe.inputs.fixture import Fixture
from evalpipe.scoring.run import RunScores, score_results


@dataclass(frozen=True)
class Scored:
    """A configuration's prepared ranker, its scores (None when the ranker was skipped) and
    how long its cases took to run."""

    prepared: PreparedRanker
    scores: RunScores | None
    search_seconds: float

    @property
    def skipped(self) -> str:
        return self.prepared.skipped


def score_config(
    cfg: Any,
    fixture: Fixture,
    count_tokens: Callable[[str], int] = lambda text: 0,
    families: Sequence[str] | None = None,
    ks: Sequence[int] | None = None,
) -> Scored:
    """Build `cfg.ranker` (hydra `instantiate`), prepare it on `fixture`'s corpus, run every case
    at the config's largest K and score at `ks` (default the config's) with `families`
    (default the config's `metrics`)."""
    # lazy: hydra, omegaconf, ~112 ms
    from hydra.utils import instantiate

    prepared = prepare_ranker(instantiate(cfg.ranker), fixture.corpus)
    if prepared.skipped:
        return Scored(prepared, None, 0.0)
    start = time.perf_counter()
    results = run_cases(prepared.ranker, fixture, max(cfg.ks), count_tokens)
    seconds = time.perf_counter() - start
    units = None
    if any(r.labels for r in results):  # the RAG measures read each hit's unit, as a run's do
        units = {**{u.id: u for u in fixture.corpus}, **getattr(prepared.ranker, "foreign_units", {})}
    scores = score_results(
        results,
        list(ks if ks is not None else cfg.ks),
        list(families if families is not None else cfg.metrics),
        tiers=fixture.tiers,
        units=units,
        sections=getattr(prepared.ranker, "sections_known", True),
    )
    return Scored(prepared, scores, seconds)
