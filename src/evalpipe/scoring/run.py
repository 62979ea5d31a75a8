"""Per-case results -> metrics: overall, per tier, latency, tokens, misses and RAG rates.

All arithmetic lives in `metrics` and `rag` (pure functions); this module only
slices the cases (overall, per tier) and names the figures consistently, so the
same names reach the terminal, the Markdown report and MLflow.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import attrgetter
from typing import Any, NamedTuple, overload

import numpy as np

from evalpipe.heap import collector_off
from evalpipe.scoring import completeness, metrics, rag
from evalpipe.scoring.results import CaseResult

DEFAULT_FAMILIES = ("recall", "mrr", "ndcg", "map", "precision", "frac_recall")
_COLUMNS = tuple(map(attrgetter, ("ids", "qrels", "tier", "latency_us", "latency_timed", "tokens", "error")))
_CASE_ID, _QUERY, _EXPECTED = attrgetter("case_id"), attrgetter("query"), attrgetter("expected")


class Miss(NamedTuple):
    """A case whose first hit is not at rank 1 (rank 0 = no expected ID in the top K).

    A named tuple, not a frozen dataclass: a large run has one per case (98% of 100k
    synthetic cases), and a dataclass instance with its `__dict__` cost three times as
    much to make and twice as much for the collector to walk, a third of what scoring
    added to the metrics. Immutable all the same (`_replace` makes a changed copy).
    """

    case_id: str
    tier: str
    query: str
    expected: Sequence[str]  # the case's expected-ID tuple (shared, not copied)
    rank: int
    top: Sequence[str]  # the case's ranked IDs as the result holds them (a tuple, not copied)
    error: str | None = None
    judged_hit: bool | None = None  # set by the LLM judge (evalpipe.judge); None = not judged


class Misses(Sequence[Miss]):
    """A run's misses, kept as columns and handed out as `Miss` tuples one at a time.

    A large run has a miss for most cases (98% of 100k synthetic ones). As 100k objects
    they cost the cyclic collector a walk over every one of them at its next pass
    (70-100 ms, more than making them); as eight lists they cost it eight objects. Reading
    is the same as a tuple of `Miss` (index, slice, iterate, len); equality compares the
    misses themselves.
    """

    __slots__ = ("_columns", "_n")

    def __init__(self, columns: Sequence[Sequence[Any]]):
        if len(columns) != len(Miss._fields):
            raise ValueError(f"Misses needs {len(Miss._fields)} columns ({', '.join(Miss._fields)})")
        self._n = len(columns[0])
        if any(len(c) != self._n for c in columns):
            raise ValueError("Misses: columns of different lengths")
        self._columns = tuple(columns)

    @classmethod
    def of(cls, misses: Sequence[Miss]) -> Misses:
        """Columns from `Miss` tuples (what the judge builds when it sets `judged_hit`)."""
        cols = [list(c) for c in zip(*misses, strict=True)] if misses else [[] for _ in Miss._fields]
        return cls(cols)

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[Miss]:
        return map(Miss._make, zip(*self._columns, strict=True))

    @overload
    def __getitem__(self, index: int) -> Miss: ...

    @overload
    def __getitem__(self, index: slice) -> Misses: ...

    def __getitem__(self, index: int | slice) -> Miss | Misses:
        if isinstance(index, slice):
            return Misses([c[index] for c in self._columns])
        if not -self._n <= index < self._n:
            raise IndexError("Misses index out of range")
        return Miss._make(c[index] for c in self._columns)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Misses({list(self)!r})"


@dataclass(frozen=True)
class RunScores:
    ks: tuple[int, ...]
    cases: int
    overall: Mapping[str, float]
    per_tier: Mapping[str, Mapping[str, float]]
    per_case: Mapping[str, np.ndarray]
    first_rank: np.ndarray
    latency_us: tuple[int, int, int]
    mean_tokens: float
    misses: Sequence[Miss]  # a Misses (columns), or Miss tuples
    errors: int
    empty: int
    rag: Mapping[str, float] = field(default_factory=dict)
    rag_per_case: tuple[rag.RagResult | None, ...] = ()

    def metric(self, name: str, tier: str | None = None) -> float:
        table = self.overall if tier is None else self.per_tier.get(tier, {})
        return float(table.get(name, 0.0))


def _rag_scores(results: Sequence[CaseResult], units: Mapping[str, Any] | None, sections: bool = True):
    """`sections` False: the retrieved items name no section (a store without a section field), so
    section hit does not apply to any case (left out, shown as n/a), rather than a miss on every one."""
    per_case: list[rag.RagResult | None] = []
    scored = []
    for r in results:
        if not r.labels:
            per_case.append(None)
            continue
        label = rag.RagLabel(
            expected_documents=tuple(r.labels.get("expected_documents") or ()),
            expected_sections=tuple(r.labels.get("expected_sections") or ()) if sections else (),
            citation_required=bool(r.labels.get("citation_required")),
            answerability=str(r.labels.get("answerability") or "answerable"),
            document_grades=tuple(sorted(dict(r.labels.get("document_grades") or {}).items())),
            section_match=str(r.labels.get("section_match") or "any"),
        )
        candidates = [units[h.id] if units and h.id in units else {"id": h.id} for h in r.hits]
        res = rag.score_case(label, candidates, error=r.error is not None)
        per_case.append(res)
        scored.append(res)
    return (rag.aggregate_rag(scored) if scored else {}), tuple(per_case)


def _rows_by_tier(tier_col: Sequence[str], tier_names: Sequence[str]) -> dict[str, np.ndarray]:
    """Row indices of each tier in `tier_names` (in result order), found in one pass over the cases'
    tiers so that scoring stays linear however many tiers there are."""
    tier_names = list(dict.fromkeys(tier_names))
    code = {t: i for i, t in enumerate(tier_names)}
    codes = np.fromiter(map(code.get, tier_col, repeat(-1)), dtype=np.int64, count=len(tier_col))
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(tier_names) + 1))
    return {t: order[bounds[i] : bounds[i + 1]] for i, t in enumerate(tier_names)}


def score_results(
    results: Sequence[CaseResult],
    ks: Sequence[int],
    families: Sequence[str] = DEFAULT_FAMILIES,
    tiers: Sequence[str] | None = None,
    units: Mapping[str, Any] | None = None,
    sections: bool = True,
) -> RunScores:
    """Score a run. `tiers` fixes the tier order (stock tiers first); `units` maps id -> Unit for RAG;
    `sections` False: the retrieved units name no section, so section hit is not applicable."""
    with collector_off():  # many records, no cycles: see evalpipe.heap.collector_off
        return _score_results(results, ks, families, tiers, units, sections)


def _score_results(
    results: Sequence[CaseResult],
    ks: Sequence[int],
    families: Sequence[str],
    tiers: Sequence[str] | None,
    units: Mapping[str, Any] | None,
    sections: bool = True,
) -> RunScores:
    ks = tuple(sorted(set(int(k) for k in ks)))
    depth = max(ks)
    n = len(results)
    # The columns scoring reads, one C-level pass each (no Hit is touched: the IDs are
    # carried by each result); per-case Python loops cost a third as much again as the
    # metrics themselves at 100k cases.
    ranked, qrels, tier_col, latency, timed_flags, tokens, errors_col = (
        list(map(getter, results)) for getter in _COLUMNS
    )
    rel = metrics.relevance_matrix(ranked, qrels, depth)
    per_case = metrics.evaluate_matrix(rel, ks, list(families))
    # How much of each ranking the labels can see (judged@k, condensed figures, bpref): no judge needed.
    per_case.update(completeness.completeness_per_case(ranked, qrels, ks, families, rel))
    first_rank = metrics.first_hit_rank(rel)

    # Ranking metrics average over judged cases (at least one expected/qrels entry), the
    # queries trec_eval evaluates; unanswerable cases (no expected IDs) are judged by the
    # RAG measures instead (did the ranker correctly return nothing?).
    answerable = np.fromiter(map(len, qrels), dtype=np.int64, count=n) > 0
    # No judged case (every case unanswerable, or a store's own IDs no label names): the ranking
    # metrics do not apply, so they are left out (shown as "—"), never averaged into a 0.
    overall = dict(metrics.aggregate(per_case, answerable)) if answerable.any() else {}
    tier_names = list(tiers) if tiers is not None else list(dict.fromkeys(tier_col))
    per_tier = {}
    for tier, rows in _rows_by_tier(tier_col, tier_names).items():
        scored = rows[answerable[rows]]
        figures = dict(metrics.aggregate({k: v[scored] for k, v in per_case.items()})) if scored.size else {}
        figures["cases"] = float(rows.size)
        per_tier[tier] = figures

    missed = np.flatnonzero(answerable & (first_rank != 1)).tolist()
    chosen = list(map(results.__getitem__, missed))
    misses = Misses(
        [
            list(map(_CASE_ID, chosen)),
            list(map(tier_col.__getitem__, missed)),
            list(map(_QUERY, chosen)),
            list(map(_EXPECTED, chosen)),  # the case's expected-ID tuple (shared, not copied)
            first_rank[missed].tolist(),
            list(map(ranked.__getitem__, missed)),  # the result's ID tuple (shared)
            list(map(errors_col.__getitem__, missed)),
            [None] * len(missed),
        ]
    )
    # Percentiles over the cases timed one by one; a batched run's other cases only carry a share.
    timed = list(compress(latency, timed_flags))
    lat = metrics.latency_percentiles(np.array(timed, dtype=np.int64))
    no_error = [e is None for e in errors_col]
    errors = n - sum(no_error)
    empty = sum(compress(map(operator.not_, ranked), no_error))
    mean_tokens = float(np.fromiter(tokens, dtype=np.float64, count=n).mean()) if n else 0.0
    overall.update(
        {
            "cases": float(n),
            "judged_cases": float(answerable.sum()),
            "latency_p50_us": float(lat[0]),
            "latency_p95_us": float(lat[1]),
            "latency_max_us": float(lat[2]),
            "latency_timed_cases": float(len(timed)),
            "mean_tokens_returned": mean_tokens,
            "retrieval_errors": float(errors),
            "empty_results": float(empty),
        }
    )
    rag_overall, rag_per_case = _rag_scores(results, units, sections)
    return RunScores(
        ks=ks,
        cases=n,
        overall=overall,
        per_tier=per_tier,
        per_case=per_case,
        first_rank=first_rank,
        latency_us=(int(lat[0]), int(lat[1]), int(lat[2])),
        mean_tokens=mean_tokens,
        misses=misses,
        errors=errors,
        empty=empty,
        rag=rag_overall,
        rag_per_case=rag_per_case,
    )


def flat_metrics(scores: RunScores) -> dict[str, float]:
    """Every figure under its MLflow name (`evalpipe.scoring.names`): headline figures bare, the
    rest grouped by prefix (`ir/`, `cost/`, `count/`, `rag/`), tiers as `tier/<tier>/<metric>`."""
    # lazy: evalpipe.scoring.names, ~2 ms
    from evalpipe.scoring.names import metric_name

    out = {metric_name(k): float(v) for k, v in scores.overall.items()}
    for tier, figures in scores.per_tier.items():
        for name, value in figures.items():
            out[f"tier/{tier}/{name}"] = float(value)
    out.update({metric_name(k): float(v) for k, v in scores.rag.items()})
    return out
