"""A grep baseline: literal (or regex) search over unit texts, ranked by match quality.

What a developer does without any index: `rg -w AddItem`, then `rg -i additem`, then
words of the question. The seed harness evaluates such a ripgrep-style baseline, and
it is the floor every smarter ranker must clear. Grades, best first:

1. the whole query is the unit's name (the declaration itself): 4.0;
2. the whole query occurs as a whole word, same case: 3.0;
3. the whole query occurs in any case (substring): 2.0;
4. otherwise the share of the query's words (3+ characters, stopwords dropped) found in
   any case: (0, 1].

Within grades 2-3: +0.3 when the match is in the name or signature line, plus up to 0.2
for the number of occurrences (capped at 5). Ties go to corpus order. With
`regex: true` the query is a Python regular expression (grade 3 for a case-sensitive
match, 2 for a match ignoring case, no word-share grade); a query that does not compile
is searched literally. With `test_prior: last` (default) test units come after the non-test
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
from evalpipe.rankers.base import CorpusRanker
from evalpipe.rankers.priors.test_prior import TestPrior, check_mode
from evalpipe.rankers.tokenize import resolve_stopwords

NAME_SCORE = 4.0
WORD_SCORE = 3.0
SUBSTRING_SCORE = 2.0
HEAD_BONUS = 0.3
COUNT_BONUS = 0.2
COUNT_CAP = 5
_WORD = re.compile(r"\w{3,}")


def unit_search_text(unit: Unit) -> str:
    """What grep sees for a unit: its ID line, its signature, then its text."""
    sig = str(unit.metadata.get("signature") or "")
    return "\n".join(t for t in (unit.id, sig, unit.text) if t)


def unit_head(unit: Unit) -> str:
    """Name, qualname and signature: a match here is a match on the declaration."""
    meta = unit.metadata
    return "\n".join(str(v) for v in (meta.get("name"), meta.get("qualname"), meta.get("signature")) if v)


class GrepRanker(CorpusRanker):
    """Literal / regex search over unit texts (see the module docstring for the grades)."""

    name = "grep"
    drop_nonpositive = True
    query_params = ("min_score", "test_prior")

    def __init__(
        self,
        regex: bool = False,
        words: bool = True,
        stopwords: str | Iterable[str] | None = "en",
        min_score: float | None = None,
        test_prior: str | bool = "last",
    ):
        self.regex = bool(regex)
        self.words = bool(words)
        self.stopwords = resolve_stopwords(
            stopwords if stopwords is None or isinstance(stopwords, str) else [str(w) for w in stopwords]
        )
        self.min_score = None if min_score is None else float(min_score)
        self.test_prior = check_mode("GrepRanker", test_prior)
        self._stats: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"GrepRanker(regex={self.regex}, words={self.words})"

    def _build(self, corpus: Corpus) -> None:
        start = time.perf_counter()
        self._texts = [unit_search_text(u) for u in corpus]
        self._lower = [t.lower() for t in self._texts]
        self._heads = [unit_head(u) for u in corpus]
        self._names = [str(u.metadata.get("name") or "") for u in corpus]
        self._prior = TestPrior(corpus)
        self._stats = {
            "index_units": len(corpus),
            "index_chars": sum(len(t) for t in self._texts),
            "test_units": self._prior.count,
            "build_seconds": time.perf_counter() - start,
        }

    def _patterns(self, query: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
        """(case-sensitive grade-3 pattern, case-insensitive grade-2 pattern)."""
        if self.regex:
            try:
                return re.compile(query), re.compile(query, re.IGNORECASE)
            except re.error:
                pass  # not a valid regex: search it literally
        literal = re.escape(query)
        return re.compile(rf"(?<!\w){literal}(?!\w)"), re.compile(literal, re.IGNORECASE)

    def _scores(self, query: str) -> np.ndarray:
        if not hasattr(self, "corpus"):
            raise RuntimeError("GrepRanker.search called before prepare(corpus)")
        scores = np.zeros(len(self.corpus), dtype=np.float64)
        query = query.strip()
        if not query:
            return scores
        exact, loose = self._patterns(query)
        lowered = query.lower()
        words = (
            []
            if self.regex
            else [w for w in dict.fromkeys(_WORD.findall(lowered)) if w not in self.stopwords]
        )
        for row, text in enumerate(self._texts):
            if not self.regex and lowered not in self._lower[row]:
                found = sum(w in self._lower[row] for w in words) if self.words and words else 0
                scores[row] = found / len(words) if found else 0.0
                continue
            if self._names[row] == query:
                scores[row] = NAME_SCORE
                continue
            hits = exact.findall(text)
            grade = WORD_SCORE if hits else SUBSTRING_SCORE
            if not hits:
                hits = loose.findall(text)
            if not hits:
                found = sum(w in self._lower[row] for w in words) if self.words and words else 0
                scores[row] = found / len(words) if found else 0.0
                continue
            head = HEAD_BONUS if (exact if grade == WORD_SCORE else loose).search(self._heads[row]) else 0.0
            scores[row] = grade + head + COUNT_BONUS * min(len(hits), COUNT_CAP) / COUNT_CAP
        return self._prior.demote(scores, query, self.test_prior, graded=True)

    def stats(self) -> dict[str, Any]:
        return dict(self._stats)
