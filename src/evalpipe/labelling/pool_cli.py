"""`evalpipe pool`: a judging batch from several runs on one fixture (docs/growing_fixtures.md).

    evalpipe pool --fixture fixtures/gold.yaml outputs/bm25 outputs/bm25f outputs/exact -o gold.pool.jsonl
    evalpipe pool --fixture fixtures/gold.yaml --runs 3f2a... 9b1c... --tracking-uri sqlite:///mlruns/mlflow.db

Every run must have been made on this fixture as it is now (its `evalpipe.fixture_sha256`
tag): a run on another fixture, or on this one before an edit, is refused with one line and
exit 2, since its rankings were scored against other labels.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from evalpipe.inputs.fixture import load_fixture
from evalpipe.judge.batch import write_batch
from evalpipe.labelling import plan
from evalpipe.labelling.pooling import pool
from evalpipe.labelling.runs import PooledRun, from_folder, from_mlflow, unique_labels
from evalpipe.safety.cli_parser import CommandParser
from evalpipe.safety.errors import EvalpipeError, print_error

PROG = "evalpipe pool"


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(
        prog=PROG,
        description="Pool the unlabelled top-k candidates of several runs on one fixture into a judging "
        "batch, "
        "the candidates that can change a comparison first.",
    )
    p.add_argument(
        "folders", nargs="*", type=Path, help="run output folders (with cases.jsonl and tags.json)"
    )
    p.add_argument(
        "--runs",
        nargs="+",
        default=[],
        metavar="RUN_ID",
        help="MLflow run IDs (a sweep parent or suite run stands for its child runs)",
    )
    p.add_argument(
        "--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlruns/mlflow.db"
    )
    p.add_argument("--fixture", required=True, type=Path, help="the fixture YAML the runs were made on")
    p.add_argument("--depth", type=int, default=5, help="pool each run's top DEPTH (default 5)")
    p.add_argument(
        "-o", "--output", type=Path, help="the batch file (default: <fixture stem>.pool.jsonl here)"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return _run(args)
    except EvalpipeError as exc:
        print_error(exc, prog=PROG)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.depth < 1:
        raise EvalpipeError(f"--depth {args.depth}: pool at least the top 1")
    if not args.folders and not args.runs:
        raise EvalpipeError("no runs given: name run output folders, or --runs RUN_ID ...")
    if not args.fixture.is_file():
        raise EvalpipeError(f"--fixture {args.fixture}: no such fixture file")
    try:
        fixture = load_fixture(args.fixture)
    except EvalpipeError:
        raise
    except Exception as exc:  # a loader error is named by the loader; anything else in one line
        raise EvalpipeError(f"--fixture {args.fixture}: {exc}") from None
    runs: list[PooledRun] = [from_folder(f) for f in args.folders]
    for run_id in args.runs:
        runs += from_mlflow(args.tracking_uri, run_id)
    for r in runs:
        if r.fixture_sha256 != fixture.sha256:
            raise EvalpipeError(
                f"{r.source} ({r.label}) ran on fixture sha256 {r.fixture_sha256[:12] or '?'}, but "
                f"{args.fixture} is {fixture.sha256[:12]}: another fixture, or edited since; "
                "re-run it on this one"
            )
    runs = unique_labels(runs)
    cases = [(c.id, c.tier, c.query, c.qrels) for c in fixture.cases if c.qrels]
    items = pool(runs, cases, args.depth)
    out = args.output or Path(f"{args.fixture.stem}.pool.jsonl")
    header = {
        "fixture": str(args.fixture),
        "fixture_name": fixture.name,
        "fixture_sha256": fixture.sha256,
        "depth": args.depth,
        "runs": [{"label": r.label, "source": r.source} for r in runs],
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    write_batch(out, header, items)
    pooled_cases = {it.case_id for it in items}
    changing = sum(1 for it in items if it.priority > 0)
    print(
        f"wrote {out}: {len(items)} candidates from {len(runs)} runs ({', '.join(r.label for r in runs)}) "
        f"over {len(pooled_cases)} cases at depth {args.depth}; {changing} can change a comparison (first)"
    )
    tiers: dict[str, int] = {}
    for it in items:
        tiers[it.tier] = tiers.get(it.tier, 0) + 1
    print("by tier: " + ", ".join(f"{t} {n}" for t, n in tiers.items()))
    for it in items[:5]:
        print(f"  {it.priority:.3f}  {it.case_id}  {it.candidate}  ({it.reason})")
    metric = f"recall_at_{args.depth}"
    values = runs[0].values.get(metric)
    if values:
        tier_of = {c.id: c.tier for c in fixture.cases}
        seconds, timed = plan.seconds_per_label(out.parent)
        per_case = len(items) / max(1, len(cases))
        for line in plan.plan_lines(plan.tier_plans(values, tier_of), per_case, seconds, timed, metric):
            print(line)
    return 0
