"""The fixture's difficulty summary logged with every evaluation run.

A recall figure means little without knowing what it was measured on: a concept tier
whose queries copy their targets' words is easy for any lexical ranker. Every run
therefore logs the checker's per-tier figures next to its metrics. Ambiguity
candidates are left out (they need a ranker index). The rest costs a few tens of
milliseconds on the gold fixture but a quarter of a second on SciFact (every expected
document's words), on the critical path of every run. It depends only on the cases,
the corpus and the checker's code, so it is kept per (fixture, corpus, split's cases,
evalpipe's code fingerprint): in the process (a sweep's jobs) and on disk as one small
JSON file (`cache_dir()`), so a re-run of the same fixture pays a file read.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from pathlib import Path

from evalpipe.atomic import write_atomic
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


#: cache key -> metrics, for the life of the process (a sweep's jobs).
_MEMO: dict[str, dict[str, float]] = {}
_MEMO_SIZE = 8


def cache_dir() -> Path:
    """Where the summaries are kept: `$XDG_CACHE_HOME/evalpipe/difficulty` (~/.cache by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "evalpipe" / "difficulty"


def cache_key(fixture: Fixture) -> str:
    """What the summary depends on. The case IDs count because a split (or `max_cases`)
    keeps the file's sha256 but not its cases; the code fingerprint because the checker's
    rules change with evalpipe."""
    # lazy: evalpipe.core.fingerprint, ~1 ms
    from evalpipe.core.fingerprint import code_fingerprint

    parts = [fixture.sha256, fixture.corpus.sha256, fixture.split, code_fingerprint()]
    parts += [c.id for c in fixture.cases]
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:32]


def difficulty_metrics(fixture: Fixture) -> dict[str, float]:
    """The per-run hook: the fixture's difficulty summary as MLflow metrics (no ambiguity part)."""
    if not fixture.sha256:  # an in-memory fixture: nothing stable to key a cache on
        return summary_metrics(check_fixture(fixture))
    key = cache_key(fixture)
    if key not in _MEMO:
        if len(_MEMO) >= _MEMO_SIZE:
            _MEMO.pop(next(iter(_MEMO)))
        _MEMO[key] = _read(key)
        if _MEMO[key] is None:
            _MEMO[key] = summary_metrics(check_fixture(fixture))
            _write(key, _MEMO[key])
    return dict(_MEMO[key])


def _read(key: str) -> dict[str, float] | None:
    """The kept summary, or None (absent, unreadable, or not a mapping of numbers: recomputed)."""
    try:
        data = json.loads((cache_dir() / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not all(isinstance(v, int | float) for v in data.values()):
        return None
    return {str(k): float(v) for k, v in data.items()}


def _write(key: str, metrics: dict[str, float]) -> None:
    """Atomically (concurrent sweep jobs share the directory); a cache that cannot be written
    costs only the next run's quarter second."""
    payload = json.dumps(metrics).encode("utf-8")
    with contextlib.suppress(OSError):
        write_atomic(cache_dir() / f"{key}.json", lambda fh: fh.write(payload))
