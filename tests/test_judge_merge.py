"""`evalpipe merge-judgements`: reviewed verdicts into a fixture as a new version, comments kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, TINY_UNITS
from evalpipe.inputs.fixture import load_fixture
from evalpipe.judge.merge import merge
from evalpipe.safety.errors import EvalpipeError

FIXTURE = """\
# The tiny fixture: comments and layout must survive a merge.
name: tiny
version: 3
corpus: corpus.jsonl
cases:
  - id: c1          # block list
    tier: exact
    query: merge_settings
    expected:
      - pkg/a.py::merge_settings   # the function itself
  - id: c2
    tier: concept
    query: combine another session
    expected: [pkg/a.py::Session.merge]
  - id: c3
    tier: multi_hop
    query: open a file with pip
    expected:
      pkg/b.go::Open: 2
  - id: c4
    tier: di
    query: zebra
    expected: pkg/a.py
  - id: c5
    tier: exact
    query: install
    expected: {docs/guide.md#install: 2}
"""

TSV = """\
# Positive verdicts of openai:m, prompt relevance_v1@00000000
case_id\tunit_id\tgrade\trank\treason
c1\tpkg/a.py::Session.merge\t1\t2\tmerges too
c2\tpkg/a.py::merge_settings\t1\t1\tcombines two settings
c2\tpkg/b.go::Open\t0\t3\trejected by the reviewer
c3\tdocs/guide.md#install\t1\t2\tpip is the installer
c4\tpkg/a.py::merge_settings\t1\t1\t-
c5\tpkg/a.py\t2\t4\tthe module
c1\tpkg/a.py::merge_settings\t1\t1\talready expected
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(u) + "\n" for u in TINY_UNITS))
    (tmp_path / "fx.yaml").write_text(FIXTURE)
    (tmp_path / "judged.tsv").write_text(TSV)
    return tmp_path


def test_merge_adds_reviewed_ids_keeps_comments_and_bumps_the_version(tiny):
    out, added, skipped = merge(tiny / "fx.yaml", tiny / "judged.tsv", None)
    assert out == tiny / "fx_v4.yaml"
    assert added == 5 and [(r.case_id, r.unit_id) for r in skipped] == [("c1", "pkg/a.py::merge_settings")]
    text = out.read_text()
    # Every original line is still there, in order; the additions are new lines or in-line.
    assert "# The tiny fixture: comments and layout must survive a merge." in text
    assert "  - id: c1          # block list" in text
    assert (
        "      - pkg/a.py::merge_settings   # the function itself\n"
        "      - pkg/a.py::Session.merge  # judged: merges too\n" in text
    )
    assert "    expected: [pkg/a.py::Session.merge, pkg/a.py::merge_settings]\n" in text
    assert "      pkg/b.go::Open: 2\n      docs/guide.md#install: 1  # judged: pip is the installer\n" in text
    assert "    expected: [pkg/a.py, pkg/a.py::merge_settings]\n" in text
    assert "    expected: {docs/guide.md#install: 2, pkg/a.py: 2}\n" in text
    assert "# version 4: 5 reviewed judge verdicts merged from judged.tsv\nversion: 4\n" in text
    fx = load_fixture(out)
    assert str(fx.version) == "4"
    q = {c.id: dict(c.qrels) for c in fx.cases}
    assert q == {
        "c1": {"pkg/a.py::merge_settings": 1, "pkg/a.py::Session.merge": 1},
        "c2": {"pkg/a.py::Session.merge": 1, "pkg/a.py::merge_settings": 1},
        "c3": {"pkg/b.go::Open": 2, "docs/guide.md#install": 1},
        "c4": {"pkg/a.py": 1, "pkg/a.py::merge_settings": 1},
        "c5": {"docs/guide.md#install": 2, "pkg/a.py": 2},
    }
    # The original file is untouched.
    assert (tiny / "fx.yaml").read_text() == FIXTURE


def test_the_gold_fixture_merges_with_only_added_lines(tmp_path):
    gold = (ROOT / "fixtures" / "gold.yaml").read_text()
    data = yaml.safe_load(gold)
    first = data["cases"][0]
    (tmp_path / "gold.yaml").write_text(gold)
    (tmp_path / "gold_corpus.jsonl").symlink_to(ROOT / "fixtures" / "gold_corpus.jsonl")
    unit = "src/evalpipe/rankers/base.py::CorpusRanker"
    (tmp_path / "j.tsv").write_text(f"case_id\tunit_id\tgrade\treason\n{first['id']}\t{unit}\t1\tclose\n")
    new_version = data["version"] + 1
    out, added, _ = merge(tmp_path / "gold.yaml", tmp_path / "j.tsv", None)
    assert out == tmp_path / f"gold_v{new_version}.yaml"
    old, new = gold.splitlines(), out.read_text().splitlines()
    assert added == 1 and len(new) == len(old) + 3
    today = date.today().isoformat()
    assert [line for line in new if line not in old] == [
        f"# provenance: judge unknown judge, prompt unknown prompt, judged unknown date, merged {today}",
        f"# version {new_version}: 1 reviewed judge verdicts merged from j.tsv",
        f"version: {new_version}",
        f"  - {unit}  # judged: close",
    ]


