"""Ambiguity candidates: unlisted units a reviewer should look at before trusting a miss.

A case scores a miss when the ranker returns a unit that answers the question but is
not in `expected`. The checker cannot judge answers; it lists units with a reason to
be one, for a person to accept (add to `expected`) or reject (add with grade 0,
"judged non-relevant"):

- `same_name`: another unit with the expected unit's normalised name (`Metrics` section
  chunks, a `stats` method on every ranker, `load_fixture` vs `loadFixture`);
- `near_duplicate`: text whose stemmed content words overlap an expected unit's
  (Jaccard >= NEAR_DUPLICATE_JACCARD);
- `expected_elsewhere`: the fixture lists it as an answer to another case of the same tier
  (an `exact` case naming a symbol says nothing about a concept question);
- `bm25_above` (and `semantic_above` with --semantic): the ranker puts it above every
  expected unit, within the top RANKED_DEPTH (two rankers agreeing are two reasons).

A candidate is *strong* (and flags the case) when a ranker puts it first, above every
expected unit, one other reason backs it, and the query does not name it (`named_in_query`:
in "what calls top_k", `top_k` is the subject of the question, not an answer). A single
weak signal is normal (BM25 disagrees with the gold on many honest concept cases); two
together are worth a look.
Units the case already judges (any grade, including 0) are never candidates.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from evalpipe.core import Unit
from evalpipe.fixture_check.leakage import known_names, query_identifiers, spellings, unit_name
from evalpipe.fixture_check.words import content_words
from evalpipe.inputs.fixture import Case, Fixture
from evalpipe.rankers.base import Ranker
from evalpipe.rankers.tokenize import identifier_pieces

NEAR_DUPLICATE_JACCARD = 0.8
#: Units with fewer distinct stemmed words are too short to call near-duplicates.
NEAR_DUPLICATE_MIN_WORDS = 8
#: Ranked candidates are looked for this deep (and only above the best expected unit).
RANKED_DEPTH = 3
#: At most this many same-name candidates per case (a `search` method exists on every ranker).
MAX_SAME_NAME = 5


@dataclass(frozen=True)
class Candidate:
    """An unlisted unit that may answer the case, with every reason found for it."""

    unit_id: str
    reasons: tuple[str, ...]
    rank: int | None = None  # best rank given by a ranker, when one put it above the expected units

    @property
    def strong(self) -> bool:
        if "named_in_query" in self.reasons:
            return False
        return self.rank == 1 and len(self.reasons) >= 2


def normalised_name(unit: Unit) -> str:
    """Case- and spelling-insensitive name: `loadFixture`, `load_fixture` -> `load_fixture`."""
    return "_".join(identifier_pieces(unit_name(unit)))


class AmbiguityFinder:
    """Indexes the corpus once (names, word sets, rankers) and lists candidates per case."""

    def __init__(
        self,
        fixture: Fixture,
        rankers: Mapping[str, Ranker] | None = None,
        config: Mapping[str, object] | None = None,
    ):
        """`config`: how the rankers were built ({name: config}), kept for the report."""
        self.fixture = fixture
        self.config = dict(config or {})
        self.corpus = fixture.corpus
        self.rankers = dict(rankers or {})
        self.by_name: dict[str, list[str]] = defaultdict(list)
        for unit in self.corpus:
            key = normalised_name(unit)
            if key:
                self.by_name[key].append(unit.id)
        # unit id -> (case id, tier) of every case that lists it as relevant
        self.expected_in: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for case in fixture.cases:
            for uid in case.expected:
                self.expected_in[uid].append((case.id, case.tier))
        self.names = known_names(self.corpus)
        self._stems: list[frozenset[str]] | None = None

    def _word_sets(self) -> list[frozenset[str]]:
        if self._stems is None:
            self._stems = [content_words(f"{u.title}\n{u.text}").stem_set for u in self.corpus]
        return self._stems

    def near_duplicates(self, uid: str) -> list[str]:
        sets = self._word_sets()
        mine = sets[self.corpus.index_of[uid]]
        if len(mine) < NEAR_DUPLICATE_MIN_WORDS:
            return []
        out = []
        # Jaccard >= J needs the smaller set to be at least J times the larger: skip the rest cheaply.
        low, high = len(mine) * NEAR_DUPLICATE_JACCARD, len(mine) / NEAR_DUPLICATE_JACCARD
        for other, words in zip(self.corpus.ids, sets, strict=True):
            n = len(words)
            if n < NEAR_DUPLICATE_MIN_WORDS or not low <= n <= high or other == uid:
                continue
            if len(mine & words) / len(mine | words) >= NEAR_DUPLICATE_JACCARD:
                out.append(other)
        return out

    def ranked_above(self, case: Case) -> dict[str, dict[str, int]]:
        """{unit id: {ranker: rank}} for unjudged units a ranker puts above every expected unit."""
        found: dict[str, dict[str, int]] = defaultdict(dict)
        expected = set(case.expected)
        for name, ranker in self.rankers.items():
            hits = ranker.search(case.query, RANKED_DEPTH, case.winnow_constraints or None)
            for rank, hit in enumerate(hits, start=1):
                if hit.id in expected:
                    break
                if hit.id not in case.qrels:
                    found[hit.id][name] = rank
        return found

    def candidates(self, case: Case) -> tuple[Candidate, ...]:
        reasons: dict[str, list[str]] = defaultdict(list)
        for uid in case.expected:
            unit = self.corpus.get(uid)
            if unit is None:
                continue
            same = [u for u in self.by_name.get(normalised_name(unit), []) if u not in case.qrels]
            for other in same[:MAX_SAME_NAME]:
                reasons[other].append("same_name")
            for other in self.near_duplicates(uid):
                if other not in case.qrels:
                    reasons[other].append("near_duplicate")
        ranked = self.ranked_above(case)
        for uid, by_ranker in ranked.items():
            reasons[uid].extend(f"{name}_above" for name in by_ranker)
        named = {
            "_".join(identifier_pieces(s))
            for ident in query_identifiers(case.query, self.names)
            for s in spellings(ident)
        }
        for uid in list(reasons):
            unit = self.corpus.get(uid)
            if unit is not None and normalised_name(unit) in named:
                reasons[uid].append("named_in_query")
            if any(c != case.id and t == case.tier for c, t in self.expected_in.get(uid, ())):
                reasons[uid].append("expected_elsewhere")
        out = [
            Candidate(uid, tuple(dict.fromkeys(r)), min(ranked[uid].values()) if uid in ranked else None)
            for uid, r in reasons.items()
        ]
        out.sort(key=lambda c: (not c.strong, c.rank or RANKED_DEPTH + 1, -len(c.reasons), c.unit_id))
        return tuple(out)
