"""`evalpipe gate` and `evalpipe baseline {set,list,export}`: the command lines.

Exit codes of `gate`: 0 no regression, 1 regression, 2 cannot compare (bad input, a missing
run, different data). A gate that cannot compare still writes one line to the step summary,
so the pull request says why.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalpipe.gate.model import GateError
from evalpipe.safety.cli_parser import CommandParser
from evalpipe.safety.errors import print_error
from evalpipe.safety.secrets import mask_text
from evalpipe.stats.comparison import CompareError
from evalpipe.stats.corrections import METHODS

DEFAULT_URI = "sqlite:///mlruns/mlflow.db"

GATE_EXAMPLES = """\
examples:
  evalpipe gate --baseline main --candidate 3f2a9c1d                 # a named baseline in the store
  evalpipe gate --baseline baseline.json --candidate outputs/pr      # an exported file, a saved run dir
  evalpipe gate --baseline 1a2b3c4d --candidate 5e6f7a8b --metrics recall_at_5 ndcg_at_5 \\
      --max-drop 0.03 --max-drop-for mrr=0.05 --alpha 0.05 --scope both
  evalpipe gate --baseline baseline.json --candidate outputs/pr --rules gate.yaml --markdown gate.md

A regression is a drop larger than the allowed drop (--max-drop, absolute) AND a paired
randomization p-value below --alpha after correcting over the gate's rows (--correction, Holm
by default), on any gated metric, overall or in any tier (a gain in one tier does not pay for a
loss in another). Each row says the smallest drop it can detect (power --power, default 0.8); a
warning names the rows whose allowed drop is below it. The baseline and candidate must have been measured on
the same fixture, corpus and split (else exit 2; --allow-different-data compares anyway, flagged).
A suite run (a parent run with one child run per fixture) is gated fixture by fixture.

Exit status: 0 no regression, 1 regression, 2 cannot compare. More: docs/gate.md.
"""

BASELINE_EXAMPLES = """\
examples:
  evalpipe baseline set main 3f2a9c1d          # name a run (or a suite run) as the baseline `main`
  evalpipe baseline list                       # every named baseline of the store
  evalpipe baseline export main -o baseline.json   # figures and per-case values, for CI without a server

Exit status: 0 done, 2 bad input (unknown run or name, a run that cannot be a baseline).
"""


def _uri_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tracking-uri",
        default=None,
        help=f"MLflow tracking URI (default: $MLFLOW_TRACKING_URI or {DEFAULT_URI}, as the app)",
    )


def _uri(value: str | None) -> str:
    return value or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI


def _opener(uri: str):
    """A function opening the store once, on first need (a baseline file needs no store)."""
    opened: list[Any] = []

    def open_store() -> Any:
        if not opened:
            # lazy: evalpipe.compare.runs, ~9 ms
            from evalpipe.compare.runs import open_tracker

            try:
                opened.append(open_tracker(uri))
            except CompareError as exc:
                raise GateError(str(exc)) from None
        return opened[0]

    return open_store


def build_gate_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="evalpipe gate",
        description=(
            "Is the candidate worse than the baseline, per tier, beyond noise, on the same data?\n"
            "Prints a Markdown table (metric, tier, baseline, candidate, delta, CI, p, verdict) and the\n"
            "cases lost and won, writes it to a file (and $GITHUB_STEP_SUMMARY when set), and logs the\n"
            "gate as an MLflow run linked to both runs."
        ),
        epilog=GATE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--baseline",
        required=True,
        metavar="REF",
        help="a named baseline (evalpipe baseline set), a run ID or 6+ digit prefix, an exported "
        "baseline file (evalpipe baseline export) or a saved run directory",
    )
    parser.add_argument(
        "--candidate",
        required=True,
        metavar="REF",
        help="the run to judge: a run ID or prefix, or its saved output directory (hydra.run.dir)",
    )
    _uri_arg(parser)
    rules = parser.add_argument_group("rules (defaults, then --rules FILE, then these flags)")
    rules.add_argument("--rules", type=Path, metavar="FILE.yaml", help="rules file (see docs/gate.md)")
    rules.add_argument(
        "--metrics",
        nargs="+",
        metavar="METRIC",
        help="per-case metrics to gate (default: the baseline's objective and mrr)",
    )
    rules.add_argument(
        "--scope",
        choices=("both", "overall", "tiers"),
        help="gate the overall means, each tier's, or both (default both)",
    )
    rules.add_argument("--tiers", nargs="+", metavar="TIER", help="gate only these tiers (default: all)")
    rules.add_argument(
        "--max-drop", type=float, metavar="DROP", help="allowed absolute drop of any metric (default 0.02)"
    )
    rules.add_argument(
        "--max-drop-for",
        nargs="+",
        default=[],
        metavar="METRIC=DROP",
        help="allowed absolute drop for one metric, e.g. mrr=0.03",
    )
    rules.add_argument(
        "--alpha", type=float, help="significance level of the paired test; CIs at 1 - alpha (default 0.05)"
    )
    rules.add_argument("--resamples", type=int, help="bootstrap / randomization resamples (default 10000)")
    rules.add_argument("--seed", type=int, help="random seed of the resampling (default 0)")
    rules.add_argument(
        "--correction",
        choices=METHODS,
        help="multiple-comparison correction over the gate's rows: holm (family-wise error, default), "
        "bh (false discovery rate) or none",
    )
    rules.add_argument(
        "--power",
        type=float,
        help="power at which each row's smallest detectable drop is computed (default 0.8)",
    )
    parser.add_argument(
        "--allow-different-data",
        action="store_true",
        help="compare even when the fixture, corpus or split differ (flagged in the output)",
    )
    parser.add_argument(
        "--markdown",
        type=Path,
        default=Path("gate.md"),
        metavar="OUT.md",
        help="where to write the table and cases (default gate.md)",
    )
    parser.add_argument("--json", type=Path, metavar="OUT.json", help="also write the result as JSON")
    parser.add_argument("--no-log", action="store_true", help="do not record the gate as an MLflow run")
    return parser


def _step_summary(text: str) -> str | None:
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return None
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text if text.endswith("\n") else text + "\n")
    return path


def _log_target(args: argparse.Namespace, candidate: Any, open_store) -> tuple[Any, str] | None:
    """(tracker, experiment ID) where the gate run goes: the candidate's store and experiment."""
    if not candidate.run_id:
        return None
    if candidate.origin == "store":
        tracker = open_store()
        return tracker, candidate.experiment_id
    if candidate.origin == "saved run" and (candidate.tracking_uri or args.tracking_uri):
        # lazy: evalpipe.compare.runs, ~9 ms
        from evalpipe.compare.runs import open_tracker

        try:
            tracker = open_tracker(args.tracking_uri or candidate.tracking_uri)
            run = tracker.client.get_run(candidate.run_id)
        except (CompareError, Exception):
            return None
        return tracker, run.info.experiment_id
    return None


