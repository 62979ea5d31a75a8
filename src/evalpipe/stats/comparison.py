"""Paired comparison of runs over their shared cases: each run's mean with a bootstrap CI and,
against a baseline, the paired bootstrap CI of the difference and a paired randomization p-value.

Means alone mislead on a fixture of a few hundred queries: two BM25 settings 0.8 points apart in
recall@5 are usually the same system. Every run logs its per-case values (the `cases.json`
table), so runs are aligned case by case (`evalpipe.stats.resampling` states the methods).
The p-values of all the cells (runs x metrics against the baseline) are one family: they are
adjusted together (Holm by default, `evalpipe.stats.corrections`) and a cell is significant when
its adjusted p < alpha. Each cell also carries the cases won and lost and its minimum detectable
difference (`evalpipe.stats.power`, at the level a cell is held to after the correction). No
MLflow here: `evalpipe.compare` reads the runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from evalpipe.safety.errors import EvalpipeError
from evalpipe.stats import power as power_
from evalpipe.stats.case_diff import CaseInfo, case_diff, case_info
from evalpipe.stats.corrections import DEFAULT_METHOD, adjust, check_method, family_alpha
from evalpipe.stats.resampling import bootstrap_ci, paired_bootstrap_ci_diff, paired_randomization_test
from evalpipe.stats.ties import METHOD, all_pairs, ties_of

CASES_ARTIFACT = "cases.json"


class CompareError(EvalpipeError):
    """Bad input to `evalpipe compare` (unknown run, no cases.json, no common cases): exit 2."""


@dataclass(frozen=True)
class RunCases:
    """One run's per-case values: {metric: {case_id: value}} plus what identifies the run."""

    run_id: str
    name: str
    values: Mapping[str, Mapping[str, float]]
    start_time: int = 0
    objective: str = ""
    #: per case: tier, query, expected IDs, top of the ranking (for `--cases`)
    info: Mapping[str, CaseInfo] = field(default_factory=dict)
    #: per case: first_rank (0 = not found), kept apart from the averaged metrics
    ranks: Mapping[str, float] = field(default_factory=dict)
    #: the reused sweep points (run IDs and names) compared as this run, which measured them
    aliases: tuple[str, ...] = ()
    #: how a reused point was resolved: `bm25 k1=0.9 (reused 2b0f2ca7 -> measured run <id>)`
    reuse_line: str = ""

    def column(self, metric: str) -> Mapping[str, float] | None:
        return self.ranks if metric == "first_rank" and self.ranks else self.values.get(metric)

    @property
    def label(self) -> str:
        return f"{self.name} ({self.run_id[:8]})" if self.name else self.run_id[:8]

    @property
    def case_ids(self) -> list[str]:
        """Every case with a value for some metric (some metrics skip unanswerable cases)."""
        return list(dict.fromkeys(c for per_case in self.values.values() for c in per_case))


@dataclass(frozen=True)
class Comparison:
    """One (metric, run) cell: mean and CI; against the baseline the paired diff, its CI and p."""

    metric: str
    run: RunCases
    mean: float
    lo: float
    hi: float
    is_baseline: bool = False
    diff: float | None = None
    diff_lo: float | None = None
    diff_hi: float | None = None
    p_value: float | None = None
    significant: bool = False
    #: the p adjusted over every cell of the comparison (what `significant` is decided on)
    p_adj: float | None = None
    won: int = 0
    lost: int = 0
    #: the smallest difference from the baseline this cell detects (`stats.power.Detectable`)
    mde: power_.Detectable | None = None
    #: the run is tied with the metric's best run (3+ runs: no run surely better, `stats.ties`)
    tied: bool = False
    #: 3+ runs: the run's rank on the metric with its simultaneous interval (`1 [1-3]`)
    rank: str = ""


