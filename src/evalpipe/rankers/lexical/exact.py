"""Exact symbol lookup: the baseline a code-search tool must at least match.

A developer who types `AddItem` wants the declaration spelt exactly so, not the test
helper `addItem`; who types `store.Node` wants type `Node` of package `store`, not a
method `Store.AddNode`; who types `type Cache` wants the type, not the file `cache.go`.
So matches are graded, best first:

1. **whole query, exact case** (5.0 + bonus): the query, split into name components at
   `.`, `::`, `/` and spaces, equals the trailing components of one of the unit's names,
   with the same case: its qualname (`Type.Method`), its qualified name (`pkg.Name`,
   `evalpipe.rankers.base.top_k`, `web/util.helper`) or its ID (`path/file.go::Name`);
2. **whole query, any case or separator** (4.0 + bonus): the same with names normalised
   (`merge_settings` = `mergeSettings` = "merge settings" = `Merge.settings`);
3. **an identifier in the query** ("where is `merge_settings` defined?"), exact case
   (3.0 + bonus) or any case (2.0 + bonus), so "BM25Ranker query_ids" is the method, not
   the class named by its first word. A plain word of a sentence query counts as an
   identifier (2.0 + bonus) when it is the run-together spelling of a name of several
   pieces ("who calls registerhandler" for `registerHandler`, "where is fileops used" for
   `FileOps`), unless the whole query already names a unit. A word that is also a one-word
   name ("engine", "JSON", "corpus") stays a word: in "which Engine methods ..." the type is
   the subject, not the answer;
4. **partial** (<= 1): the Jaccard overlap of name pieces, or a substring.

Within a grade the bonus orders candidates: a kind word in the query ("type", "func",
"class", ...) that matches the unit's kind (+0.5), a declaration outside test files
(+0.25; modules, sections and test code get none), a top-level symbol (+0.1). Equal
scores then go to corpus order (file path, then source order). `min_score: 2.0` keeps
full matches only. With `test_prior: last` (default) test units come after the non-test
units of their grade unless the query asks for tests (`evalpipe.rankers.priors.test_prior`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from typing import Any

import numpy as np

from evalpipe.core import Unit
from evalpipe.corpus import Corpus
from evalpipe.corpus.qualify import name_parts, unit_qualified_name
from evalpipe.rankers.base import CorpusRanker
from evalpipe.rankers.priors.test_prior import TestPrior, check_mode
from evalpipe.rankers.tokenize import TOKEN_PATTERN, identifier_pieces, resolve_stopwords

__all__ = ["ExactSymbolRanker", "normalise", "query_candidates", "split_kind_words"]

#: Base score of a case/separator-insensitive full match; partial matches score in (0, 1].
FULL_SCORE = 2.0
#: Base score of a full match spelt with the same case.
EXACT_CASE_SCORE = 3.0
KIND_BONUS = 0.5
DECLARATION_BONUS = 0.25
TOP_LEVEL_BONUS = 0.1
#: A full match of the whole query outranks a full match of one identifier inside it.
WHOLE_QUERY_BONUS = 2.0
#: A bare substring match (no shared piece) is worth at most this, scaled by coverage.
SUBSTRING_WEIGHT = 0.5
_MIN_SUBSTRING = 3
_CAMEL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")
_NAME_SPLIT = re.compile(r"::|[./\\\s]+")
#: Units that are containers or prose, not declarations.
NON_DECLARATIONS = frozenset({"module", "section", "document", "chunk"})
#: Kind words a developer puts in a query -> unit kinds they ask for.
KIND_WORDS: dict[str, frozenset[str]] = {
    "type": frozenset({"type", "class", "interface"}),
    "struct": frozenset({"type"}),
    "interface": frozenset({"interface"}),
    "func": frozenset({"function", "method"}),
    "function": frozenset({"function", "method"}),
    "def": frozenset({"function", "method"}),
    "class": frozenset({"class"}),
    "method": frozenset({"method"}),
    "const": frozenset({"const"}),
    "constant": frozenset({"const"}),
    "var": frozenset({"var"}),
    "variable": frozenset({"var"}),
}


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


def unit_full_names(unit: Unit) -> set[str]:
    """Every spelling that fully names the unit, as components joined by ".".

    Suffixes of the qualified name (`Node`, `store.Node`; `top_k`, `base.top_k`,
    `rankers.base.top_k`, ...) and of path + qualname (`store.go.Node`,
    `pkg/store/store.go::Node` as `pkg.store.store.go.Node`). A module or section
    is named only by two or more components (`rankers/base.py`, `rankers.base`), so a
    bare word finds the declaration, not the file of the same name.
    """
    path, _, symbol = unit.id.partition("::")
    symbol_parts = name_parts(str(unit.metadata.get("qualname") or symbol))
    sequences = [name_parts(unit_qualified_name(unit)), name_parts(path) + (symbol_parts if symbol else ())]
    shortest = 2 if unit.kind in NON_DECLARATIONS or not symbol_parts else 1
    out: set[str] = set()
    for parts in sequences:
        for i in range(len(parts)):
            if len(parts) - i >= shortest:
                out.add(".".join(parts[i:]))
    return out


def looks_like_identifier(token: str) -> bool:
    """True for tokens a person would only write as code: snake_case, kebab-case, camelCase,
    dotted, paths."""
    return any(s in token for s in ("_", "-", ".", "::", "/", "\\")) or bool(_CAMEL.search(token))


def split_kind_words(query: str) -> tuple[str, frozenset[str]]:
    """("type Cache" -> "Cache", {type, class, interface}); a query of one word keeps it."""
    words = query.split()
    if len(words) < 2:
        return query, frozenset()
    kinds: set[str] = set()
    rest = []
    for w in words:
        wanted = KIND_WORDS.get(w.lower().strip("`"))
        if wanted is None:
            rest.append(w)
        else:
            kinds |= wanted
    return (" ".join(rest), frozenset(kinds)) if rest else (query, frozenset())


def query_candidates(query: str) -> list[str]:
    """The whole query plus every identifier-looking token in it, in order, deduplicated."""
    out = [query.strip()]
    for match in TOKEN_PATTERN.finditer(query.replace("`", " ")):
        token = match.group(0)
        if looks_like_identifier(token) and token not in out:
            out.append(token)
    return [c for c in out if normalise(c)]


def plain_words(query: str, stopwords: frozenset[str]) -> list[str]:
    """Words of a sentence query that do not look like identifiers (3+ characters, no
    stopwords), in order: candidates for same-case identifiers such as Go's `fileops`."""
    words = TOKEN_PATTERN.findall(query.replace("`", " "))
    if len(words) < 2:
        return []
    out = []
    for w in words:
        if len(w) >= 3 and not looks_like_identifier(w) and w.lower() not in stopwords and w not in out:
            out.append(w)
    return out


