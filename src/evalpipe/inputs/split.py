"""Dev/test splits of a fixture's cases: tune on `dev`, report on `test`.

A setting tuned on the cases it is then scored on looks better than it is (the
optimism gap). `fixture.split=dev|test|all` picks a part of any fixture (YAML,
BEIR, TREC) after it is loaded, so every loader gets the same split and the
memoised load stays the unsplit one.

Choices, stated once:
* Deterministic everywhere: a case's place is decided by blake2b(seed, case ID),
  never Python's `hash()` (salted per process), so two processes or two machines
  with the same seed get the same cases.
* Stratified by tier: within each tier the cases are ordered by that hash and the
  first round(n * test_fraction) go to `test`, so every tier keeps its share (a
  tier of 2+ cases has at least one case on each side).
* Disjoint and complete: every case is in exactly one of dev and test.
* Adding a case to a tier moves at most the one case at that tier's boundary.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from evalpipe.safety.errors import EvalpipeError

SPLITS = ("all", "dev", "test")
#: Keys under `fixture:` that choose the split (taken out before the loader is built).
SPLIT_KEYS = ("split", "split_seed", "test_fraction")
DEFAULT_SEED = 0
DEFAULT_TEST_FRACTION = 0.5
#: A tier with fewer cases than this on one side of the split gives figures too noisy to trust.
MIN_TIER_CASES = 10
#: The run tag another tool (the gate) reads: dev, test or all.
SPLIT_TAG = "evalpipe.split"


class SplitError(EvalpipeError):
    """A split setting that cannot work; the message names the key and a good value."""


@dataclass(frozen=True)
class SplitSettings:
    """Which part of the fixture a run measures."""

    split: str = "all"
    seed: int = DEFAULT_SEED
    test_fraction: float = DEFAULT_TEST_FRACTION

    @property
    def active(self) -> bool:
        return self.split != "all"

    def label(self) -> str:
        """`dev split (seed 0, test fraction 0.5)`, or "" for the whole fixture."""
        if not self.active:
            return ""
        return f"{self.split} split (seed {self.seed}, test fraction {self.test_fraction:g})"

    def params(self) -> dict[str, str]:
        return {
            "fixture.split": self.split,
            "fixture.split_seed": str(self.seed),
            "fixture.test_fraction": f"{self.test_fraction:g}",
        }


def settings_from(fixture_values: Mapping[str, Any] | None) -> SplitSettings:
    """The split settings of a resolved `fixture:` mapping (missing keys take the defaults)."""
    given = fixture_values or {}
    split = given.get("split", "all")
    if split is None:
        split = "all"
    if not isinstance(split, str) or split not in SPLITS:
        raise SplitError(
            f"fixture.split must be one of {', '.join(SPLITS)}, got {split!r} "
            "(e.g. fixture.split=dev to tune, fixture.split=test to report; "
            "a BEIR qrels file is fixture.qrels_split)"
        )
    seed = given.get("split_seed", DEFAULT_SEED)
    if seed is None:
        seed = DEFAULT_SEED
    if isinstance(seed, bool) or not isinstance(seed, int | str) or str(seed).strip() == "":
        raise SplitError(f"fixture.split_seed must be an integer or a word, got {seed!r} (e.g. 0)")
    fraction = given.get("test_fraction", DEFAULT_TEST_FRACTION)
    if fraction is None:
        fraction = DEFAULT_TEST_FRACTION
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0.0 < fraction < 1.0:
        raise SplitError(f"fixture.test_fraction must be a number strictly between 0 and 1, got {fraction!r}")
    return SplitSettings(split, seed if isinstance(seed, int) else str(seed), float(fraction))


def case_key(seed: int | str, case_id: str) -> bytes:
    """The case's place in the order of its tier: a keyed hash, the same on every machine."""
    return hashlib.blake2b(f"{seed}\x00{case_id}".encode(), digest_size=16).digest()


def test_count(n: int, fraction: float) -> int:
    """Cases of an n-case tier that go to test: round half up, one on each side when n >= 2."""
    k = math.floor(n * fraction + 0.5)
    if n >= 2:
        k = min(max(k, 1), n - 1)
    return min(max(k, 0), n)


def assign(cases: Iterable[Any], seed: int | str, test_fraction: float) -> dict[str, str]:
    """{case ID: "dev" | "test"} for cases with `.id` and `.tier`, stratified by tier."""
    by_tier: dict[str, list[str]] = {}
    for case in cases:
        by_tier.setdefault(case.tier, []).append(case.id)
    out: dict[str, str] = {}
    for ids in by_tier.values():
        ordered = sorted(ids, key=lambda cid: case_key(seed, cid))
        k = test_count(len(ordered), test_fraction)
        for i, cid in enumerate(ordered):
            out[cid] = "test" if i < k else "dev"
    return out


def apply(fixture: Any, settings: SplitSettings) -> tuple[Any, list[str]]:
    """(the fixture with only the chosen part's cases, warnings about tiers too small to trust)."""
    if not settings.active:
        return fixture, []
    side = assign(fixture.cases, settings.seed, settings.test_fraction)
    cases = tuple(c for c in fixture.cases if side[c.id] == settings.split)
    if not cases:
        raise SplitError(
            f"fixture {fixture.name}: the {settings.split} split has no cases "
            f"({len(fixture.cases)} in all); lower or raise fixture.test_fraction"
        )
    split_fixture = replace(fixture, cases=cases, split=settings.split, split_label=settings.label())
    small = {t: n for t, n in split_fixture.tier_counts().items() if n < MIN_TIER_CASES}
    warnings = []
    if small:
        tiers = ", ".join(f"{t}={n}" for t, n in small.items())
        warnings.append(
            f"the {settings.split} split of {fixture.name} has tier(s) with fewer than "
            f"{MIN_TIER_CASES} cases ({tiers}): their per-tier figures move a lot with one case"
        )
    return split_fixture, warnings


def without_split_keys(fixture_values: Mapping[str, Any]) -> dict[str, Any]:
    """The resolved fixture config the loader is built from: the split keys are not its arguments."""
    return {k: v for k, v in fixture_values.items() if k not in SPLIT_KEYS}


def loaded(
    fixture: Any, split: Any = "all", split_seed: Any = DEFAULT_SEED, test_fraction: Any = None
) -> Any:
    """A loader's result with its `fixture.split*` arguments applied, for code that builds a fixture
    config directly (`instantiate(<the fixture node>)` in scripts). A run strips these keys before the
    loader is built and applies the split itself (`preflight.check`), so the loaded fixture is
    memoised unsplit and the warnings are printed."""
    settings = settings_from({"split": split, "split_seed": split_seed, "test_fraction": test_fraction})
    return apply(fixture, settings)[0]
