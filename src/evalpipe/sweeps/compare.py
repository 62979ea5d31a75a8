"""`evalpipe compare`: are the differences between runs real? Paired statistics over shared cases.

Means alone mislead on a fixture of a few hundred queries: two BM25 settings
0.8 points apart in recall@5 are usually the same system. Every run logs its
per-case values (the `cases.json` table), so we align the runs case by case
and report, per metric, each run's mean with a bootstrap CI, and against a
baseline the paired bootstrap CI of the difference and a paired randomization
p-value (see `evalpipe.sweeps.stats` for the methods). p-values are per comparison,
not corrected for multiple comparisons: with many runs and metrics expect some
p < 0.05 by chance.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evalpipe.safety.errors import EvalpipeError
from evalpipe.sweeps.case_diff import CaseInfo, case_info
from evalpipe.sweeps.reuse import REUSED_TAG, is_reuse

CASES_ARTIFACT = "cases.json"
EXCLUDED_ROLES = ("parent", "compare", "gate")
EXAMPLES = """\
examples:
  evalpipe compare --experiment evalpipe/gold
  evalpipe compare --sweep 3f2a9c1d0b7e --metrics recall_at_5 mrr --baseline "bm25 k1=1.2 b=0.75"
  evalpipe compare --runs 1a2b... 3c4d... --resamples 20000 --markdown compare.md --log
  python -m evalpipe compare --tracking-uri http://127.0.0.1:5000 --experiment evalpipe/scifact

