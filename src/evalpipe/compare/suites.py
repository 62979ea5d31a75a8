"""`evalpipe compare` over suite runs: fixture by fixture, then the suites' own aggregate figures.

A suite run has no cases of its own: its fixtures' runs (children, role suite_member) do. So
suites are compared on each fixture they share, with the same paired statistics as any two
runs (`evalpipe.stats.comparison.compare_runs` over that fixture's cases), each fixture's
table labelled with the suite runs' names.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from evalpipe.compare.render import markdown, print_table
from evalpipe.compare.runs import pick_baseline
from evalpipe.safety.errors import print_error
from evalpipe.stats.comparison import CompareError, compare_runs
from evalpipe.suite.members import MEMBER_ROLE, SUITE_FIXTURE_TAG, SUITE_TAG
from evalpipe.tracking.cases import load_cases


def is_suite_run(run: Any) -> bool:
    tags = run.data.tags
    return SUITE_TAG in tags and SUITE_FIXTURE_TAG not in tags


def members_of(client: Any, run: Any) -> dict[str, Any]:
    """{fixture: its FINISHED run} under suite run `run`."""
    # lazy: evalpipe.tracking.sweep_summary, yaml, ~40 ms
    from evalpipe.tracking.sweep_summary import search_all

    found = search_all(client, f"tags.`mlflow.parentRunId` = '{run.info.run_id}'")
    out = {}
    for r in sorted(found, key=lambda r: r.info.start_time or 0):
        if r.data.tags.get("evalpipe.role") == MEMBER_ROLE and r.info.status == "FINISHED":
            out[r.data.tags.get(SUITE_FIXTURE_TAG, "")] = r
    return out


def compare_suites(
    client: Any, suites: list[Any], args: Any, console: Any, err: Any, notes: list[str]
) -> int:
    """Print (and with --markdown write) one comparison per shared fixture; exit status as compare's."""
    members = {s.info.run_id: members_of(client, s) for s in suites}
    order = list(members[suites[0].info.run_id])
    shared = [f for f in order if all(f in m for m in members.values())]
    for s in suites:
        extra = sorted(set(members[s.info.run_id]) - set(shared))
        if extra:
            notes.append(
                f"suite run {s.info.run_name} ({s.info.run_id[:8]}): fixture(s) {extra} not in every suite"
            )
    if not shared:
        print_error("the suite runs share no finished fixture run", prog="evalpipe compare")
        return 2
    texts = []
    for note in notes:
        err.print(f"[yellow]warning:[/] {note}")
    for fixture in shared:
        try:
            runs = [
                replace(
                    load_cases(client, members[s.info.run_id][fixture]), name=f"{s.info.run_name} [{fixture}]"
                )
                for s in suites
            ]
            baseline = suite_baseline(suites, runs, args.baseline, pick_baseline)
            result = compare_runs(
                runs,
                baseline,
                args.metrics,
                args.resamples,
                args.alpha,
                args.seed,
                args.correction,
                args.power,
            )
        except CompareError as exc:
            print_error(f"fixture {fixture}: {exc}", prog="evalpipe compare")
            return 2
        for w in result.warnings:
            err.print(f"[yellow]warning:[/] {fixture}: {w}")
        console.print(f"[bold]fixture {fixture}[/]", highlight=False)
        print_table(console, result, args.resamples, args.alpha)
        texts.append(f"## fixture `{fixture}`\n\n" + markdown(result, args.resamples, args.alpha))
    console.print(aggregate_line(suites), highlight=False)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text("# evalpipe compare (suites)\n\n" + "\n".join(texts), encoding="utf-8")
        console.print(f"wrote {args.markdown}")
    if getattr(args, "log", False):
        err.print("[yellow]note:[/] --log is not recorded for suite comparisons (compare their fixture runs)")
    return 0


def suite_baseline(suites: list[Any], runs: list[Any], wanted: str | None, pick) -> int:
    """--baseline as a suite run's ID (or prefix) or name; else as compare reads it."""
    if not wanted:
        return 0
    match = [i for i, s in enumerate(suites) if s.info.run_id.startswith(wanted) or s.info.run_name == wanted]
    return match[0] if len(match) == 1 else pick(runs, wanted)


def aggregate_line(suites: list[Any]) -> str:
    """Each suite's objective as it aggregated it (mean or min over its fixtures)."""
    parts = []
    for s in suites:
        objective = s.data.tags.get("evalpipe.objective", "recall_at_5")
        value = s.data.metrics.get(objective)
        agg = s.data.tags.get("evalpipe.suite.agg", "mean")
        shown = "—" if value is None else f"{value:.4f}"
        parts.append(f"{s.info.run_name} ({s.info.run_id[:8]}): {objective} {agg} {shown}")
    return "suite aggregates: " + " · ".join(parts)
