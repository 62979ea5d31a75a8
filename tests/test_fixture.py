"""Fixture validation: every bad input gives one clear error naming file, line and case."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalpipe.inputs.fixture import load_fixture
from evalpipe.safety.errors import FixtureError

GOOD_CASES = """\
  - id: c1
    tier: exact
    query: merge_settings
    expected: [pkg/a.py::merge_settings]
  - id: c2
    tier: concept
    query: combine two configuration dictionaries
    expected: {pkg/a.py::merge_settings: 2, pkg/a.py::Session.merge: 1}
    winnow_constraints: {language: python}
"""


def write(tmp_path: Path, body: str, corpus: str = "corpus.jsonl") -> Path:
    path = tmp_path / "fx.yaml"
    path.write_text(f"name: tiny\ncorpus: {corpus}\ncases:\n{body}", encoding="utf-8")
    return path


def test_good_fixture_loads(tmp_path, tiny_corpus_path):
    fx = load_fixture(write(tmp_path, GOOD_CASES))
    assert fx.name == "tiny"
    assert [c.id for c in fx.cases] == ["c1", "c2"]
    assert fx.cases[0].qrels == {"pkg/a.py::merge_settings": 1}
    assert fx.cases[1].qrels == {"pkg/a.py::merge_settings": 2, "pkg/a.py::Session.merge": 1}
    assert fx.cases[1].winnow_constraints == {"language": "python"}
    assert fx.cases[0].line == 4 and fx.cases[1].line == 8
    assert fx.tier_counts() == {"exact": 1, "concept": 1}
    assert len(fx.corpus) == 5 and len(fx.sha256) == 64


def test_extra_tier_is_allowed_and_ordered_after_stock(tmp_path, tiny_corpus_path):
    body = GOOD_CASES.replace("tier: exact", "tier: di")
    fx = load_fixture(write(tmp_path, body))
    assert fx.tiers == ["concept", "di"]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (GOOD_CASES.replace("id: c2", "id: c1"), "case 'c1': duplicate case id (first defined at line 4)"),
        (GOOD_CASES.replace("query: merge_settings", 'query: "  "'), "case 'c1': empty query"),
        (
            GOOD_CASES.replace("    tier: exact\n", "    tier: exact\n    expect: [x]\n"),
            "unknown field(s) ['expect']",
        ),
        (GOOD_CASES.replace("expected: [pkg/a.py::merge_settings]", "expected: []"), "empty 'expected'"),
        (
            GOOD_CASES.replace("[pkg/a.py::merge_settings]", "[pkg/a.py::merge_setting]"),
            "expected ID(s) not in corpus",
        ),
        # A misspelt constraint key matches no unit: the expected IDs could never be returned.
        (GOOD_CASES.replace("{language: python}", "{langauge: python}"), "outside the case's own winnow"),
        (
            GOOD_CASES.replace("{language: python}", "{language: go}"),
            "['pkg/a.py::merge_settings', 'pkg/a.py::Session.merge'] are outside",
        ),
    ],
)
def test_bad_fixture_names_file_line_and_case(tmp_path, tiny_corpus_path, body, needle):
    path = write(tmp_path, body)
    with pytest.raises(FixtureError) as info:
        load_fixture(path)
    msg = str(info.value)
    assert needle in msg
    assert str(path) in msg


def test_unanswerable_case_may_have_no_expected(tmp_path, tiny_corpus_path):
    body = (
        GOOD_CASES
        + "  - id: c3\n    tier: concept\n    query: how do I fly\n    answerability: unanswerable\n"
    )
    fx = load_fixture(write(tmp_path, body))
    assert fx.cases[2].qrels == {} and fx.cases[2].answerability == "unanswerable"


def test_missing_corpus_and_bad_yaml(tmp_path, tiny_corpus_path):
    with pytest.raises(FixtureError, match="corpus file not found"):
        load_fixture(write(tmp_path, GOOD_CASES, corpus="nope.jsonl"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncases: [\n", encoding="utf-8")
    with pytest.raises(FixtureError, match=r"bad.yaml:\d+: invalid YAML"):
        load_fixture(bad)
    with pytest.raises(FixtureError, match="fixture file not found"):
        load_fixture(tmp_path / "absent.yaml")