def gate_main(argv: Sequence[str] | None = None) -> int:
    # lazy: rich, evalpipe.gate, evalpipe.gate.loading, ..., ~57 ms
    from rich.console import Console

    from evalpipe.gate import render
    from evalpipe.gate.loading import resolve
    from evalpipe.gate.rules import load_rules, parse_drop_flags
    from evalpipe.gate.verdict import run_gate

    args = build_gate_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    console = Console(width=None if sys.stdout.isatty() else 160)
    open_store = _opener(_uri(args.tracking_uri))
    try:
        flags = {
            "metrics": args.metrics,
            "scope": args.scope,
            "tiers": args.tiers,
            "max_drop": args.max_drop,
            "max_drops": parse_drop_flags(args.max_drop_for) or None,
            "alpha": args.alpha,
            "resamples": args.resamples,
            "seed": args.seed,
            "correction": args.correction,
            "power": args.power,
        }
        rules = load_rules(args.rules, flags)
        baseline = resolve(args.baseline, open_store, "--baseline", names=True)
        candidate = resolve(args.candidate, open_store, "--candidate", names=False)
        result = run_gate(baseline, candidate, rules, args.allow_different_data)
    except GateError as exc:
        print(f"evalpipe gate: cannot compare: {exc}", file=sys.stderr)
        text = f"## evalpipe gate: cannot compare\n\n{render._md(str(exc))}\n"
        with contextlib.suppress(OSError):  # the PR comment says why there is no verdict
            args.markdown.parent.mkdir(parents=True, exist_ok=True)
            args.markdown.write_text(text, encoding="utf-8")
        with contextlib.suppress(OSError):
            _step_summary(text)
        return 2
    text = render.markdown(result)
    json_text = render.to_json(result)
    render.print_result(console, result)
    try:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(text, encoding="utf-8")
        console.print(f"wrote {args.markdown}", highlight=False)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json_text, encoding="utf-8")
            console.print(f"wrote {args.json}", highlight=False)
        summary = _step_summary(
            text if len(text) < 500_000 else render.markdown(result, render.SUMMARY_CASES)
        )
        if summary:
            console.print(f"appended the table to $GITHUB_STEP_SUMMARY ({summary})", highlight=False)
    except OSError as exc:
        print_error(f"cannot write the report: {exc}", prog="evalpipe gate")
        return 2
    if not args.no_log:
        _log(args, result, candidate, open_store, text, json_text, console)
    return result.exit_code


def _log(args, result, candidate, open_store, text: str, json_text: str, console) -> None:
    """Record the gate run; a store that fails costs the log, never the verdict (said in one line)."""
    # lazy: evalpipe.gate.record, ~8 ms
    from evalpipe.gate.record import log_gate

    try:
        target = _log_target(args, candidate, open_store)
        if target is None:
            console.print(
                "not logged to MLflow: the candidate is in no tracking store (a saved run never uploaded)",
                highlight=False,
            )
            return
        tracker, experiment_id = target
        run_id = log_gate(tracker, experiment_id, result, text, json_text)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(
            f"evalpipe gate: warning: the gate run was not logged ({type(exc).__name__}: {mask_text(first)})",
            file=sys.stderr,
        )
        return
    # lazy: evalpipe.tracking.links, ~2 ms
    from evalpipe.tracking.links import run_url

    url = run_url(tracker.uri, experiment_id, run_id)
    line = f"MLflow: logged the gate as run {run_id}" + (f" ({url})" if url else "")
    console.print(line, highlight=False, soft_wrap=True)


