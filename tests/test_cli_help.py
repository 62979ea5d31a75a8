"""`evalpipe --help` lists every subcommand with its one line and Hydra's own usage; each
subcommand's `--help` works, through the installed console script and `python -m evalpipe`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import cli_env
from evalpipe.__main__ import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = (
    "compare",
    "check-fixture",
    "merge-judgements",
    "sync",
    "gate",
    "baseline",
    "abstain",
    "pool",
    "label",
    "judge-batch",
)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "evalpipe", *args], cwd=ROOT, env=cli_env(), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


def test_top_level_help_lists_every_subcommand_and_the_hydra_usage():
    assert tuple(SUBCOMMANDS) == EXPECTED
    proc = run("--help")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for name, sub in SUBCOMMANDS.items():
        assert re.search(rf"^  {re.escape(name)} +{re.escape(sub.summary)}$", out, re.M), name
    assert "python -m evalpipe ranker=bm25 fixture=gold" in out
    assert "== Config groups" in out and "ranker: " in out  # Hydra's own help follows
    assert out.index("commands:") < out.index("== Config groups")


@pytest.mark.parametrize("name", EXPECTED)
def test_each_subcommand_has_its_own_help(name):
    proc = run(name, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: evalpipe {name} ")


def test_the_upload_worker_reads_the_same_list(monkeypatch):
    # One list: the worker started before dispatch leaves every command alone, and only those.
    from evalpipe.core import subcommands
    from evalpipe.tracking import upload_worker

    monkeypatch.delenv("EVALPIPE_UPLOAD_WORKER", raising=False)
    assert SUBCOMMANDS is subcommands.SUBCOMMANDS is upload_worker.SUBCOMMANDS
    for name in EXPECTED:
        assert not upload_worker.wanted([name, "runs/a"]), name
        assert not upload_worker.wanted_sweep([name, "-m"]), name
    assert upload_worker.wanted(["ranker=bm25", "fixture=gold"])
    assert upload_worker.wanted_sweep(["-m", "ranker.k1=0.9,1.2"])
