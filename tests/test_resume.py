"""Resume bookkeeping: which finished run a sweep point may reuse, and sweep identity."""

from __future__ import annotations

from evalpipe.core.fingerprint import code_fingerprint
from evalpipe.tracking import mlflow_store
from evalpipe.tracking.sweep_job import HASH_TAG, find_finished, sweep_id_for


def test_skipped_or_failed_runs_are_never_reused(tracking_uri):
    tracker, exp = mlflow_store.open_experiment(tracking_uri, "evalpipe/t")
    client = tracker.client

    def run(status: str, **tags: str) -> str:
        r = client.create_run(exp, tags={HASH_TAG: "abc", **tags})
        client.set_terminated(r.info.run_id, status=status)
        return r.info.run_id

    assert find_finished(tracker, exp, "abc") is None
    run("FAILED")
    run("FINISHED", **{"evalpipe.skipped": "no model"})
    assert find_finished(tracker, exp, "abc") is None
    good = run("FINISHED")
    assert find_finished(tracker, exp, "abc").info.run_id == good
    assert find_finished(tracker, exp, "other") is None


def test_sweeps_into_one_fixed_dir_get_distinct_ids(tmp_path):
    d = str(tmp_path / "multirun")
    assert sweep_id_for(d, 1) != sweep_id_for(d, 2)
    assert sweep_id_for(d, 1) == sweep_id_for(d, 1) and len(sweep_id_for(d)) == 12


def test_code_fingerprint_changes_with_the_source(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("x = 1\n")
    before = code_fingerprint(pkg)
    assert code_fingerprint(pkg) == before
    (pkg / "a.py").write_text("x = 2\n")
    assert code_fingerprint(pkg) != before