# --- baseline ------------------------------------------------------------------------------------


def build_baseline_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="evalpipe baseline",
        description="Named baselines for `evalpipe gate`: record one in the tracking store, list them, "
        "or export one (figures and per-case values) to a JSON file CI can gate against without a server.",
        epilog=BASELINE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="action", required=True, metavar="{set,list,export}")
    p_set = sub.add_parser("set", help="name a run (or suite run) as a baseline", epilog=BASELINE_EXAMPLES,
                           formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p_set.add_argument("name", help="baseline name, e.g. main")
    p_set.add_argument(
        "run",
        help="run ID or 6+ digit prefix (a single run or a suite's parent), or its saved output directory",
    )
    _uri_arg(p_set)
    p_list = sub.add_parser("list", help="list the named baselines of the store")
    _uri_arg(p_list)
    p_exp = sub.add_parser(
        "export",
        help="write a baseline (figures and per-case values) to a JSON file",
        epilog=BASELINE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p_exp.add_argument("ref", help="a named baseline, a run ID or prefix, or a saved run directory")
    p_exp.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("baseline.json"),
        help="file to write (default baseline.json)",
    )
    _uri_arg(p_exp)
    return parser


def baseline_main(argv: Sequence[str] | None = None) -> int:
    args = build_baseline_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    open_store = _opener(_uri(args.tracking_uri))
    try:
        if args.action == "set":
            return _set(args, open_store)
        if args.action == "list":
            return _list(open_store)
        return _export(args, open_store)
    except GateError as exc:
        print_error(exc, prog="evalpipe baseline")
        return 2


def _set(args, open_store) -> int:
    # lazy: evalpipe.gate.baseline_store, evalpipe.gate.loading, ~13 ms
    from evalpipe.gate.baseline_store import check_name, set_baseline
    from evalpipe.gate.loading import get_run, store_side

    check_name(args.name)
    tracker = open_store()
    run_ref = args.run
    if Path(run_ref).is_dir():  # a saved run directory: the run it was uploaded as
        # lazy: evalpipe.gate.loading, ~10 ms
        from evalpipe.gate.loading import saved_side

        run_ref = saved_side(Path(run_ref)).run_id
        if not run_ref:
            raise GateError(
                f"{args.run} was never uploaded to a store (an offline run): `evalpipe sync` it first"
            )
    run = get_run(tracker.client, run_ref)
    side = store_side(tracker.client, run, tracker.uri)  # refuses a run the gate could not read
    record = set_baseline(tracker.client, args.name, run)
    fixtures = ", ".join(f"{r.key} ({len(r.cases.case_ids)} cases)" for r in side.runs)
    was = f"; was {record.previous}" if record.previous and record.previous != record.run_id else ""
    # lazy: evalpipe.tracking.links, ~2 ms
    from evalpipe.tracking.links import run_link_suffix

    print(
        f"baseline {record.name} -> run {record.run_id} ({record.run_name}) in {record.experiment}: "
        f"{fixtures}{was}"
    )
    url = run_link_suffix(tracker.uri, run.info.experiment_id, run.info.run_id).strip(" ()")
    if url:
        print(f"run page: {url}")
    return 0


def _list(open_store) -> int:

    # lazy: evalpipe.gate.baseline_store, ~3 ms
    from evalpipe.gate.baseline_store import list_baselines

    tracker = open_store()
    found = list_baselines(tracker.client)
    if not found:
        print("no named baselines in this store (record one with `evalpipe baseline set NAME RUN`)")
        return 0
    # lazy: evalpipe.reporting.report, yaml, ~44 ms
    from evalpipe.reporting.report import markdown_table

    body = [
        [b.name, b.run_id, b.run_name, b.experiment,
         time.strftime("%Y-%m-%d %H:%M", time.gmtime(b.set_at_ms / 1000)) + " UTC", b.previous or "-"]
        for b in found
    ]  # fmt: skip
    print("\n".join(markdown_table(["name", "run", "run name", "experiment", "set", "previous run"], body)))
    return 0


def _export(args, open_store) -> int:
    # lazy: evalpipe.gate.baseline_file, evalpipe.gate.loading, ~10 ms
    from evalpipe.gate.baseline_file import export_side
    from evalpipe.gate.loading import resolve

    side = resolve(args.ref, open_store, "baseline", names=True)
    name = args.ref if side.reference == args.ref and side.origin == "store" else ""
    text = export_side(side, name=name)
    try:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise GateError(f"cannot write {args.output}: {exc}") from None
    fixtures = ", ".join(f"{r.key} ({len(r.cases.case_ids)} cases)" for r in side.runs)
    print(f"wrote {args.output}: baseline {side.label}: {fixtures}; {len(text.encode()) // 1024 + 1} KB")
    return 0
