"""Winnow: structured retrieval that re-scores lexical candidates with graph signals.

The seed harness's `winnow` ranker narrows the corpus to structured candidates (by the
case's winnow constraints: language, kind, path prefix) and orders them by relevance
plus signals of importance such as fan-in (how many units call, import or inherit from
a unit) and churn. Among units that match a question equally well, the one the code
base depends on most is usually the answer ("the Store type", not a test helper).

    score(d) = rel(d) + fan_in_weight * ln(1 + fan_in(d)) / ln(1 + max fan_in)
                      + churn_weight  * churn(d) / max churn

`rel` is the candidate ranker's score divided by its top score (candidates are its top
`candidates` hits, drawn from units allowed by the constraints). `fan_in` counts
incoming `calls`, `imports` and `inherits` edges. `churn` is the unit's `churn`
metadata (e.g. commits touching it) when the corpus records it, else 0.

The base ranker's own test prior already orders its candidates; fan-in could lift a test
(tests call a lot, and helpers in tests are called by many tests) back above them, so the
re-scored list gets the same prior (`test_prior`, `evalpipe.rankers.priors.test_prior`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from evalpipe.core import Hit
from evalpipe.corpus import Corpus
from evalpipe.rankers.base import CorpusRanker, Ranker, top_k
from evalpipe.rankers.priors.test_prior import TestPrior, check_mode

FAN_IN_RELATIONS = ("calls", "imports", "inherits")


def fan_in(corpus: Corpus) -> np.ndarray:
    """Incoming calls/imports/inherits edges per unit (distinct sources, self-edges ignored)."""
    sources: list[set[int]] = [set() for _ in range(len(corpus))]
    for row, unit in enumerate(corpus):
        for kind in FAN_IN_RELATIONS:
            for target in unit.relations.get(kind, ()):
                other = corpus.index_of.get(target)
                if other is not None and other != row:
                    sources[other].add(row)
    return np.array([len(s) for s in sources], dtype=np.float64)


class WinnowRanker(CorpusRanker):
    """Candidates from `base` (constraint-filtered), re-scored with fan-in and churn."""

    name = "winnow"
    drop_nonpositive = True
    query_params = ("min_score", "fan_in_weight", "churn_weight", "candidates", "test_prior")

    def __init__(
        self,
        base: Ranker,
        candidates: int = 100,
        fan_in_weight: float = 0.2,
        churn_weight: float = 0.0,
        min_score: float | None = None,
        test_prior: str | bool = "last",
    ):
        if not hasattr(base, "search"):
            raise ValueError(f"WinnowRanker: base must be a ranker with search(), got {type(base).__name__}")
        if int(candidates) < 1 or fan_in_weight < 0 or churn_weight < 0:
            raise ValueError(
                "WinnowRanker: need candidates >= 1 and non-negative weights, got "
                f"candidates={candidates}, fan_in_weight={fan_in_weight}, churn_weight={churn_weight}"
            )
        self.base = base
        self.candidates = int(candidates)
        self.fan_in_weight = float(fan_in_weight)
        self.churn_weight = float(churn_weight)
        self.min_score = None if min_score is None else float(min_score)
        self.test_prior = check_mode("WinnowRanker", test_prior)
        self._stats: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"WinnowRanker(base={self.base!r}, fan_in_weight={self.fan_in_weight})"

    def _build(self, corpus: Corpus) -> None:
        start = time.perf_counter()
        prepare = getattr(self.base, "prepare", None)
        if callable(prepare):
            prepare(corpus)
        counts = fan_in(corpus)
        top = counts.max() if len(counts) else 0.0
        self._fan_in = np.log1p(counts) / math.log1p(top) if top > 0 else np.zeros(len(corpus))
        churn = np.array([float(u.metadata.get("churn") or 0.0) for u in corpus], dtype=np.float64)
        self._churn = churn / churn.max() if len(churn) and churn.max() > 0 else np.zeros(len(corpus))
        self._prior = TestPrior(corpus)
        self._stats = {
            "index_units": len(corpus),
            "max_fan_in": float(top),
            "units_with_churn": int((churn > 0).sum()),
            "build_seconds": time.perf_counter() - start,
        }

    def search(self, query: str, k: int, constraints: Mapping[str, Any] | None = None) -> list[Hit]:
        if not hasattr(self, "corpus"):
            raise RuntimeError("WinnowRanker.search called before prepare(corpus)")
        if k <= 0:
            return []
        hits = [
            h for h in self.base.search(query, max(k, self.candidates), constraints) if h.id in self.corpus
        ]
        scores = np.zeros(len(self.corpus), dtype=np.float64)
        if not hits:
            return []
        top = hits[0].score
        for rank, h in enumerate(hits):
            rel = h.score / top if top and h.score is not None and top > 0 else 1.0 / (rank + 1)
            scores[self.corpus.index_of[h.id]] = max(rel, 1e-9)
        chosen = scores > 0
        scores[chosen] += self.fan_in_weight * self._fan_in[chosen] + self.churn_weight * self._churn[chosen]
        scores = self._prior.demote(scores, query, self.test_prior)
        return top_k(
            self.corpus,
            scores,
            k,
            self.corpus.allowed_mask(constraints),
            self.min_score,
            drop_nonpositive=True,
        )

    def stats(self) -> dict[str, Any]:
        return dict(self._stats)
