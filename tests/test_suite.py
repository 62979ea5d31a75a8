"""Suites: per-fixture figures equal to single runs, the macro mean equal to their mean, the worst
fixture, sweeps over a suite (mean or min), `evalpipe compare` fixture by fixture, bad suites."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cli_helpers import FIXTURE, all_runs, write_tiny
from cli_in_process import run_cli as cli
from conftest import ROOT
from evalpipe.suite.aggregate import aggregate
from evalpipe.suite.spec import SuiteError, check_suite, conf_dirs, fixture_options

# A second tiny fixture over the same corpus: other queries, so its figures differ from the first's.
OTHER = """\
name: tinyb
corpus: corpus.jsonl
cases:
  - {id: b1, tier: exact, query: Open, expected: ["pkg/b.go::Open"]}
  - {id: b2, tier: exact, query: Install, expected: ["docs/guide.md#install"]}
  - {id: b3, tier: concept, query: combine dicts, expected: ["pkg/a.py::merge_settings"]}
  - {id: b4, tier: concept, query: unrelated words, expected: ["pkg/a.py::Session.merge"]}
"""


@pytest.fixture(scope="module")
def conf(tmp_path_factory) -> Path:
    """A config dir on Hydra's search path: two fixtures (tinya, tinyb) and a suite of both."""
    root = tmp_path_factory.mktemp("suite")
    write_tiny(root)
    (root / "fx.yaml").write_text(FIXTURE.replace("name: tiny", "name: tinya"))
    (root / "b.yaml").write_text(OTHER)
    (root / "conf" / "fixture").mkdir(parents=True)
    (root / "conf" / "suite").mkdir()
    for name, path in (("tinya", root / "fx.yaml"), ("tinyb", root / "b.yaml")):
        cfg = {"_target_": "evalpipe.inputs.fixture.load_fixture", "path": str(path), "name": None}
        (root / "conf" / "fixture" / f"{name}.yaml").write_text(yaml.safe_dump(cfg))
    (root / "conf" / "suite" / "pair.yaml").write_text("name: pair\nfixtures: [tinya, tinyb]\n")
    (root / "conf" / "suite" / "bad.yaml").write_text("name: bad\nfixtures: [tinya, nosuch]\n")
    return root / "conf"


def common(tmp: Path, conf: Path, uri: str) -> list[str]:
    return [f"hydra.searchpath=[file://{conf}]", f"tracking.uri={uri}", "progress=false", "ks=[1,5]"]