Each run must have the per-case table cases.json (every evalpipe run logs it).
Runs are compared on the cases present in all of them. Exit status: 0 done, 2 bad input.
"""


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


@dataclass(frozen=True)
class Result:
    comparisons: list[Comparison]
    baseline: RunCases
    runs: list[RunCases]
    cases: list[str]
    metrics: list[str]
    warnings: list[str] = field(default_factory=list)


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
) -> Result:
    """Align `runs` on their common cases and compare each with `runs[baseline]`, metric by metric.

    CIs are at level 1 - alpha, so a difference whose CI excludes 0 and a p < alpha mostly agree.
    """
    from evalpipe.sweeps.stats import bootstrap_ci, paired_bootstrap_ci_diff, paired_randomization_test

    if not runs:
        raise CompareError("no runs selected")
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
    compared = []
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
        for run, values in zip(have, arrays, strict=True):
            mean, lo, hi = bootstrap_ci(values, resamples, confidence, seed)
            if run is base:
                out.append(Comparison(metric, run, mean, lo, hi, is_baseline=True))
                continue
            diff, dlo, dhi = paired_bootstrap_ci_diff(values, arrays[0], resamples, confidence, seed)
            p = paired_randomization_test(values, arrays[0], resamples, seed)
            out.append(Comparison(metric, run, mean, lo, hi, False, diff, dlo, dhi, p, p < alpha))
    if not compared:
        raise CompareError("no metric could be compared: " + "; ".join(warnings[-len(metrics) :]))
    return Result(out, base, ordered, cases, compared, warnings)


# --- reading runs from MLflow ---------------------------------------------------------------


def open_tracker(uri: str | None) -> Any:
    """A tracker on an existing store; never creates one (a typo must not leave an empty database)."""
    from evalpipe.reporting import tracking

    resolved = tracking.normalise_uri(uri)
    db = tracking.sqlite_path(resolved)
    if db is not None and not db.is_file():
        raise CompareError(f"no MLflow store at {db} (pass --tracking-uri or set MLFLOW_TRACKING_URI)")
    try:
        return tracking.ensure_store(resolved)
    except Exception as exc:
        raise CompareError(f"cannot open MLflow store {resolved!r}: {type(exc).__name__}: {exc}") from None


def _search(client: Any, experiment_ids: list[str], filter_string: str = "") -> list[Any]:
    runs: list[Any] = []
    token = None
    while True:
        page = client.search_runs(
            experiment_ids, filter_string=filter_string, max_results=1000, page_token=token
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs


FULL_ID = re.compile(r"[0-9a-f]{32}")
#: The shortest run-ID prefix accepted (compare and sweeps print 8 characters).
MIN_PREFIX = 6


def _get_run(client: Any, run_id: str) -> Any:
    """A run by its ID or by a unique prefix of it (as compare and sweeps print them, 8 characters)."""
    if not FULL_ID.fullmatch(run_id):
        run_id = resolve_prefix(client, run_id)
    try:
        return client.get_run(run_id)
    except Exception:
        raise CompareError(f"unknown run ID {run_id!r} in this tracking store") from None


def resolve_prefix(client: Any, prefix: str) -> str:
    """The one run ID starting with `prefix`, over every experiment of the store."""
    if len(prefix) < MIN_PREFIX or not re.fullmatch(r"[0-9a-f]+", prefix):
        raise CompareError(
            f"run ID {prefix!r} is neither a 32-character run ID nor a prefix of at least "
            f"{MIN_PREFIX} hex digits"
        )
    from evalpipe.sweeps.summary import search_all

    matches = sorted({r.info.run_id for r in search_all(client, "") if r.info.run_id.startswith(prefix)})
    if not matches:
        raise CompareError(f"no run ID starts with {prefix!r} in this tracking store")
    if len(matches) > 1:
        raise CompareError(
            f"run ID prefix {prefix!r} matches {len(matches)} runs ({', '.join(matches[:5])}); "
            "give more characters"
        )
    return matches[0]


def select_runs(client: Any, args: argparse.Namespace) -> tuple[list[Any], list[str]]:
    """MLflow runs chosen by --runs / --experiment / --sweep (oldest first) and notes on runs left out."""
    notes: list[str] = []
    if args.runs:
        runs = [_get_run(client, rid) for rid in dict.fromkeys(args.runs)]
    elif args.experiment:
        exp = client.get_experiment_by_name(args.experiment)
        if exp is None:
            names = sorted(e.name for e in client.search_experiments())
            raise CompareError(
                f"unknown experiment {args.experiment!r}; known: {', '.join(names) or '(none)'}"
            )
        runs = _search(client, [exp.experiment_id], "attributes.status = 'FINISHED'")
        runs = [r for r in runs if r.data.tags.get("evalpipe.role") not in EXCLUDED_ROLES]
        runs = [r for r in runs if not is_reuse(r)]  # a reused sweep point: its original run is here too
        if not runs:
            raise CompareError(f"experiment {args.experiment!r} has no FINISHED evaluation runs")
        # A skipped ranker's run ends FAILED (exit 3) unless allow_skipped: name it below all the same.
        failed = _search(client, [exp.experiment_id], "attributes.status = 'FAILED'")
        runs += [r for r in failed if r.data.tags.get("evalpipe.skipped")]
    else:
        from evalpipe.sweeps.summary import search_all, sweep_run_ids

        ids = sweep_run_ids(client, args.sweep)
        if not ids:
            raise CompareError(
                f"no finished runs for sweep {args.sweep!r} (the ID is the evalpipe.sweep_id tag "
                "of the sweep's parent run)"
            )
        # A reused point stays the sweep's child here, so compare says which run measured it (and
        # names a deleted original) instead of silently reading another run.
        reused = {
            r.data.tags[REUSED_TAG]: r
            for r in search_all(client, f"tags.`evalpipe.sweep_id` = '{args.sweep}'")
            if is_reuse(r) and r.info.status == "FINISHED" and r.data.tags.get("evalpipe.role") == "child"
        }
        runs = [reused.get(rid) or _get_run(client, rid) for rid in ids]
    if not args.runs:
        skipped = [r for r in runs if r.data.tags.get("evalpipe.skipped")]
        for r in skipped:
            notes.append(f"left out {r.info.run_name} ({r.info.run_id[:8]}): its ranker was skipped")
        runs = [r for r in runs if not r.data.tags.get("evalpipe.skipped")]
    runs = by_split(runs, getattr(args, "split", None), bool(args.runs))
    runs.sort(key=lambda r: (r.info.start_time or 0, r.info.run_id))
    return runs, notes


def by_split(runs: list[Any], wanted: str | None, explicit: bool) -> list[Any]:
    """Runs of one split (tag evalpipe.split; none = all): dev and test runs share no case, so an
    experiment holding both (a dev sweep and its hold-out re-runs) needs --split."""
    from evalpipe.inputs.split import SPLIT_TAG

    def split_of(run: Any) -> str:
        return run.data.tags.get(SPLIT_TAG) or "all"

    if wanted:
        kept = [r for r in runs if split_of(r) == wanted]
        if not kept:
            raise CompareError(f"no selected run measured --split {wanted}")
        return kept
    counts: dict[str, int] = {}
    for r in runs:
        counts[split_of(r)] = counts.get(split_of(r), 0) + 1
    if len(counts) > 1 and not explicit:
        seen = ", ".join(f"{s}: {n}" for s, n in sorted(counts.items()))
        raise CompareError(
            f"the selected runs measure different splits ({seen}) and share no cases across them; "
            f"add --split {max(counts, key=lambda s: counts[s])} (or another of {', '.join(sorted(counts))})"
        )
    return runs


def load_cases(client: Any, run: Any) -> RunCases:
    """The run's cases.json as {metric: {case_id: value}} (every numeric column except bookkeeping).

    A reused sweep point is read as the run it reuses (through any chain of reuses): its figures
    are that run's and its per-case table is there; `aliases` and `reuse_line` record the point."""
    from dataclasses import replace

    from evalpipe.sweeps.measured import MissingOriginal, follow

    if is_reuse(run):
        try:
            point = follow(client, run)
        except MissingOriginal as exc:
            raise CompareError(str(exc)) from None
        cases = load_cases(client, point.measured)
        aliases = (run.info.run_id, run.info.run_name or "", *cases.aliases)
        return replace(cases, aliases=aliases, reuse_line=point.line())
    label = f"{run.info.run_name} ({run.info.run_id})"
    with tempfile.TemporaryDirectory(prefix="evalpipe-compare-") as tmp:
        try:
            path = client.download_artifacts(run.info.run_id, CASES_ARTIFACT, tmp)
            table = json.loads(Path(path).read_text(encoding="utf-8"))
        except Exception:
            raise CompareError(
                f"run {label} has no {CASES_ARTIFACT} artifact (per-case table); "
                "re-run it with a current evalpipe or leave it out"
            ) from None
    try:
        columns = list(table["columns"])
        rows = [dict(zip(columns, row, strict=False)) for row in table["data"]]
    except (KeyError, TypeError, ValueError):
        raise CompareError(f"run {label}: {CASES_ARTIFACT} has no case_id column") from None
    return cases_from_rows(
        rows,
        run_id=run.info.run_id,
        name=run.info.run_name or "",
        label=label,
        start_time=int(run.info.start_time or 0),
        objective=str(run.data.params.get("objective") or run.data.tags.get("evalpipe.objective", "")),
    )


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