def _joined(candidate: str) -> str:
    return ".".join(p for p in _NAME_SPLIT.split(candidate.strip().strip("`")) if p)


class ExactSymbolRanker(CorpusRanker):
    """Graded name matching: exact case, then any case, then partial (see the module docstring).

    Stopwords are dropped from the whole query's pieces for partial scoring only, so
    "where is the config merged" overlaps on its content words. `kind_filter: true`
    turns kind words from a boost into a filter (other kinds are not returned).
    `test_prior: last` ranks test units after the non-test units of their grade.
    """

    name = "exact"
    drop_nonpositive = True
    query_params = ("min_score", "test_prior")

    def __init__(
        self,
        stopwords: str | Iterable[str] | None = "en",
        partial: bool = True,
        kind_filter: bool = False,
        min_score: float | None = None,
        test_prior: str | bool = "last",
    ):
        self.stopwords = resolve_stopwords(
            stopwords if stopwords is None or isinstance(stopwords, str) else [str(w) for w in stopwords]
        )
        self.partial = bool(partial)
        self.kind_filter = bool(kind_filter)
        self.min_score = None if min_score is None else float(min_score)
        self.test_prior = check_mode("ExactSymbolRanker", test_prior)
        self._stats: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"ExactSymbolRanker(partial={self.partial}, min_score={self.min_score})"

    def _build(self, corpus: Corpus) -> None:
        start = time.perf_counter()
        self._by_key: dict[str, list[int]] = {}
        self._by_exact: dict[str, list[int]] = {}
        self._by_piece: dict[str, list[int]] = {}
        # keys of names made of several pieces, for run-together spellings in sentences
        self._by_joined: dict[str, list[int]] = {}
        self._prior = TestPrior(corpus)
        # per row: list of (key, piece set) for each name
        self._names: list[list[tuple[str, frozenset[str]]]] = []
        self._kinds = np.array([u.kind for u in corpus], dtype=object)
        self._bonus = np.zeros(len(corpus), dtype=np.float64)

        def add(index: dict[str, list[int]], key: str, row: int) -> None:
            rows = index.setdefault(key, [])
            if not rows or rows[-1] != row:
                rows.append(row)

        for row, unit in enumerate(corpus):
            entries = []
            full = unit_full_names(unit)
            for name in sorted(full):
                add(self._by_exact, name, row)
                add(self._by_key, normalise(name), row)
            for name in unit_names(unit):
                key = normalise(name)
                if not key:
                    continue
                add(self._by_key, key, row)
                name_pieces = identifier_pieces(name.replace(" ", "_"))
                pieces = frozenset(name_pieces)
                entries.append((key, pieces))
                if len(name_pieces) > 1:
                    add(self._by_joined, key, row)
                for p in pieces:
                    add(self._by_piece, p, row)
            self._names.append(entries)
            if unit.kind not in NON_DECLARATIONS and not self._prior.rows[row]:
                self._bonus[row] += DECLARATION_BONUS
                qualname = str(unit.metadata.get("qualname") or unit.id.partition("::")[2])
                if qualname and "." not in qualname:
                    self._bonus[row] += TOP_LEVEL_BONUS
        self._stats = {
            "index_units": len(corpus),
            "names": sum(len(e) for e in self._names),
            "distinct_keys": len(self._by_key),
            "test_units": self._prior.count,
            "build_seconds": time.perf_counter() - start,
        }

    def _scores(self, query: str) -> np.ndarray:
        if not hasattr(self, "corpus"):
            raise RuntimeError("ExactSymbolRanker.search called before prepare(corpus)")
        scores = np.zeros(len(self.corpus), dtype=np.float64)
        text, kinds = split_kind_words(query)
        candidates = query_candidates(text)
        bonus = self._bonus.copy()
        wanted = np.ones(len(self.corpus), dtype=bool)
        if kinds:
            wanted = np.isin(self._kinds, list(kinds))
            bonus[wanted] += KIND_BONUS
        for i, cand in enumerate(candidates):
            whole = WHOLE_QUERY_BONUS if i == 0 else 0.0
            for row in self._by_key.get(normalise(cand), ()):
                scores[row] = max(scores[row], FULL_SCORE + whole + bonus[row])
            for row in self._by_exact.get(_joined(cand), ()):
                scores[row] = max(scores[row], EXACT_CASE_SCORE + whole + bonus[row])
        # same-case identifiers written as words of a sentence ("where is fileops used"), unless
        # the whole query names a unit (then its words are that name's pieces, not names)
        named = candidates and scores.max() >= FULL_SCORE + WHOLE_QUERY_BONUS
        for word in [] if named else plain_words(text, self.stopwords):
            for row in self._by_joined.get(word.lower(), ()):
                scores[row] = max(scores[row], FULL_SCORE + bonus[row])
        if self.partial:
            for i, cand in enumerate(candidates):
                pieces = identifier_pieces(cand.replace(" ", "_"))
                if i == 0 and len(candidates[0].split()) > 1:  # the whole (multi-word) query
                    pieces = [p for p in pieces if p not in self.stopwords]
                self._score_partial(scores, normalise(cand), frozenset(pieces))
        if kinds and self.kind_filter:
            scores[~wanted] = 0.0
        return self._prior.demote(scores, query, self.test_prior, graded=True)

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