def run(tmp: Path, *args: str):
    proc = cli(tmp, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_suite_figures_equal_single_runs_and_macro_mean(tmp_path, conf):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    singles = {}
    for name in ("tinya", "tinyb"):
        out = tmp_path / f"single_{name}"
        run(tmp_path, *common(tmp_path, conf, uri), f"fixture={name}", f"hydra.run.dir={out}")
        singles[name] = json.loads((out / "metrics.json").read_text())
    proc = run(tmp_path, *common(tmp_path, conf, uri), "suite=pair", f"hydra.run.dir={tmp_path / 'suite'}")
    runs = all_runs(uri)
    (suite,) = [
        r for r in runs if r.data.tags.get("evalpipe.suite") and "evalpipe.suite_fixture" not in r.data.tags
    ]
    members = {
        r.data.tags["evalpipe.suite_fixture"]: r
        for r in runs
        if r.data.tags.get("mlflow.parentRunId") == suite.info.run_id
    }
    assert set(members) == {"tinya", "tinyb"}
    assert {r.data.tags["evalpipe.role"] for r in members.values()} == {"suite_member"}
    m = suite.data.metrics
    for name, single in singles.items():
        for metric in ("recall_at_1", "recall_at_5", "mrr", "ndcg_at_5", "ir/map_at_5"):
            assert members[name].data.metrics[metric] == single[metric]
            assert m[f"suite/{name}/{metric}"] == single[metric]
    # tinya (hand count, see cli_helpers): BM25 finds c1, c2, c3, c5 of 6 in the top 5 -> checked via
    # the single run; the macro mean is the plain mean of the two single runs.
    for metric in ("recall_at_1", "recall_at_5", "mrr", "ndcg_at_5"):
        mean = (singles["tinya"][metric] + singles["tinyb"][metric]) / 2
        assert m[metric] == pytest.approx(mean) and m[f"suite/mean/{metric}"] == pytest.approx(mean)
        assert m[f"suite/min/{metric}"] == min(singles["tinya"][metric], singles["tinyb"][metric])
    worst = min(("tinya", "tinyb"), key=lambda n: (singles[n]["recall_at_5"], n))
    assert suite.data.tags["evalpipe.suite.worst_fixture"] == worst
    assert suite.data.tags["evalpipe.split"] == "all" and suite.info.status == "FINISHED"
    assert suite.data.params["suite"] == "pair"
    out = proc.stdout
    assert "suite pair:" in out and "macro mean" in out and f"{worst} (worst)" in out
    assert "tinya" in out and "tinyb" in out
    assert (tmp_path / "suite" / "suite.md").is_file() and (
        tmp_path / "suite" / "tinya" / "report.md"
    ).is_file()

    # The same suite, judged by its worst fixture: the headline figures are the minimum.
    run(
        tmp_path,
        *common(tmp_path, conf, uri),
        "suite=pair",
        "objective_agg=min",
        f"hydra.run.dir={tmp_path / 'min'}",
    )
    runs = all_runs(uri)
    (by_min,) = [r for r in runs if r.data.tags.get("evalpipe.suite.agg") == "min"]
    assert by_min.data.metrics["recall_at_5"] == min(
        singles["tinya"]["recall_at_5"], singles["tinyb"]["recall_at_5"]
    )

    # compare: fixture by fixture, on the fixtures' own cases.
    from evalpipe.compare.cli import main as compare_main

    md = tmp_path / "cmp.md"
    code = compare_main(
        ["--runs", suite.info.run_id, by_min.info.run_id, "--tracking-uri", uri, "--metrics", "recall_at_5"]
        + ["--resamples", "200", "--markdown", str(md)]
    )
    assert code == 0
    text = md.read_text()
    assert "## fixture `tinya`" in text and "## fixture `tinyb`" in text
    assert "6 common cases" in text and "4 common cases" in text
    assert text.count("+0.0000 [+0.0000, +0.0000]") == 2  # the same ranker: identical per case


def test_sweep_over_a_suite_optimises_the_macro_mean(tmp_path, conf):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sweep = ["suite=pair", "ranker.fields=[title],[title,text]", f"hydra.sweep.dir={tmp_path / 'ms'}"]
    proc = run(tmp_path, "-m", *common(tmp_path, conf, uri), *sweep, "fixture.split=dev")
    runs = all_runs(uri)
    (parent,) = [r for r in runs if r.data.tags.get("evalpipe.role") == "parent"]
    under = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    points = [r for r in under if r.data.tags.get("evalpipe.role") == "child"]
    # The hold-out re-runs of a suite sweep are suite runs on the test split (means only, no CI).
    held = {
        r.data.tags["evalpipe.holdout"]: r for r in under if r.data.tags.get("evalpipe.role") == "holdout"
    }
    assert set(held) == {"best", "default"}
    assert {r.data.tags["evalpipe.split"] for r in held.values()} == {"test"}
    assert all(r.data.tags["evalpipe.suite"] == "pair" for r in held.values())
    assert parent.data.metrics["holdout/best_test"] == held["best"].data.metrics["recall_at_5"]
    assert "hold-out check" in proc.stdout
    assert len(points) == 2 and all(p.data.tags.get("evalpipe.suite") == "pair" for p in points)
    for p in points:  # each point is a suite run: its objective is the mean over its two fixtures
        m = p.data.metrics
        assert m["recall_at_5"] == pytest.approx(
            (m["suite/tinya/recall_at_5"] + m["suite/tinyb/recall_at_5"]) / 2
        )
        kids = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == p.info.run_id]
        assert len(kids) == 2
    assert parent.data.metrics["best/recall_at_5"] == max(p.data.metrics["recall_at_5"] for p in points)
    assert parent.data.metrics["sweep/points"] == 2


