"""The ranker protocol: the one small interface every retrieval strategy implements.

A ranker needs only `search(query, k, constraints) -> ranked hits`. Built-in rankers
also implement `prepare(corpus)` (build an index) and `stats()` (index build cost),
which the runner calls when present, so a plug-in wrapping a production service
can implement `search` alone. A ranker that can answer many queries in one call
cheaper than one by one (bm25, semantic) may also implement
`search_batch(queries, k, constraints) -> one hit list per query`, with the same
results as `search`; the runner uses it when it is not timing every query.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from evalpipe.core.hit import Hit
from evalpipe.corpus import Corpus


@runtime_checkable
class Ranker(Protocol):
    def search(self, query: str, k: int, constraints: Mapping[str, Any] | None = None) -> Sequence[Hit]:
        """Return at most `k` hits, best first, drawn only from units allowed by `constraints`."""
        ...


@runtime_checkable
class BatchRanker(Ranker, Protocol):
    def search_batch(
        self, queries: Sequence[str], k: int, constraints: Sequence[Mapping[str, Any] | None] | None = None
    ) -> Sequence[Sequence[Hit]]:
        """Optional: `[search(q, k, c) for q, c in zip(queries, constraints)]` in one call, same results."""
        ...


class RankerUnavailable(RuntimeError):
    """Raised when a ranker's backend cannot load (missing model or optional dependency).

    The runner reports the ranker as skipped with this message instead of failing.
    """


#: Built index state kept per process, so sweep points that differ only in
#: query-time parameters (min_score, RRF k and weights, ...) reuse indexes and
#: loaded models. Small LRU: indexes of large corpora are big.
_BUILT: OrderedDict[str, dict[str, Any]] = OrderedDict()
BUILT_CACHE_SIZE = 4


def _key_part(value: Any) -> Any:
    if isinstance(value, CorpusRanker):
        return value.index_key()
    if isinstance(value, Mapping):
        return {str(k): _key_part(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):  # list, tuple, ListConfig
        return [_key_part(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return f"{type(value).__qualname__}@{id(value)}"  # unknown objects never share an index


#: Other per-process memos of index inputs (bm25's tokenized corpora), cleared with the indexes.
BUILD_MEMOS: list[Any] = []


def clear_built_cache() -> None:
    """Forget every memoised index (tests use this to measure builds in isolation)."""
    _BUILT.clear()
    for memo in BUILD_MEMOS:
        memo.clear()


def _check_kinds(ranker: str, signature: Any, args: Mapping[str, Any]) -> None:
    """A config value of the wrong kind (`ranker.k1=abc`) fails here with the parameter's name,
    not later inside a library with a message about comparing str and int."""
    for name, value in args.items():
        default = signature.parameters[name].default
        if isinstance(default, bool) and not isinstance(value, bool):
            raise ValueError(f"{ranker}: {name} must be true or false, got {value!r}")
        numeric = isinstance(default, int | float) and not isinstance(default, bool)
        if numeric and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError(f"{ranker}: {name} must be a number, got {value!r}")
        wanted = annotation_kinds(signature.parameters[name].annotation)
        if wanted and not any(_is_kind(value, kind) for kind in wanted):
            described = " or ".join(dict.fromkeys(_KIND_WORDS[k] for k in wanted))
            raise ValueError(f"{ranker}: {name} must be {described}, got {value!r}")


#: Annotation names the kind check understands, and how a message describes them.
_KIND_WORDS = {
    "bool": "true or false",
    "int": "a number",
    "float": "a number",
    "str": "text",
    "None": "null",
    "Mapping": "a mapping like {name: value}",
    "dict": "a mapping like {name: value}",
    "Iterable": "a list",
    "Sequence": "a list",
    "list": "a list",
    "tuple": "a list",
}


def annotation_kinds(annotation: Any) -> list[str]:
    """The kinds an annotation like `float | None` or `Mapping[str, float] | None` allows;
    [] when any part is something else (a class, Literal, Any): then nothing is checked."""

    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    while "[" in text:
        shorter = re.sub(r"\[[^\[\]]*\]", "", text)
        if shorter == text:
            return []
        text = shorter
    parts = [p.strip().rsplit(".", 1)[-1] for p in text.split("|")]
    return parts if parts and all(p in _KIND_WORDS for p in parts) else []


def _is_kind(value: Any, kind: str) -> bool:
    if kind == "None":
        return value is None
    if kind == "bool":
        return isinstance(value, bool)
    if kind in ("int", "float"):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind in ("Mapping", "dict"):
        return isinstance(value, Mapping)
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)  # ListConfig too


class CorpusRanker:
    """Base for built-in rankers that index a corpus held in memory.

    Subclasses implement `_build(corpus)` and `_scores(query) -> np.ndarray` (one
    score per corpus row); this class applies winnow masks and top-k selection
    with a deterministic tie-break (score desc, then corpus order). The state
    `_build` creates is memoised per (class, constructor arguments except
    `query_params`, corpus hash) for the life of the process.
    """

    #: Constructor arguments that do not change the index (excluded from its key).
    query_params: tuple[str, ...] = ("min_score",)
    _init_args: dict[str, Any]
    index_reused: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            return

        @functools.wraps(init)
        def recording_init(self, *args: Any, **kw: Any) -> None:
            if not hasattr(self, "_init_args"):
                signature = inspect.signature(init)
                bound = signature.bind(self, *args, **kw)
                bound.apply_defaults()
                self._init_args = {k: v for k, v in list(bound.arguments.items())[1:]}
                _check_kinds(cls.__name__, signature, self._init_args)
            init(self, *args, **kw)

        cls.__init__ = recording_init  # type: ignore[method-assign]

    def index_key(self) -> str:
        args = {k: v for k, v in getattr(self, "_init_args", {}).items() if k not in self.query_params}
        return json.dumps([type(self).__module__, type(self).__qualname__, _key_part(args)], sort_keys=True)

    name = "ranker"
    corpus: Corpus
    #: Optional score threshold (config `min_score`): below it nothing is returned,
    #: which is how a ranker can answer "no result" to an unanswerable question.
    min_score: float | None = None
    #: Lexical rankers give 0 to units sharing no term with the query; never return those.
    drop_nonpositive: bool = False

    def prepare(self, corpus: Corpus) -> None:
        key = self.index_key() + corpus.sha256
        built = _BUILT.get(key)
        self.corpus = corpus
        if built is not None:
            _BUILT.move_to_end(key)
            self.__dict__.update(built)
            self.index_reused = True
            # Nested rankers (a graph ranker's base) are this instance's own objects:
            # prepare them too (itself a memo hit), since `_build` did that the first time.
            for value in self._init_args.values():
                nested = value.values() if isinstance(value, Mapping) else [value]
                for ranker in nested:
                    if isinstance(ranker, CorpusRanker):
                        ranker.prepare(corpus)
            return
        self.index_reused = False
        before = dict(self.__dict__)
        self._build(corpus)
        _BUILT[key] = {k: v for k, v in self.__dict__.items() if k not in before or before[k] is not v}
        _BUILT[key].pop("index_reused", None)
        while len(_BUILT) > BUILT_CACHE_SIZE:
            _BUILT.popitem(last=False)

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


class BatchScoring:
    """Mixin for a `CorpusRanker` that scores many queries in one call.

    The subclass implements `_scores_batch(queries) -> float[len(queries), len(corpus)]`,
    each row exactly what `_scores(query)` would give; `search_batch` then applies the
    same masks and top-k as `search`, so a batched run returns the same hits as a
    per-query run. The runner calls `search_batch` on chunks of cases when it is not
    timing every query (see `evalpipe.evaluation.batching`).
    """

    def search_batch(
        self,
        queries: Sequence[str],
        k: int,
        constraints: Sequence[Mapping[str, Any] | None] | None = None,
    ) -> list[list[Hit]]:
        ranker: Any = self
        allowed = [None] * len(queries) if constraints is None else list(constraints)
        if len(allowed) != len(queries):
            raise ValueError(f"search_batch: {len(queries)} queries but {len(allowed)} constraints")
        matrix = np.asarray(ranker._scores_batch(list(queries)), dtype=np.float64)
        return [
            top_k(
                ranker.corpus,
                row,
                k,
                ranker.corpus.allowed_mask(c),
                min_score=ranker.min_score,
                drop_nonpositive=ranker.drop_nonpositive,
            )
            for row, c in zip(matrix, allowed, strict=True)
        ]

    def _scores_batch(self, queries: list[str]) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError


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
    kept = scores[idx]
    if idx.size > k:
        # Select before sorting: only rows scoring at least the k-th best score can make
        # the top k. Keeping every row tied with it leaves the tie-break below unchanged.
        kth = kept[np.argpartition(-kept, k - 1)[k - 1]]
        near = kept >= kth
        idx, kept = idx[near], kept[near]
    # lexsort: last key is primary -> sort by -score, then by row index.
    order = idx[np.lexsort((idx, -kept))][:k]
    ids = corpus.ids
    return [Hit(ids[i], s) for i, s in zip(order.tolist(), scores[order].tolist(), strict=True)]
