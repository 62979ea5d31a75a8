"""Compare fusion and graph options of one ranker config on one fixture, in one process.

    .venv/bin/python scripts/bench_fusion.py --fixture gold
    .venv/bin/python scripts/bench_fusion.py --fixture fixgo --ranker code_search \\
        --variant default= --variant rank=ranker.base.method=rank

Each `--variant NAME=OVERRIDE[,OVERRIDE...]` is the ranker config (`--ranker`, default
`hybrid`, or the variant's own `ranker=...`) with those Hydra overrides; without any, the
hybrid fusion options (`linear`, `rank`, `confidence: gap`, both). Unlike
`bench_rankers.py`, component hits are *not* cleared between variants: fusion options are
query-time parameters, so every variant after the first only re-fuses the memoised component
hits (a dense component is embedded and searched once). Latencies are therefore not
comparable here; R@k and MRR are. Prints the per-tier R@5 table and, with --markdown, writes
it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from evalpipe.evaluation.in_process import score_config
from evalpipe.paths import PROJECT_ROOT
from evalpipe.reporting.report import markdown_table

HYBRID_VARIANTS = {
    "linear": [],
    "rank": ["ranker.method=rank"],
    "gap": ["ranker.confidence=gap"],
    "rank+gap": ["ranker.method=rank", "ranker.confidence=gap"],
}


def parse_variant(text: str) -> tuple[str, list[str]]:
    name, sep, rest = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--variant wants NAME=OVERRIDE[,OVERRIDE...], got {text!r}")
    return name, [o for o in rest.split(",") if o]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixture", default="gold", help="conf/fixture option (gold, fixgo, ...)")
    parser.add_argument("--ranker", default="hybrid", help="conf/ranker option the variants override")
    parser.add_argument("--variant", action="append", type=parse_variant, default=[], help="NAME=OVERRIDES")
    parser.add_argument("--overrides", nargs="*", default=[], help="Hydra overrides for every variant")
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    variants = dict(args.variant) if args.variant else HYBRID_VARIANTS

    rows = []
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        fixture = None
        for name, overrides in variants.items():
            ranker = next((o.split("=", 1)[1] for o in overrides if o.startswith("ranker=")), args.ranker)
            rest = [o for o in overrides if not o.startswith("ranker=")]
            cfg = compose(
                config_name="config",
                overrides=[f"fixture={args.fixture}", f"ranker={ranker}", *args.overrides, *rest],
            )
            if fixture is None:
                fixture = instantiate(cfg.fixture)
            start = time.perf_counter()
            scored = score_config(cfg, fixture, families=["recall", "mrr"], ks=[1, 5, 20])
            if scored.scores is None:
                print(f"{name}: skipped ({scored.skipped})", file=sys.stderr)
                rows.append([name, "skipped", "", "", "", "", ""])
                continue
            scores = scored.scores
            tiers = [f"{100 * scores.metric('recall_at_5', t):.1f}" for t in fixture.tiers]
            rows.append(
                [
                    name,
                    f"{100 * scores.metric('recall_at_1'):.1f}",
                    f"{100 * scores.metric('recall_at_5'):.1f}",
                    f"{scores.metric('mrr'):.3f}",
                    *tiers,
                ]
            )
            print(f"{name}: {time.perf_counter() - start:.1f} s  {rows[-1]}", file=sys.stderr)
    assert fixture is not None
    headers = ["variant", "R@1", "R@5", "MRR", *(f"R@5 {t}" for t in fixture.tiers)]
    table = "\n".join(markdown_table(headers, rows))
    report = f"`{args.ranker}` variants on `{args.fixture}` ({len(fixture.cases)} cases)\n\n{table}\n"
    print(report)
    if args.markdown:
        args.markdown.write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
