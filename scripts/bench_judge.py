"""The judge's cost: a run without a judge, a first judged run and an identical repeat, on a local server.

    python scripts/bench_judge.py                         # BM25 on fixtures/gold.yaml, OpenAI protocol
    python scripts/bench_judge.py --backend anthropic --pool -- ks=[1,5,10]

Starts the deterministic test server of tests/judge_server.py on 127.0.0.1 (no model:
it answers in microseconds, so this measures evalpipe's own overhead per judged pair,
the client library, HTTP, prompt rendering, the cache, not a model's latency), then
runs `python -m evalpipe` three times as subprocesses into one fresh SQLite store and
judge cache: judge=none, judge=<backend>, and the same judged run again. Prints wall
times, the judge's calls, cache hits and seconds as logged to MLflow, the cache hit
rate of the repeat and the judging seconds per judged pair.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def run(tmp: Path, name: str, args: list[str]) -> tuple[float, str]:
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-m", "evalpipe", f"tracking.uri=sqlite:///{tmp / 'mlflow.db'}"]
    cmd += [f"hydra.run.dir={tmp / name}", "progress=false", "plots=false", *args]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"bench_judge: {name} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, re.search(r"run ([0-9a-f]{32})", proc.stdout).group(1)


def main(argv: list[str] | None = None) -> int:
    from mlflow.tracking import MlflowClient

    from judge_server import JudgeServer

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=["openai", "anthropic"], default="openai")
    parser.add_argument(
        "--marker", default="rankers", help="the server calls a unit relevant iff its ID has this"
    )
    parser.add_argument(
        "--pool", action="store_true", help="judge.pool=true (every unlabelled top-K candidate)"
    )
    parser.add_argument("--max-calls", type=int, default=5000)
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides, after --")
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="bench-judge-") as tmpdir,
        JudgeServer(marker=args.marker) as server,
    ):
        tmp = Path(tmpdir)
        url = f"{server.url}/v1" if args.backend == "openai" else server.url
        judged = [
            f"judge={args.backend}",
            f"judge.base_url={url}",
            "judge.model=bench",
            f"judge.cache_dir={tmp / 'cache'}",
            f"judge.max_calls={args.max_calls}",
            f"judge.pool={str(args.pool).lower()}",
        ]
        walls, run_ids = {}, {}
        # "warm-up" creates the store, so the timed no-judge run pays what the judged runs pay.
        plan = (("warm-up", []), ("judged", judged), ("repeat", judged), ("no judge", []))
        for name, extra in plan:
            walls[name], run_ids[name] = run(tmp, name.replace(" ", "_"), [*extra, *args.overrides])
        client = MlflowClient(tracking_uri=f"sqlite:///{tmp / 'mlflow.db'}")
        metrics = {
            name: client.get_run(rid).data.metrics for name, rid in run_ids.items() if name != "warm-up"
        }
        head = ("run", "wall s", "questions", "calls", "cached", "judge s", "R@5", "judged R@5", "coverage")
        print("{:10} {:>8} {:>10} {:>7} {:>7} {:>8} {:>7} {:>11} {:>9}".format(*head))
        for name, m in metrics.items():
            cells = [m.get(f"judge/{k}", 0.0) for k in ("questions", "calls", "cache_hits", "seconds")]
            strict = m.get("recall_at_5", 0.0)
            judged = m.get("judged_recall_at_5")
            partial = m.get("partial_judged_recall_at_5")
            shown = "—" if partial is None else f"≥{partial:.3f}"
            shown = f"{judged:.3f}" if judged is not None else shown
            cover = f"{m['judge/coverage']:9.1%}" if "judge/coverage" in m else f"{'—':>9}"
            print(
                f"{name:10} {walls[name]:8.2f} {cells[0]:10.0f} {cells[1]:7.0f} {cells[2]:7.0f} "
                f"{cells[3]:8.2f} {strict:7.3f} {shown:>11} {cover}"
            )
        first, again = metrics["judged"], metrics["repeat"]
        calls = max(first["judge/calls"], 1.0)
        n1, n2 = first["judge/calls"], again["judge/calls"]
        print(f"server requests: {server.calls()} (judged run {n1:.0f}, repeat {n2:.0f})")
        print(f"repeat cache hit rate: {again['judge/cache_hit_rate']:.1%}")
        per_pair = first["judge/seconds"] / calls * 1000
        print(
            f"judging time per judged pair (judge/seconds / judge/calls of the judged run): {per_pair:.2f} ms"
        )
        wall = (walls["judged"] - walls["no judge"]) / calls * 1000
        print(
            f"wall time per judged pair, judged run - no-judge run: {wall:.2f} ms (noisy on a shared machine)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
