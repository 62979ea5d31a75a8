"""Compare rankers on one fixture in one process: the seed harness's multi-ranker report.

    python scripts/bench_rankers.py                                   # every ranker on the gold fixture
    python scripts/bench_rankers.py --rankers bm25 exact graph
    python scripts/bench_rankers.py --overrides +bench=scifact --rankers bm25_prose semantic
    python scripts/bench_rankers.py --markdown gold.md

Each ranker is composed from conf/ with Hydra's compose API (the same configs as the CLI),
built, run over every case and scored; the Markdown report has one row per ranker (skipped
rankers keep their row), followed by the build and evaluation wall time of each. Nothing is
logged to MLflow: this measures, `python -m evalpipe` records.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from evalpipe.evaluation.in_process import score_config
from evalpipe.paths import PROJECT_ROOT
from evalpipe.rankers.fusion.hybrid import clear_hits_cache
from evalpipe.reporting.report import ReportRow, markdown_report, markdown_table
from evalpipe.scoring.tokens import get_token_counter

RANKERS = ["bm25", "bm25f", "exact", "grep", "winnow", "graph", "semantic", "rrf", "hybrid", "code_search"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rankers", nargs="+", default=RANKERS, help="conf/ranker options to run")
    parser.add_argument("--overrides", nargs="*", default=[], help="Hydra overrides, e.g. +bench=scifact")
    parser.add_argument("--markdown", type=Path, help="also write the report here")
    args = parser.parse_args(argv)

    rows, timings = [], []
    fixture = None
    counter = get_token_counter()
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        for name in args.rankers:
            cfg = compose(config_name="config", overrides=[*args.overrides, f"ranker={name}"])
            if fixture is None:
                fixture = instantiate(cfg.fixture)
            clear_hits_cache()  # each ranker's latency is its own, not a memo of an earlier ranker's hits
            scored = score_config(cfg, fixture, counter.count)
            prepared, scores, eval_seconds = scored.prepared, scored.scores, scored.search_seconds
            rows.append(ReportRow(name, scores, skipped=prepared.skipped))
            timings.append([name, f"{prepared.build_seconds:.2f}", f"{eval_seconds:.2f}"])
            print(f"{name}: build {prepared.build_seconds:.2f} s, eval {eval_seconds:.2f} s", file=sys.stderr)
    assert fixture is not None
    report = markdown_report(fixture.name, rows, list(cfg.ks), fixture.tier_counts())
    wall = markdown_table(["ranker", "build s", "eval s"], timings)
    report += "\n## Wall time\n\n" + "\n".join(wall) + "\n"
    print(report)
    if args.markdown:
        args.markdown.write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
