"""Bad input, round 3, by category (issue #19): values that look valid but are not, text you cannot
see, half-written or odd files, input dropped without a word, bad input that would leave a run
behind, Hydra's own startup failures, and commands with too little to do.

Every case goes through the real CLI (its own entry, in this process: tests/cli_in_process.py; the
one-line check of `evalpipe compare` stays a real process) and meets the same bar as
tests/test_bad_input.py: exit 2, one line naming what to fix, no traceback, nothing in the store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_in_process import run_cli
from conftest import ROOT
from test_bad_input import CORPUS, assert_bad_input, cli, evalpipe_lines, setup


def sweep_cli(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m evalpipe -m ...` (flags first), logging to tmp/mlruns as `cli` does (in this
    process, as `cli`: tests/cli_in_process.py)."""
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    for key in ("MLFLOW_TRACKING_URI", "HYDRA_FULL_ERROR"):
        env.pop(key, None)
    return run_cli(
        tmp, "-m", f"tracking.uri=sqlite:///{tmp / 'mlruns' / 'mlflow.db'}",
        "plots=false", "fixture.path=fx.yaml", "ranker.k1=0.9,1.2", *args, env=env,
    )  # fmt: skip


# -- values that look valid but are not ----------------------------------------------------------------

LOOKALIKE_CASES = [
    (["tracking.offline=no"], ["tracking.offline must be true or false, got 'no'"]),
    (["tracking.offline=yes"], ["tracking.offline must be true or false, got 'yes'"]),
    (["tracking.offline=1"], ["tracking.offline must be true or false, got 1"]),
    (["force=off"], ["force must be true or false, got 'off'"]),
    (["traces=0"], ["traces must be true or false, got 0"]),
    (["progress='false'"], ["progress must be true or false"]),
    (["ks=[5,5]"], ["ks lists 5 more than once", "ks=[5]"]),
    (["ks=[1,5,1,5]"], ["ks lists 1, 5 more than once", "ks=[1,5]"]),
]


@pytest.mark.parametrize(("args", "needles"), LOOKALIKE_CASES, ids=[" ".join(a) for a, _ in LOOKALIKE_CASES])
def test_values_that_look_valid_are_refused(tmp_path, args, needles):
    setup(tmp_path)
    assert_bad_input(cli(tmp_path, "fixture.path=fx.yaml", *args), tmp_path, *needles)


def test_offline_false_spelt_as_a_boolean_still_uploads(tmp_path):
    setup(tmp_path)
    proc = cli(tmp_path, "fixture.path=fx.yaml", "tracking.offline=false")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "mlruns" / "mlflow.db").is_file()


# -- text you cannot see -------------------------------------------------------------------------------

INVISIBLE = {
    "trailing space": "pkg/a.py::merge_settings ",
    "no-break space": "pkg/a.py::merge_settings\u00a0",
    "zero-width space": "pkg/a.py::merge\u200b_settings",
    "tab": "pkg/a.py::merge_settings\t",
}


@pytest.mark.parametrize("uid", INVISIBLE.values(), ids=INVISIBLE.keys())
def test_an_expected_id_with_invisible_characters_is_shown_escaped(tmp_path, uid):
    fixture = (
        "name: tiny\ncorpus: corpus.jsonl\ncases:\n  - id: c1\n    tier: exact\n    query: merge\n"
        f"    expected: [{json.dumps(uid)}]\n"
    )
    setup(tmp_path, {"fx.yaml": fixture})
    line = assert_bad_input(cli(tmp_path, "fixture.path=fx.yaml"), tmp_path, repr(uid))
    assert "nearest: pkg/a.py::merge_settings" in line  # the visible one, unquoted beside it


# -- half-written or odd files ---------------------------------------------------------------------------


def test_fixture_path_that_is_a_symlink_loop(tmp_path):
    setup(tmp_path)
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
    assert_bad_input(cli(tmp_path, "fixture.path=a.yaml"), tmp_path, "a.yaml", "symbolic link loop")


def test_fixture_path_that_is_a_broken_symlink(tmp_path):
    setup(tmp_path)
    (tmp_path / "gone.yaml").symlink_to(tmp_path / "nowhere.yaml")
    assert_bad_input(cli(tmp_path, "fixture.path=gone.yaml"), tmp_path, "gone.yaml", "broken symbolic link")


def test_yaml_alias_bomb_is_refused_before_it_is_expanded(tmp_path):
    lines = [
        "name: bomb",
        "corpus: corpus.jsonl",
        'a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]',
    ]
    for i in range(1, 9):  # 10^9 values in 10 short lines
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    lines.append("cases: *a8")
    setup(tmp_path, {"fx.yaml": "\n".join(lines) + "\n"})
    line = assert_bad_input(cli(tmp_path, "fixture.path=fx.yaml"), tmp_path, "fx.yaml", "alias bomb")
    assert len(line) < 500


@pytest.fixture()
def saved_run(tmp_path) -> Path:
    """A finished offline run's output dir (what `evalpipe sync` reads)."""
    setup(tmp_path)
    proc = cli(tmp_path, "fixture.path=fx.yaml", "tracking.offline=true")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "run_info.json").is_file()
    return tmp_path / "out"