def _measured_run(client: Any, run: Any, cases: RunCases) -> Any:
    return run if cases.run_id == run.info.run_id else client.get_run(cases.run_id)


def measured_runs(client: Any, mlflow_runs: Sequence[Any]) -> tuple[list[RunCases], list[Any], list[str]]:
    """Every selected run's cases, reused points as the runs they reuse (one line each saying so);
    a measured run selected twice (itself and a point reusing it) is compared once."""
    out: dict[str, RunCases] = {}
    runs: dict[str, Any] = {}
    notes: list[str] = []
    for run in mlflow_runs:
        cases = load_cases(client, run)
        if cases.reuse_line:
            notes.append(cases.reuse_line)
        if cases.run_id in out:
            first = out[cases.run_id]
            notes.append(
                f"run {cases.run_id[:8]} selected twice (as itself or a reused point); compared once"
            )
            cases = replace_aliases(first, first.aliases + cases.aliases)
        else:
            runs[cases.run_id] = _measured_run(client, run, cases)
        out[cases.run_id] = cases
    return list(out.values()), list(runs.values()), notes


def replace_aliases(cases: RunCases, aliases: tuple[str, ...]) -> RunCases:
    from dataclasses import replace

    return replace(cases, aliases=aliases)


def data_notes(runs: Sequence[Any]) -> list[str]:
    """A warning when the runs were measured on different data (fixture or corpus sha256, read from
    their MLflow dataset inputs, else their tags): their differences then say nothing about rankers."""
    from evalpipe.reporting.datasets import logged_data

    groups: dict[tuple[str, str], list[str]] = {}
    for run in runs:
        data = logged_data(run)
        groups.setdefault((data.fixture_sha256[:36], data.corpus_sha256[:36]), []).append(run.info.run_id[:8])
    if len(groups) < 2:
        return []
    parts = [
        f"fixture {f[:12] or '?'} / corpus {c[:12] or '?'}: {', '.join(ids)}"
        for (f, c), ids in groups.items()
    ]
    return [
        "the runs were not measured on the same data (" + "; ".join(parts) + "); compare runs of one fixture"
    ]


