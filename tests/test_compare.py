"""`evalpipe compare`: statistics on constructed per-case values with known answers, and the CLI contract.

Known answers used below (paired sign-flip test, see evalpipe.stats.resampling):
* identical runs: every difference is 0, so p = 1.0 exactly and the diff CI is (0, 0, 0);
* a run that wins every one of n cases by 1: only the all-plus / all-minus sign patterns reach
  |sum| = n (probability 2 / 2**n ~ 2e-9 for n = 30), so with R resamples no resample is as
  extreme and p = (0 + 1) / (R + 1);
* one non-zero difference among n cases: every sign pattern gives |sum| = that difference, so p = 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalpipe.compare.cli import main
from evalpipe.compare.runs import pick_baseline
from evalpipe.stats.comparison import CompareError, RunCases, common_cases, compare_runs, default_metrics

IDS = [f"q{i:02d}" for i in range(30)]


def run(run_id: str, name: str = "", objective: str = "", **columns: list[float]) -> RunCases:
    ids = IDS[: len(next(iter(columns.values())))]
    values = {m: dict(zip(ids, v, strict=True)) for m, v in columns.items()}
    return RunCases(run_id=run_id.ljust(32, "0"), name=name, values=values, objective=objective)


def cell(result, metric, run_id):
    return next(c for c in result.comparisons if c.metric == metric and c.run.run_id.startswith(run_id))


def test_identical_runs_p_is_one_and_nothing_is_significant():
    values = [1.0, 0.0, 0.5, 1.0, 0.0, 0.25] * 5
    a, b = run("a", recall_at_5=values), run("b", recall_at_5=values)
    result = compare_runs([a, b], resamples=500)
    c = cell(result, "recall_at_5", "b")
    assert (c.diff, c.diff_lo, c.diff_hi) == (0.0, 0.0, 0.0)
    assert c.p_value == 1.0 and not c.significant
    assert c.mean == pytest.approx(sum(values) / 30)
    assert c.lo <= c.mean <= c.hi


def test_a_run_that_wins_every_case_is_significant():
    base, better = run("base", mrr=[0.0] * 30), run("better", mrr=[1.0] * 30)
    result = compare_runs([base, better], resamples=2000, alpha=0.05)
    c = cell(result, "mrr", "better")
    assert c.p_value == pytest.approx(1 / 2001)
    assert c.significant
    assert (c.diff, c.diff_lo, c.diff_hi) == (1.0, 1.0, 1.0)  # constant differences: a degenerate CI
    assert (c.mean, c.lo, c.hi) == (1.0, 1.0, 1.0)
    base_cell = cell(result, "mrr", "base")
    assert base_cell.is_baseline and base_cell.p_value is None


def test_one_win_in_thirty_is_not_significant():
    worse = [0.0] * 30
    one = [1.0] + [0.0] * 29
    c = cell(compare_runs([run("a", mrr=worse), run("b", mrr=one)], resamples=300), "mrr", "b")
    assert c.p_value == 1.0 and not c.significant
    assert c.diff == pytest.approx(1 / 30)


def test_cases_are_aligned_by_id_and_mismatches_warned():
    a = RunCases("a" * 32, "a", {"mrr": {"x": 1.0, "y": 0.0, "z": 1.0}})
    b = RunCases("b" * 32, "b", {"mrr": {"z": 0.0, "y": 0.0, "w": 1.0}})  # other order, one other case
    ids, warnings = common_cases([a, b])
    assert ids == ["y", "z"]  # the first run's order
    assert len(warnings) == 2 and "'x'" in warnings[0] and "'w'" in warnings[1]
    result = compare_runs([a, b], resamples=100)
    c = cell(result, "mrr", "b")
    assert c.diff == pytest.approx((0.0 - 0.0 + 0.0 - 1.0) / 2)  # y: 0-0, z: 0-1


def test_bad_inputs_raise_one_clear_error():
    a = RunCases("a" * 32, "a", {"mrr": {"x": 1.0}})
    b = RunCases("b" * 32, "b", {"mrr": {"y": 1.0}})
    with pytest.raises(CompareError, match="share no case IDs"):
        compare_runs([a, b])
    with pytest.raises(CompareError, match="no per-case 'ndcg_at_5'.*available: mrr"):
        compare_runs([a, a], metrics=["ndcg_at_5"])


def test_default_metrics_objective_first_then_numeric_k_order():
    r = run("a", objective="ndcg_at_20", recall_at_20=[1.0], recall_at_5=[1.0], mrr=[1.0])
    r = RunCases(
        r.run_id, "", {**r.values, "ndcg_at_20": {"q00": 1.0}, "precision_at_5": {"q00": 0.2}}, 0, r.objective
    )
    assert default_metrics([r]) == ["ndcg_at_20", "recall_at_5", "recall_at_20", "mrr"]


def test_pick_baseline_by_id_prefix_or_unique_name():
    runs = [
        run("aaaa1111", "bm25", mrr=[1.0]),
        run("bbbb2222", "rrf", mrr=[1.0]),
        run("cccc", "rrf", mrr=[1.0]),
    ]
    assert pick_baseline(runs, None) == 0
    assert pick_baseline(runs, "bbbb2222") == 1
    assert pick_baseline(runs, "bm25") == 0
    with pytest.raises(CompareError, match="names 2 runs"):
        pick_baseline(runs, "rrf")
    with pytest.raises(CompareError, match="not among the selected runs"):
        pick_baseline(runs, "nope")


# --- the CLI on a real (temporary) MLflow store -----------------------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """base (12 cases, all 0), better (all 1), 'empty' without cases.json, 'elsewhere' on other cases.

    Module-scoped: creating a SQLite store's schema takes seconds; tests only read it (and one adds
    a compare run, which selections ignore).
    """
    from evalpipe.tracking import mlflow_store

    tracker = mlflow_store.ensure_store(f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}")
    exp = mlflow_store.ensure_experiment(tracker, "evalpipe/tiny")
    ids = {}
    for name, value in (("base", 0.0), ("better", 1.0)):
        with mlflow_store.tracked_run(tracker, exp, name, {"evalpipe.ranker": name}) as run_id:
            table = {
                "case_id": [f"c{i}" for i in range(12)],
                "tier": ["exact"] * 12,
                "recall_at_5": [value] * 12,
                "mrr": [value / 2] * 12,
                "latency_us": [10] * 12,
            }
            mlflow_store.log_batch(tracker, run_id, params={"objective": "recall_at_5"})
            mlflow_store.log_table(tracker, run_id, table, "cases.json")
        ids[name] = run_id
    with mlflow_store.tracked_run(tracker, exp, "empty") as run_id:
        ids["empty"] = run_id
    other = mlflow_store.ensure_experiment(tracker, "evalpipe/other")
    with mlflow_store.tracked_run(tracker, other, "elsewhere") as run_id:
        mlflow_store.log_table(
            tracker, run_id, {"case_id": ["zz"], "recall_at_5": [1.0], "mrr": [1.0]}, "cases.json"
        )
    ids["elsewhere"] = run_id
    return tracker, ids


def test_cli_compares_marks_significance_writes_markdown_and_logs(store, tmp_path, capsys):
    tracker, ids = store
    out = tmp_path / "cmp.md"
    argv = ["--runs", ids["base"], ids["better"], "--tracking-uri", tracker.uri, "--resamples", "500"]
    assert main(argv + ["--markdown", str(out), "--log"]) == 0
    text = out.read_text(encoding="utf-8")
    # 12 cases all won by 1 (recall) and by 0.5 (mrr): p = 1/501 for both, marked '*'.
    assert "| recall_at_5 | better" in text and "+1.0000 [+1.0000, +1.0000] | 0.0020 | * |" in text
    assert "| mrr | better" in text and "+0.5000 [+0.5000, +0.5000] | 0.0020 | * |" in text
    assert "2 runs · 12 common cases · baseline base" in text
    logged = tracker.client.search_runs(
        [tracker.client.get_experiment_by_name("evalpipe/tiny").experiment_id],
        filter_string="tags.`evalpipe.role` = 'compare'",
    )
    assert len(logged) == 1
    assert logged[0].data.tags["evalpipe.compare.baseline"] == ids["base"]
    artifacts = {a.path for a in tracker.client.list_artifacts(logged[0].info.run_id)}
    assert artifacts == {"compare.md", "compare.json"}
    path = tracker.client.download_artifacts(logged[0].info.run_id, "compare.json", str(tmp_path))
    payload = json.loads(Path(path).read_text(encoding="utf-8"))
    assert sum(row["significant"] for row in payload) == 2

    # --baseline by name flips the sign; the logged compare run is not picked up by --experiment.
    capsys.readouterr()
    argv = ["--runs", ids["base"], ids["better"], "--tracking-uri", tracker.uri, "--resamples", "100"]
    assert main(argv + ["--baseline", "better", "--metrics", "mrr", "--markdown", str(out)]) == 0
    assert "-0.5000 [-0.5000, -0.5000]" in out.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--experiment", "nope"], "unknown experiment 'nope'; known: "),
        (["--runs", "0123456789abcdef0123456789abcdef"], "unknown run ID"),
        (["--runs", "{base}", "{empty}"], "has no cases.json artifact"),
        (["--runs", "{base}", "{elsewhere}"], "share no case IDs"),
        (["--experiment", "evalpipe/tiny"], "has no cases.json artifact"),  # 'empty' is in it
        (["--runs", "{base}", "{better}", "--metrics", "ndcg_at_3"], "no per-case 'ndcg_at_3'"),
        (["--runs", "{base}"], "nothing to compare: the given runs has 1 measured run (only 'base')"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(store, capsys, args, message):
    tracker, ids = store
    args = [a.format(**ids) for a in args]
    assert main([*args, "--tracking-uri", tracker.uri, "--resamples", "50"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("evalpipe compare: error: ") and message in err
    assert len(err.splitlines()) == 1


def test_cli_missing_store_is_not_created(tmp_path, capsys):
    db = tmp_path / "none" / "mlflow.db"
    assert main(["--experiment", "x", "--tracking-uri", f"sqlite:///{db}"]) == 2
    assert "no MLflow store at" in capsys.readouterr().err
    assert not db.exists()


def test_cli_help_and_usage_errors():
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    with pytest.raises(SystemExit) as exc:
        main([])  # one of --experiment / --sweep / --runs is required
    assert exc.value.code == 2


def test_metric_missing_for_some_cases_is_compared_on_the_cases_that_have_it():
    # Unanswerable case "u" has no ranking metrics (None in cases.json) but has RAG measures.
    a = RunCases(
        "a" * 32, "a", {"mrr": {"x": 1.0, "y": 0.0}, "rag_document_hit": {"x": 1.0, "y": 0.0, "u": 0.0}}
    )
    b = RunCases(
        "b" * 32, "b", {"mrr": {"x": 0.0, "y": 0.0}, "rag_document_hit": {"x": 1.0, "y": 1.0, "u": 0.0}}
    )
    result = compare_runs([a, b], metrics=["mrr", "rag_document_hit"], resamples=100)
    assert cell(result, "mrr", "a").mean == pytest.approx(0.5)  # over x, y only: as the run's logged mrr
    assert cell(result, "mrr", "b").diff == pytest.approx(-0.5)
    assert cell(result, "rag_document_hit", "b").mean == pytest.approx(2 / 3)  # over x, y, u


# --- metrics some runs lack, run-ID prefixes, the per-case view ---------------------------------


def test_a_metric_some_runs_lack_is_compared_on_the_others_and_they_are_named():
    a = run("a", "a", recall_at_5=[1.0, 0.0], mrr=[1.0, 0.5])
    b = run("b", "b", recall_at_5=[1.0, 1.0], mrr=[1.0, 1.0])
    c = run("c", "c", mrr=[0.5, 0.5])  # e.g. logged with other ks
    result = compare_runs([a, b, c], metrics=None, resamples=100)
    assert result.metrics == ["recall_at_5", "mrr"]  # the baseline's metrics, not only the shared ones
    assert {x.run.name for x in result.comparisons if x.metric == "recall_at_5"} == {"a", "b"}
    assert {x.run.name for x in result.comparisons if x.metric == "mrr"} == {"a", "b", "c"}
    assert cell(result, "recall_at_5", "b").diff == pytest.approx(0.5)  # (0 + 1) / 2
    (warning,) = [w for w in result.warnings if w.startswith("recall_at_5")]
    assert "compared on 2 of 3 runs" in warning and "c (c0000000)" in warning


def test_a_metric_the_baseline_lacks_is_reported_not_compared():
    a = run("a", "a", mrr=[1.0, 0.5])
    b = run("b", "b", mrr=[1.0, 1.0], ndcg_at_5=[1.0, 1.0])
    result = compare_runs([a, b], metrics=["mrr", "ndcg_at_5"], resamples=100)
    assert result.metrics == ["mrr"]
    assert any("ndcg_at_5: not compared, the baseline a (a0000000)" in w for w in result.warnings)
    with pytest.raises(CompareError, match="no metric could be compared"):
        compare_runs([a, b], metrics=["ndcg_at_5"], resamples=100)


def test_cli_accepts_run_id_prefixes_and_rejects_bad_ones(store, capsys):
    tracker, ids = store
    argv = ["--tracking-uri", tracker.uri, "--resamples", "50", "--metrics", "recall_at_5"]
    assert main(["--runs", ids["base"][:8], ids["better"][:8], *argv]) == 0
    out = capsys.readouterr().out
    assert f"base ({ids['base'][:8]})" in out and f"better ({ids['better'][:8]})" in out
    assert main(["--runs", ids["base"][:8], *argv, "--baseline", ids["better"][:8]]) == 0  # added
    assert "baseline better" in " ".join(capsys.readouterr().out.split())
    for bad, message in (
        ("abc", "neither a 32-character run ID nor a prefix"),
        ("0" * 12, "no run ID starts"),
    ):
        assert main(["--runs", bad, *argv]) == 2
        assert message in capsys.readouterr().err


def test_cli_cases_lists_won_cases_and_logs_diff_artifacts(store, tmp_path, capsys):
    tracker, ids = store
    argv = ["--runs", ids["base"], ids["better"], "--tracking-uri", tracker.uri, "--resamples", "50"]
    assert main([*argv, "--metrics", "mrr", "--cases", "--log"]) == 0  # --cases: the objective
    out = " ".join(capsys.readouterr().out.split())
    # better has recall_at_5 = 1 on all 12 cases, base 0: 12 won, 0 lost, all in tier exact.
    assert "on recall_at_5: 12 won, 0 lost, 0 unchanged" in out
    logged = tracker.client.search_runs(
        [tracker.client.get_experiment_by_name("evalpipe/tiny").experiment_id],
        filter_string="tags.`evalpipe.role` = 'compare'",
        order_by=["attributes.start_time DESC"],
    )[0]
    assert {a.path for a in tracker.client.list_artifacts(logged.info.run_id)} >= {"diff.md", "diff.json"}
    path = tracker.client.download_artifacts(logged.info.run_id, "diff.json", str(tmp_path))
    table = json.loads(Path(path).read_text(encoding="utf-8"))
    columns = table["columns"]
    rows = [dict(zip(columns, r, strict=True)) for r in table["data"]]
    assert (
        len(rows) == 12 and {r["outcome"] for r in rows} == {"won"} and {r["tier"] for r in rows} == {"exact"}
    )
