"""Measure every case of a fixture and summarise per tier: how hard, and how honest, it is.

One pass over the cases computes, per case, how much wording the query copies from
its expected units (content-word overlap, longest shared phrase), name leakage,
multi_hop name matching and expected-set size; `case_flags` then applies the tier's
thresholds. Ambiguity candidates need a ranker index, so they are optional: the
per-run MLflow summary leaves them out to stay cheap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import fmean

from evalpipe.fixture_check.ambiguity import AmbiguityFinder, Candidate
from evalpipe.fixture_check.leakage import Leak, known_names, name_leak, name_match, query_identifiers
from evalpipe.fixture_check.thresholds import ThresholdTable, TierThresholds, thresholds_for
from evalpipe.fixture_check.tier_kind import all_sections_share, tier_kinds
from evalpipe.fixture_check.words import Words, content_words, copied_share, longest_shared_run
from evalpipe.inputs.fixture import Case, Fixture

LEAK_ORDER = {"none": 0, "partial": 1, "full": 2}


@dataclass(frozen=True)
class UnitFigures:
    """The query measured against one expected unit's title + text."""

    unit_id: str
    overlap: float
    overlap_stemmed: float
    phrase: tuple[str, ...]  # the query's content words of the longest shared phrase
    phrase_words: int  # its length in written words (`trec_eval` is one)
    leak: Leak


@dataclass(frozen=True)
class CaseCheck:
    """Per-case figures. Case-level overlap/phrase/leak are the maxima over expected units,
    since any-hit recall needs only the easiest one."""

    case_id: str
    tier: str
    query: str
    line: int
    n_expected: int
    query_words: tuple[str, ...]
    units: tuple[UnitFigures, ...]
    identifiers: tuple[str, ...] = ()
    name_matched: str | None = None
    candidates: tuple[Candidate, ...] = ()
    flags: tuple[str, ...] = ()

    @property
    def overlap(self) -> float:
        return max((u.overlap for u in self.units), default=0.0)

    @property
    def overlap_stemmed(self) -> float:
        return max((u.overlap_stemmed for u in self.units), default=0.0)

    @property
    def phrase(self) -> tuple[str, ...]:
        best = max(self.units, key=lambda u: (u.phrase_words, len(u.phrase)), default=None)
        return best.phrase if best else ()

    @property
    def phrase_words(self) -> int:
        return max((u.phrase_words for u in self.units), default=0)

    @property
    def leak(self) -> Leak | None:
        leaks = [u.leak for u in self.units]
        return max(leaks, key=lambda x: LEAK_ORDER[x.level]) if leaks else None

    @property
    def leak_level(self) -> str:
        leak = self.leak
        return leak.level if leak else "none"

    @property
    def needs_relation(self) -> bool:
        """Multi_hop: no identifier in the query occurs in every expected unit's text."""
        return self.name_matched is None


@dataclass(frozen=True)
class TierSummary:
    tier: str
    cases: int
    mean_overlap: float
    mean_overlap_stemmed: float
    phrase_share: float  # share with a shared phrase of >= 2 content words
    full_leak_share: float
    partial_leak_share: float
    needs_relation_share: float | None  # relational tiers only
    mean_expected: float
    max_expected: int
    flagged: int
    candidates: int  # cases with at least one ambiguity candidate (when ambiguity was run)
    tier_flags: tuple[str, ...] = ()
    kind: str = "paraphrase"  # lookup / paraphrase / relational / multi_section (tier_kind.py)

    @property
    def flagged_share(self) -> float:
        return self.flagged / self.cases if self.cases else 0.0


@dataclass(frozen=True)
class FixtureCheck:
    name: str
    source: str
    sha256: str
    version: str
    cases: tuple[CaseCheck, ...]
    tiers: tuple[TierSummary, ...]
    #: The thresholds applied, per tier (its kind's defaults plus any override).
    thresholds: Mapping[str, TierThresholds] = field(default_factory=dict)
    ambiguity: tuple[str, ...] = ()  # the rankers used for ambiguity ("" = not run)
    #: {tier: kind}: what each tier was checked as (tier_kind.py).
    kinds: Mapping[str, str] = field(default_factory=dict)
    #: The ambiguity ranker's pinned configuration, when one ran (ranker.py).
    ambiguity_config: Mapping[str, object] = field(default_factory=dict)

    @property
    def flagged_cases(self) -> list[CaseCheck]:
        return [c for c in self.cases if c.flags]

    @property
    def tier_flags(self) -> list[str]:
        return [f"{t.tier}: {flag}" for t in self.tiers for flag in t.tier_flags]


def measure_case(
    case: Case,
    fixture: Fixture,
    unit_words: dict[str, Words],
    names: frozenset[str],
    relational: bool | None = None,
) -> CaseCheck:
    """Figures for one case (no flags, no candidates). `relational`: also look for a name
    match (default: the case's tier is the stock `multi_hop`)."""
    query = content_words(case.query)
    units = []
    expected_units = [u for u in (fixture.corpus.get(uid) for uid in case.expected) if u is not None]
    for unit in expected_units:
        words = unit_words.get(unit.id)
        if words is None:
            words = unit_words[unit.id] = content_words(f"{unit.title}\n{unit.text}")
        start, length = longest_shared_run(query, words)
        units.append(
            UnitFigures(
                unit_id=unit.id,
                overlap=copied_share(query, words, stemmed=False),
                overlap_stemmed=copied_share(query, words, stemmed=True),
                phrase=query.surface[start : start + length],
                phrase_words=query.span_size(start, length),
                leak=name_leak(query, unit),
            )
        )
    identifiers: tuple[str, ...] = ()
    matched = None
    if relational is None:
        relational = case.tier == "multi_hop"
    if relational:
        identifiers = query_identifiers(case.query, names)
        matched = name_match(identifiers, expected_units).matched
    return CaseCheck(
        case_id=case.id,
        tier=case.tier,
        query=case.query,
        line=case.line,
        n_expected=len(case.expected),
        query_words=query.surface,
        units=tuple(units),
        identifiers=identifiers,
        name_matched=matched,
    )