def pick_baseline(runs: list[RunCases], wanted: str | None) -> int:
    """Index of --baseline (a run ID, an ID prefix of 6+ chars, or a unique run name); default the oldest."""
    if not wanted:
        return 0

    def ids_of(r: RunCases) -> list[str]:
        return [r.run_id, *r.aliases[0::2]]

    by_id = [
        i
        for i, r in enumerate(runs)
        if any(x == wanted or (len(wanted) >= MIN_PREFIX and x.startswith(wanted)) for x in ids_of(r))
    ]
    if len(by_id) == 1:
        return by_id[0]
    by_name = [i for i, r in enumerate(runs) if wanted in (r.name, *r.aliases[1::2])]
    if len(by_name) == 1:
        return by_name[0]
    if len(by_name) > 1:
        listed = "; ".join(f"{runs[i].run_id} ({runs[i].name})" for i in by_name)
        raise CompareError(
            f"--baseline {wanted!r} is ambiguous: it names {len(by_name)} runs ({listed}); pass one of "
            "these run IDs (or an 8-character prefix)"
        )
    raise CompareError(f"--baseline {wanted!r} is not among the selected runs ({len(runs)} runs)")


def case_diffs(result: Result, metric: str, top: int = 3) -> list[Any]:
    """The per-case view of every run against the baseline on `metric` (default: the objective)."""
    from evalpipe.sweeps.case_diff import case_diff

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


# --- output ------------------------------------------------------------------------------------


def _ci(mean: float, lo: float, hi: float, signed: bool = False) -> str:
    f = "{:+.4f}" if signed else "{:.4f}"
    return f"{f.format(mean)} [{f.format(lo)}, {f.format(hi)}]"


def table_rows(result: Result, alpha: float) -> tuple[list[str], list[list[str]]]:
    level = f"{(1 - alpha) * 100:g}%"
    header = ["metric", "run", f"mean [{level} CI]", f"Δ vs baseline [{level} CI]", "p", "sig"]
    body = []
    for c in result.comparisons:
        if c.is_baseline:
            body.append([c.metric, c.run.label, _ci(c.mean, c.lo, c.hi), "(baseline)", "", ""])
            continue
        assert c.diff is not None and c.diff_lo is not None and c.diff_hi is not None
        body.append(
            [
                c.metric,
                c.run.label,
                _ci(c.mean, c.lo, c.hi),
                _ci(c.diff, c.diff_lo, c.diff_hi, signed=True),
                f"{c.p_value:.4f}",
                "*" if c.significant else "",
            ]
        )
    return header, body


def caption(result: Result, resamples: int, alpha: float) -> str:
    return (
        f"{len(result.runs)} runs · {len(result.cases)} common cases · baseline {result.baseline.label} · "
        f"{resamples} resamples · * = paired randomization p < {alpha:g} "
        "(not corrected for multiple comparisons)"
    )


def markdown(result: Result, resamples: int, alpha: float) -> str:
    from evalpipe.reporting.report import markdown_table

    lines = ["# evalpipe compare", "", f"_{caption(result, resamples, alpha)}_", ""]
    lines += markdown_table(*table_rows(result, alpha))
    if result.warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in result.warnings]
    return "\n".join(lines) + "\n"


def print_table(console: Any, result: Result, resamples: int, alpha: float) -> None:
    from rich.markup import escape
    from rich.table import Table

    header, body = table_rows(result, alpha)
    body = [[escape(cell) for cell in row] for row in body]  # run names like "fields=[title]"
    table = Table(title=escape(caption(result, resamples, alpha)), title_justify="left")
    for i, h in enumerate(header):
        table.add_column(h, justify="left" if i < 2 else "right", no_wrap=i != 1)
    previous = None
    for row, c in zip(body, result.comparisons, strict=True):
        if previous is not None and c.metric != previous:
            table.add_section()
        previous = c.metric
        style = "bold green" if c.significant and (c.diff or 0) > 0 else "bold red" if c.significant else None
        table.add_row(*row, style=style)
    console.print(table)


