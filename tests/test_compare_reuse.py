"""`evalpipe compare` on reused sweep points, on a real SQLite MLflow store and real sweeps.

Two sweeps over the tiny fixture of tests/test_sweep.py: the second widens the first, so two of
its three points are reused (child runs tagged `evalpipe.reused_run_id`, no artifacts of their
own). Worked out by hand (see tests/test_sweep.py): BM25 over fields=[title] misses c1 only
(recall_at_5 = 2/3), over fields=[title,text] finds all three (1.0); so on recall_at_5 the
[title,text] point wins exactly case c1 against [title], a paired difference of +1/3.
"""

from __future__ import annotations

import json
import re

import pytest

from evalpipe.compare.cli import main
from test_sweep import all_runs, client_for, run_cli

FIELDS = "ranker.fields"


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reuse")
    from test_sweep import FIXTURE

    (tmp / "corpus.jsonl").write_text("".join(json.dumps(u) + "\n" for u in _units()), encoding="utf-8")
    (tmp / "fx.yaml").write_text(FIXTURE, encoding="utf-8")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    run_cli(tmp, tmp / "fx.yaml", uri, "sw1", f"{FIELDS}=[title],[title,text]", "plots=false")
    second = run_cli(tmp, tmp / "fx.yaml", uri, "sw2", f"{FIELDS}=[title],[title,text],[text]", "plots=false")
    assert second.stdout.count("reused (force=true re-runs)") == 2
    client = client_for(uri)
    runs = all_runs(client)
    reused = {r.data.params[FIELDS]: r for r in runs if "evalpipe.reused_run_id" in r.data.tags}
    measured = {
        r.data.params[FIELDS]: r
        for r in runs
        if r.data.tags.get("evalpipe.role") == "child" and "evalpipe.reused_run_id" not in r.data.tags
    }
    sweep2 = next(
        r.data.tags["evalpipe.sweep_id"]
        for r in runs
        if r.data.tags.get("evalpipe.role") == "parent" and r.data.metrics.get("sweep/reused") == 2
    )
    return {
        "uri": uri,
        "client": client,
        "reused": reused,
        "measured": measured,
        "sweep2": sweep2,
        "tmp": tmp,
    }


def _units():
    from conftest import TINY_UNITS

    return TINY_UNITS


