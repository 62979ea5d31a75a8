"""The shipped gold fixtures: v2 (fixture=gold) and v1 kept for history (fixture=gold_v1).

These pin what the fixture files promise in their headers and in docs/fixtures.md, so an
edit that breaks a promise (tier sizes, unchanged exact tier, multi_hop cases that need
a relation) fails here rather than silently changing what a recall figure measures.
"""

from __future__ import annotations

import re

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from evalpipe.inputs.fixture import Fixture, load_fixture
from evalpipe.paths import PROJECT_ROOT

# Identifier-looking tokens of a question: snake_case, dotted (module.py, Class.method), camelCase.
_TOKEN = re.compile(r"[A-Za-z_][\w.]*")
_CAMEL = re.compile(r"[a-z][A-Z]")


@pytest.fixture(scope="module")
def v2() -> Fixture:
    return load_fixture(PROJECT_ROOT / "fixtures" / "gold.yaml")


@pytest.fixture(scope="module")
def v1() -> Fixture:
    return load_fixture(PROJECT_ROOT / "fixtures" / "gold_v1.yaml")


def notes_of(path: str) -> dict[str, str]:
    import yaml

    data = yaml.safe_load((PROJECT_ROOT / "fixtures" / path).read_text(encoding="utf-8"))
    return {c["id"]: c.get("notes", "") for c in data["cases"]}


def identifiers(query: str) -> list[str]:
    tokens = [t.rstrip(".") for t in _TOKEN.findall(query)]
    return [t for t in tokens if "_" in t or "." in t or _CAMEL.search(t)]


def named_in(identifier: str, text: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(identifier) + r"(?!\w)", text) is not None


def test_v2_sizes_and_version(v2):
    assert v2.name == "gold"
    assert v2.version == "2"
    assert len(v2.cases) == 204
    assert v2.tier_counts() == {"exact": 81, "concept": 83, "multi_hop": 40}
    assert len(v2.corpus) == 393


def test_v1_still_loads_through_its_config():
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["fixture=gold_v1"])
    fixture = instantiate(cfg.fixture)
    assert fixture.name == "gold_v1"  # its own experiment, never mixed with v2 runs
    assert fixture.version == "1"
    assert fixture.tier_counts() == {"exact": 81, "concept": 83, "multi_hop": 40}
    assert {"g1-concept-001", "g2-multi_hop-020"} <= {c.id for c in fixture.cases}


def test_v2_uses_the_same_corpus_file(v1, v2):
    assert v2.corpus.sha256 == v1.corpus.sha256


def test_exact_tier_is_unchanged(v1, v2):
    def exact(f):
        return [(c.id, c.query, dict(c.qrels)) for c in f.cases if c.tier == "exact"]

    assert exact(v2) == exact(v1)


def test_rewritten_tiers_have_new_ids(v1, v2):
    old = {c.id for c in v1.cases if c.tier != "exact"}
    new = [c.id for c in v2.cases if c.tier != "exact"]
    assert not old & set(new)
    assert new[0] == "v2-concept-001" and new[-1] == "v2-multi_hop-040"


def test_concept_sets_are_small(v2):
    assert max(len(c.expected) for c in v2.cases if c.tier == "concept") == 3


def test_grade_zero_only_on_reviewed_cases(v2):
    notes = notes_of("gold.yaml")
    zero = {c.id for c in v2.cases if any(g == 0 for g in c.qrels.values())}
    assert len(zero) == 28
    assert all(notes[cid].startswith("grade 0:") for cid in zero)


def test_multi_hop_labels_match_the_corpus(v2):
    """31 of 40 need a relation: no identifier they name occurs in every expected unit's text.

    The other 9 are labelled answerable by name, and there the identifier does occur in
    every expected unit (callers contain the callee's name).
    """
    notes = notes_of("gold.yaml")
    unit_names = {str(u.metadata.get(k)) for u in v2.corpus for k in ("name", "qualname")}
    needs = by_name = 0
    for case in (c for c in v2.cases if c.tier == "multi_hop"):
        texts = [f"{u.title}\n{u.text}" for u in map(v2.corpus.get, case.expected)]
        named = identifiers(case.query)
        in_all = [i for i in named if all(named_in(i, t) or named_in(i.rsplit(".", 1)[-1], t) for t in texts)]
        if notes[case.id].endswith("no identifier named"):  # "GitHub" is a name, but of no unit
            assert not set(named) & unit_names, (case.id, named)
        if "needs a relation" in notes[case.id]:
            needs += 1
            assert in_all == [], (case.id, in_all)
        else:
            by_name += 1
            assert in_all, case.id
    assert (needs, by_name) == (31, 9)


def test_gold_v1_run_is_tagged_with_its_version(tmp_path):
    """A real CLI run on fixture=gold_v1 lands in its own experiment, tagged version 1."""
    import os
    import subprocess
    import sys

    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONPATH": str(PROJECT_ROOT / "src")}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run(
        [sys.executable, "-m", "evalpipe", "fixture=gold_v1", "ks=[1]", "metrics=[recall]",
         f"tracking.uri={uri}", f"hydra.run.dir={tmp_path / 'out'}"],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    client = MlflowClient(tracking_uri=uri)
    (exp,) = [e for e in client.search_experiments() if e.name.startswith("evalpipe/")]
    assert exp.name == "evalpipe/gold_v1"
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.tags["evalpipe.fixture"] == "gold_v1"
    assert run.data.tags["evalpipe.fixture_version"] == "1"
    assert run.data.metrics["count/cases"] == 204  # MLflow name of `cases` (docs/tracking.md)
