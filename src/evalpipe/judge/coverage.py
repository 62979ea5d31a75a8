"""How much of what could change a judged figure was judged: the coverage, overall and per tier.

A judged figure counts an unjudged candidate as not relevant, so below full
coverage it is a lower bound, not the figure: it depends on how much budget there
was. Coverage is judged pairs / pairs that could change a figure (the misses'
unlabelled candidates, `pairs.rescue_pairs` without pooling), over the pairs whose
unit is in the corpus (a returned ID the corpus does not hold has no text to show
a judge; the run counts those as `unknown_ids`). A slice with nothing to judge is
fully covered: its judged figures equal its strict ones, exactly.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass

from evalpipe.judge.pairs import Pair


@dataclass(frozen=True)
class Slice:
    pairs: int
    judged: int

    @property
    def coverage(self) -> float:
        return self.judged / self.pairs if self.pairs else 1.0

    @property
    def full(self) -> bool:
        return self.judged == self.pairs

    @property
    def none(self) -> bool:
        """Something to judge and nothing judged: no judged figure at all, not even a bound."""
        return self.pairs > 0 and self.judged == 0

    @property
    def state(self) -> str:
        return "full" if self.full else "none" if self.none else "partial"


@dataclass(frozen=True)
class Coverage:
    overall: Slice
    per_tier: Mapping[str, Slice]
    complete_cases: frozenset[str]  # cases whose every figure-changing pair was judged

    def figures(self) -> dict[str, float]:
        out = {
            "judge/coverage": self.overall.coverage,
            "judge/pairs": float(self.overall.pairs),
            "judge/judged_pairs": float(self.overall.judged),
        }
        for tier, s in self.per_tier.items():
            out[f"judge/coverage/{tier}"] = s.coverage
        return out

    def line(self) -> str:
        """`judge/coverage 30.4% (500 of 1,646 pairs; exact 100.0%, concept 0.0%)`"""
        o = self.overall
        tiers = ", ".join(f"{t} {s.coverage:.1%}" for t, s in self.per_tier.items())
        tiers = f"; {tiers}" if tiers else ""
        return f"judge/coverage {o.coverage:.1%} ({o.judged:,} of {o.pairs:,} pairs{tiers})"


def coverage(
    changing: Sequence[Pair],
    judged: Container[tuple[str, str]],
    tier_of: Mapping[str, str],
    tiers: Sequence[str],
    case_ids: Sequence[str],
) -> Coverage:
    """Coverage of the figure-changing pairs `changing`; `judged` holds the (case, unit) with a verdict."""
    counts: dict[str, list[int]] = {t: [0, 0] for t in tiers}
    incomplete: set[str] = set()
    for p in changing:
        c = counts.setdefault(tier_of[p.case_id], [0, 0])
        c[0] += 1
        if (p.case_id, p.unit_id) in judged:
            c[1] += 1
        else:
            incomplete.add(p.case_id)
    per_tier = {t: Slice(n, j) for t, (n, j) in counts.items()}
    overall = Slice(sum(s.pairs for s in per_tier.values()), sum(s.judged for s in per_tier.values()))
    return Coverage(overall, per_tier, frozenset(c for c in case_ids if c not in incomplete))
