"""The Go fixture over gin 1.8.1 (fixture=fixgo): what its header and docs/fixtures.md promise.

The fixture measures code search on a real Go codebase that is not evalpipe, so these tests pin
the properties that make its figures mean something: every expected ID exists in the frozen
corpus (read here straight from the JSONL, not through the loader that already checks it), no
expected answer is a test or a module unit unless the query asks for tests, the multi_hop labels
in the notes agree with the checker, and `check-fixture --strict` passes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from cli_helpers import check_fixture_json
from evalpipe.inputs.fixture import Fixture
from evalpipe.paths import PROJECT_ROOT

FIXTURE = PROJECT_ROOT / "fixtures" / "fixgo_gin.yaml"
CORPUS = PROJECT_ROOT / "fixtures" / "fixgo_gin_corpus.jsonl"
GIN_SOURCE = Path("/usr/share/gocode/src/github.com/gin-gonic/gin")


@pytest.fixture(scope="module")
def fixture() -> Fixture:
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["fixture=fixgo"])
    return instantiate(cfg.fixture)


@pytest.fixture(scope="module")
def raw_cases() -> list[dict]:
    return yaml.safe_load(FIXTURE.read_text(encoding="utf-8"))["cases"]


@pytest.fixture(scope="module")
def units() -> dict[str, dict]:
    with CORPUS.open(encoding="utf-8") as f:
        return {u["id"]: u for u in map(json.loads, f)}


def all_ids(case: dict) -> dict[str, int]:
    expected = case["expected"]
    return dict(expected) if isinstance(expected, dict) else dict.fromkeys(expected, 1)


def asks_for_tests(query: str) -> bool:
    return re.search(r"\btests\b", query) is not None


def test_sizes_through_the_hydra_config(fixture):
    assert fixture.name == "go_gin"
    assert fixture.version == "1"
    assert fixture.tier_counts() == {"exact": 81, "concept": 80, "multi_hop": 52}
    assert len(fixture.corpus) == 1394


def test_corpus_is_gin_with_its_tests(units):
    assert all(u["language"] == "go" for u in units.values())
    packages = {u["package"] for u in units.values()}
    assert {"gin", "binding", "render", "ginS", "bytesconv", "json", "protoexample"} <= packages
    in_tests = [i for i, u in units.items() if u["path"].endswith("_test.go")]
    assert len(in_tests) == 646  # 46% of the units, as the header says
    assert "context_test.go::TestContextCopy" in units


def test_every_expected_id_is_in_the_corpus(raw_cases, units):
    missing = [(c["id"], i) for c in raw_cases for i in all_ids(c) if i not in units]
    assert missing == []


def test_no_answer_is_a_test_or_module_unless_asked(raw_cases, units):
    for case in raw_cases:
        relevant = [i for i, g in all_ids(case).items() if g >= 1]
        assert all(units[i]["kind"] != "module" for i in relevant), case["id"]
        tests = [i for i in relevant if units[i]["path"].endswith("_test.go")]
        if asks_for_tests(case["query"]):
            assert tests == relevant, case["id"]  # a question about tests is answered by tests
        else:
            assert tests == [], case["id"]
    asked = [c["id"] for c in raw_cases if asks_for_tests(c["query"])]
    assert len(asked) == 4


def test_exact_queries_spell_their_target(raw_cases, units):
    """`calculate absolute path`, `search_credential`, `cleanpath`, `c.SSEvent` all spell the name."""
    for case in (c for c in raw_cases if c["tier"] == "exact"):
        squashed = re.sub(r"[\s_.]", "", case["query"]).lower()
        for unit_id in all_ids(case):
            assert units[unit_id]["name"].lower() in squashed, case["id"]


def test_grade_zero_is_reviewed_and_explained(raw_cases):
    zero = [c for c in raw_cases if 0 in all_ids(c).values()]
    assert len(zero) == 39  # 38 + go-concept-030 (checker candidate judged after its rewording)
    assert all(c["notes"].startswith("grade 0:") for c in zero)


def test_concept_sets_are_small_and_graded(raw_cases):
    concept = [c for c in raw_cases if c["tier"] == "concept"]
    assert max(sum(g >= 1 for g in all_ids(c).values()) for c in concept) == 3
    assert all(2 in all_ids(c).values() for c in concept)  # every concept case names its best answer


def check_json(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    return check_fixture_json(tmp_path, FIXTURE, *extra)


def test_check_fixture_strict_passes(tmp_path):
    """The real CLI, ambiguity candidates included: nothing flagged, no tier flag."""
    proc, report = check_json(tmp_path, "--strict")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["flagged_cases"] == [] and report["tier_flags"] == []


def test_multi_hop_labels_agree_with_the_checker(tmp_path, raw_cases):
    """Notes say 'needs a relation' or 'answerable by name (X ...)' exactly where the checker does."""
    proc, report = check_json(tmp_path, "--no-ambiguity")
    assert proc.returncode == 0, proc.stderr
    notes = {c["id"]: c.get("notes", "") for c in raw_cases}
    checked = {c["case_id"]: c for c in report["cases"] if c["tier"] == "multi_hop"}
    assert len(checked) == 52
    for case_id, c in checked.items():
        if c["needs_relation"]:
            assert notes[case_id].endswith("needs a relation"), case_id
        else:
            assert f"answerable by name ({c['name_matched']} " in notes[case_id], case_id
    assert sum(c["needs_relation"] for c in checked.values()) == 31


@pytest.mark.skipif(
    not GIN_SOURCE.is_dir(),
    reason=f"{GIN_SOURCE} absent: apt-get install golang-github-gin-gonic-gin-dev to rebuild the corpus",
)
def test_expected_ids_survive_a_rebuild(tmp_path, raw_cases):
    """The header's rebuild command still yields every expected ID (the IDs are the contract)."""
    pytest.importorskip("tree_sitter")
    out = tmp_path / "gin.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "evalpipe.corpus", str(GIN_SOURCE), "-o", str(out), "--include", "**/*.go"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT / "src")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    with out.open(encoding="utf-8") as f:
        rebuilt = {json.loads(line)["id"] for line in f}
    assert [i for c in raw_cases for i in all_ids(c) if i not in rebuilt] == []


def test_cli_run_lands_in_its_own_experiment(tmp_path):
    """A real `python -m evalpipe fixture=fixgo` run: experiment evalpipe/go_gin, all 213 cases."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONPATH": str(PROJECT_ROOT / "src")}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run(
        [sys.executable, "-m", "evalpipe", "fixture=fixgo", "ranker=bm25", "ks=[5]", "metrics=[recall]",
         f"tracking.uri={uri}", f"hydra.run.dir={tmp_path / 'out'}"],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    client = MlflowClient(tracking_uri=uri)
    (exp,) = [e for e in client.search_experiments() if e.name.startswith("evalpipe/")]
    assert exp.name == "evalpipe/go_gin"
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.tags["evalpipe.fixture"] == "go_gin"
    assert run.data.tags["evalpipe.fixture_version"] == "1"
    assert run.data.metrics["count/cases"] == 213