@dataclass(frozen=True)
class Result:
    comparisons: list[Comparison]
    baseline: RunCases
    runs: list[RunCases]
    cases: list[str]
    metrics: list[str]
    warnings: list[str] = field(default_factory=list)
    correction: str = DEFAULT_METHOD
    power: float = power_.POWER
    #: 3+ runs: the number of pairs (runs x runs, every metric) of the one all-pairs family
    pairs: int = 0

    @property
    def all_pairs(self) -> bool:
        """3+ runs: every decision (vs baseline, tied, rank) is read off one all-pairs family."""
        return self.pairs > 0

    @property
    def family(self) -> int:
        """How many tests the family holds: every non-baseline cell (2 runs) or every pair (3+)."""
        return self.pairs or sum(not c.is_baseline for c in self.comparisons)


def common_cases(runs: Sequence[RunCases]) -> tuple[list[str], list[str]]:
    """Case IDs present in every run (in the first run's order) and a warning per run that has others."""
    shared = set(runs[0].case_ids)
    for run in runs[1:]:
        shared &= set(run.case_ids)
    ordered = [c for c in runs[0].case_ids if c in shared]
    warnings = []
    for run in runs:
        extra = [c for c in run.case_ids if c not in shared]
        if extra:
            warnings.append(
                f"run {run.label} has {len(extra)} case(s) not in every run (e.g. {extra[0]!r}); "
                f"they are left out"
            )
    return ordered, warnings


def default_metrics(runs: Sequence[RunCases]) -> list[str]:
    """The baseline's objective, then recall_at_K, mrr and ndcg_at_K: those the baseline has (runs
    without one are left out of that metric's comparison, with a warning, not silently)."""
    shared = set(runs[0].values)

    def at(family: str) -> list[str]:
        pattern = re.compile(rf"^{family}_at_(\d+)$")
        ks = sorted(int(m.group(1)) for name in shared if (m := pattern.match(name)))
        return [f"{family}_at_{k}" for k in ks]

    names = [runs[0].objective] if runs[0].objective else []
    names += at("recall") + ["mrr"] + at("ndcg")
    return [n for n in dict.fromkeys(names) if n in shared]


