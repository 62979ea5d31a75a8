"""Graph ranking: walk code relations from the symbol a question is about.

**Set questions** (`set_questions: true`, intent mode): "which types implement Binding",
"handlers registered in routes.go", "methods of Context that modify its fields", "subcommands
of rootCmd", "exported methods of RouterGroup" are parsed by `evalpipe.rankers.structure.set_questions`
and answered from the corpus structure by `evalpipe.rankers.structure.graph_structure` (edges, kinds,
file scope); the set's members are ranked first, ordered by the base ranker's rank of the
whole question, then the anchor, then the base ranking. A question that parses but whose
anchor resolves to nothing falls through to the relation walk below, then to the base.

Two modes. **Relation intent** (`intent: true`, the shipped config): a question such as
"what calls top_k", "which functions does RRFRanker._fuse call", "subclasses of
EvalpipeError" or "which modules import trec" names a relation and a symbol
(`evalpipe.rankers.structure.relation_intent`). The symbol is looked up by exact name (else by
the base ranker on the named phrase), and a truncated personalized PageRank from it
along that one relation scores the units it reaches; those are ranked first (ties by
the base ranker's score for the whole question), then the seed symbols, then the
base ranking. Any other question gets the base ranking unchanged, so the ranker can only
move relational questions. Reached units in test files come after the non-test reached
units (and test seeds after non-test seeds) unless the question asks for tests
(`test_prior`, `evalpipe.rankers.priors.test_prior`): "what calls X" wants X's callers in the
code, not its tests.

**Expansion** (`intent: false`): the base ranker's top seeds, scores normalised to
[0, 1], spread along every configured relation, multiplied by `decay` per hop.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from evalpipe.core import Hit
from evalpipe.core.unit import RELATION_KINDS
from evalpipe.corpus import Corpus
from evalpipe.rankers.base import CorpusRanker, Ranker, top_k
from evalpipe.rankers.lexical.exact import FULL_SCORE, ExactSymbolRanker
from evalpipe.rankers.priors.test_prior import TestPrior, check_mode
from evalpipe.rankers.structure.graph_structure import EDGE_KINDS, StructureIndex
from evalpipe.rankers.structure.relation_intent import RelationIntent, detect_relation
from evalpipe.rankers.structure.set_questions import SetQuestion, parse_set_question

#: Reverse edge name for each forward relation kind stored on units (the corpus builder's
#: kind names, `graph_structure.EDGE_KINDS`); kinds a corpus does not have are simply empty.
REVERSE = {
    "contains": "contained_by",
    "calls": "called_by",
    "imports": "imported_by",
    "inherits": "inherited_by",
    "implements": "implemented_by",
    "references": "referenced_by",
    "subcommands": "subcommand_of",
}
EDGE_NAMES = tuple(dict.fromkeys([*EDGE_KINDS.values(), *RELATION_KINDS]))
RELATIONS = EDGE_NAMES + tuple(REVERSE[k] for k in EDGE_NAMES if k in REVERSE)
DEFAULT_RELATIONS = ("calls", "called_by", "contains", "contained_by", "inherits", "imports")
#: An intent walk along a relation also follows these: "implementations of X" / "subclasses of
#: X" (inherited_by) reach classes that `implements` X as well as those that extend it.
INTENT_ALSO = {"inherited_by": ("implemented_by",), "inherits": ("implements",)}
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
    query_params = ("min_score", "test_prior")

    def __init__(
        self,
        base: Ranker,
        seeds: int = 10,
        hops: int = 2,
        decay: float = 0.5,
        relations: Iterable[str] = DEFAULT_RELATIONS,
        combine: str = "max",
        intent: bool = False,
        base_weight: float = 0.3,
        min_score: float | None = None,
        test_prior: str | bool = "last",
        set_questions: bool = True,
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
        self.intent = bool(intent)
        self.base_weight = float(base_weight)
        self.min_score = None if min_score is None else float(min_score)
        self.test_prior = check_mode("GraphRanker", test_prior)
        self.set_questions = bool(set_questions)
        self._stats: dict[str, Any] = {}

    def __repr__(self) -> str:
        return (
            f"GraphRanker(base={self.base!r}, seeds={self.seeds}, hops={self.hops}, decay={self.decay}, "
            f"relations={list(self.relations)}, combine={self.combine!r}, intent={self.intent}, "
            f"set_questions={self.set_questions})"
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
            for kind in EDGE_NAMES:
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
        # intent mode walks one relation kind at a time (forward and reverse edges kept apart)
        self._by_relation: dict[str, list[list[int]]] = {
            r: [[] for _ in range(len(corpus))] for r in RELATIONS
        }
        for row, unit in enumerate(corpus):
            for kind in EDGE_NAMES:
                for target in unit.relations.get(kind, ()):
                    other = corpus.index_of.get(target)
                    if other is not None and other != row:
                        self._by_relation[kind][row].append(other)
                        self._by_relation[REVERSE[kind]][other].append(row)
        self._by_relation = {r: [list(dict.fromkeys(n)) for n in adj] for r, adj in self._by_relation.items()}
        self._walk_adj: dict[str, list[list[int]]] = {}
        for relation, also in INTENT_ALSO.items():
            extra = [self._by_relation[r] for r in also]
            if any(any(rows) for rows in extra):
                own = self._by_relation[relation]
                self._walk_adj[relation] = [
                    list(dict.fromkeys([*own[row], *(n for rows in extra for n in rows[row])]))
                    for row in range(len(own))
                ]
        # set questions (implementations, handlers, mutators, ...): facts computed once per corpus
        self._structure = StructureIndex(corpus) if self.intent and self.set_questions else None
        self._symbols = ExactSymbolRanker(partial=False, min_score=FULL_SCORE)
        self._prior = TestPrior(corpus)
        self._symbols.prepare(corpus)
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
        if self.intent:
            found = detect_relation(query)
            asked = parse_set_question(query) if self._structure is not None else None
            if found is not None and found.described:
                asked = None  # "what calls the function that ...": the anchor is a description
            ranked = None
            walk_first = asked is None or (found is not None and asked.relation in ("callers", "callees"))
            if not walk_first and asked is not None:
                ranked = self._set_answer(query, asked, k, constraints)
            if ranked is None and found is not None:
                ranked = self._relational(query, found, k, constraints)
            if ranked is None and walk_first and asked is not None:
                ranked = self._set_answer(query, asked, k, constraints)
            return ranked if ranked is not None else list(self.base.search(query, k, constraints))[:k]
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

    def seed_rows(self, intent: RelationIntent) -> dict[int, float]:
        """Rows of the symbol the question names, weighted: full exact-name matches (the best
        grade only), else (or when the symbol is described, not named) the base ranker's top
        `seeds` for the phrase, weighted 1/rank."""
        hits = [] if intent.described else self._symbols.search(intent.target, self.seeds)
        if hits:
            best = hits[0].score
            rows = {self.corpus.index_of[h.id]: 1.0 for h in hits if h.score == best}
        else:
            found = [h for h in self.base.search(intent.target, self.seeds) if h.id in self.corpus.index_of]
            rows = {self.corpus.index_of[h.id]: 1.0 / (rank + 1) for rank, h in enumerate(found)}
        if intent.relation in ("imports", "imported_by"):  # import edges join files: lift to the module
            lifted: dict[int, float] = {}
            for row, w in rows.items():
                module = self.corpus.index_of.get(self.corpus.units[row].path, row)
                lifted[module] = max(lifted.get(module, 0.0), w)
            rows = lifted
        return rows

    def walk(self, seeds: Mapping[int, float], relation: str) -> np.ndarray:
        """Truncated personalized PageRank from `seeds` along one relation.

        Each hop passes a node's mass to its neighbours in equal shares (so a hub seed does
        not drown the others), damped by `decay` per hop; `hops` hops are summed. The seeds'
        own mass is not counted: they are what the question names, not its answer.
        """
        adj = self._walk_adj.get(relation) or self._by_relation[relation]
        mass = np.zeros(len(self.corpus), dtype=np.float64)
        for row, w in seeds.items():
            mass[row] = w
        total = np.zeros_like(mass)
        for hop in range(1, self.hops + 1):
            nxt = np.zeros_like(mass)
            for row in np.flatnonzero(mass):
                if adj[row]:
                    nxt[adj[row]] += mass[row] / len(adj[row])
            mass = nxt
            total += self.decay ** (hop - 1) * mass
        return total

    def _relational(
        self, query: str, intent: RelationIntent, k: int, constraints: Mapping[str, Any] | None
    ) -> list[Hit] | None:
        """Reached units, then the seeds, then the base ranking; None when the walk reaches nothing."""
        seeds = self.seed_rows(intent)
        reach = self.walk(seeds, intent.relation) if seeds else np.zeros(len(self.corpus))
        for row in seeds:
            reach[row] = 0.0
        mask = self.corpus.allowed_mask(constraints)
        if mask is not None:
            reach[~mask] = 0.0
        if not reach.any():
            return None
        base = list(self.base.search(query, max(k, 100), constraints))
        base_norm = np.zeros(len(self.corpus), dtype=np.float64)
        for rank, h in enumerate(base):
            row = self.corpus.index_of.get(h.id)
            if row is not None:
                base_norm[row] = max(base_norm[row], 1.0 / (rank + 1))
        scores = np.where(reach > 0, 2.0 + reach / reach.max() + self.base_weight * base_norm, 0.0)
        for row in seeds:
            if mask is None or mask[row]:
                scores[row] = 1.5
        listed = scores > 0
        rest = (~listed) & (base_norm > 0)
        scores[rest] = base_norm[rest]
        # bands: reached units (>= 2), seeds (1.5), the rest of the base ranking (<= 1)
        floors = np.select([scores >= 2.0, scores >= 1.5], [2.0, 1.5], 0.0)
        scores = self._prior.demote(scores, query, self.test_prior, floors=floors)
        return top_k(self.corpus, scores, k, mask, min_score=self.min_score, drop_nonpositive=True)

    def _base_norm(self, query: str, k: int, constraints: Mapping[str, Any] | None) -> np.ndarray:
        """1/rank of each unit in the base ranker's list for the whole question (0 if absent)."""
        base_norm = np.zeros(len(self.corpus), dtype=np.float64)
        for rank, h in enumerate(self.base.search(query, max(k, 100), constraints)):
            row = self.corpus.index_of.get(h.id)
            if row is not None:
                base_norm[row] = max(base_norm[row], 1.0 / (rank + 1))
        return base_norm

    def set_answer_rows(self, asked: SetQuestion) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(anchor rows, member rows) of a parsed set question (see `graph_structure`)."""
        if self._structure is None:
            return (), ()
        answer = self._structure.answer(asked)
        return answer.anchors, answer.members

    def _set_answer(
        self, query: str, asked: SetQuestion, k: int, constraints: Mapping[str, Any] | None
    ) -> list[Hit] | None:
        """The set's members (ordered by the base's rank of the whole question), then the anchor,
        then the base ranking; None when the anchor resolves to nothing or the set is empty."""
        anchors, members = self.set_answer_rows(asked)
        mask = self.corpus.allowed_mask(constraints)
        listed = [m for m in members if mask is None or mask[m]]
        if not listed:
            return None
        base_norm = self._base_norm(query, k, constraints)
        scores = base_norm.copy()
        for row in anchors:
            scores[row] = 1.5
        for row in listed:
            scores[row] = 3.0 + self.base_weight * base_norm[row]
        return top_k(self.corpus, scores, k, mask, min_score=self.min_score, drop_nonpositive=True)

    def stats(self) -> dict[str, Any]:
        return dict(self._stats)
