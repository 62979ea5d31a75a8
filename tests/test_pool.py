"""`evalpipe pool`: the union of runs' unlabelled candidates, ordered by what can change a comparison,
refused for runs on another (or an edited) fixture."""

from __future__ import annotations

import json

import pytest

from conftest import TINY_UNITS
from evalpipe.corpus import file_sha256
from evalpipe.judge.batch import read_batch
from evalpipe.labelling import pool_cli
from evalpipe.labelling.pooling import gain, pool
from evalpipe.labelling.runs import PooledRun

FIXTURE = """\
name: tiny
corpus: corpus.jsonl
cases:
  - {id: c1, tier: concept, query: combine dicts, expected: ["pkg/a.py::merge_settings"]}
  - {id: c2, tier: exact, query: Open, expected: {"pkg/b.go::Open": 1, "pkg/a.py": 0}}
"""


def run(label, ranked, first):
    return PooledRun(label, label, "sha", ranked, first, {})


def test_priority_is_the_spread_of_reciprocal_rank_gains():
    assert gain(None, 0) == 0.0
    assert gain(2, 0) == 0.5  # found nothing: the whole 1/2
    assert gain(1, 3) == pytest.approx(1 - 1 / 3)  # above its first hit at 3
    assert gain(4, 3) == 0.0  # below its first hit: changes nothing
    a = run("a", {"c1": ("x", "y", "t")}, {"c1": 3})
    b = run("b", {"c1": ("y", "z", "t")}, {"c1": 3})
    items = pool([a, b], [("c1", "concept", "q", {"t": 1})], depth=3)
    got = {it.candidate: (round(it.priority, 4), dict(it.runs)) for it in items}
    # x: a @1 (gain 2/3), b none (0) -> 2/3; y: a @2 (1/6), b @1 (2/3) -> 1/2; z: b @2 (1/6) -> 1/6
    assert got == {
        "x": (0.6667, {"a": 1, "b": None}),
        "y": (0.5, {"a": 2, "b": 1}),
        "z": (0.1667, {"a": None, "b": 2}),
    }
    assert [it.candidate for it in items] == ["x", "y", "z"]  # what can change the comparison first
    assert items[0].reason == "retrieved by a @1; not by b"


def test_labelled_candidates_any_grade_are_not_pooled_and_cases_all_runs_lack_are_left_out():
    a = run("a", {"c1": ("neg", "u"), "c2": ("v",)}, {"c1": 0, "c2": 0})
    b = run("b", {"c1": ("u",)}, {"c1": 0})
    items = pool([a, b], [("c1", "t", "q", {"neg": 0, "p": 1}), ("c2", "t", "q", {"p": 1})], depth=5)
    assert [(it.case_id, it.candidate) for it in items] == [("c1", "u")]  # not neg (grade 0), not c2


def _run_folder(path, sha, rows, ranker):
    path.mkdir()
    (path / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (path / "tags.json").write_text(json.dumps({"evalpipe.fixture_sha256": sha, "evalpipe.ranker": ranker}))


def test_cli_writes_a_batch_and_refuses_another_fixture(tmp_path, capsys):
    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps(u) + "\n" for u in TINY_UNITS), encoding="utf-8"
    )
    fx = tmp_path / "fx.yaml"
    fx.write_text(FIXTURE, encoding="utf-8")
    sha = file_sha256(fx)
    rows_a = [
        {
            "case_id": "c1",
            "top": json.dumps(["pkg/a.py::Session.merge", "pkg/a.py::merge_settings"]),
            "first_rank": 2,
            "recall_at_5": 1.0,
        },
        {
            "case_id": "c2",
            "top": json.dumps(["pkg/a.py", "docs/guide.md#install"]),
            "first_rank": 0,
            "recall_at_5": 0.0,
        },
    ]
    rows_b = [
        {
            "case_id": "c1",
            "top": json.dumps(["pkg/a.py::merge_settings"]),
            "first_rank": 1,
            "recall_at_5": 1.0,
        },
        {"case_id": "c2", "top": json.dumps(["pkg/b.go::Open"]), "first_rank": 1, "recall_at_5": 1.0},
    ]
    _run_folder(tmp_path / "a", sha, rows_a, "bm25")
    _run_folder(tmp_path / "b", sha, rows_b, "exact")
    out = tmp_path / "batch.jsonl"
    assert (
        pool_cli.main(["--fixture", str(fx), str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(out)]) == 0
    )
    batch = read_batch(out)
    assert batch.fixture_sha256 == sha and batch.header["depth"] == 5
    assert [(it.case_id, it.candidate, dict(it.runs)) for it in batch.items] == [
        ("c1", "pkg/a.py::Session.merge", {"bm25": 1, "exact": None}),  # gain 1 - 1/2 for bm25 only
        ("c2", "docs/guide.md#install", {"bm25": 2, "exact": None}),  # 1/2; pkg/a.py is a judged negative
    ]
    printed = capsys.readouterr().out
    assert "2 candidates from 2 runs (bm25, exact) over 2 cases" in printed
    assert "per label (assumed: none timed yet" in printed

    # A run on the fixture before an edit: one line, exit 2, no batch written.
    fx.write_text(FIXTURE.replace("combine dicts", "merge two dicts"), encoding="utf-8")
    out.unlink()
    assert pool_cli.main(["--fixture", str(fx), str(tmp_path / "a"), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "edited since" in err[0] and not out.exists()
