"""Family-wise error of "tied with the best" under the global null, on real per-case outcomes.

The points' per-case values are drawn from the 12 points of a real bm25 grid sweep on gold's dev
split (tests/data/gold_dev_bm25_grid.json: recall@5, 0/1, and MRR, graded, 101 cases). Global
null: for each case, each of the k simulated points takes, independently, the value of a random
real point on that case (probability 1 - mix) or on a random case (probability mix), so every
case's values are exchangeable across points (same distribution, no point better), with a case
effect (hard cases stay hard: mix 0.5 gives a correlation of about 0.2 between two points, the
bm25 grid's own points correlate 0.8-0.95). A sweep errs when it declares some point "not tied
with the best". Prints P(error) and its Monte Carlo SE for the procedure the commands use
(`evalpipe.stats.ties.tied_group`) and, with --old, for the former rule (each point against the
observed best, paired randomization test, Holm).

    python scripts/ties_fwer.py --points 3 12 30 --sims 1000 --resamples 200 [--old]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from evalpipe.stats.resampling import paired_randomization_test
from evalpipe.stats.ties import all_pairs, tied_with_best, ties_of

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "gold_dev_bm25_grid.json"


def exchangeable_null(x: np.ndarray, k: int, mix: float, rng: np.random.Generator) -> np.ndarray:
    """k points x n cases under the global null drawn from the real points x (see the module doc)."""
    p, n = x.shape
    pick = rng.integers(0, p, size=(k, n))
    case = np.where(rng.random((k, n)) < mix, rng.integers(0, n, size=(k, n)), np.arange(n)[None, :])
    return x[pick, case]


def old_rule(y: np.ndarray, resamples: int, seed: int) -> bool:
    means = y.mean(axis=1)
    best = int(np.argmax(means))
    p = [
        None if i == best else paired_randomization_test(y[best], y[i], resamples, seed)
        for i in range(len(y))
    ]
    return tied_with_best(list(means), p, 0.05, "holm", best).size < len(y)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, nargs="+", default=[3, 12, 30])
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--resamples", type=int, default=200)
    ap.add_argument("--mix", type=float, default=0.5)
    ap.add_argument("--old", action="store_true", help="also the former rule (slow: 1000 resamples per test)")
    args = ap.parse_args()
    data = json.loads(DATA.read_text())
    print(
        "| metric | points | sims | P(some point not tied), max-T | MC SE "
        "| former rule (Holm vs observed best) | s |"
    )
    print("|---|---|---|---|---|---|---|")
    for metric in ("recall_at_5", "mrr"):
        x = np.array(data[metric], dtype=np.float64)
        for k in args.points:
            rng = np.random.default_rng(1000 + k)
            errors = old = 0
            start = time.perf_counter()
            for s in range(args.sims):
                y = exchangeable_null(x, k, args.mix, rng)
                (pairs,) = all_pairs([y], 0.05, args.resamples, seed=s)
                errors += ties_of(pairs).size < k
                if args.old:
                    old += old_rule(y, 1000, s)
            rate = errors / args.sims
            se = math.sqrt(max(rate * (1 - rate), 0.05 * 0.95) / args.sims)
            former = f"{old / args.sims:.3f}" if args.old else "—"
            took = time.perf_counter() - start
            print(
                f"| {metric} | {k} | {args.sims} | {rate:.3f} | {se:.3f} | {former} | {took:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
