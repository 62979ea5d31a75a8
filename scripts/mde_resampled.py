"""MDE before/after: the analytic models beside the MDE measured on the runs' own per-case outcomes.

For each pair of runs (two cases.jsonl files of the same fixture and cases), per metric: the
one-run model's MDE (a second system correlated rho = 0.5, the figure before any comparison), the
paired analytic MDE (the pair's own spread), and the resampling MDE (`stats.power.resampled`:
gains and drops planted on the pair's outcomes with their real churn, the gate's paired
randomization test counted), all at power 0.8, alpha 0.05 (and alpha 0.05/8, a gate row).

    python scripts/mde_resampled.py gold=/tmp/a/10/cases.jsonl,/tmp/a/0/cases.jsonl ...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from evalpipe.stats import power as P

METRICS = ("recall_at_5", "mrr", "ndcg_at_5")


def column(path: Path, metric: str) -> dict[str, float]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {r["case_id"]: float(r[metric]) for r in rows if r.get(metric) is not None}


def main(argv: list[str]) -> None:
    print(
        "| fixture | metric | cases | kind | alpha | one run ρ=0.5 | paired analytic "
        "| resampled gain | resampled drop |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for spec in argv:
        name, paths = spec.split("=", 1)
        a, b = (Path(p) for p in paths.split(","))
        for metric in METRICS:
            ca, cb = column(a, metric), column(b, metric)
            ids = [c for c in ca if c in cb]
            base, cand = np.array([ca[c] for c in ids]), np.array([cb[c] for c in ids])
            for alpha in (0.05, 0.05 / 8):
                one = P.one_run(base, alpha)
                pair = P.paired(base, cand, alpha)
                up = P.resampled(base, cand, alpha, gain=True)
                down = P.resampled(base, cand, alpha, gain=False)
                print(
                    f"| {name} | {metric} | {len(ids)} | {one.kind} | {alpha:.4g} | {one.text()} "
                    f"| {pair.text()} | {up.text()} | {down.text()} |",
                    flush=True,
                )


if __name__ == "__main__":
    main(sys.argv[1:])
