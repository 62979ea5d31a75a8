"""Per-tier thresholds: when a measured figure means a case does not test what its tier claims.

The figures are measured the same way for every tier; what counts as a problem depends
on what the tier *is*, its kind (`tier_kind.py`), never on its name alone:

- `lookup`: the query spells its unit's name, so overlap and leakage are its point;
- `relational`: the question names the unit it asks about, so only the tier as a whole is
  held to "needs a relation";
- `paraphrase`: every other tier (`concept`, `paraphrase`, `semantic`, `docs`, BEIR's
  `all`): the query must not copy its target's wording or name.

Overlap and phrase thresholds flag at or above their value: a query copying exactly
half of its words from the target is as much a copy as one copying a little more.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType


@dataclass(frozen=True)
class TierThresholds:
    """A `None` threshold disables that check for the tier."""

    #: Flag a case whose stemmed overlap with its best-overlapping expected unit is this or more.
    max_overlap_stemmed: float | None = None
    #: Flag a case sharing a run of at least this many consecutive content words with an expected unit.
    max_phrase: int | None = None
    #: Flag a case whose query contains every content word of an expected unit's own name...
    flag_full_name_leak: bool = False
    #: ...when the name has at least this many content words (`format_arguments`: 2). A
    #: one-word name (`fail`, `_build`) is an everyday word a paraphrase may well use.
    leak_min_name_words: int = 2
    #: Flag a case with more relevant expected IDs than this (any-hit recall gets lenient).
    max_expected: int | None = None
    #: Tier flag: at least this share of the tier's cases must need a relation (not be
    #: answerable by name match).
    min_needs_relation: float | None = None
    #: Flag a case with a strong ambiguity candidate (see ambiguity.py).
    flag_strong_candidate: bool = True
    #: Tier flag: at least this share of the tier's answerable cases must need every one of their
    #: sections (`section_match: all` with two or more sections): a multi-section tier's point.
    min_all_sections: float | None = None


#: The thresholds of each tier kind (see the module docstring and docs/fixtures.md).
KIND_THRESHOLDS: Mapping[str, TierThresholds] = MappingProxyType(
    {
        # A lookup query names its symbol: BM25 preferring another unit is the ranker's
        # problem, not the case's, so candidates are listed but do not flag.
        "lookup": TierThresholds(max_expected=2, flag_strong_candidate=False),
        "paraphrase": TierThresholds(
            max_overlap_stemmed=0.5, max_phrase=2, flag_full_name_leak=True, max_expected=3
        ),
        "relational": TierThresholds(max_expected=8, min_needs_relation=0.5),
        # Said in other words like a paraphrase, but the answer is several sections' chunks.
        "multi_section": TierThresholds(
            max_overlap_stemmed=0.5,
            max_phrase=2,
            flag_full_name_leak=True,
            max_expected=12,
            min_all_sections=1.0,
        ),
    }
)
THRESHOLD_NAMES = tuple(f.name for f in fields(TierThresholds))
#: The stock tiers' thresholds (their stock kinds'); any other tier is a paraphrase tier
#: unless measured or declared otherwise.
DEFAULT_THRESHOLDS: Mapping[str, TierThresholds] = MappingProxyType(
    {
        "exact": KIND_THRESHOLDS["lookup"],
        "concept": KIND_THRESHOLDS["paraphrase"],
        "multi_hop": KIND_THRESHOLDS["relational"],
    }
)
OTHER_TIER = KIND_THRESHOLDS["paraphrase"]
#: The kind a stock tier has when nothing else is known (check_fixture measures it instead).
STOCK_KINDS: Mapping[str, str] = MappingProxyType({"exact": "lookup", "multi_hop": "relational"})


def default_kind(tier: str) -> str:
    """The kind of a tier known only by its name: the stock meaning, else paraphrase."""
    return STOCK_KINDS.get(tier, "paraphrase")


@dataclass(frozen=True)
class ThresholdTable:
    """Kind defaults plus `--threshold TIER.NAME=VALUE` overrides.

    `overrides` maps a tier name (or `*`, every tier without an override of its own) to
    {threshold name: value}; a tier's thresholds are its kind's, then its overrides.
    """

    overrides: Mapping[str, Mapping[str, object]] = field(default_factory=dict)

    def for_tier(self, tier: str, kind: str | None = None) -> TierThresholds:
        base = KIND_THRESHOLDS[kind or default_kind(tier)]
        own = self.overrides.get(tier)
        changes = own if own is not None else self.overrides.get("*", {})
        return replace(base, **changes) if changes else base

    def __getitem__(self, tier: str) -> TierThresholds:
        """`table["concept"]`: a tier's thresholds by its stock kind (see `default_kind`)."""
        return self.for_tier(tier)


DEFAULT_TABLE = ThresholdTable()


def thresholds_for(
    tier: str, kind: str | ThresholdTable | None = None, table: ThresholdTable | None = None
) -> TierThresholds:
    """A tier's thresholds; `thresholds_for(tier, table)` (no kind) uses the stock kind."""
    if isinstance(kind, ThresholdTable):
        kind, table = None, kind
    return (table or DEFAULT_TABLE).for_tier(tier, kind)


def _parse_value(raw: str, current: object) -> object:
    text = raw.strip().lower()
    if text in ("none", "null", "off", ""):
        return None
    if isinstance(current, bool):
        if text not in ("true", "false"):
            raise ValueError(f"must be true or false, got {raw!r}")
        return text == "true"
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"must be a number or none, got {raw!r}") from None
    return int(number) if number.is_integer() and "." not in text else number


def apply_overrides(overrides: Iterable[str]) -> ThresholdTable:
    """`concept.max_overlap_stemmed=0.4`, `docs.max_expected=5`, `*.max_expected=none` -> a table."""
    table: dict[str, dict[str, object]] = {}
    types = KIND_THRESHOLDS["paraphrase"]
    for item in overrides:
        key, sep, value = item.partition("=")
        tier, dot, name = key.strip().rpartition(".")
        if not sep or not dot or not tier or name not in THRESHOLD_NAMES:
            raise ValueError(
                f"bad threshold {item!r}: use TIER.NAME=VALUE with NAME one of {sorted(THRESHOLD_NAMES)} "
                "(TIER * means every tier not listed)"
            )
        try:
            parsed = _parse_value(value, getattr(types, name))
        except ValueError as exc:
            raise ValueError(f"bad threshold {item!r}: {name} {exc}") from None
        table.setdefault(tier, {})[name] = parsed
    return ThresholdTable(table)