def log_comparison(
    tracker: Any,
    result: Result,
    text: str,
    experiment_id: str,
    args: argparse.Namespace,
    diffs: Sequence[Any] = (),
) -> str:
    """Record the comparison as its own MLflow run (role compare) so it sits beside the runs it judges."""
    from evalpipe.reporting import tracking

    tags = {
        "evalpipe.role": "compare",
        "evalpipe.compare.baseline": result.baseline.run_id,
        "evalpipe.compare.runs": ",".join(r.run_id for r in result.runs)[:5000],
    }
    name = f"compare {len(result.runs)} runs vs {result.baseline.name or result.baseline.run_id[:8]}"
    payload = [
        {
            "metric": c.metric,
            "run_id": c.run.run_id,
            "run_name": c.run.name,
            "mean": c.mean,
            "ci": [c.lo, c.hi],
            "baseline": c.is_baseline,
            "diff": c.diff,
            "diff_ci": None if c.diff is None else [c.diff_lo, c.diff_hi],
            "p_value": c.p_value,
            "significant": c.significant,
        }
        for c in result.comparisons
    ]
    with tracking.tracked_run(tracker, experiment_id, name, tags) as run_id:
        params = {
            "metrics": json.dumps(result.metrics),
            "alpha": str(args.alpha),
            "resamples": str(args.resamples),
            "seed": str(args.seed),
            "cases": str(len(result.cases)),
        }
        tracking.log_batch(tracker, run_id, params=params)
        tracking.log_artifact_files(
            tracker, run_id, {"compare.md": text, "compare.json": json.dumps(payload, indent=1)}
        )
        if diffs:  # the per-case view: Markdown, and a table the MLflow artifact view renders
            from evalpipe.sweeps import case_diff

            tracking.log_artifact_files(tracker, run_id, {"diff.md": case_diff.markdown(diffs)})
            tracking.log_table(tracker, run_id, case_diff.table(diffs), "diff.json")
    return run_id


