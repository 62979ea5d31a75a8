"""How far to trust the judge: its agreement with the fixture's own labels.

The judge is asked about labelled pairs (expected IDs are positives, strong
non-expected candidates negatives) and its verdicts are compared with the labels.
Precision says how often a judged rescue is a real answer; Cohen's kappa corrects
raw agreement for the agreement two coin-flippers with the same base rates would
reach. The negatives are only as good as the fixture is complete, so a judge that
finds unlisted answers loses some precision here for being right.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Agreement:
    tp: int  # judge relevant, label relevant
    fp: int  # judge relevant, label not
    fn: int  # judge not, label relevant
    tn: int
    errors: int = 0  # pairs without a verdict (left out of the counts above)

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def precision(self) -> float:
        said = self.tp + self.fp
        return self.tp / said if said else 0.0

    @property
    def recall(self) -> float:
        gold = self.tp + self.fn
        return self.tp / gold if gold else 0.0

    @property
    def accuracy(self) -> float:
        return (self.tp + self.tn) / self.n if self.n else 0.0

    @property
    def kappa(self) -> float:
        """Cohen's kappa: (p_o - p_e) / (1 - p_e); 1.0 for perfect agreement when p_e = 1."""
        n = self.n
        if not n:
            return 0.0
        p_o = (self.tp + self.tn) / n
        p_e = ((self.tp + self.fp) * (self.tp + self.fn) + (self.fn + self.tn) * (self.fp + self.tn)) / (
            n * n
        )
        if p_e == 1.0:
            return 1.0 if p_o == 1.0 else 0.0
        return (p_o - p_e) / (1.0 - p_e)

    def figures(self) -> dict[str, float]:
        out = {f"judge/calibration/{k}": float(getattr(self, k)) for k in ("tp", "fp", "fn", "tn", "errors")}
        out["judge/calibration/pairs"] = float(self.n)
        for name in ("precision", "recall", "accuracy", "kappa"):
            out[f"judge/calibration/{name}"] = getattr(self, name)
        return out


def agreement(gold: Sequence[bool], said: Sequence[bool | None]) -> Agreement:
    """Confusion counts of the judge's verdicts (`None` = no verdict) against the labels."""
    counts = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    errors = 0
    for g, s in zip(gold, said, strict=True):
        if s is None:
            errors += 1
        else:
            counts[("t" if s == g else "f") + ("p" if s else "n")] += 1
    return Agreement(errors=errors, **counts)
