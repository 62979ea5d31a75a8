"""The gate's verdict: per fixture, metric and tier (and overall), is the candidate worse?

Each row pairs the two runs case by case (the cases both scored), and reports both means,
the difference with its paired bootstrap CI (`evalpipe.stats.resampling`), the paired randomization p-value,
and a verdict:

* `regression`: the drop is larger than the allowed drop AND p < alpha: fails the gate;
* `noise`: a drop larger than allowed, but p >= alpha: not shown to be real, passes;
* `untestable`: as `noise`, but the tier is so small (5 cases or fewer at alpha 0.05) that no
  p-value could reach alpha: passes, with a warning saying so;
* `allowed`: a drop no larger than the allowed drop;
* `improved`: a gain with p < alpha; `better`: a gain that is not significant;
* `unchanged`: the same mean.

The gate fails (exit 1) when any row is a regression, whatever other rows gained.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evalpipe.gate.model import FixtureKey, FixtureRun, GateError, Side
from evalpipe.gate.rules import GateRules
from evalpipe.gate.same_data import differences
from evalpipe.stats.case_diff import case_diff
from evalpipe.stats.comparison import default_metrics
from evalpipe.stats.resampling import paired_bootstrap_ci_diff, paired_randomization_test

OVERALL = "overall"
FAILING = ("regression",)


@dataclass(frozen=True)
class Row:
    key: FixtureKey
    metric: str
    tier: str
    cases: int
    changed: int
    baseline: float
    candidate: float
    delta: float
    ci: tuple[float, float]
    p: float
    allowed: float
    verdict: str

    @property
    def failed(self) -> bool:
        return self.verdict in FAILING


@dataclass(frozen=True)
class FixtureGate:
    key: FixtureKey
    baseline: FixtureRun
    candidate: FixtureRun
    rows: Sequence[Row]
    #: the cases won and lost on the first gated metric (a `stats.case_diff.CaseDiff`)
    diff: Any
    data_differences: Sequence[str] = ()
    cases: int = 0


@dataclass(frozen=True)
class GateResult:
    baseline: Side
    candidate: Side
    rules: GateRules
    fixtures: Sequence[FixtureGate]
    warnings: Sequence[str] = field(default_factory=list)
    #: the data differed and --allow-different-data compared anyway
    different_data: bool = False

    @property
    def rows(self) -> list[Row]:
        return [row for f in self.fixtures for row in f.rows]

    @property
    def regressions(self) -> list[Row]:
        return [row for row in self.rows if row.failed]

    @property
    def passed(self) -> bool:
        return not self.regressions

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1


def min_p(changed: int) -> float:
    """The smallest two-sided sign-flip p-value `changed` non-zero differences can give (2 / 2^n)."""
    return 1.0 if changed <= 0 else min(1.0, 2.0 / 2.0**changed)


def classify(delta: float, p: float, allowed: float, alpha: float, cases: int) -> str:
    """The row's verdict (module docstring); `cases` = the cases in the row (its tier's size)."""
    eps = 1e-12
    if abs(delta) <= eps:
        return "unchanged"
    if delta > 0:
        return "improved" if p < alpha else "better"
    if -delta <= allowed + eps:
        return "allowed"
    if p < alpha:
        return "regression"
    return "untestable" if min_p(cases) >= alpha else "noise"


#: Per-case values closer than this are the same value: a table read back from MLflow (JSON through
#: pandas) and one read from the saved cases.jsonl differ in the last digits of, e.g., 1/3.
SAME_VALUE = 1e-9


def snapped(base: Mapping[str, float], cand: Mapping[str, float]) -> dict[str, float]:
    """`cand` with every value within SAME_VALUE of the baseline's replaced by the baseline's."""
    out = dict(cand)
    for case_id, value in cand.items():
        b = base.get(case_id)
        if b is not None and abs(value - b) <= SAME_VALUE:
            out[case_id] = b
    return out


def gated_metrics(rules: GateRules, base: FixtureRun, cand: FixtureRun) -> list[str]:
    """The rules' metrics, or the baseline's objective and mrr; each must be in both runs."""
    metrics = list(rules.metrics)
    if not metrics:
        objective = base.cases.objective
        metrics = [m for m in dict.fromkeys([objective, "mrr"]) if m and m in base.cases.values]
        if not metrics:
            metrics = default_metrics([base.cases])[:2]
    if not metrics:
        raise GateError(f"{base.label} has no per-case metric to gate; name them with --metrics")
    for metric in metrics:
        for side, run in (("baseline", base), ("candidate", cand)):
            if metric not in run.cases.values:
                available = ", ".join(sorted(run.cases.values)[:20])
                raise GateError(
                    f"{run.key}: the {side} {run.label} has no per-case {metric!r}; available: {available}"
                )
    return metrics


def _tiers(base: FixtureRun, rules: GateRules) -> list[str]:
    seen = list(dict.fromkeys(info.tier for info in base.cases.info.values() if info.tier))
    if rules.tiers:
        missing = [t for t in rules.tiers if t not in seen]
        if missing:
            raise GateError(f"{base.key}: no tier {missing} in the baseline; its tiers: {', '.join(seen)}")
        return [t for t in seen if t in rules.tiers]
    return seen


def gate_row(
    key: FixtureKey, metric: str, tier: str, base: np.ndarray, cand: np.ndarray, rules: GateRules
) -> Row:

    confidence = 1.0 - rules.alpha
    try:
        delta, lo, hi = paired_bootstrap_ci_diff(cand, base, rules.resamples, confidence, rules.seed)
        p = paired_randomization_test(cand, base, rules.resamples, rules.seed)
    except ValueError as exc:  # NaN or infinite per-case values
        raise GateError(f"{key}: {metric} on {tier}: {exc}") from None
    changed = int(np.count_nonzero(cand != base))
    allowed = rules.allowed_drop(metric)
    verdict = classify(delta, p, allowed, rules.alpha, int(base.size))
    return Row(
        key, metric, tier, int(base.size), changed, float(base.mean()), float(cand.mean()), delta,
        (lo, hi), p, allowed, verdict,
    )  # fmt: skip


def gate_fixture(
    base: FixtureRun, cand: FixtureRun, rules: GateRules, warnings: list[str], data_diffs: Sequence[str] = ()
) -> FixtureGate:

    metrics = gated_metrics(rules, base, cand)
    tiers = _tiers(base, rules)
    rows: list[Row] = []
    common: set[str] = set()
    for metric in metrics:
        b_values = base.cases.values[metric]
        c_values = snapped(b_values, cand.cases.values[metric])
        cases = [c for c in b_values if c in c_values]
        only = len(b_values) - len(cases) + len([c for c in c_values if c not in b_values])
        if only:
            warnings.append(
                f"{base.key}: {metric}: {only} case(s) scored by one run only are left out "
                f"({len(cases)} compared)"
            )
        if not cases:
            raise GateError(f"{base.key}: the baseline and candidate share no case with a {metric} value")
        common.update(cases)
        scopes: list[tuple[str, list[str]]] = []
        if rules.scope in ("both", "overall"):
            scopes.append((OVERALL, cases))
        one_tier = len(tiers) == 1 and rules.scope == "both"  # its rows would repeat the overall ones
        if rules.scope in ("both", "tiers") and not one_tier:
            for tier in tiers:
                in_tier = [c for c in cases if base.cases.info.get(c) and base.cases.info[c].tier == tier]
                if in_tier:
                    scopes.append((tier, in_tier))
        for tier, ids in scopes:
            b = np.array([b_values[c] for c in ids], dtype=np.float64)
            c = np.array([c_values[c] for c in ids], dtype=np.float64)
            row = gate_row(base.key, metric, tier, b, c, rules)
            rows.append(row)
            if row.verdict == "untestable":
                warnings.append(
                    f"{base.key}: {metric} on {tier} dropped {-row.delta:.4f}, but the tier has only "
                    f"{row.cases} cases: no paired test on so few can reach p < {rules.alpha:g} (the "
                    f"smallest possible p is {min_p(row.cases):.3g}); add cases to that tier to gate it"
                )
    primary = metrics[0]
    diff = case_diff(
        primary,
        base.label,
        base.cases.values[primary],
        base.cases.info,
        cand.label,
        snapped(base.cases.values[primary], cand.cases.values[primary]),
        cand.cases.info,
    )
    return FixtureGate(base.key, base, cand, rows, diff, tuple(data_diffs), len(common))


def run_gate(
    baseline: Side, candidate: Side, rules: GateRules, allow_different_data: bool = False
) -> GateResult:
    """Pair the sides fixture by fixture, check they measured the same data, gate every pair.

    GateError (exit 2) when a baseline fixture has no candidate run, when nothing pairs, or when
    the data differ (unless `allow_different_data`: then compared anyway and flagged)."""
    base_runs, cand_runs = baseline.by_key(), candidate.by_key()
    warnings: list[str] = []
    missing = [k for k in base_runs if k not in cand_runs]
    extra = [k for k in cand_runs if k not in base_runs]
    if missing:
        have = ", ".join(str(k) for k in cand_runs) or "none"
        raise GateError(
            f"the candidate {candidate.label} has no run on {', '.join(str(k) for k in missing)} "
            f"(the baseline {baseline.label} has); the candidate's fixtures: {have}. Evaluate the "
            "candidate on every fixture of the baseline"
        )
    for key in extra:
        warnings.append(f"{key}: the candidate has a run on it but the baseline has none: not gated")
    diffs = {key: differences(base_runs[key], cand_runs[key]) for key in base_runs}
    all_diffs = [line for lines in diffs.values() for line in lines]
    if all_diffs and not allow_different_data:
        raise GateError(
            "the baseline and candidate were not measured on the same data: "
            + "; ".join(all_diffs)
            + ". Re-measure the baseline on this data (or pass --allow-different-data to compare anyway)"
        )
    fixtures = [
        gate_fixture(base_runs[key], cand_runs[key], rules, warnings, diffs[key]) for key in base_runs
    ]
    return GateResult(baseline, candidate, rules, fixtures, warnings, bool(all_diffs))
