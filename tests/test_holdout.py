"""Sweeps on the dev split re-run their best and reference point on the test split.

The planted `Memoriser` (tests/holdout_plugins.py) answers the dev cases it memorised perfectly
and everything else by a query hash: on dev, memorise=1 scores recall@5 = 1.0 and memorise=0
scores what chance gives; on test every value of memorise returns the same rankings. So, worked
out without evalpipe: the tuned point's test figure equals the default's exactly, the paired
difference is 0 on every test case (randomization p = 1 exactly), and the gap is 1 - test.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from cli_helpers import all_runs
from cli_in_process import run_cli as cli
from evalpipe.inputs.fixture import load_fixture
from evalpipe.inputs.split import assign
from holdout_plugins import Memoriser, write_fixture


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    return write_fixture(tmp_path_factory.mktemp("planted"))


def chance_recall(fixture: Path, split: str, k: int = 5) -> float:
    """recall@k of the Memoriser (no memory) on a split, counted here by hand."""
    fx = load_fixture(fixture)
    side = assign(fx.cases, 0, 0.5)
    ranker = Memoriser(str(fixture), 0.0)
    cases = [c for c in fx.cases if side[c.id] == split]
    return sum(any(e in ranker.search(c.query, k) for e in c.expected) for c in cases) / len(cases)


def sweep(tmp: Path, fixture: Path, uri: str, name: str, *args: str):
    base = ["-m", f"fixture.path={fixture}", f"tracking.uri={uri}", f"hydra.sweep.dir={tmp / name}"]
    proc = cli(tmp, *base, "progress=false", *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


MEMORISER = ["~ranker", "+ranker._target_=holdout_plugins.Memoriser"]


def memoriser(fixture: Path) -> list[str]:
    return [*MEMORISER, f"+ranker.fixture={fixture}"]


def parents(runs):
    return [r for r in runs if r.data.tags.get("evalpipe.role") == "parent"]


def kids(runs, parent, role):
    pid = parent.info.run_id
    return [
        r
        for r in runs
        if r.data.tags.get("mlflow.parentRunId") == pid and r.data.tags.get("evalpipe.role") == role
    ]


def test_memorising_ranker_shows_a_large_gap_and_no_gain_on_test(tmp_path, planted):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = sweep(
        tmp_path, planted, uri, "ms", "fixture.split=dev", *memoriser(planted), "+ranker.memorise=0,0.5,1"
    )
    test_chance = chance_recall(planted, "test")
    dev_chance = chance_recall(planted, "dev")
    assert dev_chance < 0.5  # the default is far from perfect on dev: the sweep "finds" memorise=1
    runs = all_runs(uri)
    (parent,) = parents(runs)
    assert parent.info.status == "FINISHED"  # not KILLED by the upload worker after the re-runs
    points = kids(runs, parent, "child")
    held = kids(runs, parent, "holdout")
    assert len(points) == 3 and len(held) == 2
    assert {r.data.tags["evalpipe.split"] for r in points} == {"dev"}
    assert {r.data.tags["evalpipe.split"] for r in held} == {"test"}
    by_role = {r.data.tags["evalpipe.holdout"]: r for r in held}
    assert by_role["best"].data.params["ranker.memorise"] == "1"
    assert "ranker.memorise" not in by_role["default"].data.params  # the class default, 0.0
    m = parent.data.metrics
    assert m["holdout/best_dev"] == 1.0
    assert m["holdout/best_test"] == pytest.approx(test_chance)
    assert m["holdout/default_test"] == pytest.approx(test_chance)
    assert m["holdout/gap"] == pytest.approx(1.0 - test_chance)
    assert m["holdout/gap_lo"] > 0.5  # a large gap, far from chance
    assert m["holdout/tuned_minus_default"] == 0.0 and m["holdout/p_value"] == 1.0
    assert m["holdout/test_cases"] == 20 and m["holdout/dev_cases"] == 20
    assert m["sweep/points"] == 3  # the re-runs are not points
    tags = parent.data.tags
    assert tags["evalpipe.holdout.verdict"] == "not_better" and tags["evalpipe.holdout.gap_flagged"] == "true"
    assert tags["evalpipe.holdout.best_run_id"] == by_role["best"].info.run_id
    out = proc.stdout
    assert "hold-out check: tuned on dev, measured on test" in out
    assert "optimism gap" in out and "NOT significantly better than the default" in out
    md = (tmp_path / "ms" / "summary.md").read_text()
    assert "## Hold-out check (tuned on dev, measured on test)" in md
    assert "the tuned point is NOT significantly better" in md
    rows = list(csv.DictReader(io.StringIO((tmp_path / "ms" / "summary.csv").read_text())))
    assert [r["status"] for r in rows] == ["FINISHED"] * 3 + ["HOLDOUT"] * 2
    holdout_csv = list(csv.DictReader(io.StringIO((tmp_path / "ms" / "holdout.csv").read_text())))
    assert holdout_csv[0]["point"] == "best" and float(holdout_csv[0]["dev"]) == 1.0
    assert holdout_csv[0]["verdict"] == "not_better"

    # An experiment holding dev points and test re-runs: compare asks which split, then compares it.
    from evalpipe.compare.cli import main as compare_main

    base = ["--experiment", "evalpipe/planted", "--tracking-uri", uri, "--resamples", "200"]
    assert compare_main(base) == 2
    assert compare_main([*base, "--split", "test", "--markdown", str(tmp_path / "t.md")]) == 0
    assert "2 runs · 20 common cases" in (tmp_path / "t.md").read_text()


def test_holdout_false_and_all_split_run_no_holdout(tmp_path, planted):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sweep(tmp_path, planted, uri, "a", "fixture.split=dev", "sweep.holdout=false", *memoriser(planted))
    sweep(tmp_path, planted, uri, "b", *memoriser(planted), "+ranker.memorise=0,1")
    runs = all_runs(uri)
    assert not [r for r in runs if r.data.tags.get("evalpipe.role") == "holdout"]
    assert all("holdout/gap" not in p.data.metrics for p in parents(runs))


def test_joblib_and_resume_with_reused_points(tmp_path, planted):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["fixture.split=dev", *memoriser(planted), "+ranker.memorise=0,1"]
    sweep(tmp_path, planted, uri, "first", *args, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2")
    proc = sweep(tmp_path, planted, uri, "again", *args)  # every point, and both re-runs, reused
    runs = all_runs(uri)
    first, again = sorted(parents(runs), key=lambda r: r.info.start_time)
    assert first.data.tags["evalpipe.launcher"] == "JoblibLauncher"
    for parent in (first, again):
        assert parent.data.metrics["holdout/best_dev"] == 1.0
        assert parent.data.metrics["holdout/p_value"] == 1.0
        assert parent.data.tags["evalpipe.holdout.verdict"] == "not_better"
    assert again.data.metrics["sweep/reused"] == 2
    assert again.data.metrics["holdout/best_test"] == first.data.metrics["holdout/best_test"]
    reused_holdouts = kids(runs, again, "holdout")
    assert len(reused_holdouts) == 2 and all("evalpipe.reused_run_id" in r.data.tags for r in reused_holdouts)
    assert {r.data.tags["evalpipe.reused_run_id"] for r in reused_holdouts} == {
        r.info.run_id for r in kids(runs, first, "holdout")
    }
    assert "NOT significantly better" in proc.stdout


def test_optuna_preset_on_bm25(tmp_path, planted):
    """Through the shipped preset (whichever Optuna sweeper plug-in serves `hydra/sweeper=optuna`)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sweep(
        tmp_path, planted, uri, "opt", "fixture.split=dev", "+sweep=bm25_optuna", "hydra.sweeper.n_trials=3"
    )
    runs = all_runs(uri)
    (parent,) = parents(runs)
    assert parent.data.tags["evalpipe.sweeper"] == "OptunaSweeper"
    points = kids(runs, parent, "child")
    held = {r.data.tags["evalpipe.holdout"]: r for r in kids(runs, parent, "holdout")}
    assert len(points) == 3 and set(held) == {"best", "default"}
    best_dev = max(p.data.metrics["recall_at_5"] for p in points)
    (best_point,) = [p for p in points if p.info.run_id == parent.data.tags["best/recall_at_5.run_id"]]
    assert best_point.data.metrics["recall_at_5"] == best_dev  # ties go to the earliest trial
    for key in ("ranker.k1", "ranker.b", "ranker.method"):  # the best trial's values, re-run on test
        assert held["best"].data.params[key] == best_point.data.params[key]
    assert held["default"].data.params["ranker.k1"] == "1.5"  # conf/ranker/bm25.yaml
    m = parent.data.metrics
    assert m["holdout/best_dev"] == best_dev
    assert m["holdout/best_test"] == held["best"].data.metrics["recall_at_5"]
    assert m["holdout/default_test"] == held["default"].data.metrics["recall_at_5"]
    assert m["holdout/gap"] == pytest.approx(best_dev - m["holdout/best_test"])
    # The re-run is an ordinary run: the same as a single run of that point on the test split.
    single = tmp_path / "single"
    point_args = [f"{k}={best_point.data.params[k]}" for k in ("ranker.k1", "ranker.b", "ranker.method")]
    proc = cli(
        tmp_path, f"fixture.path={planted}", "fixture.split=test", *point_args, "tracking.offline=true",
        f"hydra.run.dir={single}", "progress=false",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = json.loads((single / "metrics.json").read_text())
    assert metrics["recall_at_5"] == m["holdout/best_test"]


def test_gap_ci_resamples_both_case_sets():
    """Two independent sets: the CI of the difference of means matches the normal approximation
    mean_a - mean_b +- 1.96 * sqrt(var_a / n_a + var_b / n_b) (worked out here, not by evalpipe)."""
    import numpy as np

    from evalpipe.stats.resampling import bootstrap_ci_diff_independent

    a = np.array([1.0] * 60 + [0.0] * 40)  # 0.6
    b = np.array([1.0] * 30 + [0.0] * 90)  # 0.25
    diff, lo, hi = bootstrap_ci_diff_independent(a, b, n_resamples=20000)
    assert diff == pytest.approx(0.35)
    se = (0.6 * 0.4 / 100 + 0.25 * 0.75 / 120) ** 0.5
    assert lo == pytest.approx(0.35 - 1.96 * se, abs=0.015)
    assert hi == pytest.approx(0.35 + 1.96 * se, abs=0.015)
    assert bootstrap_ci_diff_independent(np.ones(5), np.zeros(7)) == (1.0, 1.0, 1.0)
