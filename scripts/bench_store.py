#!/usr/bin/env python3
"""How many runs a minute each tracking setup takes, and what one run costs to log, with 1, 4 and 8
concurrent writers (a benchmark, not a test: docs/team.md has the numbers).

    .venv/bin/python scripts/bench_store.py                       # all three stores, 1/4/8 writers
    .venv/bin/python scripts/bench_store.py --stores sqlite server-postgres --writers 1 8 --runs 20

Stores: `sqlite` (a SQLite file opened by every writer, evalpipe's default), `server-sqlite` (an
MLflow server on a SQLite file), `server-postgres` (an MLflow server on a local PostgreSQL,
started with scripts/team_server.py's classes; needs Debian's postgresql). Each writer is its own
process and logs `--runs` runs shaped like an evalpipe run: ~15 tags at creation, one batch of
~30 params and ~45 metrics, a 4 KB report artifact, then the end of the run. The timer covers only
the logging (not the writers' Python start-up); writers start together. A failed run (e.g.
"database is locked") is counted, not retried.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STORES = ("sqlite", "server-sqlite", "server-postgres")


def _team_server():
    spec = importlib.util.spec_from_file_location("team_server", HERE / "team_server.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["team_server"] = module
    spec.loader.exec_module(module)
    return module


def worker(uri: str, experiment_id: str, runs: int, start_at: float, out: str) -> None:
    """One writer process: log `runs` evalpipe-shaped runs, write [(seconds, ok)] to `out`."""
    os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    report = "# evalpipe run\n" + "| case | hit |\n" * 250
    while time.time() < start_at:
        time.sleep(0.005)
    results = []
    for i in range(runs):
        t0 = time.perf_counter()
        try:
            tags = {f"evalpipe.tag{j}": f"value-{j}" for j in range(15)}
            run = client.create_run(experiment_id, run_name=f"w{os.getpid()}-{i}", tags=tags)
            rid = run.info.run_id
            now = int(time.time() * 1000)
            params = [Param(f"ranker.param{j}", str(j * 0.1)) for j in range(30)]
            metrics = [Metric(f"metric_{j}", j / 45, now, 0) for j in range(45)]
            client.log_batch(
                rid, metrics=metrics, params=params, tags=[RunTag("mlflow.note.content", "x" * 500)]
            )
            client.log_text(rid, report, "report.md")
            client.set_terminated(rid, "FINISHED")
            results.append((time.perf_counter() - t0, True))
        except Exception:
            results.append((time.perf_counter() - t0, False))
    Path(out).write_text(json.dumps({"start": start_at, "end": time.time(), "runs": results}))


def measure(uri: str, writers: int, runs: int, tmp: Path) -> dict[str, float]:
    os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    name = f"bench-{writers}-{time.time_ns()}"
    experiment_id = client.create_experiment(name)
    start_at = time.time() + 8.0 + writers * 1.5  # after every writer has imported MLflow
    outs = [tmp / f"{name}-{i}.json" for i in range(writers)]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", uri, experiment_id, str(runs), str(start_at), str(out)],
            env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"},
            stdout=subprocess.DEVNULL,  # MLflow prints a "View run" link per run
        )
        for out in outs
    ]
    for proc in procs:
        proc.wait(timeout=1800)
    data = [json.loads(out.read_text()) for out in outs]
    times = [t for d in data for t, ok in d["runs"] if ok]
    failed = sum(not ok for d in data for _, ok in d["runs"])
    wall = max(d["end"] for d in data) - start_at
    times.sort()
    return {
        "runs": float(len(times)),
        "failed": float(failed),
        "runs_per_min": 60.0 * len(times) / wall if wall > 0 else 0.0,
        "mean_ms": 1000 * statistics.fmean(times) if times else float("nan"),
        "p95_ms": 1000 * times[int(0.95 * (len(times) - 1))] if times else float("nan"),
    }


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        uri, experiment_id, runs, start_at, out = sys.argv[2:7]
        worker(uri, experiment_id, int(runs), float(start_at), out)
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    p.add_argument("--writers", nargs="+", type=int, default=[1, 4, 8])
    p.add_argument("--runs", type=int, default=15, help="runs per writer (default 15)")
    p.add_argument("--server-workers", type=int, default=2, help="mlflow server --workers (default 2)")
    args = p.parse_args()
    team = _team_server()
    root = Path(tempfile.mkdtemp(prefix="evalpipe-bench-", dir="/tmp"))
    root.chmod(0o711)
    rows = []
    for store in args.stores:
        server = local = None
        try:
            if store == "sqlite":
                uri = f"sqlite:///{root / 'file' / 'mlflow.db'}"
                (root / "file").mkdir()
                from mlflow.tracking import MlflowClient

                MlflowClient(tracking_uri=uri).search_experiments()  # schema created once, before the writers
            elif store == "server-sqlite":
                backend = f"sqlite:///{root / 'srv' / 'mlflow.db'}"
                (root / "srv").mkdir()
                server = team.MlflowServer(
                    backend,
                    root / "srv" / "artifacts",
                    workers=args.server_workers,
                    log_path=root / "srv.log",
                )
                uri = server.start().url
            else:
                why = team.postgres_unavailable()
                if why:
                    print(f"{store}: skipped ({why})", file=sys.stderr)
                    continue
                local = team.LocalPostgres(root / "pg").start()
                backend = local.create_database("mlflow")
                server = team.MlflowServer(
                    backend, root / "pg-artifacts", workers=args.server_workers, log_path=root / "pg.log"
                )
                uri = server.start().url
            for writers in args.writers:
                row = measure(uri, writers, args.runs, root)
                rows.append((store, writers, row))
                print(
                    f"{store:16s} writers={writers}  {row['runs_per_min']:7.0f} runs/min  "
                    f"mean {row['mean_ms']:6.0f} ms/run  p95 {row['p95_ms']:6.0f} ms  "
                    f"failed {row['failed']:.0f}/{row['runs'] + row['failed']:.0f}",
                    flush=True,
                )
        finally:
            if server is not None:
                server.stop()
            if local is not None:
                local.stop()
    print("\n| store | writers | runs/min | ms per run (mean) | ms per run (p95) | failed |")
    print("|---|---|---|---|---|---|")
    for store, writers, row in rows:
        total = row["runs"] + row["failed"]
        print(
            f"| {store} | {writers} | {row['runs_per_min']:.0f} | {row['mean_ms']:.0f} | {row['p95_ms']:.0f} "
            f"| {row['failed']:.0f} of {total:.0f} |"
        )
    subprocess.run(["rm", "-rf", str(root)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