def _main(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--resamples", "200"])
    out = capsys.readouterr()
    return code, " ".join(out.out.split()), out.err


def test_a_reused_point_is_compared_as_the_run_it_reuses(swept, capsys, tmp_path):
    title, both = swept["reused"]['["title"]'], swept["reused"]['["title", "text"]']
    orig_title = swept["measured"]['["title"]']
    orig_both = swept["measured"]['["title", "text"]']
    assert title.data.tags["evalpipe.reused_run_id"] == orig_title.info.run_id
    md = tmp_path / "cmp.md"
    code, out, err = _main(
        capsys, "--tracking-uri", swept["uri"], "--runs", title.info.run_id[:8], both.info.run_id[:8],
        "--metrics", "recall_at_5", "--markdown", str(md),
    )  # fmt: skip
    assert code == 0, err
    # One line per reused point: which run measured it.
    name = orig_title.info.run_name
    line = f"{name} (reused {orig_title.info.run_id[:8]} -> measured run {orig_title.info.run_id})"
    assert line in " ".join(err.split())
    text = md.read_text(encoding="utf-8")
    # The table reads the measured runs' cases.json: 2/3 vs 1, diff +1/3 (case c1).
    assert f"| recall_at_5 | {orig_title.info.run_name} ({orig_title.info.run_id[:8]})" in text
    assert f"| recall_at_5 | {orig_both.info.run_name} ({orig_both.info.run_id[:8]})" in text
    assert "0.6667 [" in text and "+0.3333 [" in text
    # --baseline may name the reused point, by ID or by its own name.
    for ref in (both.info.run_id[:8], both.info.run_name):
        code, out, err = _main(
            capsys, "--tracking-uri", swept["uri"], "--runs", title.info.run_id, both.info.run_id,
            "--metrics", "recall_at_5", "--baseline", ref, "--markdown", str(md),
        )  # fmt: skip
        assert code == 0, err
        assert "-0.3333 [" in md.read_text(encoding="utf-8")


def test_a_sweep_with_reused_points_compares_every_point(swept, capsys):
    code, out, err = _main(capsys, "--tracking-uri", swept["uri"], "--sweep", swept["sweep2"])
    assert code == 0, err
    assert "3 runs · 3 common cases" in out
    assert len(re.findall(r"\(reused [0-9a-f]{8} -> measured run [0-9a-f]{32}\)", " ".join(err.split()))) == 2


def test_a_reused_point_and_its_original_are_compared_once(swept, capsys):
    title = swept["reused"]['["title"]']
    orig = swept["measured"]['["title"]']
    both = swept["measured"]['["title", "text"]']
    code, out, err = _main(
        capsys,
        "--tracking-uri",
        swept["uri"],
        "--runs",
        title.info.run_id,
        orig.info.run_id,
        both.info.run_id,
    )
    assert code == 0, err
    assert "2 runs · 3 common cases" in out and "compared once" in err


def _reuse_of(tracker, exp_id: str, target: str, name: str) -> str:
    """A run tagged as reusing `target`, as a sweep (or an older evalpipe) records one."""
    from evalpipe.tracking import mlflow_store

    with mlflow_store.tracked_run(tracker, exp_id, name, {"evalpipe.reused_run_id": target}) as run_id:
        pass
    return run_id


def test_a_chain_of_reuses_is_followed_to_the_measured_run(swept, capsys):
    from evalpipe.tracking import mlflow_store

    tracker = mlflow_store.ensure_store(swept["uri"])
    hop1 = swept["reused"]['["title"]']  # -> measured [title]
    exp_id = hop1.info.experiment_id
    hop2 = _reuse_of(tracker, exp_id, hop1.info.run_id, "bm25 chained")
    orig = swept["measured"]['["title"]']
    both = swept["measured"]['["title", "text"]']
    code, out, err = _main(
        capsys, "--tracking-uri", swept["uri"], "--runs", hop2, both.info.run_id, "--metrics", "recall_at_5"
    )
    assert code == 0, err
    hops = f"{hop1.info.run_id[:8]} -> {orig.info.run_id[:8]}"
    expected = f"bm25 chained (reused {hops} -> measured run {orig.info.run_id})"
    assert expected in " ".join(err.split())
    assert f"{orig.info.run_name} ({orig.info.run_id[:8]})" in out


def test_a_reused_run_whose_original_was_deleted_is_one_clear_error(swept, capsys):
    from evalpipe.tracking import mlflow_store

    tracker = mlflow_store.ensure_store(swept["uri"])
    client = swept["client"]
    both = swept["measured"]['["title", "text"]']
    exp_id = both.info.experiment_id
    with mlflow_store.tracked_run(tracker, exp_id, "doomed") as doomed:
        mlflow_store.log_table(
            tracker, doomed, {"case_id": ["c1", "c2", "c3"], "recall_at_5": [1, 1, 1]}, "cases.json"
        )
    point = _reuse_of(tracker, exp_id, doomed, f"doomed (reused {doomed[:8]})")
    client.delete_run(doomed)
    code, out, err = _main(capsys, "--tracking-uri", swept["uri"], "--runs", point, both.info.run_id)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"standing for run {doomed}, which was deleted from this store" in err
    assert f"mlflow runs restore --run-id {doomed}" in err and "force=true" in err
    # Restored, it compares again.
    client.restore_run(doomed)
    code, out, err = _main(capsys, "--tracking-uri", swept["uri"], "--runs", point, both.info.run_id)
    assert code == 0, err
    # An original that was never in this store.
    ghost = _reuse_of(tracker, exp_id, "f" * 32, "ghost")
    code, out, err = _main(capsys, "--tracking-uri", swept["uri"], "--runs", ghost, both.info.run_id)
    assert code == 2 and f"standing for run {'f' * 32}, which is not in this store" in err
    assert "--tracking-uri" in err and len(err.strip().splitlines()) == 1


# --- links from every command that touches a run ------------------------------------------------

UI = "http://127.0.0.1:5000/#/experiments/"


def test_compare_log_prints_the_comparison_run_page(swept, capsys):
    title, both = swept["reused"]['["title"]'], swept["reused"]['["title", "text"]']
    code, out, err = _main(
        capsys, "--tracking-uri", swept["uri"], "--runs", title.info.run_id, both.info.run_id,
        "--metrics", "recall_at_5", "--log",
    )  # fmt: skip
    assert code == 0, err
    logged = re.search(r"logged the comparison as run ([0-9a-f]{32}) \((\S+)\)", out)
    assert logged, out
    exp_id = title.info.experiment_id
    assert logged.group(2) == f"{UI}{exp_id}/runs/{logged.group(1)}?workflowType=machine_learning"


def test_a_reused_points_description_links_the_original_run(swept):
    title = swept["reused"]['["title"]']
    orig = swept["measured"]['["title"]']
    note = title.data.tags["mlflow.note.content"]
    href = f"#/experiments/{orig.info.experiment_id}/runs/{orig.info.run_id}?workflowType=machine_learning"
    assert f"measured by run [{orig.info.run_id}]({href})" in note


def test_baseline_set_and_sync_print_the_run_page(swept, tmp_path):
    from cli_helpers import cli, cli_env, write_tiny

    orig = swept["measured"]['["title"]']
    proc = cli(tmp_path, "baseline", "set", "main", orig.info.run_id[:8], "--tracking-uri", swept["uri"])
    assert proc.returncode == 0, proc.stderr
    url = f"{UI}{orig.info.experiment_id}/runs/{orig.info.run_id}?workflowType=machine_learning"
    assert f"run page: {url}" in proc.stdout
    # An offline run, then `evalpipe sync`: the upload line is followed by the run page.
    fx = write_tiny(tmp_path)
    args = [f"fixture.path={fx}", "fixture.name=tiny", "tracking.offline=true", "progress=false"]
    run = cli(tmp_path, *args, "plots=false", f"hydra.run.dir={tmp_path / 'off'}", env=cli_env())
    assert run.returncode == 0, run.stderr
    synced = cli(tmp_path, "sync", str(tmp_path / "off"), "--tracking-uri", swept["uri"])
    assert synced.returncode == 0, synced.stderr
    run_id = re.search(r"-> run ([0-9a-f]{32})", synced.stdout).group(1)
    exp_id = swept["client"].get_run(run_id).info.experiment_id
    assert f"run page: {UI}{exp_id}/runs/{run_id}?workflowType=machine_learning" in synced.stdout
    again = cli(tmp_path, "sync", str(tmp_path / "off"), "--tracking-uri", swept["uri"])
    assert f"is run {run_id} ({UI}{exp_id}/runs/{run_id}?workflowType=machine_learning)" in again.stdout


def test_the_runs_view_filter_lists_each_measured_configuration_once(swept):
    """The shared view's filter, run by the store itself: the measured points only (no reused
    copies, no sweep parents); the UI sends the same string (tests/test_ui_browser.py)."""
    from evalpipe.tracking import links
    from evalpipe.tracking.reuse import REUSED_TAG

    assert links.REUSED_TAG == REUSED_TAG
    client = swept["client"]
    exp_id = next(iter(swept["measured"].values())).info.experiment_id
    shown = client.search_runs([exp_id], filter_string=links.measured_filter("recall_at_5"), max_results=100)
    # The two sweeps hold 3 measured points and 2 reused copies under 2 parents; each point once.
    points = sorted(r.info.run_name for r in shown if r.info.run_name.startswith("bm25 fields="))
    assert points == sorted(r.info.run_name for r in swept["measured"].values())
    assert len(points) == 3 and all("recall_at_5" in r.data.metrics for r in shown)
    assert not any(REUSED_TAG in r.data.tags for r in shown)
    assert not any(r.data.tags.get("evalpipe.role") in ("parent", "compare") for r in shown)