def test_bad_suites_stop_before_any_run(tmp_path, conf):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = cli(tmp_path, *common(tmp_path, conf, uri), "suite=bad")
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and " INFO mlflow" not in ln]
    assert len(lines) == 1 and "unknown fixture 'nosuch'" in lines[0] and "available:" in lines[0]
    assert not (tmp_path / "mlflow.db").exists()  # checked before the store is opened
    proc = cli(tmp_path, *common(tmp_path, conf, uri), "suite=pair", "objective_agg=max")
    assert proc.returncode == 2 and "objective_agg must be one of mean, min" in proc.stderr


def test_shipped_code_suite_names_shipped_fixtures():
    raw = yaml.safe_load((ROOT / "conf" / "suite" / "code.yaml").read_text())
    suite = check_suite(raw, None, fixture_options(conf_dirs()))
    assert suite.name == "code" and set(suite.fixtures) == {"gold", "fixgo", "fixts", "fixgo2"}
    with pytest.raises(SuiteError, match="fixtures must be a non-empty list"):
        check_suite({"name": "x", "fixtures": []}, None, ["gold"])


def test_aggregate_by_hand():
    per = {"a": {"recall_at_5": 0.5, "mrr": 0.25, "cost/x": 3.0}, "b": {"recall_at_5": 1.0, "mrr": 0.75}}
    f = aggregate(per, "recall_at_5", "mean")
    assert f.metrics["recall_at_5"] == 0.75 and f.metrics["suite/min/mrr"] == 0.25
    assert (
        f.metrics["suite/a/cost/x"] == 3.0
        and "cost/x" not in f.metrics
        and "suite/mean/cost/x" not in f.metrics
    )
    assert f.worst_fixture == "a" and f.objective_value == 0.75
    assert aggregate(per, "recall_at_5", "min").objective_value == 0.5


def test_suite_whose_second_fixture_is_broken_stops_before_the_first_runs(tmp_path, conf):
    """Issue 32, category 6: every member is checked before the first child run."""
    broken = tmp_path / "broken.yaml"
    broken.write_text(OTHER.replace("name: tinyb", "name: tinyc").replace("Open, expected", "Open, expectd"))
    cfg = {"_target_": "evalpipe.inputs.fixture.load_fixture", "path": str(broken), "name": None}
    extra = tmp_path / "conf"
    (extra / "fixture").mkdir(parents=True)
    (extra / "suite").mkdir()
    (extra / "fixture" / "tinyc.yaml").write_text(yaml.safe_dump(cfg))
    (extra / "suite" / "half.yaml").write_text("name: half\nfixtures: [tinya, tinyc]\n")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = [f"hydra.searchpath=[file://{conf},file://{extra}]", f"tracking.uri={uri}", "progress=false"]
    proc = cli(tmp_path, *args, "suite=half", f"hydra.run.dir={tmp_path / 'suite'}")
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("evalpipe: error: suite half: fixture tinyc: ") and str(broken) in lines[0]
    assert not (tmp_path / "suite" / "tinya").exists()  # the first fixture was not measured
    assert not (tmp_path / "mlflow.db").exists() or all_runs(uri) == []


def test_suite_into_a_folder_with_an_unsynced_member_run_stops_before_the_suite_run(tmp_path, conf):
    """Issue 39, category 3: the second member's folder holds a run not in a store yet; the suite
    refuses before its own run exists and before the first member is measured."""
    kept = tmp_path / "suite" / "tinyb"
    kept.mkdir(parents=True)
    (kept / "run_info.json").write_text(json.dumps({"upload": "offline", "status": "FINISHED"}))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = cli(tmp_path, *common(tmp_path, conf, uri), "suite=pair", f"hydra.run.dir={tmp_path / 'suite'}")
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("evalpipe: error: suite pair: fixture tinyb: ")
    assert "not in a tracking store yet" in lines[0] and "hydra.run.dir=" in lines[0]
    assert not (tmp_path / "suite" / "tinya").exists()  # the first fixture was not measured
    assert not (tmp_path / "mlflow.db").exists() or all_runs(uri) == []
