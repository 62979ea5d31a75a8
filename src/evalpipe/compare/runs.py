"""Which runs `evalpipe compare` (and the gate) compares: runs read from an MLflow store by ID,
ID prefix, experiment or sweep, one split at a time, reused sweep points followed to the run that
measured them, and each run's per-case table (`cases.json`) as `RunCases`."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from evalpipe.stats.comparison import CompareError, RunCases
from evalpipe.tracking.cases import load_cases
from evalpipe.tracking.reuse import REUSED_TAG, is_reuse

EXCLUDED_ROLES = ("parent", "compare", "gate")


def open_tracker(uri: str | None) -> Any:
    """A tracker on an existing store; never creates one (a typo must not leave an empty database)."""
    # lazy: evalpipe.tracking, ~12 ms
    from evalpipe.tracking import mlflow_store

    resolved = mlflow_store.normalise_uri(uri)
    db = mlflow_store.sqlite_path(resolved)
    if db is not None and not db.is_file():
        raise CompareError(f"no MLflow store at {db} (pass --tracking-uri or set MLFLOW_TRACKING_URI)")
    try:
        return mlflow_store.ensure_store(resolved)
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


def get_run(client: Any, run_id: str) -> Any:
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
    # lazy: evalpipe.tracking.sweep_summary, yaml, ~48 ms
    from evalpipe.tracking.sweep_summary import search_all

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
        runs = [get_run(client, rid) for rid in dict.fromkeys(args.runs)]
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
        # lazy: evalpipe.tracking.sweep_summary, yaml, ~46 ms
        from evalpipe.tracking.sweep_summary import search_all, sweep_run_ids

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
        runs = [reused.get(rid) or get_run(client, rid) for rid in ids]
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
    # lazy: evalpipe.inputs.split, ~8 ms
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


def measured_run(client: Any, run: Any, cases: RunCases) -> Any:
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
            runs[cases.run_id] = measured_run(client, run, cases)
        out[cases.run_id] = cases
    return list(out.values()), list(runs.values()), notes


def replace_aliases(cases: RunCases, aliases: tuple[str, ...]) -> RunCases:

    return replace(cases, aliases=aliases)


def data_notes(runs: Sequence[Any]) -> list[str]:
    """A warning when the runs were measured on different data (fixture or corpus sha256, read from
    their MLflow dataset inputs, else their tags): their differences then say nothing about rankers."""
    # lazy: evalpipe.tracking.datasets, ~6 ms
    from evalpipe.tracking.datasets import logged_data

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
