"""Reciprocal Rank Fusion of several rankers (Cormack, Clarke & Buettcher, SIGIR 2009).

score(d) = sum over components c of  w_c / (k + rank_c(d)),  rank 1-based, counted only
where d is in c's top `depth`. RRF uses ranks, not scores, so lexical and dense
rankers whose scores live on unrelated scales fuse without any normalisation.

A fused run that quietly lost a component would be mislabelled in every report, so a
component that cannot load fails the whole ranker unless `allow_skipped_components`
is set, and even then the skipped names are recorded in `stats()`.

Fused lists get the test-file prior (`test_prior`, `evalpipe.rankers.priors.test_prior`): a
component without one (a dense model) can otherwise lift a test unit above the non-test
units the lexical components ranked first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evalpipe.core import Hit
from evalpipe.corpus import Corpus
from evalpipe.rankers.base import CorpusRanker, Ranker, RankerUnavailable
from evalpipe.rankers.priors.module_prior import ModulePrior
from evalpipe.rankers.priors.module_prior import check_mode as module_prior_mode
from evalpipe.rankers.priors.test_prior import TestPrior, check_mode, demote_rows


class RRFRanker(CorpusRanker):
    """Fuse `components` (name -> ranker, in config order) with weighted RRF.

    `weights` maps component names to weights (missing names weigh 1.0). Each
    component is asked for `max(depth, k)` hits so a large `k` is never silently
    truncated. Ties in the fused score are broken by the best rank any component
    gave the unit, then by corpus order (units outside the corpus last, by id).
    """

    name = "rrf"
    #: Fusion parameters only; each component memoises its own index in its own prepare().
    query_params = (
        "min_score",
        "k",
        "weights",
        "depth",
        "allow_skipped_components",
        "test_prior",
        "module_prior",
    )

    def __init__(
        self,
        components: Mapping[str, Ranker],
        k: int = 60,
        weights: Mapping[str, float] | None = None,
        depth: int = 100,
        min_score: float | None = None,
        allow_skipped_components: bool = False,
        test_prior: str | bool = "last",
        module_prior: str | bool = "off",
    ):
        # Hydra hands nested configs over as a DictConfig of instantiated rankers; plain dicts work too.
        self.components: dict[str, Ranker] = {str(n): c for n, c in dict(components or {}).items()}
        if not self.components:
            raise ValueError(f"{self.name} ranker: no components configured (set ranker.components)")
        for cname, comp in self.components.items():
            if not callable(getattr(comp, "search", None)):
                raise ValueError(f"{self.name} ranker: component {cname!r} has no search() method: {comp!r}")
        if k < 0 or depth < 1:
            raise ValueError(f"{self.name} ranker: need k >= 0 and depth >= 1 (got k={k}, depth={depth})")
        weights = {str(n): float(w) for n, w in dict(weights or {}).items()}
        unknown = sorted(set(weights) - set(self.components))
        if unknown:
            raise ValueError(
                f"{self.name} ranker: weights name unknown components {unknown}; "
                f"known: {list(self.components)}"
            )
        self.k = k
        self.depth = int(depth)
        self.weights = {n: weights.get(n, 1.0) for n in self.components}
        self.min_score = min_score
        self.allow_skipped_components = bool(allow_skipped_components)
        self.test_prior = check_mode(type(self).__name__, test_prior)
        self.module_prior = module_prior_mode(type(self).__name__, module_prior)
        self._modules: ModulePrior | None = None
        self._prior: TestPrior | None = None
        self.active: dict[str, Ranker] = dict(self.components)
        self.skipped: dict[str, str] = {}
        self.corpus: Corpus | None = None  # type: ignore[assignment]

    def prepare(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self._prior = TestPrior(corpus)
        self._modules = ModulePrior(corpus)
        self.active, self.skipped = {}, {}
        for cname, comp in self.components.items():
            prepare = getattr(comp, "prepare", None)
            try:
                if prepare is not None:
                    prepare(corpus)
            except RankerUnavailable as exc:
                if not self.allow_skipped_components:
                    raise RankerUnavailable(
                        f"{self.name} ranker: component {cname!r} unavailable: {exc} "
                        f"(set ranker.allow_skipped_components=true to fuse the others)"
                    ) from exc
                self.skipped[cname] = str(exc)
                continue
            self.active[cname] = comp
        if not self.active:
            raise RankerUnavailable(f"{self.name} ranker: every component is unavailable: {self.skipped}")
        # Fusion itself builds nothing: the index is "reused" when every component's was.
        self.index_reused = all(getattr(c, "index_reused", False) for c in self.active.values())

    def search(self, query: str, k: int, constraints: Mapping[str, Any] | None = None) -> list[Hit]:
        return self._fuse(None, query, k, constraints)

    def search_case(
        self, case_id: str, query: str, k: int, constraints: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        """Like `search`, but components that replay per-case results (RunFileRanker) get the case id."""
        return self._fuse(case_id, query, k, constraints)

    def component_hits(
        self, case_id: str | None, query: str, k: int, constraints: Mapping[str, Any] | None = None
    ) -> dict[str, list[Hit]]:
        """Each active component's top `max(depth, k)` hits, as fused (useful for per-component reports)."""
        depth = max(self.depth, k)
        out: dict[str, list[Hit]] = {}
        for cname, comp in self.active.items():
            by_case = getattr(comp, "search_case", None)
            if case_id is not None and by_case is not None:
                hits = by_case(case_id, query, depth, constraints)
            else:
                hits = comp.search(query, depth, constraints)
            out[cname] = list(hits)[:depth]
        return out

    def _fuse(
        self, case_id: str | None, query: str, k: int, constraints: Mapping[str, Any] | None
    ) -> list[Hit]:
        if k <= 0:
            return []
        runs = self.component_hits(case_id, query, k, constraints)
        fused = self.demote_tests(
            query, self.demote_modules(query, rrf_fuse(runs, k=self.k, weights=self.weights))
        )
        corpus = self.corpus
        mask = corpus.allowed_mask(constraints) if corpus is not None else None
        n = len(corpus) if corpus is not None else 0

        def order(item: tuple[str, tuple[float, int]]) -> tuple[float, int, int, str]:
            uid, (score, best_rank) = item
            row = corpus.index_of.get(uid, n) if corpus is not None else 0
            return (-score, best_rank, row, uid)

        hits: list[Hit] = []
        for uid, (score, _) in sorted(fused.items(), key=order):
            # Components are trusted to honour constraints; re-checking catches plug-ins that do not.
            if mask is not None and corpus is not None:
                row = corpus.index_of.get(uid)
                if row is None or not mask[row]:
                    continue
            if self.min_score is not None and score < self.min_score:
                continue
            hits.append(Hit(uid, score))
            if len(hits) == k:
                break
        return hits

    def demote_modules(self, query: str, fused: dict[str, tuple[float, int]]) -> dict[str, tuple[float, int]]:
        """Fused scores with each module unit moved just below its file's best definition
        (`evalpipe.rankers.priors.module_prior`); unchanged when the prior is off or lifted."""
        modules, corpus = self._modules, self.corpus
        if modules is None or corpus is None or not modules.applies(query, self.module_prior):
            return fused
        return modules.demote_fused(fused, corpus.index_of, query, self.module_prior)

    def demote_tests(self, query: str, fused: dict[str, tuple[float, int]]) -> dict[str, tuple[float, int]]:
        """Fused scores with test units moved after the non-test ones (scores scaled as in
        `test_prior.demote_rows`); unchanged when the prior does not apply to the query."""
        prior, corpus = self._prior, self.corpus
        if prior is None or corpus is None or not fused or not prior.applies(query, self.test_prior):
            return fused
        ids = list(fused)
        rows = [corpus.index_of.get(uid) for uid in ids]
        test = np.array([r is not None and bool(prior.rows[r]) for r in rows], dtype=bool)
        scores = np.array([fused[uid][0] for uid in ids], dtype=np.float64)
        moved = demote_rows(scores, test)
        return {uid: (float(s), fused[uid][1]) for uid, s in zip(ids, moved.tolist(), strict=True)}

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {"components": ",".join(self.components)}
        for cname, comp in self.active.items():
            get = getattr(comp, "stats", None)
            for key, value in (get() if get is not None else {}).items():
                out[f"{cname}.{key}"] = value
        if self.allow_skipped_components:
            out["skipped_components"] = ",".join(self.skipped)
            for cname, reason in self.skipped.items():
                out[f"{cname}.unavailable"] = reason
        return out

    def __repr__(self) -> str:
        return f"RRFRanker(components={list(self.components)}, k={self.k}, weights={self.weights})"


def rrf_fuse(
    runs: Mapping[str, Sequence[Hit]], k: float = 60, weights: Mapping[str, float] | None = None
) -> dict[str, tuple[float, int]]:
    """id -> (fused score, best 1-based rank in any run). Order of the runs does not matter.

    Contributions are summed with `math.fsum` (exactly rounded), so two units with the
    same multiset of ranks get bit-identical scores and fall to the tie-break rather
    than to float summation order. A unit listed twice in one run counts once, at its
    best rank.
    """
    parts: dict[str, list[float]] = {}
    best: dict[str, int] = {}
    for cname, hits in runs.items():
        w = 1.0 if weights is None else float(weights.get(cname, 1.0))
        seen: set[str] = set()
        for rank, hit in enumerate(hits, start=1):
            if hit.id in seen:
                continue
            seen.add(hit.id)
            parts.setdefault(hit.id, []).append(w / (k + rank))
            best[hit.id] = min(best.get(hit.id, rank), rank)
    return {uid: (math.fsum(p), best[uid]) for uid, p in parts.items()}
