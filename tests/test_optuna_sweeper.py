"""The Optuna sweeper (hydra/sweeper=evalpipe_optuna, src/hydra_plugins/evalpipe_optuna_sweeper).

The search-space grammar against hand-worked distributions; then real sweep processes on a study
in a SQLite file: two processes at once split one study's trials (none measured twice, each a
FINISHED child of its own process's parent); a process killed with SIGKILL mid-trial leaves that
trial RUNNING until its heartbeat goes stale, and the next `-m` marks it FAIL and completes the
study. The same two-process run on PostgreSQL is in tests/test_team_postgres.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

optuna = pytest.importorskip("optuna")

from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution  # noqa: E402

from hydra_plugins.evalpipe_optuna_sweeper._core import search_space  # noqa: E402
from hydra_plugins.evalpipe_optuna_sweeper._urls import masked  # noqa: E402
from test_ray import ROOT, clean_env, parents_and_children, wait_for, write_fixture  # noqa: E402


def test_the_grammar_of_the_presets_and_the_command_line():
    params = {
        "ranker.k1": "interval(0.3, 2.5)",
        "ranker.k": "int(interval(1, 120))",
        "ranker.lr": "tag(log, interval(0.001, 1.0))",
        "ranker.method": "choice(lucene, robertson)",
        "ranker.depth": "50,100",
        "ranker.n": "range(1, 4)",  # 1, 2, 3: Hydra's range excludes its end
        "ranker.x": "range(0.5, 2.1, 0.5)",  # 0.5, 1.0, 1.5, 2.0
        "ranker.b": "interval(0.0, 1.0)",
    }
    dists, fixed = search_space(params, ["ranker.b=0.4", "+ranker.extra=interval(1, 2)"])
    assert dists["ranker.k1"] == FloatDistribution(0.3, 2.5)
    assert dists["ranker.k"] == IntDistribution(1, 120)
    assert dists["ranker.lr"] == FloatDistribution(0.001, 1.0, log=True)
    assert dists["ranker.method"] == CategoricalDistribution(["lucene", "robertson"])
    assert dists["ranker.depth"] == CategoricalDistribution([50, 100])
    assert dists["ranker.n"] == IntDistribution(1, 3)
    assert dists["ranker.x"] == FloatDistribution(0.5, 2.0, step=0.5)
    assert dists["+ranker.extra"] == FloatDistribution(1.0, 2.0)  # interval: floats; the + stays
    assert "ranker.b" not in dists and fixed == ["ranker.b=0.4"]  # the command line fixed the axis


def test_passwords_in_storage_urls_are_masked_when_printed():
    assert masked("postgresql://team:s3cret@db:5432/optuna") == "postgresql://team:***@db:5432/optuna"
    assert masked("sqlite:////tmp/optuna.db") == "sqlite:////tmp/optuna.db"


def optuna_cmd(
    fx: Path, uri: str, sweep_dir: Path, storage: str, *args: str, preset: bool = True
) -> list[str]:
    import sys

    sweep = ["+sweep=bm25_optuna"] if preset else ["hydra/sweeper=evalpipe_optuna", "hydra.sweeper.n_jobs=1"]
    return [
        sys.executable,
        "-m",
        "evalpipe",
        "-m",
        *sweep,
        f"fixture.path={fx}",
        "fixture.name=tiny",
        f"tracking.uri={uri}",
        f"hydra.sweep.dir={sweep_dir}",
        "progress=false",
        "plots=none",
        f"hydra.sweeper.storage={storage}",
        "hydra.sweeper.study_name=shared",
        *args,
    ]


def check_study_against_mlflow(storage: str, uri: str, n_trials: int, n_parents: int) -> None:
    """Every COMPLETE trial is a FINISHED child of one of the parents; no config measured twice."""
    study = optuna.load_study(study_name="shared", storage=storage)
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert len(complete) == n_trials
    assert not [t for t in study.trials if t.state.name == "RUNNING"]
    configs = [tuple(sorted(t.params.items())) for t in complete]
    assert len(set(configs)) == len(configs)
    runs, parents, kids = parents_and_children(uri)
    parents = [
        p for p in parents if p.data.tags.get("evalpipe.sweeper") == "OptunaSweeper"
    ]  # a shared server
    assert len(parents) == n_parents and all(p.info.status == "FINISHED" for p in parents)
    children = {k.info.run_id: k for ks in kids.values() for k in ks}
    for trial in complete:
        run = children[trial.user_attrs["mlflow_run_id"]]
        assert run.info.status == "FINISHED"
        assert float(run.data.tags["evalpipe.swept.ranker.k1"]) == pytest.approx(trial.params["ranker.k1"])
        assert run.data.metrics["recall_at_5"] == trial.value
    measured = [r for r in children.values() if "evalpipe.reused_run_id" not in r.data.tags]
    hashes = [r.data.tags["evalpipe.config_hash"] for r in measured]
    assert len(hashes) == len(set(hashes))  # none measured twice under one config


def two_processes_share_one_study(tmp_path: Path, uri: str, storage: str, n_trials: int = 6) -> None:
    fx = write_fixture(tmp_path / "fx")
    procs = [
        subprocess.Popen(
            optuna_cmd(fx, uri, tmp_path / f"multirun{i}", storage, f"hydra.sweeper.n_trials={n_trials}"),
            cwd=ROOT,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
        assert "Traceback" not in err
    check_study_against_mlflow(storage, uri, n_trials, n_parents=2)
    points = [
        int(line.split(" points")[0].rsplit(" ", 1)[-1])
        for i in range(2)
        for line in (tmp_path / f"multirun{i}" / "summary.md").read_text(encoding="utf-8").splitlines()
        if " points · " in line
    ]
    assert sum(points) == n_trials  # the two processes split the study's trials


@pytest.mark.slow
def test_two_processes_split_one_study_in_a_sqlite_file(tmp_path):
    # MLflow on a server (several processes writing one SQLite MLflow store is what the server is for)
    from test_ray import start_mlflow_server

    server, url = start_mlflow_server(tmp_path)
    try:
        two_processes_share_one_study(tmp_path, url, f"sqlite:///{tmp_path / 'optuna.db'}")
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.slow
def test_a_killed_process_leaves_fail_trials_and_the_next_run_continues_the_study(tmp_path):
    fx = write_fixture(tmp_path / "fx")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    marker = tmp_path / "held.pid"
    args = [
        "~ranker",
        "+ranker._target_=plugins_for_tests.HoldingRanker",
        f"+ranker.marker={marker}",
        "+ranker.hold_s=120",
        "+ranker.once=true",
        "hydra.sweeper.direction=maximize",
        "+ranker.knob=interval(0.0, 1.0)",
        "hydra.sweeper.n_trials=3",
        "hydra.sweeper.heartbeat_interval=1",
        "hydra.sweeper.grace_period=2",
    ]
    first = subprocess.Popen(
        optuna_cmd(fx, uri, tmp_path / "multirun1", storage, *args, preset=False),
        cwd=ROOT,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(marker, first)
    assert int(marker.read_text()) == first.pid  # the basic launcher runs trials in-process
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=60)
    study = optuna.load_study(study_name="shared", storage=storage)
    assert [t.state.name for t in study.trials] == ["RUNNING"]  # nobody has looked at it yet
    time.sleep(3)  # past the grace period

    again = subprocess.run(
        optuna_cmd(fx, uri, tmp_path / "multirun2", storage, *args, preset=False),
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert "[optuna] study 'shared' in sqlite:" in again.stderr
    study = optuna.load_study(study_name="shared", storage=storage)
    states = [t.state.name for t in study.trials]
    assert states == ["FAIL", "COMPLETE", "COMPLETE", "COMPLETE"]
    # keyword_search finds c2 (Open) and misses c1: recall@5 = 1/2 for every knob value.
    assert [t.value for t in study.trials[1:]] == [0.5, 0.5, 0.5]
    results = yaml.safe_load((tmp_path / "multirun2" / "optimization_results.yaml").read_text())
    assert results["best_value"] == 0.5 and results["study_name"] == "shared"
    _, parents, kids = parents_and_children(uri)
    (second,) = [p for p in parents if p.info.status == "FINISHED"]
    assert sorted(k.info.status for k in kids[second.info.run_id]) == ["FINISHED"] * 3


def test_the_presets_select_this_sweeper():
    for path in sorted((ROOT / "conf" / "sweep").glob("*_optuna.yaml")):
        text = path.read_text(encoding="utf-8")
        assert "override /hydra/sweeper: evalpipe_optuna" in text, path.name
    assert os.path.isdir(ROOT / "src" / "hydra_plugins" / "evalpipe_optuna_sweeper")
