"""Hybrid code search: field-weighted BM25, exact names and dense retrieval fused, with a router.

Each component is strong where the others are weak: `exact` on symbol names, `bm25f`
on words shared with the code, `semantic` on paraphrases. Plain RRF over BM25 and
dense retrieval lost exact-name queries to the dense model's near misses, so this
fusion adds two things:

* **linear fusion of normalised scores** (`method: linear`, default): each component's
  scores over its top `depth` are min-max normalised to [0, 1] and summed with
  `weights`, so a component that is sure (one hit far above the rest) counts for more
  than one whose top hits are all alike. `method: rrf` uses reciprocal ranks instead.
* **a router**: when the `router` component (default `exact`) finds a whole-query
  name match (score >= `router_min_score`; 4.0 is the exact ranker's any-case
  whole-query grade), the query names a symbol, and those matches go first, in the
  exact ranker's order; the fused list follows.

Two options keep one component from deciding when it is weak on a corpus (a dense model
whose min-max normalised scores spread its near-ties over [0, 1] as if it were sure):

* `method: rank`: normalised-rank fusion, each component contributes
  `weight x (1 - (rank - 1) / depth)`: only the order counts, never the score spread.
* `confidence: gap`: per query, each component's weight is multiplied by how far its top
  hit stands above its `confidence_depth`-th hit, relative to its whole list
  ((s_1 - s_n) / (s_1 - s_last), in [0, 1]): a component whose top hits are all alike
  (unsure on this query) counts for less, one with a clear winner for more.

Both are off by default (`method: linear`, `confidence: none`): the shipped weights were
tuned without them, and defaults are chosen on the dev splits of every code fixture.

Weights were found by an Optuna sweep on the gold fixture (`+sweep=hybrid_optuna`,
docs/rankers.md). Components are prepared, memoised and reported as in `rrf`.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from evalpipe.core import Hit
from evalpipe.rankers.base import CorpusRanker, Ranker, _key_part
from evalpipe.rankers.fusion.rrf import RRFRanker, rrf_fuse

METHODS = ("linear", "rrf", "rank")
CONFIDENCE = ("none", "gap")
#: Component results kept per process, so sweep points that differ only in fusion
#: parameters (weights, method, router) re-run no component search: a dense component
#: costs far more per query than the fusion. Keyed by the component's class and *all*
#: its arguments (query-time ones change results), the corpus, query, depth, constraints.
_HITS: OrderedDict[str, list[Hit]] = OrderedDict()
HITS_CACHE_SIZE = 50_000


def clear_hits_cache() -> None:
    """Forget memoised component hits (benchmarks call this so each ranker's latency is its own)."""
    _HITS.clear()


def _hits_key(comp: Ranker, corpus_sha: str, query: str, depth: int, constraints: Any) -> str | None:
    if not isinstance(comp, CorpusRanker) or not hasattr(comp, "_init_args"):
        return None  # plug-ins and replays may not be pure functions of their arguments
    args = _key_part(comp._init_args)
    return json.dumps(
        [type(comp).__qualname__, args, corpus_sha, query, depth, constraints], sort_keys=True, default=str
    )


def minmax_fuse(
    runs: Mapping[str, list[Hit]], weights: Mapping[str, float] | None = None
) -> dict[str, tuple[float, int]]:
    """id -> (sum of weight x min-max normalised score, best 1-based rank in any run).

    A run's scores are normalised over the hits it returned; a run whose scores are all
    equal (or missing) gives 1 to its first hit and 1/rank to the others, so order is kept.
    """
    fused: dict[str, float] = {}
    best: dict[str, int] = {}
    for cname, hits in runs.items():
        w = 1.0 if weights is None else float(weights.get(cname, 1.0))
        if not hits or w == 0:
            continue
        scores = [h.score for h in hits]
        usable = all(s is not None for s in scores) and max(scores) > min(scores)  # type: ignore[type-var]
        lo, hi = (min(scores), max(scores)) if usable else (0.0, 1.0)  # type: ignore[type-var]
        seen: set[str] = set()
        for rank, h in enumerate(hits, start=1):
            if h.id in seen:
                continue
            seen.add(h.id)
            norm = (float(h.score) - lo) / (hi - lo) if usable else 1.0 / rank  # type: ignore[arg-type]
            fused[h.id] = fused.get(h.id, 0.0) + w * norm
            best[h.id] = min(best.get(h.id, rank), rank)
    return {uid: (score, best[uid]) for uid, score in fused.items()}


def rank_fuse(
    runs: Mapping[str, list[Hit]], weights: Mapping[str, float] | None = None, depth: int = 100
) -> dict[str, tuple[float, int]]:
    """id -> (sum of weight x (1 - (rank - 1) / depth), best 1-based rank in any run).

    Rank 1 contributes the full weight, rank `depth` 1/depth of it; scores are ignored, so a
    component cannot dominate by stretching near-equal scores.
    """
    fused: dict[str, float] = {}
    best: dict[str, int] = {}
    depth = max(int(depth), 1)
    for cname, hits in runs.items():
        w = 1.0 if weights is None else float(weights.get(cname, 1.0))
        if not hits or w == 0:
            continue
        seen: set[str] = set()
        for rank, h in enumerate(hits, start=1):
            if h.id in seen or rank > depth:
                continue
            seen.add(h.id)
            fused[h.id] = fused.get(h.id, 0.0) + w * (1.0 - (rank - 1) / depth)
            best[h.id] = min(best.get(h.id, rank), rank)
    return {uid: (score, best[uid]) for uid, score in fused.items()}


def top_gap(hits: list[Hit], n: int) -> float:
    """How clearly a run's top stands out: (s_1 - s_n) / (s_1 - s_last), in [0, 1].

    1 when the run has at most `n` hits (it is selective) or its n-th hit already scores as
    low as its last; 0 when its first n hits tie; 1 when scores are missing (order only).
    """
    scores = [h.score for h in hits]
    if len(hits) <= n or any(s is None for s in scores):
        return 1.0
    first, nth, last = float(scores[0]), float(scores[n - 1]), float(scores[-1])  # type: ignore[arg-type]
    if first <= last:
        return 0.0
    return min(max((first - nth) / (first - last), 0.0), 1.0)


def confidence_weights(
    runs: Mapping[str, list[Hit]], weights: Mapping[str, float] | None, n: int
) -> dict[str, float]:
    """Each component's weight times its `top_gap` on this query."""
    return {
        cname: (1.0 if weights is None else float(weights.get(cname, 1.0))) * top_gap(hits, n)
        for cname, hits in runs.items()
    }


class HybridRanker(RRFRanker):
    """Linear (or RRF) fusion of `components`, with exact-name routing (see the module docstring)."""

    name = "hybrid"
    query_params = (
        "min_score",
        "k",
        "weights",
        "depth",
        "allow_skipped_components",
        "method",
        "router",
        "router_min_score",
        "test_prior",
        "module_prior",
        "confidence",
        "confidence_depth",
    )

    def __init__(
        self,
        components: Mapping[str, Ranker],
        method: str = "linear",
        weights: Mapping[str, float] | None = None,
        k: int = 60,
        depth: int = 100,
        router: str | None = "exact",
        router_min_score: float = 4.0,
        min_score: float | None = None,
        allow_skipped_components: bool = False,
        test_prior: str | bool = "last",
        module_prior: str | bool = "off",
        confidence: str = "none",
        confidence_depth: int = 10,
    ):
        super().__init__(
            components, k, weights, depth, min_score, allow_skipped_components, test_prior, module_prior
        )
        if confidence not in CONFIDENCE:
            raise ValueError(
                f"hybrid ranker: unknown confidence {confidence!r}; use one of {', '.join(CONFIDENCE)}"
            )
        if int(confidence_depth) < 2:
            raise ValueError(f"hybrid ranker: confidence_depth must be >= 2, got {confidence_depth}")
        self.confidence = confidence
        self.confidence_depth = int(confidence_depth)
        if method not in METHODS:
            raise ValueError(f"hybrid ranker: unknown method {method!r}; use one of {', '.join(METHODS)}")
        if router is not None and str(router) not in self.components:
            raise ValueError(
                f"hybrid ranker: router {router!r} is not a component; known: {list(self.components)}"
            )
        self.method = method
        self.router = None if router is None else str(router)
        self.router_min_score = float(router_min_score)

    def __repr__(self) -> str:
        return (
            f"HybridRanker(components={list(self.components)}, method={self.method!r}, "
            f"weights={self.weights}, router={self.router!r}, confidence={self.confidence!r})"
        )

    def component_hits(
        self, case_id: str | None, query: str, k: int, constraints: Mapping[str, Any] | None = None
    ) -> dict[str, list[Hit]]:
        """As in `rrf`, with each built-in component's hits memoised per process (see `_HITS`).

        Hits are frozen dataclasses in a list that callers only read, so sharing them is safe.
        """
        depth = max(self.depth, k)
        sha = self.corpus.sha256 if self.corpus is not None else ""
        out: dict[str, list[Hit]] = {}
        for cname, comp in self.active.items():
            by_case = getattr(comp, "search_case", None)
            if case_id is not None and by_case is not None:  # a replay: looked up by case, not memoised
                out[cname] = list(by_case(case_id, query, depth, constraints))[:depth]
                continue
            key = _hits_key(comp, sha, query, depth, dict(constraints) if constraints else None)
            cached = _HITS.get(key) if key is not None else None
            if cached is None:
                cached = list(comp.search(query, depth, constraints))[:depth]
                if key is not None:
                    _HITS[key] = cached
                    while len(_HITS) > HITS_CACHE_SIZE:
                        _HITS.popitem(last=False)
            else:
                _HITS.move_to_end(key)
            out[cname] = cached
        return out

    def _fuse(
        self, case_id: str | None, query: str, k: int, constraints: Mapping[str, Any] | None
    ) -> list[Hit]:
        if k <= 0:
            return []
        runs = self.component_hits(case_id, query, k, constraints)
        weights = self.weights
        if self.confidence == "gap":
            weights = confidence_weights(runs, self.weights, self.confidence_depth)
        if self.method == "rrf":
            fused = rrf_fuse(runs, k=self.k, weights=weights)
        elif self.method == "rank":
            fused = rank_fuse(runs, weights, depth=max(self.depth, k))
        else:
            fused = minmax_fuse(runs, weights)
        fused = self.demote_tests(query, self.demote_modules(query, fused))
        routed: dict[str, float] = {}
        if self.router is not None:
            for h in runs.get(self.router, []):
                if h.score is not None and h.score >= self.router_min_score and h.id not in routed:
                    routed[h.id] = float(h.score)
        corpus = self.corpus
        mask = corpus.allowed_mask(constraints) if corpus is not None else None
        n = len(corpus) if corpus is not None else 0
        top = max((s for s, _ in fused.values()), default=0.0)

        def key(uid: str) -> tuple[int, float, int, int, str]:
            score, best_rank = fused.get(uid, (0.0, n + 1))
            row = corpus.index_of.get(uid, n) if corpus is not None else 0
            # routed symbols first (by the router's score), then the fused order
            return (0 if uid in routed else 1, -routed.get(uid, score), best_rank, row, uid)

        hits: list[Hit] = []
        for uid in sorted(set(fused) | set(routed), key=key):
            if mask is not None and corpus is not None:
                row = corpus.index_of.get(uid)
                if row is None or not mask[row]:
                    continue
            # routed hits score above every fused one, so the scores agree with the order
            score = top + routed[uid] if uid in routed else fused[uid][0]
            if self.min_score is not None and score < self.min_score:
                continue
            hits.append(Hit(uid, score))
            if len(hits) == k:
                break
        return hits
