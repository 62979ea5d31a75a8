"""What a tier is: a name lookup, a relational question or a paraphrase, whatever its name.

The wording checks (overlap, shared phrase, name leak) are what make a paraphrase tier
honest, and they must reach every tier whose queries are meant to be said in other words:
a fixture calling its tiers `paraphrase`, `semantic` or `nl` must not escape them. So the
kind is decided per tier, in this order:

1. the fixture's own `tier_kinds: {tier: kind}` (a documented, per-fixture setting);
2. `lookup` when the tier's cases *are* name lookups: at least LOOKUP_SHARE of its
   answerable cases have a query made only of the words of an expected unit's ID
   (`top_k`, `RRFRanker prepare`, `calculate absolute path`, lowercased `exhaustmap`).
   This is measured, so a tier named `exact` whose queries are sentences is held to the
   paraphrase checks, and a custom-named lookup tier (`names`, `symbols`) is not;
3. `multi_section` when at least LOOKUP_SHARE of its answerable cases need every one of their
   sections (`section_match: all`): RAG questions whose answer is spread over sections;
4. `relational` for the stock `multi_hop` tier (its questions name the unit they ask
   about by design; the tier is held to "needs a relation" instead). Any other
   relational tier is declared with `tier_kinds`, or it is checked as a paraphrase;
5. `paraphrase` for everything else: failing closed, the strictest checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

from evalpipe.core import Unit
from evalpipe.fixture_check.words import content_words
from evalpipe.inputs.fixture import Case, Fixture

#: A tier is a lookup tier when at least this share of its answerable cases are name lookups.
#: The shipped exact tiers measure 0.94-1.0; a paraphrase tier, even one leaking every name,
#: is near 0 (its queries carry words that are not the name).
LOOKUP_SHARE = 0.75
#: The stock tier whose questions are relational by definition (docs/fixtures.md#tiers).
RELATIONAL_STOCK_TIER = "multi_hop"

_NOT_ALNUM = re.compile(r"[^0-9a-z]+")


@lru_cache(maxsize=1 << 14)
def _id_words(unit_id: str) -> tuple[frozenset[str], str]:
    """The stemmed content words of a unit ID (path and qualified name) and its bare letters."""
    return content_words(unit_id.replace("::", " ").replace("#", " ")).stem_set, _NOT_ALNUM.sub(
        "", unit_id.lower()
    )


def is_name_lookup(query: str, units: Iterable[Unit]) -> bool:
    """True when the query says nothing but (part of) an expected unit's ID.

    Either every stemmed content word of the query is a word of the ID (`RRFRanker prepare`
    for `.../rrf.py::RRFRanker.prepare`), or the query's letters, separators removed, are a
    run of the ID's (`exhaustmap` in `.../exhaustMap.ts::exhaustMap`). A query with one word
    of its own ("format the arguments of a *call*") is not a lookup.
    """
    stems = content_words(query).stem_set
    letters = _NOT_ALNUM.sub("", query.lower())
    for unit in units:
        id_stems, id_letters = _id_words(unit.id)
        if stems and stems <= id_stems:
            return True
        if len(letters) >= 3 and letters in id_letters:
            return True
    return False


def lookup_share(cases: Sequence[Case], fixture: Fixture) -> float | None:
    """Share of the answerable cases that are name lookups (None when no case has expected units)."""
    measured = 0
    lookups = 0
    for case in cases:
        units = [u for u in (fixture.corpus.get(uid) for uid in case.expected) if u is not None]
        if not units:
            continue
        measured += 1
        lookups += is_name_lookup(case.query, units)
    return lookups / measured if measured else None


def all_sections_share(cases: Sequence[Case]) -> float | None:
    """Share of the answerable cases needing every one of their sections (None: none is answerable)."""
    answerable = [c for c in cases if c.answerability != "unanswerable"]
    if not answerable:
        return None
    return sum(getattr(c, "section_match", "any") == "all" for c in answerable) / len(answerable)


def tier_kind(tier: str, cases: Sequence[Case], fixture: Fixture, declared: Mapping[str, str]) -> str:
    """The kind of one tier, by the rule in the module docstring."""
    if tier in declared:
        return declared[tier]
    share = lookup_share(cases, fixture)
    if share is not None and share >= LOOKUP_SHARE:
        return "lookup"
    sections = all_sections_share(cases)
    if sections is not None and sections >= LOOKUP_SHARE:
        return "multi_section"
    if tier == RELATIONAL_STOCK_TIER:
        return "relational"
    return "paraphrase"


def tier_kinds(fixture: Fixture, declared: Mapping[str, str] | None = None) -> dict[str, str]:
    """{tier: kind} for every tier of the fixture; `declared` adds to the fixture's own `tier_kinds`."""
    declared = {**getattr(fixture, "tier_kinds", {}), **(declared or {})}
    return {
        t: tier_kind(t, [c for c in fixture.cases if c.tier == t], fixture, declared) for t in fixture.tiers
    }
