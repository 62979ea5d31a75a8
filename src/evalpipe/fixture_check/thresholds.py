"""Per-tier thresholds: when a measured figure means a case does not test what its tier claims.

The figures are measured the same way for every tier; what counts as a problem depends
on the tier. An `exact` query is *meant* to spell the unit's name, a `concept` query is
meant to share little wording with its target, a `multi_hop` question is meant to need
a relation. Tiers the checker does not know (`docs`, `all` from BEIR) get only the
checks that are wrong in any tier (oversized expected sets, strong ambiguity).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class TierThresholds:
    """A `None` threshold disables that check for the tier."""

    #: Flag a case whose stemmed overlap with its best-overlapping expected unit is above this.
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


DEFAULT_THRESHOLDS: dict[str, TierThresholds] = {
    # An exact query names its symbol: BM25 preferring another unit is the ranker's problem,
    # not the case's, so candidates are listed but do not flag.
    "exact": TierThresholds(max_expected=2, flag_strong_candidate=False),
    "concept": TierThresholds(
        max_overlap_stemmed=0.5, max_phrase=2, flag_full_name_leak=True, max_expected=3
    ),
    "multi_hop": TierThresholds(max_expected=8, min_needs_relation=0.5),
}
#: Any tier not named above.
OTHER_TIER = TierThresholds(max_expected=20)


def thresholds_for(tier: str, table: Mapping[str, TierThresholds] | None = None) -> TierThresholds:
    table = DEFAULT_THRESHOLDS if table is None else table
    return table.get(tier, table.get("*", OTHER_TIER))


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


def apply_overrides(overrides: Iterable[str]) -> dict[str, TierThresholds]:
    """`concept.max_overlap_stemmed=0.4`, `docs.max_expected=5`, `*.max_expected=none` -> a table."""
    table = dict(DEFAULT_THRESHOLDS)
    names = {f.name for f in fields(TierThresholds)}
    for item in overrides:
        key, sep, value = item.partition("=")
        tier, dot, name = key.strip().rpartition(".")
        if not sep or not dot or not tier or name not in names:
            raise ValueError(
                f"bad threshold {item!r}: use TIER.NAME=VALUE with NAME one of {sorted(names)} "
                "(TIER * means every tier not listed)"
            )
        current = thresholds_for(tier, table)
        try:
            parsed = _parse_value(value, getattr(DEFAULT_THRESHOLDS["concept"], name))
        except ValueError as exc:
            raise ValueError(f"bad threshold {item!r}: {name} {exc}") from None
        table[tier] = replace(current, **{name: parsed})
    return table