def compare_runs(
    runs: Sequence[RunCases],
    baseline: int = 0,
    metrics: Sequence[str] | None = None,
    resamples: int = 10000,
    alpha: float = 0.05,
    seed: int = 0,
    correction: str = DEFAULT_METHOD,
    power: float = power_.POWER,
) -> Result:
    """Align `runs` on their common cases and compare each with `runs[baseline]`, metric by metric.

    CIs are at level 1 - alpha, so a difference whose CI excludes 0 and a raw p < alpha mostly agree;
    `significant` is decided on the p adjusted over every cell (`correction`).
    """
    if not runs:
        raise CompareError("no runs selected")
    try:
        check_method(correction)
    except ValueError as exc:
        raise CompareError(f"--correction: {exc}") from None
    if not 0.0 < power < 1.0:
        raise CompareError(f"--power must be between 0 and 1, got {power}")
    if not 0.0 < alpha < 1.0:
        raise CompareError(f"--alpha must be between 0 and 1, got {alpha}")
    if resamples < 1:
        raise CompareError(f"--resamples must be >= 1, got {resamples}")
    base = runs[baseline]
    ordered = [base] + [r for i, r in enumerate(runs) if i != baseline]
    cases, warnings = common_cases(ordered)
    if not cases:
        raise CompareError(
            "the selected runs share no case IDs; compare runs of the same fixture "
            f"({', '.join(r.label for r in ordered)})"
        )
    metrics = list(metrics) if metrics else default_metrics(ordered)
    if not metrics:
        raise CompareError(f"the baseline {base.label} has no per-case metric; name them with --metrics")
    for metric in metrics:
        if not any(metric in r.values for r in ordered):
            available = ", ".join(sorted({m for r in ordered for m in r.values})[:12])
            raise CompareError(f"no per-case {metric!r} in any run; available: {available}")
    confidence = 1.0 - alpha
    out = []
    pairs: list[tuple[np.ndarray, np.ndarray] | None] = []
    compared = []
    blocks: list[tuple[str, list[RunCases], list[str], list[np.ndarray]]] = []
    for metric in metrics:
        have = [r for r in ordered if metric in r.values]
        left_out = ", ".join(r.label for r in ordered if metric not in r.values)
        if base not in have or len(have) < 2:
            who = f"the baseline {base.label}" if base not in have else left_out
            warnings.append(f"{metric}: not compared, {who} has no per-case values")
            continue
        if left_out:
            warnings.append(
                f"{metric}: compared on {len(have)} of {len(ordered)} runs; left out (no per-case values): "
                f"{left_out}"
            )
        compared.append(metric)
        scored = [c for c in cases if all(c in r.values[metric] for r in have)]
        arrays = [np.array([r.values[metric][c] for c in scored], dtype=np.float64) for r in have]
        blocks.append((metric, have, scored, arrays))
    if not compared:
        raise CompareError("no metric could be compared: " + "; ".join(warnings[-len(metrics) :]))
    if len(ordered) > 2:
        if correction != DEFAULT_METHOD:
            warnings.append(
                f"--correction {correction} is not used with 3+ runs: every decision is read off one family "
                f"of all pairs of runs on every metric ({METHOD}, family-wise error rate)"
            )
        return _all_pairs_result(
            ordered, base, cases, compared, blocks, warnings, resamples, alpha, seed, power
        )
    for metric, have, _scored, arrays in blocks:
        for run, values in zip(have, arrays, strict=True):
            mean, lo, hi = bootstrap_ci(values, resamples, confidence, seed)
            if run is base:
                out.append(Comparison(metric, run, mean, lo, hi, is_baseline=True))
                pairs.append(None)
                continue
            diff, dlo, dhi = paired_bootstrap_ci_diff(values, arrays[0], resamples, confidence, seed)
            p = paired_randomization_test(values, arrays[0], resamples, seed)
            won, lost = int(np.sum(values > arrays[0])), int(np.sum(values < arrays[0]))
            out.append(
                Comparison(metric, run, mean, lo, hi, False, diff, dlo, dhi, p, False, None, won, lost)
            )
            pairs.append((arrays[0], values))
    adjusted = adjust([c.p_value for c in out], correction)
    level = family_alpha(alpha, sum(p is not None for p in adjusted), correction)
    final = []
    for c, p_adj, pair in zip(out, adjusted, pairs, strict=True):
        if pair is not None and p_adj is not None:
            mde = power_.paired(pair[0], pair[1], level, power)
            c = replace(c, p_adj=p_adj, significant=p_adj < alpha, mde=mde)
        final.append(c)
    return Result(final, base, ordered, cases, compared, warnings, correction, power)


