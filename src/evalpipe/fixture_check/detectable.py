"""What each tier of a fixture can detect, before any run: its MDE and the cases it would need.

`check-fixture` has no per-case metric values (no run), so the figures are for the worst case of
a 0/1 metric (hit@k), a 50% hit rate (p(1 - p) is largest there), and a second system correlated
`rho` with the first (`evalpipe.stats.power`, one-run model: discordance 2 p (1 - p)(1 - rho) =
0.25 at rho 0.5), at alpha 0.05 for one comparison. A tier with a higher or lower hit rate, or a
change that moves fewer cases, detects smaller changes; a gate testing several rows holds each to
alpha / rows (docs/power.md). The exact sign test on the discordant cases gives the power.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evalpipe.stats.power import POWER, RHO, Detectable, binary_mde, cases_needed

#: The changes `check-fixture` sizes the tiers for (2 and 5 points of a 0..1 metric).
CHANGES = (0.05, 0.02)
HIT_RATE = 0.5
ALPHA = 0.05


@dataclass(frozen=True)
class TierPower:
    tier: str
    cases: int
    mde: Detectable
    #: {change: cases needed to detect it} (None: more than the search limit)
    needed: dict[float, int | None]


def spread(rho: float = RHO, hit_rate: float = HIT_RATE) -> float:
    return 2.0 * hit_rate * (1.0 - hit_rate) * (1.0 - rho)


def tier_power(
    tiers: Sequence[tuple[str, int]], alpha: float = ALPHA, power: float = POWER, rho: float = RHO
) -> list[TierPower]:
    """Per (tier, cases): the MDE and the cases needed for each of CHANGES; 'overall' last."""
    psi = spread(rho)
    out = []
    rows = list(tiers) + ([("overall", sum(n for _, n in tiers))] if len(tiers) > 1 else [])
    needed_for = {}
    for change in CHANGES:
        probe = Detectable(0.0, 0, "binary", psi, "one run", alpha, power, rho)
        needed_for[change] = cases_needed(change, probe)
    for tier, n in rows:
        mde = Detectable(binary_mde(n, psi, alpha, power), n, "binary", psi, "one run", alpha, power, rho)
        out.append(TierPower(tier, n, mde, dict(needed_for)))
    return out


def method_line(alpha: float = ALPHA, power: float = POWER, rho: float = RHO) -> str:
    return (
        f"detectable change of a 0/1 metric (hit@k) at a 50% hit rate (the worst case), power {power:g}, "
        f"alpha {alpha:g} (one comparison), a second system correlated {rho:g}: exact sign test on the "
        "discordant cases (docs/power.md)"
    )
