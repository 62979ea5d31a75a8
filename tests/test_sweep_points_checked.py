"""Issue #39, category 3 (checks after the work): a sweep checks EVERY point before its parent run.

The points a sweeper will launch are worked out in-process and compared with hand-listed grids and
search-space ends; then three real sweeps (the exit code and the store are the point): a bad value
in the second point of a grid (a ranker parameter, a chunker size), an Optuna search space whose
end is out of range, and a sweep into a folder of unsynced offline runs. Each is refused with exit 2
and one line naming the point and the parameter, before anything is measured or any store exists.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cli_helpers import cli_env
from evalpipe.sweeps.points import bounds, grid
from test_bad_input import assert_bad_input, setup


def test_the_grid_is_the_basic_sweepers_points_in_its_order():
    points = grid({"ranker.b": "0.4,0.75"}, ["ranker.k1=0.9,1.2", "plots=false"])
    assert points == [
        ["ranker.b=0.4", "ranker.k1=0.9", "plots=False"],  # Hydra's grid writes values back its way
        ["ranker.b=0.4", "ranker.k1=1.2", "plots=False"],
        ["ranker.b=0.75", "ranker.k1=0.9", "plots=False"],
        ["ranker.b=0.75", "ranker.k1=1.2", "plots=False"],
    ]


def test_a_search_space_is_checked_at_its_ends_one_axis_at_a_time():
    params = {"ranker.k1": "interval(0.3, 2.5)", "ranker.method": "choice(lucene, atire)"}
    task = ["ranker.n=range(1, 10)", "ranker.k1=interval(1, 4)", "ranker.k=int(interval(2, 50))", "ks=[1]"]
    points, labels = bounds(params, task)
    # the command line's ranker.k1 replaces the preset's axis; range(1, 10) ends at 9; Hydra's
    # interval is over floats unless cast to int (as the Optuna sweeper reads it)
    first = ["ranker.method=lucene", "ranker.n=1", "ranker.k1=1.0", "ranker.k=2", "ks=[1]"]
    assert points == [
        first,
        ["ranker.method=atire", *first[1:]],
        [first[0], "ranker.n=9", *first[2:]],
        [*first[:2], "ranker.k1=4.0", *first[3:]],
        [*first[:3], "ranker.k=50", first[4]],
    ]
    assert labels[3] == "ranker.k1=4.0 (the other axes at their first value)"
    floats, _ = bounds({"ranker.b": "tag(log, interval(0.001, 1))"}, [])
    assert floats == [["ranker.b=0.001"], ["ranker.b=1.0"]]


def sweep(tmp: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "evalpipe", "-m", f"tracking.uri=sqlite:///{tmp / 'mlruns' / 'mlflow.db'}",
         "plots=false", "progress=false", f"hydra.sweep.dir={tmp / 'sw'}", *args],
        cwd=cwd or tmp, capture_output=True, text=True, env=cli_env(), timeout=300,
    )  # fmt: skip


def nothing_measured(tmp: Path) -> None:
    assert not list((tmp / "sw").rglob("run_info.json")), "no point may be measured"


def test_a_bad_ranker_value_in_the_second_point_is_refused_before_the_parent(tmp_path):
    setup(tmp_path)
    proc = sweep(tmp_path, "fixture.path=fx.yaml", "ranker.k1=0.9,1.2", "ranker.b=0.5,7")
    assert_bad_input(proc, tmp_path, "sweep point 2 of 4 (ranker.k1=0.9 ranker.b=7)", "b must be in [0, 1]")
    nothing_measured(tmp_path)


DOCS_FIXTURE = """\
name: mini
documents: docs
cases:
  - {id: q1, tier: concept, query: "how do I set the options", expected_documents: [guide.md]}
"""


def test_a_bad_chunker_size_in_the_second_point_is_refused_before_the_parent(tmp_path):
    setup(tmp_path, {"docs.yaml": DOCS_FIXTURE, "docs/guide.md": "# Guide\n\n## Options\n\nSet them here.\n"})
    proc = sweep(
        tmp_path, "fixture=flask", "fixture.path=docs.yaml", "fixture.chunk_cache=null", "chunker=tokens",
        "chunker.overlap=0", "chunker.size=16,0",
    )  # fmt: skip
    assert_bad_input(proc, tmp_path, "sweep point 2 of 2 (chunker.size=0)", "chunker.size")
    nothing_measured(tmp_path)


def test_an_optuna_search_space_out_of_range_is_refused_before_the_parent(tmp_path):
    setup(tmp_path)
    proc = sweep(tmp_path, "+sweep=bm25_optuna", "fixture.path=fx.yaml", "ranker.b=interval(0.1, 1.5)")
    assert_bad_input(proc, tmp_path, "sweep search space at ranker.b=1.5", "b must be in [0, 1]")
    nothing_measured(tmp_path)


def test_a_sweep_into_unsynced_offline_runs_is_refused_before_its_parent(tmp_path):
    setup(tmp_path)
    first = sweep(tmp_path, "fixture.path=fx.yaml", "ranker.k1=0.9,1.2", "tracking.offline=true")
    assert first.returncode == 0, first.stderr[-2000:]
    kept = (tmp_path / "sw" / "0" / "run_info.json").read_bytes()
    proc = sweep(tmp_path, "fixture.path=fx.yaml", "ranker.k1=0.9,1.2")
    line = assert_bad_input(proc, tmp_path, "not in a tracking store yet", "hydra.sweep.dir=")
    assert "hydra.run.dir" not in line
    assert (tmp_path / "sw" / "0" / "run_info.json").read_bytes() == kept
