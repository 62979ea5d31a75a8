"""Two `python -m evalpipe` processes started together on a new SQLite store both succeed.

Without the schema lock (`tracking.schema_lock`), one of them failed every time with
`duplicate column name` while both created and migrated the schema.
"""

from __future__ import annotations

import pytest

from cli_helpers import all_runs, error_lines, popen_cli, write_tiny

PLUGIN = ["~ranker", "+ranker._target_=plugins_for_tests.keyword_search", "+ranker._partial_=true"]


@pytest.mark.parametrize("attempt", range(3))
def test_two_first_runs_on_a_new_store_both_succeed(tmp_path, attempt):
    fx = write_tiny(tmp_path)
    uri = f"sqlite:///{tmp_path / 'fresh' / 'mlflow.db'}"
    procs = [
        popen_cli(
            tmp_path,
            f"fixture.path={fx}",
            f"tracking.uri={uri}",
            f"hydra.run.dir={tmp_path / f'o{i}'}",
            "plots=false",
            *PLUGIN,
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for proc, (_, stderr) in zip(procs, outs, strict=True):
        assert proc.returncode == 0, stderr
        assert error_lines(stderr) == [], stderr
    runs = all_runs(uri)
    assert sorted(r.info.status for r in runs) == ["FINISHED", "FINISHED"]
    # keyword_search: c1..c3 of 6 at rank 1 (see cli_helpers.FIXTURE), in both runs.
    assert [r.data.metrics["recall_at_1"] for r in runs] == [0.5, 0.5]
