"""`evalpipe compare`: are the differences between runs real? Paired statistics over shared cases.

This module is the command line: which runs (`compare.runs`), the statistics
(`evalpipe.stats.comparison`), how they are shown (`compare.render`), `--log`
(`compare.log`) and suite runs (`compare.suites`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from evalpipe.compare.labels import label_warnings
from evalpipe.compare.log import log_comparison
from evalpipe.compare.render import markdown, print_table
from evalpipe.compare.runs import (
    MIN_PREFIX,
    data_notes,
    get_run,
    load_cases,
    measured_run,
    measured_runs,
    open_tracker,
    pick_baseline,
    select_runs,
)
from evalpipe.compare.suites import compare_suites, is_suite_run
from evalpipe.reporting import case_diff_view
from evalpipe.safety.cli_parser import CommandParser
from evalpipe.safety.errors import print_error
from evalpipe.stats.comparison import CompareError, case_diffs, compare_runs
from evalpipe.stats.corrections import DEFAULT_METHOD, METHODS
from evalpipe.stats.power import POWER

EXAMPLES = """\
examples:
  evalpipe compare --experiment evalpipe/gold
  evalpipe compare --sweep 3f2a9c1d0b7e --metrics recall_at_5 mrr --baseline "bm25 k1=1.2 b=0.75"
  evalpipe compare --runs 1a2b... 3c4d... --resamples 20000 --markdown compare.md --log
  python -m evalpipe compare --tracking-uri http://127.0.0.1:5000 --experiment evalpipe/scifact

Each run must have the per-case table cases.json (every evalpipe run logs it).
Runs are compared on the cases present in all of them. Exit status: 0 done, 2 bad input.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="evalpipe compare",
        description=(
            "Compare evaluation runs case by case: per metric, each run's mean with a bootstrap CI,\n"
            "and against a baseline the paired bootstrap CI of the difference and a paired\n"
            "randomization p-value. Differences with p < alpha after correcting over every run x metric\n"
            "(Holm by default) are marked '*'; each says the smallest difference it could detect."
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
    parser.add_argument(
        "--correction",
        choices=METHODS,
        default=DEFAULT_METHOD,
        help="multiple-comparison correction over the runs x metrics: holm (family-wise error, default), "
        "bh (false discovery rate) or none",
    )
    parser.add_argument(
        "--power",
        type=float,
        default=POWER,
        help="power at which each difference's smallest detectable size is computed (default 0.8)",
    )
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
    # lazy: rich, ~24 ms
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
                extra = get_run(client, args.baseline)
            except CompareError:
                raise exc from None
            extra_cases = load_cases(client, extra)
            if extra_cases.reuse_line:
                reuse_notes.append(extra_cases.reuse_line)
            runs.insert(0, extra_cases)
            mlflow_runs.insert(0, measured_run(client, extra, extra_cases))
            baseline = 0
        notes += data_notes(mlflow_runs)
        result = compare_runs(
            runs, baseline, args.metrics, args.resamples, args.alpha, args.seed, args.correction, args.power
        )
        result.warnings.extend(label_warnings(result))  # judged@k: may a difference be the labels'?
        diffs = case_diffs(result, args.cases, args.top) if args.cases is not None else []
    except CompareError as exc:
        print_error(exc, prog="evalpipe compare")
        return 2
    # lazy: rich, ~18 ms
    from rich.markup import escape

    for note in reuse_notes:  # how each reused sweep point was compared
        err.print(f"note: {escape(note)}", highlight=False, soft_wrap=True)
    for note in notes + result.warnings:
        err.print(f"[yellow]warning:[/] {escape(note)}", soft_wrap=True)
    print_table(console, result, args.resamples, args.alpha)
    text = markdown(result, args.resamples, args.alpha)
    if diffs:
        case_diff_view.print_diffs(console, diffs)
        text += "\n" + case_diff_view.markdown(diffs)
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
        # lazy: evalpipe.tracking.links, ~4 ms
        from evalpipe.tracking.links import run_link_suffix

        link = run_link_suffix(tracker.uri, experiment_id, run_id)
        console.print(f"MLflow: logged the comparison as run [bold]{run_id}[/]{link}", soft_wrap=True)
    return 0
