"""What a sweep point costs besides its measuring: Hydra composes each job's config once (not in
the sweeper's check and again in the launcher), and a fully reused sweep asks the store once for
the runs it reuses (not once per point). Real sweeps in real processes; the counts come from
wrapping the real Hydra and MLflow methods in the child, which still do the work."""

from __future__ import annotations

import json
import subprocess
import sys

from cli_helpers import all_runs, cli_env, write_tiny

COUNTING = r"""
import atexit, json, sys
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from mlflow.tracking import MlflowClient

counts = {"compose": 0, "per_point": 0, "prefetch": 0}
compose = ConfigLoaderImpl.load_configuration
search = MlflowClient.search_runs

def load_configuration(self, *a, **k):
    counts["compose"] += 1
    return compose(self, *a, **k)

def search_runs(self, *a, **k):
    where = str(k.get("filter_string") or (a[1] if len(a) > 1 else ""))
    counts["per_point"] += "evalpipe.config_hash" in where
    counts["prefetch"] += "evalpipe.code_fingerprint" in where
    return search(self, *a, **k)

ConfigLoaderImpl.load_configuration = load_configuration
MlflowClient.search_runs = search_runs
atexit.register(lambda: print("COUNTS " + json.dumps(counts)))
sys.argv = ["evalpipe", *sys.argv[1:]]
from evalpipe.__main__ import main
main()
"""


def _sweep(tmp_path, fx, uri, sweep_dir):
    proc = subprocess.run(
        [sys.executable, "-c", COUNTING, "-m", f"fixture.path={fx}", f"tracking.uri={uri}",
         f"hydra.sweep.dir={sweep_dir}", "ranker=bm25", "ranker.k1=0.9,1.2,1.5", "progress=false"],
        cwd=tmp_path, capture_output=True, text=True, env=cli_env(), timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("COUNTS "))
    return proc, json.loads(line[len("COUNTS ") :])


def test_each_job_composed_once_and_a_reused_sweep_asks_the_store_once(tmp_path):
    fx = write_tiny(tmp_path)
    uri = f"sqlite:///{tmp_path / 'ml' / 'mlflow.db'}"
    first, counts = _sweep(tmp_path, fx, uri, tmp_path / "m1")
    # Hydra composes the command's config once (its mode is read without composing:
    # evaluation.hydra_mode) and each job once: 1 + 3, where the sweeper's check and the
    # launcher composed each job separately (1 + 6).
    assert counts["compose"] == 4, counts
    assert counts["prefetch"] == 1 and counts["per_point"] == 3, counts  # nothing to reuse yet
    assert "reused" not in first.stdout

    again, counts = _sweep(tmp_path, fx, uri, tmp_path / "m2")
    assert counts["compose"] == 4, counts
    assert counts["prefetch"] == 1 and counts["per_point"] == 0, counts  # one query for the sweep
    assert again.stdout.count("reused") >= 3
    children = [r for r in all_runs(uri) if r.data.tags.get("evalpipe.role") == "child"]
    reused = [r for r in children if "evalpipe.reused_run_id" in r.data.tags]
    measured = {r.info.run_id: r for r in children if "evalpipe.reused_run_id" not in r.data.tags}
    assert len(measured) == 3 and len(reused) == 3
    # each reuse child stands for the measured run of its own point, with that run's figures
    for child in reused:
        original = measured[child.data.tags["evalpipe.reused_run_id"]]
        k1 = "evalpipe.swept.ranker.k1"
        assert child.data.tags[k1] == original.data.tags[k1]
        assert child.data.metrics == original.data.metrics and original.info.status == "FINISHED"