# --- CLI -----------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evalpipe compare",
        description=(
            "Compare evaluation runs case by case: per metric, each run's mean with a bootstrap CI,\n"
            "and against a baseline the paired bootstrap CI of the difference and a paired\n"
            "randomization p-value. Differences with p < alpha are marked '*'."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--experiment", metavar="NAME", help="every FINISHED evaluation run of this experiment"
    )
    which.add_argument(
        "--sweep",
        metavar="SWEEP_ID",
        help="the points of one sweep (tag evalpipe.sweep_id of its parent run)",
    )
    which.add_argument("--runs", metavar="RUN_ID", nargs="+", help="these runs, by MLflow run ID")
    parser.add_argument(
        "--tracking-uri",
        default=os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlruns/mlflow.db",
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or sqlite:///mlruns/mlflow.db, as the app)",
    )
    parser.add_argument(
        "--split",
        choices=("all", "dev", "test"),
        help="only runs of this fixture split (tag evalpipe.split); needed when the selection mixes splits",
    )
    parser.add_argument(
        "--metrics",
        nargs="+",
        metavar="METRIC",
        help="per-case metrics to compare, e.g. recall_at_5 mrr ndcg_at_10 "
        "(default: the objective, recall_at_K, mrr, ndcg_at_K present in every run)",
    )
    parser.add_argument(
        "--baseline", metavar="RUN_ID|RUN_NAME", help="run the others are compared with (default: the oldest)"
    )
    parser.add_argument(
        "--resamples", type=int, default=10000, help="bootstrap / randomization resamples (default 10000)"
    )
    parser.add_argument(
        "--alpha", type=float, default=0.05, help="significance level; CIs are at 1 - alpha (default 0.05)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed, for reproducible CIs and p-values")
    parser.add_argument("--markdown", metavar="OUT.md", type=Path, help="also write the table as Markdown")
    parser.add_argument(
        "--log", action="store_true", help="log the table to a new MLflow run tagged evalpipe.role=compare"
    )
    parser.add_argument(
        "--cases",
        nargs="?",
        const="",
        metavar="METRIC",
        help="also list the cases each run won and lost against the baseline on METRIC, per tier "
        "(default: the baseline's objective; first_rank also works). With --log: diff.md and diff.json",
    )
    parser.add_argument(
        "--top", type=int, default=3, help="with --cases: how many IDs of each ranking to show (default 3)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from rich.console import Console

    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    # Piped output (CI logs, `| less`) gets a wide table instead of rich's 80-column default.
    console = Console(width=None if sys.stdout.isatty() else 160)
    err = Console(stderr=True)
    try:
        given = list(args.runs or [])
        twice = sorted({r for r in given if given.count(r) > 1})
        if twice:  # before the store is opened: the mistake is on the command line
            raise CompareError(
                f"--runs gives the same run ID twice ({', '.join(map(repr, twice))}): a run compared with "
                "itself has no differences; give two different runs (or --baseline RUN)"
            )
        tracker = open_tracker(args.tracking_uri)
        client = tracker.client
        mlflow_runs, notes = select_runs(client, args)
        ids = [r.info.run_id for r in mlflow_runs]
        if args.runs and len(set(ids)) < len(given):
            distinct = ", ".join(dict.fromkeys(ids))
            raise CompareError(
                f"--runs {' '.join(given)} name {len(set(ids))} distinct run(s), not {len(given)}: "
                f"{distinct} (an ID and its prefix name the same run): give each run once"
            )
        from evalpipe.suite.compare import compare_suites, is_suite_run

        suites = [r for r in mlflow_runs if is_suite_run(r)]
        if suites:  # suites are compared fixture by fixture, on their fixtures' runs
            return compare_suites(client, suites, args, console, err, notes)
        measured = [r for r in mlflow_runs if not r.data.tags.get("evalpipe.skipped")]
        if len(measured) < 2 and not (args.baseline and len(measured) == 1):
            where = args.experiment or args.sweep or "the given runs"
            found = f"only {measured[0].info.run_name!r}" if measured else "none"
            raise CompareError(
                f"nothing to compare: {where} has {len(measured)} measured run ({found}); a comparison needs "
                "two: run another configuration first, or give --baseline RUN"
            )
        runs, mlflow_runs, reuse_notes = measured_runs(client, mlflow_runs)
        try:
            baseline = pick_baseline(runs, args.baseline)
        except CompareError as exc:
            if not re.fullmatch(rf"[0-9a-f]{{{MIN_PREFIX},32}}", args.baseline or ""):
                raise
            try:  # a baseline outside the selection, by ID or ID prefix: add it
                extra = _get_run(client, args.baseline)
            except CompareError:
                raise exc from None
            extra_cases = load_cases(client, extra)
            if extra_cases.reuse_line:
                reuse_notes.append(extra_cases.reuse_line)
            runs.insert(0, extra_cases)
            mlflow_runs.insert(0, _measured_run(client, extra, extra_cases))
            baseline = 0
        notes += data_notes(mlflow_runs)
        result = compare_runs(runs, baseline, args.metrics, args.resamples, args.alpha, args.seed)
        diffs = case_diffs(result, args.cases, args.top) if args.cases is not None else []
    except CompareError as exc:
        print(f"evalpipe compare: error: {exc}", file=sys.stderr)
        return 2
    from rich.markup import escape

    for note in reuse_notes:  # how each reused sweep point was compared
        err.print(f"note: {escape(note)}", highlight=False, soft_wrap=True)
    for note in notes + result.warnings:
        err.print(f"[yellow]warning:[/] {escape(note)}", soft_wrap=True)
    print_table(console, result, args.resamples, args.alpha)
    text = markdown(result, args.resamples, args.alpha)
    if diffs:
        from evalpipe.sweeps import case_diff

        case_diff.print_diffs(console, diffs)
        text += "\n" + case_diff.markdown(diffs)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(text, encoding="utf-8")
        console.print(f"wrote {args.markdown}")
    if args.log:
        base_run = mlflow_runs[[r.run_id for r in runs].index(result.baseline.run_id)]
        experiment_id = base_run.info.experiment_id
        if args.experiment:
            experiment_id = client.get_experiment_by_name(args.experiment).experiment_id
        run_id = log_comparison(tracker, result, text, experiment_id, args, diffs)
        from evalpipe.reporting.links import run_link_suffix

        link = run_link_suffix(tracker.uri, experiment_id, run_id)
        console.print(f"MLflow: logged the comparison as run [bold]{run_id}[/]{link}", soft_wrap=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
