"""Graph expansion: seed with a base ranker, then walk code relations to related units.

Multi-hop questions ("what calls the function that parses the config?") name one
unit but want its neighbours. We take the base ranker's top seeds, normalise their
scores to [0, 1], and spread each seed's score along relations (calls, contains,
imports, inherits and their reverses), multiplied by `decay` per hop.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from evalpipe.corpus import RELATION_KINDS, Corpus
from evalpipe.rankers.base import CorpusRanker, Hit, Ranker, top_k

#: Reverse edge name for each forward relation kind stored on units.
REVERSE = {
    "contains": "contained_by",
    "calls": "called_by",
    "imports": "imported_by",
    "inherits": "inherited_by",
}
RELATIONS = tuple(RELATION_KINDS) + tuple(REVERSE[k] for k in RELATION_KINDS)
DEFAULT_RELATIONS = ("calls", "called_by", "contains", "contained_by", "inherits", "imports")
COMBINE = ("max", "sum")


class GraphRanker(CorpusRanker):
    """Base-ranker seeds expanded along corpus relations.

    A unit reached from one seed at hop distance d scores seed_score * decay**d
    (shortest path; seeds normalised by the top seed score, or 1/(rank+1) when the
    base returns no usable scores). Contributions from different seeds combine by
    `combine`:

    * ``max`` (default): a neighbour never outranks the seed that led to it, so the
      base ranking stays on top and hubs (a module containing every seed, a logging
      helper everything calls) cannot flood the list.
    * ``sum``: units reached from several seeds accumulate evidence, which favours
      convergence points in multi-hop questions at the risk of promoting hubs.

    Only the top `seeds` base hits are expanded; when k > seeds the base's further hits
    are kept at their normalised score, so the list is never shorter than the base's.
    Traversal crosses units outside the winnow constraints, but those are never returned.
    """

    name = "graph"
    drop_nonpositive = True

    def __init__(
        self,
        base: Ranker,
        seeds: int = 10,
        hops: int = 2,
        decay: float = 0.5,
        relations: Iterable[str] = DEFAULT_RELATIONS,
        combine: str = "max",
        min_score: float | None = None,
    ):
        if not hasattr(base, "search"):
            raise ValueError(f"GraphRanker: base must be a ranker with search(), got {type(base).__name__}")
        relations = [str(r) for r in relations]
        unknown = [r for r in relations if r not in RELATIONS]
        if unknown:
            raise ValueError(f"GraphRanker: unknown relations {unknown}; use any of {', '.join(RELATIONS)}")
        if combine not in COMBINE:
            raise ValueError(f"GraphRanker: unknown combine {combine!r}; use one of {', '.join(COMBINE)}")
        if int(seeds) < 1 or int(hops) < 0:
            raise ValueError(f"GraphRanker: need seeds >= 1 and hops >= 0, got seeds={seeds}, hops={hops}")
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"GraphRanker: decay must be in (0, 1], got {decay}")
        self.base = base
        self.seeds = int(seeds)
        self.hops = int(hops)
        self.decay = float(decay)
        self.relations = tuple(relations)
        self.combine = combine
        self.min_score = None if min_score is None else float(min_score)
        self._stats: dict[str, Any] = {}

    def __repr__(self) -> str:
        return (
            f"GraphRanker(base={self.base!r}, seeds={self.seeds}, hops={self.hops}, decay={self.decay}, "
            f"relations={list(self.relations)}, combine={self.combine!r})"
        )

    def _build(self, corpus: Corpus) -> None:
        start = time.perf_counter()
        prepare = getattr(self.base, "prepare", None)
        if callable(prepare):
            prepare(corpus)
        wanted = set(self.relations)
        neighbours: list[list[int]] = [[] for _ in range(len(corpus))]
        unresolved = 0
        for row, unit in enumerate(corpus):
            for kind in RELATION_KINDS:
                for target in unit.relations.get(kind, ()):
                    other = corpus.index_of.get(target)
                    if other is None:  # an unresolved call/import kept as a bare dotted name
                        unresolved += 1
                        continue
                    if kind in wanted:
                        neighbours[row].append(other)
                    if REVERSE[kind] in wanted:
                        neighbours[other].append(row)
        # dict.fromkeys: drop duplicate edges but keep a deterministic order
        self._neighbours = [list(dict.fromkeys(n)) for n in neighbours]
        base_stats = getattr(self.base, "stats", None)
        self._stats = {
            "index_units": len(corpus),
            "graph_edges": sum(len(n) for n in self._neighbours),
            "unresolved_targets": unresolved,
            "build_seconds": time.perf_counter() - start,
        }
        if callable(base_stats):
            self._stats.update({f"base_{k}": v for k, v in base_stats().items()})

    def _seed_scores(self, hits: list[Hit]) -> list[tuple[int, float]]:
        rows = [(self.corpus.index_of[h.id], h.score) for h in hits if h.id in self.corpus.index_of]
        if not rows:
            return []
        top = rows[0][1]
        if top is None or top <= 0 or any(s is None for _, s in rows):
            return [(row, 1.0 / (rank + 1)) for rank, (row, _) in enumerate(rows)]
        return [(row, max(float(s) / top, 0.0)) for row, s in rows]

    def _expand(self, row: int) -> dict[int, int]:
        """Hop distance from `row` to every unit within `hops` (breadth-first, shortest path)."""
        dist = {row: 0}
        frontier = [row]
        for hop in range(1, self.hops + 1):
            nxt = []
            for node in frontier:
                for other in self._neighbours[node]:
                    if other not in dist:
                        dist[other] = hop
                        nxt.append(other)
            frontier = nxt
        return dist

    def search(self, query: str, k: int, constraints: Mapping[str, Any] | None = None) -> list[Hit]:
        if not hasattr(self, "corpus"):
            raise RuntimeError("GraphRanker.search called before prepare(corpus)")
        if k <= 0:
            return []
        hits = list(self.base.search(query, max(k, self.seeds), constraints))
        seeds = self._seed_scores(hits)
        scores = np.zeros(len(self.corpus), dtype=np.float64)
        for i, (row, seed_score) in enumerate(seeds):
            # seeds past the first `self.seeds` are not expanded: they keep their own score
            reach = self._expand(row) if i < self.seeds else {row: 0}
            for node, d in reach.items():
                value = seed_score * self.decay**d
                if self.combine == "max":
                    scores[node] = max(scores[node], value)
                else:
                    scores[node] += value
        return top_k(
            self.corpus,
            scores,
            k,
            self.corpus.allowed_mask(constraints),
            min_score=self.min_score,
            drop_nonpositive=True,
        )

    def stats(self) -> dict[str, Any]:
        return dict(self._stats)
