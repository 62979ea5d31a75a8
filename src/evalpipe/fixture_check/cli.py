"""`evalpipe check-fixture FIXTURE [--strict] [--json out.json]`: audit a fixture before trusting it.

Exit codes: 0 checked (flags are reported, not fatal); 2 bad input, or flags found with
--strict (one line on stderr saying how many and where to look).
"""

from __future__ import annotations

import argparse
import sys

from evalpipe.inputs.fixture import Fixture, load_fixture
from evalpipe.paths import PROJECT_ROOT, resolve_path
from evalpipe.safety.cli_parser import CommandParser
from evalpipe.safety.errors import EvalpipeError, print_error

PROG = "evalpipe check-fixture"


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog=PROG,
        description=(
            "Measure how hard and how honest each case of a fixture is: query/target word overlap, "
            "shared phrases, name leakage, multi_hop name matching, expected-set size and ambiguity "
            "candidates, flagged with the thresholds of each tier's kind (lookup, paraphrase, relational, "
            "multi_section: measured or declared with tier_kinds, never the name alone) and a BM25 "
            "pinned in the checker (docs/fixtures.md)."
        ),
    )
    parser.add_argument("fixture", help="a YAML fixture (fixtures/gold.yaml) or a BEIR folder")
    parser.add_argument("--corpus", help="corpus JSONL to use instead of the fixture's own `corpus:`")
    parser.add_argument("--strict", action="store_true", help="exit 2 when any case or tier is flagged")
    parser.add_argument("--json", metavar="FILE", help="write every figure, case and candidate as JSON")
    parser.add_argument(
        "--no-ambiguity",
        action="store_true",
        help="skip ambiguity candidates (no index of the checker's pinned BM25; fastest)",
    )
    parser.add_argument(
        "--semantic",
        action="store_true",
        help="also rank with the semantic ranker for ambiguity (needs the [semantic] extra)",
    )
    parser.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="TIER.NAME=VALUE",
        help="override a threshold, e.g. concept.max_overlap_stemmed=0.4 or docs.max_expected=none",
    )
    parser.add_argument("--all", action="store_true", help="list every case, not only flagged ones")
    parser.add_argument("--candidates", action="store_true", help="list every ambiguity candidate")
    return parser


def load(path: str, corpus: str | None) -> Fixture:
    """A YAML fixture, or a BEIR folder (its test split)."""

    resolved = resolve_path(path)
    if not resolved.exists():
        raise EvalpipeError(f"fixture not found: {path} (give a YAML fixture file or a BEIR folder)")
    if resolved.is_dir():
        # lazy: evalpipe.inputs.beir, ~2 ms
        from evalpipe.inputs.beir import load_beir

        return load_beir(resolved)

    return load_fixture(path, corpus=corpus)


def ranker_from_conf(name: str):
    """The ranker exactly as `ranker=<name>` builds it (conf/ranker/<name>.yaml)."""
    # lazy: hydra, omegaconf, ~157 ms
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    return instantiate(OmegaConf.load(PROJECT_ROOT / "conf" / "ranker" / f"{name}.yaml"))


def ambiguity_rankers(fixture: Fixture, semantic: bool, err) -> dict:
    """The checker's pinned BM25 (ranker.py, not conf/ranker/bm25.yaml) and, optionally, the
    semantic ranker as configured by default, prepared on the corpus."""
    # lazy: evalpipe.fixture_check.ranker, evalpipe.rankers.base, ~5 ms
    from evalpipe.fixture_check.ranker import checker_bm25
    from evalpipe.rankers.base import RankerUnavailable

    bm25 = checker_bm25()
    bm25.prepare(fixture.corpus)
    rankers = {"bm25": bm25}
    if semantic:
        try:
            dense = ranker_from_conf("semantic")
            dense.prepare(fixture.corpus)
            rankers["semantic"] = dense
        except RankerUnavailable as exc:
            err.print(f"[yellow]semantic ranker skipped:[/] {exc}")
    return rankers


def main(argv: list[str] | None = None) -> int:
    # lazy: rich, evalpipe.fixture_check.ambiguity, scipy, ..., ~604 ms
    from rich.console import Console

    from evalpipe.fixture_check.ambiguity import AmbiguityFinder
    from evalpipe.fixture_check.check import check_fixture
    from evalpipe.fixture_check.ranker import CHECKER_BM25
    from evalpipe.fixture_check.render import print_report, write_json
    from evalpipe.fixture_check.thresholds import apply_overrides

    args = build_parser().parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 200)
    err = Console(stderr=True)
    try:
        thresholds = apply_overrides(args.threshold)
        fixture = load(args.fixture, args.corpus)
        finder = None
        if not args.no_ambiguity:
            rankers = ambiguity_rankers(fixture, args.semantic, err)
            finder = AmbiguityFinder(fixture, rankers, {"bm25": dict(CHECKER_BM25)})
        report = check_fixture(fixture, thresholds, finder)
    except (EvalpipeError, ValueError) as exc:
        print_error(exc, prog=PROG)
        return 2
    print_report(console, report, show_all=args.all, show_candidates=args.candidates)
    if args.json:
        try:
            write_json(report, args.json)
        except OSError as exc:
            print_error(f"cannot write --json {args.json}: {exc.strerror or exc}", prog=PROG)
            return 2
        console.print(f"JSON: {args.json}")
    flagged = len(report.flagged_cases)
    tier_flags = len(report.tier_flags)
    if args.strict and (flagged or tier_flags):
        where = f"--json {args.json}" if args.json else "the tables above, or --json FILE"
        counts = f"{flagged} flagged case(s) and {tier_flags} tier flag(s)"
        print(f"{PROG}: {counts} in {report.source}; see {where}", file=sys.stderr)
        return 2
    return 0
