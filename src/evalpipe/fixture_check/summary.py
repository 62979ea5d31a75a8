"""The fixture's difficulty summary logged with every evaluation run.

A recall figure means little without knowing what it was measured on: a concept tier
whose queries copy their targets' words is easy for any lexical ranker. Every run
therefore logs the checker's per-tier figures next to its metrics. Ambiguity
candidates are left out (they need a ranker index); everything else costs a few tens
of milliseconds on the gold fixture, and the result is memoised in the process per
(fixture sha256, corpus sha256), so a sweep pays it once.
"""

from __future__ import annotations

import re

from evalpipe.fixture_check.check import FixtureCheck, check_fixture
from evalpipe.inputs.fixture import Fixture

# MLflow metric names allow letters, digits, `_ - . / ` and space; a tier name may hold anything.
_UNSAFE = re.compile(r"[^\w\-./ ]")


def metric_key(tier: str, name: str) -> str:
    return f"fixture/{_UNSAFE.sub('_', tier)}/{name}"


def summary_metrics(report: FixtureCheck) -> dict[str, float]:
    """`fixture/<tier>/<figure>` for each tier, plus `fixture/flagged_share` over all cases."""
    out: dict[str, float] = {}
    for t in report.tiers:
        figures = {
            "cases": float(t.cases),
            "overlap": t.mean_overlap,
            "overlap_stemmed": t.mean_overlap_stemmed,
            "phrase_share": t.phrase_share,
            "name_leak_share": t.full_leak_share,
            "expected_mean": t.mean_expected,
            "flagged_share": t.flagged_share,
        }
        if t.needs_relation_share is not None:
            figures["needs_relation_share"] = t.needs_relation_share
        out.update({metric_key(t.tier, k): v for k, v in figures.items()})
    n = len(report.cases)
    out["fixture/flagged_share"] = len(report.flagged_cases) / n if n else 0.0
    out["fixture/tier_flags"] = float(len(report.tier_flags))
    return out


#: (fixture sha256, corpus sha256) -> metrics, for the life of the process (a sweep's jobs).
_MEMO: dict[tuple[str, str], dict[str, float]] = {}
_MEMO_SIZE = 8


def difficulty_metrics(fixture: Fixture) -> dict[str, float]:
    """The per-run hook: the fixture's difficulty summary as MLflow metrics (no ambiguity part)."""
    if not fixture.sha256:  # an in-memory fixture: nothing stable to key a memo on
        return summary_metrics(check_fixture(fixture))
    key = (fixture.sha256, fixture.corpus.sha256)
    if key not in _MEMO:
        if len(_MEMO) >= _MEMO_SIZE:
            _MEMO.pop(next(iter(_MEMO)))
        _MEMO[key] = summary_metrics(check_fixture(fixture))
    return dict(_MEMO[key])
