"""Exact symbol lookup: the baseline a code-search tool must at least match.

A developer who types `merge_settings`, `mergeSettings` or "merge settings" wants the
symbol of that name first. Names are normalised to a key that ignores case and
separators, so every spelling meets; a unit whose name equals the query (a full
match) always ranks above one that merely shares pieces of it (a partial match).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from typing import Any

import numpy as np

from evalpipe.corpus import Corpus, Unit
from evalpipe.rankers.base import CorpusRanker
from evalpipe.tokenize import COMPOUND_PATTERN, identifier_pieces, resolve_stopwords

#: Every full match scores this; partial matches score in (0, 1], so full always ranks first.
FULL_SCORE = 2.0
#: A bare substring match (no shared piece) is worth at most this, scaled by coverage.
SUBSTRING_WEIGHT = 0.5
_MIN_SUBSTRING = 3
_CAMEL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")


def normalise(name: str) -> str:
    """Case- and separator-insensitive key.

    `merge_settings`, `mergeSettings`, `MergeSettings` and "merge settings" all give `mergesettings`.
    """
    return "".join(identifier_pieces(name.replace(" ", "_")))


def unit_names(unit: Unit) -> list[str]:
    """Names a unit answers to: metadata name and qualname, the id after `::`, the title."""
    names: list[str] = []
    candidates = [unit.metadata.get("name"), unit.metadata.get("qualname")]
    if "::" in unit.id:
        candidates.append(unit.id.split("::", 1)[1])
    candidates.append(unit.title)
    for value in candidates:
        if value and str(value).strip() and str(value) not in names:
            names.append(str(value))
    return names


def looks_like_identifier(token: str) -> bool:
    """True for tokens a person would only write as code: snake_case, camelCase, dotted, paths."""
    return any(s in token for s in ("_", ".", "::", "/", "\\")) or bool(_CAMEL.search(token))


def query_candidates(query: str) -> list[str]:
    """The whole query plus every identifier-looking token in it, in order, deduplicated."""
    out = [query.strip()]
    for match in COMPOUND_PATTERN.finditer(query.replace("`", " ")):
        token = match.group(0)
        if looks_like_identifier(token) and token not in out:
            out.append(token)
    return [c for c in out if normalise(c)]


class ExactSymbolRanker(CorpusRanker):
    """Full name/qualname matches first (all scoring FULL_SCORE, so corpus order breaks ties),
    then partial matches scored by the Jaccard overlap of name pieces.

    Stopwords are dropped from the whole query's pieces for partial scoring only, so
    "where is the config merged" overlaps on its content words.
    """

    name = "exact"
    drop_nonpositive = True

    def __init__(
        self,
        stopwords: str | Iterable[str] | None = "en",
        partial: bool = True,
        min_score: float | None = None,
    ):
        self.stopwords = resolve_stopwords(
            stopwords if stopwords is None or isinstance(stopwords, str) else [str(w) for w in stopwords]
        )
        self.partial = bool(partial)
        self.min_score = None if min_score is None else float(min_score)
        self._stats: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"ExactSymbolRanker(partial={self.partial}, min_score={self.min_score})"

    def _build(self, corpus: Corpus) -> None:
        start = time.perf_counter()
        self._by_key: dict[str, list[int]] = {}
        self._by_piece: dict[str, list[int]] = {}
        # per row: list of (key, piece set) for each name
        self._names: list[list[tuple[str, frozenset[str]]]] = []
        for row, unit in enumerate(corpus):
            entries = []
            for name in unit_names(unit):
                key = normalise(name)
                if not key:
                    continue
                pieces = frozenset(identifier_pieces(name.replace(" ", "_")))
                entries.append((key, pieces))
                rows = self._by_key.setdefault(key, [])
                if not rows or rows[-1] != row:
                    rows.append(row)
                for p in pieces:
                    prow = self._by_piece.setdefault(p, [])
                    if not prow or prow[-1] != row:
                        prow.append(row)
            self._names.append(entries)
        self._stats = {
            "index_units": len(corpus),
            "names": sum(len(e) for e in self._names),
            "distinct_keys": len(self._by_key),
            "build_seconds": time.perf_counter() - start,
        }

    def _scores(self, query: str) -> np.ndarray:
        if not hasattr(self, "corpus"):
            raise RuntimeError("ExactSymbolRanker.search called before prepare(corpus)")
        scores = np.zeros(len(self.corpus), dtype=np.float64)
        candidates = query_candidates(query)
        for cand in candidates:
            for row in self._by_key.get(normalise(cand), ()):
                scores[row] = FULL_SCORE
        if not self.partial:
            return scores
        for i, cand in enumerate(candidates):
            pieces = identifier_pieces(cand.replace(" ", "_"))
            if i == 0 and len(candidates[0].split()) > 1:  # the whole (multi-word) query
                pieces = [p for p in pieces if p not in self.stopwords]
            self._score_partial(scores, normalise(cand), frozenset(pieces))
        return scores

    def _score_partial(self, scores: np.ndarray, qkey: str, qpieces: frozenset[str]) -> None:
        rows: set[int] = set()
        for p in qpieces:
            rows.update(self._by_piece.get(p, ()))
        if len(qkey) >= _MIN_SUBSTRING:
            rows.update(r for r, entries in enumerate(self._names) if any(qkey in k for k, _ in entries))
        for row in rows:
            if scores[row] >= FULL_SCORE:
                continue
            best = scores[row]
            for key, pieces in self._names[row]:
                union = len(qpieces | pieces)
                jaccard = len(qpieces & pieces) / union if union else 0.0
                coverage = SUBSTRING_WEIGHT * len(qkey) / len(key) if qkey and qkey in key else 0.0
                best = max(best, jaccard, coverage)
            scores[row] = best

    def stats(self) -> dict[str, Any]:
        return dict(self._stats)