def _all_pairs_result(
    ordered: Sequence[RunCases],
    base: RunCases,
    cases: list[str],
    compared: list[str],
    blocks: Sequence[tuple[str, list[RunCases], list[str], list[np.ndarray]]],
    warnings: list[str],
    resamples: int,
    alpha: float,
    seed: int,
    power: float,
) -> Result:
    """3+ runs: one family over every pair of runs on every metric (`stats.ties.all_pairs`, the same
    case resample for every metric). A cell's difference from the baseline is that pair's
    simultaneous interval and is significant when the interval excludes 0 (family-adjusted p <
    alpha); tied and rank are read off the same intervals. A run's own mean keeps its plain
    (1 - alpha) bootstrap CI: it decides nothing."""
    position = {c: i for i, c in enumerate(cases)}
    family = all_pairs(
        [np.array(arrays) for _, _, _, arrays in blocks],
        alpha,
        resamples,
        seed,
        case_index=[np.array([position[c] for c in scored]) for _, _, scored, _ in blocks],
        n_cases=len(cases),
    )
    out = []
    for (metric, have, _scored, arrays), pairs in zip(blocks, family, strict=True):
        ties = ties_of(pairs)
        level = pairs.pair_alpha
        for i, (run, values) in enumerate(zip(have, arrays, strict=True)):
            mean, lo, hi = bootstrap_ci(values, resamples, 1.0 - alpha, seed)
            common = {"tied": ties.is_tied(i), "rank": ties.rank_text(i)}
            if run is base:
                out.append(Comparison(metric, run, mean, lo, hi, is_baseline=True, **common))
                continue
            won, lost = int(np.sum(values > arrays[0])), int(np.sum(values < arrays[0]))
            p_adj = float(pairs.p_adj[i, 0])
            out.append(
                Comparison(
                    metric, run, mean, lo, hi, False,
                    float(pairs.diff[i, 0]), pairs.lo(i, 0), pairs.hi(i, 0),
                    None, pairs.better(i, 0) or pairs.better(0, i), p_adj, won, lost,
                    power_.paired(arrays[0], values, level, power), **common,
                )
            )  # fmt: skip
    return Result(out, base, list(ordered), cases, compared, warnings, "max-T", power, family[0].family)


#: cases.json columns that are not averaged metrics.
NOT_METRICS = ("case_id", "first_rank", "latency_us", "tokens")


def cases_from_rows(
    rows: Sequence[Mapping[str, Any]],
    run_id: str,
    name: str = "",
    label: str = "",
    start_time: int = 0,
    objective: str = "",
) -> RunCases:
    """Per-case rows ({column: value}, as cases.json / cases.jsonl hold them) as a RunCases: every
    numeric column except bookkeeping is a metric; None = not applicable to that case."""
    label = label or run_id
    try:
        ids = [str(row["case_id"]) for row in rows]
    except (KeyError, TypeError):
        raise CompareError(f"run {label}: the per-case table has no case_id column") from None
    if len(set(ids)) != len(ids):
        raise CompareError(f"run {label}: {CASES_ARTIFACT} has duplicate case IDs")
    info = {i: case_info(row) for i, row in zip(ids, rows, strict=True)}
    ranks = {
        i: float(row["first_rank"])
        for i, row in zip(ids, rows, strict=True)
        if isinstance(row.get("first_rank"), int | float)
    }
    columns = list(dict.fromkeys(key for row in rows for key in row))
    values: dict[str, dict[str, float]] = {}
    for name_ in columns:
        if name_ in NOT_METRICS:
            continue
        col = [row.get(name_) for row in rows]
        numbers = [v for v in col if v is not None]
        if numbers and all(isinstance(v, int | float) and not isinstance(v, bool) for v in numbers):
            # None = not applicable to that case (e.g. ranking metrics of an unanswerable case)
            values[name_] = {i: float(v) for i, v in zip(ids, col, strict=True) if v is not None}
    return RunCases(
        run_id=run_id,
        name=name,
        values=values,
        start_time=start_time,
        objective=objective,
        info=info,
        ranks=ranks,
    )


def case_diffs(result: Result, metric: str, top: int = 3) -> list[Any]:
    """The per-case view of every run against the baseline on `metric` (default: the objective)."""
    fallback = "recall_at_5" if "recall_at_5" in result.metrics or not result.metrics else result.metrics[0]
    metric = metric or result.baseline.objective or fallback
    base = result.baseline
    base_values = base.column(metric)
    if base_values is None:
        available = ", ".join(sorted(base.values) + (["first_rank"] if base.ranks else []))
        raise CompareError(
            f"--cases {metric}: the baseline {base.label} has no such column; available: {available}"
        )
    out = []
    for run in result.runs:
        if run is base:
            continue
        values = run.column(metric)
        if values is None:
            result.warnings.append(f"--cases {metric}: run {run.label} has no such column; left out")
            continue
        out.append(case_diff(metric, base.label, base_values, base.info, run.label, values, run.info, top))
    return out