def case_flags(check: CaseCheck, limits: TierThresholds) -> tuple[str, ...]:
    """The tier's thresholds applied to one case; each flag says which figure crossed which limit."""
    flags = []
    # At or above: a query copying exactly half of its content words is flagged (2 of 4 is 0.5).
    if limits.max_overlap_stemmed is not None and check.overlap_stemmed >= limits.max_overlap_stemmed:
        flags.append(f"overlap {check.overlap_stemmed:.2f} >= {limits.max_overlap_stemmed:g}")
    if limits.max_phrase is not None and check.phrase_words >= limits.max_phrase:
        flags.append(f"phrase '{' '.join(check.phrase)}'")
    full = [u.leak for u in check.units if u.leak.level == "full"]
    full = [leak for leak in full if len(leak.words) >= limits.leak_min_name_words]
    if limits.flag_full_name_leak and full:
        flags.append(f"name leak '{full[0].name}'")
    if limits.max_expected is not None and check.n_expected > limits.max_expected:
        flags.append(f"{check.n_expected} expected > {limits.max_expected}")
    if limits.flag_strong_candidate:
        strong = [c.unit_id for c in check.candidates if c.strong]
        if strong:
            flags.append(f"ambiguous: {strong[0]}" + (f" (+{len(strong) - 1})" if len(strong) > 1 else ""))
    return tuple(flags)


def summarise_tier(
    tier: str,
    checks: Sequence[CaseCheck],
    limits: TierThresholds,
    kind: str | None = None,
    all_sections: float | None = None,
) -> TierSummary:
    """Tier means and shares. Wording, name and size figures are over the cases that have
    expected units (an unanswerable case has no target to copy from, so it would only dilute them)."""
    measured = [c for c in checks if c.units]
    m = len(measured)

    def share(pred) -> float:
        return sum(1 for c in measured if pred(c)) / m if m else 0.0

    def mean(values) -> float:
        return fmean(values) if m else 0.0

    kind = kind or ("relational" if tier == "multi_hop" else "paraphrase")
    needs = None
    tier_flags: list[str] = []
    if kind == "relational":
        needs = share(lambda c: c.needs_relation)
        if limits.min_needs_relation is not None and needs < limits.min_needs_relation:
            tier_flags.append(
                f"only {needs:.0%} of {tier} cases need a relation (< {limits.min_needs_relation:.0%}); "
                "the rest are answerable by name match"
            )
    if (
        kind == "multi_section"
        and limits.min_all_sections is not None
        and (all_sections or 0.0) < limits.min_all_sections
    ):
        tier_flags.append(
            f"only {(all_sections or 0.0):.0%} of {tier} cases need every one of their sections "
            f"(< {limits.min_all_sections:.0%}); give the others section_match: all and two or more "
            "expected_sections, or move them to a one-section tier"
        )
    return TierSummary(
        tier=tier,
        cases=len(checks),
        mean_overlap=mean(c.overlap for c in measured),
        mean_overlap_stemmed=mean(c.overlap_stemmed for c in measured),
        phrase_share=share(lambda c: c.phrase_words >= 2),
        full_leak_share=share(lambda c: c.leak_level == "full"),
        partial_leak_share=share(lambda c: c.leak_level == "partial"),
        needs_relation_share=needs,
        mean_expected=mean(c.n_expected for c in measured),
        max_expected=max((c.n_expected for c in checks), default=0),
        flagged=sum(1 for c in checks if c.flags),
        candidates=sum(1 for c in checks if c.candidates),
        tier_flags=tuple(tier_flags),
        kind=kind,
    )


def check_fixture(
    fixture: Fixture,
    thresholds: ThresholdTable | None = None,
    finder: AmbiguityFinder | None = None,
    kinds: Mapping[str, str] | None = None,
) -> FixtureCheck:
    """Measure, flag and summarise every case. Without `finder`, no ambiguity candidates.

    Each tier is checked as its kind (`tier_kind.tier_kinds`: the fixture's `tier_kinds`,
    then `kinds` given here, then measured), never by its name alone.
    """
    unit_words: dict[str, Words] = {}
    names = known_names(fixture.corpus)
    kind_of = tier_kinds(fixture, kinds)
    limits = {t: thresholds_for(t, k, thresholds) for t, k in kind_of.items()}
    checks = []
    for case in fixture.cases:
        check = measure_case(case, fixture, unit_words, names, kind_of[case.tier] == "relational")
        if finder is not None:
            check = replace(check, candidates=finder.candidates(case))
        check = replace(check, flags=case_flags(check, limits[case.tier]))
        checks.append(check)
    tiers = tuple(
        summarise_tier(
            t,
            [c for c in checks if c.tier == t],
            limits[t],
            kind_of[t],
            all_sections_share([c for c in fixture.cases if c.tier == t]),
        )
        for t in fixture.tiers
    )
    return FixtureCheck(
        name=fixture.name,
        source=fixture.source,
        sha256=fixture.sha256,
        version=fixture.version,
        cases=tuple(checks),
        tiers=tiers,
        thresholds=limits,
        ambiguity=tuple(finder.rankers) if finder is not None else (),
        kinds=kind_of,
        ambiguity_config=dict(finder.config) if finder is not None else {},
    )
