"""A sweep's points share one loaded fixture, until one of its files changes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import TINY_UNITS
from evalpipe.inputs import fixture_memo
from evalpipe.inputs.fixture import load_fixture

FIXTURE = """\
name: tiny
corpus: corpus.jsonl
cases:
  - id: c1
    tier: exact
    query: merge_settings
    expected: [pkg/a.py::merge_settings]
"""


@pytest.fixture(autouse=True)
def _empty_memo():
    fixture_memo.clear()
    yield
    fixture_memo.clear()


def _bump(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_loaded_once_until_a_file_changes(tmp_path: Path):
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(u) + "\n" for u in TINY_UNITS))
    fx = tmp_path / "fx.yaml"
    fx.write_text(FIXTURE)
    builds = []

    def build():
        builds.append(1)
        return load_fixture(fx)

    config = {"path": str(fx), "name": None}
    first = fixture_memo.load_once(config, build)
    assert fixture_memo.load_once(config, build) is first and len(builds) == 1
    assert fixture_memo.load_once({**config, "name": "other"}, build) is not first  # another config

    fx.write_text(FIXTURE.replace("merge_settings\n", "merge settings\n", 1))
    _bump(fx)
    second = fixture_memo.load_once(config, build)
    assert second is not first and second.cases[0].query == "merge settings"

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(corpus.read_text())  # same content, new mtime: reloaded, to be safe
    _bump(corpus)
    assert fixture_memo.load_once(config, build) is not second
    assert len(builds) == 4