def sync(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    """`evalpipe sync ARGS` in this process (tests/cli_in_process.py)."""
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return run_cli(tmp, "sync", *args, "--tracking-uri", f"sqlite:///{tmp / 'mlruns' / 'm.db'}", env=env)


HALF_WRITTEN = {
    "truncated run_info.json": (
        "run_info.json",
        lambda text: text[: len(text) // 2],
        "truncated or not JSON",
    ),
    "empty run_info.json": ("run_info.json", lambda text: "", "is empty"),
    "run_info.json holding a list": ("run_info.json", lambda text: "[]", "JSON list"),
    "run_info.json without its status": (
        "run_info.json",
        lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "status"}),
        "no 'status' field",
    ),
    "truncated metrics.json": ("metrics.json", lambda text: text[:-5], "metrics.json is truncated"),
    "metrics.json with text values": ("metrics.json", lambda text: '{"recall_at_5": "high"}', "not a number"),
}


@pytest.mark.parametrize(("name", "edit", "needle"), HALF_WRITTEN.values(), ids=HALF_WRITTEN.keys())
def test_sync_on_a_half_written_run_is_one_line_naming_the_file(saved_run, name, edit, needle):
    path = saved_run / name
    path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
    proc = sync(saved_run.parent, str(saved_run))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("evalpipe:")]
    assert len(lines) == 1 and name in lines[0] and needle in lines[0], proc.stderr
    assert not (saved_run.parent / "mlruns" / "m.db").exists()


def test_sync_uploads_the_good_runs_beside_a_damaged_one(saved_run, tmp_path):
    good = tmp_path / "good"
    proc = cli(tmp_path, "fixture.path=fx.yaml", "tracking.offline=true", f"hydra.run.dir={good}")
    assert proc.returncode == 0, proc.stderr
    (saved_run / "run_info.json").write_text("{", encoding="utf-8")
    proc = sync(tmp_path, str(saved_run), str(good))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "uploaded" in proc.stdout and str(good) in proc.stdout
    assert json.loads((good / "run_info.json").read_text())["upload"] == "complete"


# -- input dropped without a word -------------------------------------------------------------------------


def test_beir_queries_without_text_are_counted_in_a_note(tmp_path):
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        '{"_id": "d1", "title": "", "text": "alpha beta"}\n{"_id": "d2", "title": "", "text": "gamma"}\n'
    )
    (folder / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "alpha"}\n{"_id": "q2", "text": "  "}\n{"_id": "q3", "text": "gamma"}\n'
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq3\td2\t1\nq4\td1\t1\n"
    )
    proc = cli(
        tmp_path, "fixture=beir", f"fixture.path={folder}", "ranker=bm25_prose", "tracking.offline=true"
    )
    assert proc.returncode == 0, proc.stderr
    warnings = [ln for ln in evalpipe_lines(proc) if ln.startswith("evalpipe: warning:")]
    assert any("1 of 4 judged queries have an empty query text" in w and "'q2'" in w for w in warnings)
    assert any("1 of 4 judged queries are not in the queries file" in w and "'q4'" in w for w in warnings)
    report = (tmp_path / "out" / "report.md").read_text()
    assert "empty query text" in report
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["count/cases"] == 2


# -- bad input that would leave a run behind ----------------------------------------------------------


SWEEP_CASES = [
    (["objective=recall_at_7"], ["objective=recall_at_7 is not a figure"]),
    (["tracking.offline=no"], ["tracking.offline must be true or false"]),
    (["ks=[5,5]"], ["ks lists 5 more than once"]),
]


@pytest.mark.parametrize(("args", "needles"), SWEEP_CASES, ids=[" ".join(a) for a, _ in SWEEP_CASES])
def test_a_sweep_refused_before_its_first_point_leaves_nothing_in_the_store(tmp_path, args, needles):
    setup(tmp_path)
    proc = sweep_cli(tmp_path, f"hydra.sweep.dir={tmp_path / 'sw'}", *args)
    assert_bad_input(proc, tmp_path, *needles)


# -- Hydra's own startup failures ---------------------------------------------------------------------------


def test_output_dir_that_is_a_file(tmp_path):
    setup(tmp_path)
    (tmp_path / "taken").write_text("not a folder")
    proc = cli(tmp_path, "fixture.path=fx.yaml", f"hydra.run.dir={tmp_path / 'taken'}")
    assert_bad_input(proc, tmp_path, "taken", "a file is in the way")


def test_output_dir_below_a_file(tmp_path):
    setup(tmp_path)
    (tmp_path / "taken").write_text("not a folder")
    proc = cli(tmp_path, "fixture.path=fx.yaml", f"hydra.run.dir={tmp_path / 'taken' / 'run'}")
    assert_bad_input(proc, tmp_path, "taken", "Not a directory")


def test_sweep_dir_that_is_a_file(tmp_path):
    setup(tmp_path)
    (tmp_path / "taken").write_text("not a folder")
    proc = sweep_cli(tmp_path, f"hydra.sweep.dir={tmp_path / 'taken'}")
    assert_bad_input(proc, tmp_path, "taken", "a file is in the way")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders; the file cases cover it")
def test_read_only_output_dir(tmp_path):
    setup(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    proc = cli(tmp_path, "fixture.path=fx.yaml", f"hydra.run.dir={locked / 'run'}")
    assert_bad_input(proc, tmp_path, "locked", "writable")


# -- commands with too little to do ---------------------------------------------------------------------


def test_compare_with_one_run_says_there_is_nothing_to_compare(tmp_path):
    setup(tmp_path)
    assert cli(tmp_path, "fixture.path=fx.yaml").returncode == 0
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    proc = subprocess.run(
        [sys.executable, "-m", "evalpipe", "compare", "--experiment", "evalpipe/fx",
         "--tracking-uri", f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert "nothing to compare" in line and "1 measured run" in line and len(line) < 300


def test_sync_with_nothing_saved_says_so(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = sync(tmp_path, str(tmp_path / "empty"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "no saved run" in proc.stderr


assert CORPUS  # the tiny corpus the fixtures above point at (written by `setup`)
