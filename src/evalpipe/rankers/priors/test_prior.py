"""The test-file prior: units in test files rank after non-test units, unless the query asks for tests.

A code base's tests name the same symbols as the code they test, often more times (a test
of `Parse` calls it ten times), so a lexical ranker puts them first; but a developer who
asks "where is the config parsed" wants the parser, not its test. With `test_prior: last`
(the default of every lexical ranker) a test unit is ranked after every non-test unit that
matches as well or less:

* score rankers (`bm25`, `bm25f`, `winnow`): after every non-test unit with a positive score;
* graded rankers (`exact`, `grep`): after every non-test unit of the same grade (a test
  named exactly still beats a partial match elsewhere).

It is done on the score vector, so scores keep agreeing with the order (fusion and
`min_score` see the demoted score): within a band, the test units' scores are scaled into
[band floor, lowest non-test score) keeping their own order. `test_prior: off` keeps the
ranker's scores as they are.

**Which units are tests.** The project's one rule, `evalpipe.core.unit.is_test_unit`: a
unit's `is_test` field when the corpus records it (the corpus builder does), else its path by
`evalpipe.core.testpaths` (Go, Python, TypeScript, JavaScript, and the usual conventions of
other languages).

**When a query asks for tests** the prior is lifted for it: the query has a test word
(TEST_WORDS) as a word or as a piece of an identifier (`TestParse`, `test_merge`,
`parse_test.go`, `BenchmarkSort`), or it names, as a whole or by an identifier in it, a
symbol that only test units have (a test helper asked for by name).
"""

from __future__ import annotations

import numpy as np

from evalpipe.core import Unit
from evalpipe.core.unit import is_test_unit
from evalpipe.corpus import Corpus
from evalpipe.rankers.tokenize import TOKEN_PATTERN, identifier_key, identifier_pieces

#: `test_prior` values: `last` ranks tests after non-tests; `off` disables the prior.
TEST_PRIOR_MODES = ("last", "off")

#: Words (or identifier pieces) that make a query ask for tests.
TEST_WORDS = frozenset(
    {
        "test",
        "tests",
        "testing",
        "tested",
        "unittest",
        "pytest",
        "testcase",
        "spec",
        "specs",
        "benchmark",
        "benchmarks",
        "bench",
        "example",
        "examples",
        "fixture",
        "fixtures",
        "mock",
        "mocks",
        "fuzz",
        "conftest",
        "testdata",
        "e2e",
    }
)


def check_mode(ranker: str, mode: object) -> str:
    """The validated `test_prior` value (`false`/`null` read as `off`, `true` as `last`)."""
    if mode is None or mode is False:
        return "off"
    if mode is True:
        return "last"
    if not isinstance(mode, str) or mode not in TEST_PRIOR_MODES:
        raise ValueError(f"{ranker}: test_prior must be one of {', '.join(TEST_PRIOR_MODES)}, got {mode!r}")
    return mode


def _name_keys(unit: Unit) -> set[str]:
    names = [unit.metadata.get("name"), unit.metadata.get("qualname")]
    if "::" in unit.id:
        names.append(unit.id.split("::", 1)[1])
    keys: set[str] = set()
    for name in names:
        if name:
            text = str(name)
            keys.add(identifier_key(text))
            keys.add(identifier_key(text.rsplit(".", 1)[-1]))
    keys.discard("")
    return keys


def has_test_word(query: str) -> bool:
    """True when a word of the query, or a piece of an identifier in it, is a test word."""
    return any(p in TEST_WORDS for p in identifier_pieces(query.replace(" ", "_")))


class TestPrior:
    """The test rows of one corpus and the names only tests have, built once per index."""

    __test__ = False  # not a pytest test class

    def __init__(self, corpus: Corpus):
        self.rows = np.array([is_test_unit(u) for u in corpus], dtype=bool)
        self.any = bool(self.rows.any())
        test_keys: set[str] = set()
        other_keys: set[str] = set()
        if self.any:
            for unit, test in zip(corpus, self.rows.tolist(), strict=True):
                (test_keys if test else other_keys).update(_name_keys(unit))
        #: keys of symbol names that only test units have (a query naming one asks for tests)
        self.test_only_keys = frozenset(k for k in test_keys - other_keys if len(k) >= 3)
        self._asks: dict[str, bool] = {}

    @property
    def count(self) -> int:
        return int(self.rows.sum())

    def asks_for_tests(self, query: str) -> bool:
        hit = self._asks.get(query)
        if hit is None:
            words = [identifier_pieces(w) for w in TOKEN_PATTERN.findall(query)]
            hit = any(p in TEST_WORDS for pieces in words for p in pieces)
            if not hit and self.test_only_keys:
                keys = {"".join(pieces) for pieces in words}
                keys.add("".join(p for pieces in words for p in pieces))  # the whole query
                hit = not keys.isdisjoint(self.test_only_keys)
            if len(self._asks) >= 4096:
                self._asks.clear()
            self._asks[query] = hit
        return hit

    def applies(self, query: str, mode: str) -> bool:
        """Whether the prior moves anything for this query (mode on, tests present, not asked for)."""
        return mode != "off" and self.any and not self.asks_for_tests(query)

    def demote(
        self,
        scores: np.ndarray,
        query: str,
        mode: str,
        graded: bool = False,
        floors: np.ndarray | None = None,
    ) -> np.ndarray:
        """`scores` with test rows moved after the non-test rows of their band (see the module
        docstring); unchanged when the mode is off, the corpus has no test, or the query asks
        for tests. `graded`: bands are the integer grades >= 2 and (0, 2); `floors`: each
        row's band floor, given by the caller; else one band."""
        if not self.applies(query, mode):
            return scores
        return demote_rows(scores, self.rows, graded, floors)


def demote_rows(
    scores: np.ndarray, test: np.ndarray, graded: bool = False, floors: np.ndarray | None = None
) -> np.ndarray:
    """Scale the positive scores of `test` rows into [band floor, lowest non-test score of the
    band), keeping their order; a band with no non-test row is left alone."""
    positive = scores > 0  # NaN compares False; +inf is no score a ranker gives
    moving = positive & test
    if not moving.any():
        return scores
    out = np.array(scores, dtype=np.float64, copy=True)
    if floors is None and not graded:  # one band from 0: the common case, kept to a few passes
        others = positive & ~test
        if others.any():
            values = scores[moving]
            moved = float(scores[others].min()) * 0.5 * (values / float(values.max()))
            out[moving] = np.maximum(moved, np.nextafter(0.0, 1.0))
        return out
    if floors is not None:
        bands = np.asarray(floors, dtype=np.float64)
    elif graded:
        bands = np.where(scores >= 2.0, np.floor(np.where(positive, scores, 0.0)), 0.0)
    else:
        bands = np.zeros(len(scores), dtype=np.float64)
    for floor in np.unique(bands[moving]).tolist():
        in_band = positive & (bands == floor)
        others = in_band & ~test
        if not others.any():
            continue
        rows = in_band & test
        lowest = float(scores[others].min())
        values = scores[rows]
        top = float(values.max())
        if lowest <= floor:  # no room inside the band: just below it, in corpus order
            out[rows] = np.nextafter(floor, -np.inf) if floor > 0 else np.nextafter(0.0, 1.0)
            continue
        span = top - floor
        frac = (values - floor) / span if span > 0 else np.zeros_like(values)
        # half the room below the lowest non-test score, so rounding can never reach it
        moved = floor + (lowest - floor) * 0.5 * frac
        out[rows] = np.maximum(moved, np.nextafter(floor, np.inf)) if floor == 0 else moved
    return out
