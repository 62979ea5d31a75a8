"""The minimum-detectable-effect table of docs/power.md, from saved runs' per-case values.

    python scripts/mde_table.py gold=/tmp/meas/run_gold fixgo=/tmp/meas/run_fixgo ...

Each argument is NAME=RUN_DIR, a run's output directory (hydra.run.dir) holding its cases.jsonl.
Per fixture and tier (and overall), for R@5 and nDCG@10: the mean, the MDE of one comparison
(alpha 0.05) and of one row of a gate under Holm (alpha 0.05 / 8, the gold gate's 8 rows), with
the one-run model of `evalpipe.stats.power` (a second system correlated 0.5 with this one), and
the cases a tier would need to detect a 5- and a 2-point change of R@5 at alpha 0.05.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from evalpipe.stats.power import cases_needed, one_run

METRICS = ("recall_at_5", "ndcg_at_10")
ALPHAS = (0.05, 0.05 / 8)


def read_cases(run_dir: Path) -> list[dict]:
    path = run_dir / "cases.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def rows_for(name: str, cases: list[dict]) -> list[list[str]]:
    tiers = list(dict.fromkeys(str(c.get("tier") or "all") for c in cases))
    scopes = [(t, [c for c in cases if str(c.get("tier") or "all") == t]) for t in tiers]
    if len(tiers) > 1:
        scopes.append(("overall", cases))
    out = []
    for tier, group in scopes:
        cells = [name, tier, str(len(group))]
        for metric in METRICS:
            values = np.array([float(c[metric]) for c in group if c.get(metric) is not None])
            mdes = [one_run(values, alpha) for alpha in ALPHAS]
            kind = "0/1" if mdes[0].kind == "binary" else "graded"
            cells += [f"{values.mean():.3f}", kind, *(m.text(3) for m in mdes)]
        r5 = one_run(np.array([float(c["recall_at_5"]) for c in group]), 0.05)
        cells += [str(cases_needed(d, r5) or "-") for d in (0.05, 0.02)]
        out.append(cells)
    return out


def main(argv: list[str]) -> int:
    header = ["fixture", "tier", "cases"]
    for label in ("R@5", "nDCG@10"):
        header += [label, "kind", "MDE α=.05", "MDE gate row (α=.05/8)"]
    header += ["cases for 5 pts (R@5)", "cases for 2 pts (R@5)"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for item in argv:
        name, _, folder = item.partition("=")
        for row in rows_for(name, read_cases(Path(folder))):
            print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
