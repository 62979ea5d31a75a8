"""The ranker protocol: the one small interface every retrieval strategy implements.

A ranker needs only `search(query, k, constraints) -> ranked hits`. Built-in rankers
also implement `prepare(corpus)` (build an index) and `stats()` (index build cost),
which the runner calls when present, so a plug-in wrapping a production service
can implement `search` alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from evalpipe.corpus import Corpus


@dataclass(frozen=True)
class Hit:
    """One ranked result. `score` is None when a ranker only returns an order."""

    id: str
    score: float | None = None


@runtime_checkable
class Ranker(Protocol):
    def search(self, query: str, k: int, constraints: Mapping[str, Any] | None = None) -> Sequence[Hit]:
        """Return at most `k` hits, best first, drawn only from units allowed by `constraints`."""
        ...


class RankerUnavailable(RuntimeError):
    """Raised when a ranker's backend cannot load (missing model or optional dependency).

    The runner reports the ranker as skipped with this message instead of failing.
    """


class CorpusRanker:
    """Base for built-in rankers that index a corpus held in memory.

    Subclasses implement `_build(corpus)` and `_scores(query) -> np.ndarray` (one
    score per corpus row); this class applies winnow masks and top-k selection
    with a deterministic tie-break (score desc, then corpus order).
    """

    name = "ranker"
    corpus: Corpus
    #: Optional score threshold (config `min_score`): below it nothing is returned,
    #: which is how a ranker can answer "no result" to an unanswerable question.
    min_score: float | None = None
    #: Lexical rankers give 0 to units sharing no term with the query; never return those.
    drop_nonpositive: bool = False

    def prepare(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self._build(corpus)

    def _build(self, corpus: Corpus) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def _scores(self, query: str) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def stats(self) -> dict[str, Any]:
        return {}

    def search(self, query: str, k: int, constraints: Mapping[str, Any] | None = None) -> list[Hit]:
        scores = np.asarray(self._scores(query), dtype=np.float64)
        return top_k(
            self.corpus,
            scores,
            k,
            self.corpus.allowed_mask(constraints),
            min_score=self.min_score,
            drop_nonpositive=self.drop_nonpositive,
        )


def top_k(
    corpus: Corpus,
    scores: np.ndarray,
    k: int,
    mask: np.ndarray | None = None,
    min_score: float | None = None,
    drop_nonpositive: bool = False,
) -> list[Hit]:
    """Top-k rows of `scores` as hits; rows outside `mask`, below `min_score` or non-finite never appear.

    Ties are broken by corpus order so a ranking is reproducible run to run.
    """
    scores = scores.astype(np.float64, copy=True)
    if mask is not None:
        scores[~mask] = -np.inf
    valid = np.isfinite(scores)
    if drop_nonpositive:
        valid &= scores > 0
    if min_score is not None:
        valid &= scores >= min_score
    idx = np.flatnonzero(valid)
    if idx.size == 0 or k <= 0:
        return []
    # lexsort: last key is primary -> sort by -score, then by row index.
    order = idx[np.lexsort((idx, -scores[idx]))][:k]
    return [Hit(corpus.ids[i], float(scores[i])) for i in order]
