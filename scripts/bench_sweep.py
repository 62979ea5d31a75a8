"""Time one sweep preset run serially and in parallel (joblib), each into a fresh SQLite store.

    python scripts/bench_sweep.py                               # 12-point bm25_grid on fixtures/gold.yaml
    python scripts/bench_sweep.py --fixture-path my/fixture.yaml
    python scripts/bench_sweep.py --jobs 1 2 -- fixture=beir fixture.path=../shared/datasets/scifact

Each setting is a subprocess of `python -m evalpipe -m +sweep=<preset> hydra/launcher=joblib
hydra.launcher.n_jobs=N tracking.uri=sqlite:///<tmp>/mlflow.db`, so the wall time includes
interpreter start-up and worker spawning, as a user sees it. A fresh store per setting keeps
resume from skipping points. Prints wall times, the speed-up over the first setting and the
points each sweep's summary.csv reports, so a lost or failed point shows up next to the timing.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_sweep(
    tmp: Path, preset: str, n_jobs: int, fixture: str | None, extra: list[str]
) -> tuple[float, Counter]:
    work = tmp / f"n{n_jobs}"
    cmd = [sys.executable, "-m", "evalpipe", "-m", f"+sweep={preset}", "hydra/launcher=joblib"]
    cmd += [f"hydra.launcher.n_jobs={n_jobs}", f"tracking.uri=sqlite:///{work / 'mlflow.db'}"]
    cmd += [f"hydra.sweep.dir={work / 'multirun'}", f"hydra.run.dir={work / 'out'}", "progress=false"]
    if fixture:
        cmd.append(f"fixture.path={Path(fixture).resolve()}")
    cmd += extra
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"bench_sweep: n_jobs={n_jobs} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    summary = work / "multirun" / "summary.csv"
    statuses = Counter(row["status"] for row in csv.DictReader(summary.open(encoding="utf-8")))
    return wall, statuses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="bm25_grid", help="conf/sweep/<preset>.yaml (default bm25_grid)")
    parser.add_argument("--fixture-path", help="fixture YAML (default: the config's, fixtures/gold.yaml)")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="n_jobs settings (default 1 2)")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides, after --")
    args = parser.parse_args(argv)
    default_fixture = not args.fixture_path and not any(o.startswith("fixture") for o in args.overrides)
    if default_fixture and not (ROOT / "fixtures" / "gold.yaml").is_file():
        parser.error("fixtures/gold.yaml does not exist yet: pass --fixture-path or fixture overrides")
    results = []
    with tempfile.TemporaryDirectory(prefix="evalpipe-bench-") as tmp:
        for n in args.jobs:
            wall, statuses = run_sweep(Path(tmp), args.preset, n, args.fixture_path, args.overrides)
            results.append((n, wall, statuses))
            print(f"n_jobs={n}: {wall:7.1f} s  points: {dict(sorted(statuses.items()))}", flush=True)
    base = results[0][1]
    print(f"\n{'n_jobs':>6}  {'wall s':>8}  {'speed-up':>8}")
    for n, wall, _ in results:
        print(f"{n:>6}  {wall:8.1f}  {base / wall:8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