@pytest.mark.parametrize(
    ("tsv", "message"),
    [
        ("case_id\tunit_id\nnope\tpkg/a.py\n", r"judged.tsv:2: case 'nope' is not in"),
        (
            "case_id\tunit_id\nc1\tpkg/zzz.py\n",
            r"judged.tsv:2: unit 'pkg/zzz.py' is not in the fixture's corpus",
        ),
        ("case_id\tunit_id\tgrade\nc2\tpkg/a.py\t2\n", r"judged.tsv:2: grade 2 for case 'c2'"),
        ("case_id\tunit_id\tgrade\nc2\tpkg/a.py\tx\n", r"judged.tsv:2: grade must be an integer"),
        ("unit\tcase\n", r"judged.tsv:1: the header must name"),
    ],
)
def test_bad_verdicts_name_the_line(tiny, tsv, message):
    (tiny / "judged.tsv").write_text(tsv)
    with pytest.raises(EvalpipeError, match=message):
        merge(tiny / "fx.yaml", tiny / "judged.tsv", None)


def test_cli_merges_and_exits_2_on_bad_input(tiny):
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT / 'tests'}"}
    cmd = [sys.executable, "-m", "evalpipe", "merge-judgements", "fx.yaml", "judged.tsv"]
    ok = subprocess.run(
        [*cmd, "-o", "fx_new.yaml"], cwd=tiny, capture_output=True, text=True, env=env, timeout=120
    )
    assert ok.returncode == 0, ok.stderr
    assert "merged 5 judged IDs into fx_new.yaml; 1 already labelled, skipped" in ok.stdout
    assert (tiny / "fx_new.yaml").is_file()
    bad = subprocess.run(
        [*cmd[:-1], "missing.tsv"], cwd=tiny, capture_output=True, text=True, env=env, timeout=120
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "evalpipe: error: missing.tsv: no such file (the judged.tsv written by a run with a judge)"
    ]


def test_output_in_another_folder_loads_and_records_who_judged(tiny):
    """-o DIR: the relative corpus path is rewritten to resolve from DIR (the merged fixture loads
    from there, wherever the command was run), and the judge, prompt and dates are recorded."""
    header = "# judge: openai:gpt-x; prompt: relevance_v1@1234abcd; judged: 2026-11-30T10:00:00Z\n"
    (tiny / "judged.tsv").write_text(header + TSV)
    (tiny / "elsewhere" / "deeper").mkdir(parents=True)
    out, added, _ = merge(tiny / "fx.yaml", tiny / "judged.tsv", tiny / "elsewhere" / "deeper")
    assert out == tiny / "elsewhere" / "deeper" / "fx_v4.yaml" and added == 5
    text = out.read_text()
    assert "corpus: ../../corpus.jsonl\n" in text
    today = date.today().isoformat()
    assert (
        "# provenance: judge openai:gpt-x, prompt relevance_v1@1234abcd, judged 2026-11-30T10:00:00Z, "
        f"merged {today}\n# version 4: 5 reviewed judge verdicts merged from judged.tsv\nversion: 4\n"
    ) in text
    # It loads from a working directory that is neither folder (the loader tries the fixture's first).
    cwd = os.getcwd()
    os.chdir(tiny / "elsewhere")
    try:
        fx = load_fixture(out)
    finally:
        os.chdir(cwd)
    assert len(fx.corpus) == len(TINY_UNITS) and str(fx.version) == "4"
    # Beside the original the path needs no change; an absolute path never does.
    same, _, _ = merge(tiny / "fx.yaml", tiny / "judged.tsv", tiny / "fx_same.yaml")
    assert "corpus: corpus.jsonl\n" in same.read_text()
    (tiny / "abs.yaml").write_text(FIXTURE.replace("corpus.jsonl", str(tiny / "corpus.jsonl")))
    moved, _, _ = merge(tiny / "abs.yaml", tiny / "judged.tsv", tiny / "elsewhere" / "abs_v4.yaml")
    assert f"corpus: {tiny / 'corpus.jsonl'}\n" in moved.read_text()


def test_cli_output_folder_says_the_corpus_path_was_rewritten(tiny):
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT / 'tests'}"}
    cmd = [sys.executable, "-m", "evalpipe", "merge-judgements", "fx.yaml", "judged.tsv", "-o", "v4/"]
    ok = subprocess.run(cmd, cwd=tiny, capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines() == [
        "merged 5 judged IDs into v4/fx_v4.yaml; 1 already labelled, skipped",
        "corpus path rewritten for v4: corpus.jsonl -> ../corpus.jsonl",
    ]
    assert len(load_fixture(tiny / "v4" / "fx_v4.yaml").cases) == 5
