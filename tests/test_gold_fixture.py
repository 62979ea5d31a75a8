"""The shipped gold fixtures: v3 (fixture=gold), v2 and v1 kept for history (fixture=gold_v2, gold_v1).

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
def v3() -> Fixture:
    return load_fixture(PROJECT_ROOT / "fixtures" / "gold.yaml")


@pytest.fixture(scope="module")
def v2() -> Fixture:
    return load_fixture(PROJECT_ROOT / "fixtures" / "gold_v2.yaml")


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


def test_v3_sizes_and_version(v3):
    assert v3.name == "gold"
    assert v3.version == "3"
    assert len(v3.cases) == 204
    assert v3.tier_counts() == {"exact": 81, "concept": 83, "multi_hop": 40}
    assert len(v3.corpus) == 393


@pytest.mark.parametrize(
    "choice, version, an_id",
    [("gold_v1", "1", "g1-concept-001"), ("gold_v2", "2", "v2-concept-001"), ("gold", "3", "v2-concept-001")],
)
def test_every_version_loads_through_its_config(choice, version, an_id):
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"fixture={choice}"])
    fixture = instantiate(cfg.fixture)
    assert fixture.name == choice  # its own experiment, never mixed with another version's runs
    assert fixture.version == version
    assert fixture.tier_counts() == {"exact": 81, "concept": 83, "multi_hop": 40}
    assert an_id in {c.id for c in fixture.cases}


def test_versions_use_the_same_corpus_file(v1, v2, v3):
    assert v1.corpus.sha256 == v2.corpus.sha256 == v3.corpus.sha256


def test_exact_tier_is_unchanged(v1, v2, v3):
    def exact(f):
        return [(c.id, c.query, dict(c.qrels)) for c in f.cases if c.tier == "exact"]

    assert exact(v3) == exact(v2) == exact(v1)


def test_multi_hop_tier_is_unchanged_since_v2(v2, v3):
    def tier(f):
        return [(c.id, c.query, dict(c.qrels)) for c in f.cases if c.tier == "multi_hop"]

    assert tier(v3) == tier(v2)


def test_rewritten_tiers_have_new_ids(v1, v3):
    old = {c.id for c in v1.cases if c.tier != "exact"}
    new = [c.id for c in v3.cases if c.tier != "exact"]
    assert not old & set(new)
    assert new[0] == "v2-concept-001" and new[-1] == "v2-multi_hop-040"


def test_v3_concept_keeps_v2_ids_and_intents(v2, v3):
    """Same IDs (the dev/test split hashes them), new wording, the same question: v3's best
    answer was an answer in v2, and every v2 answer is still judged (relevant, or grade 0
    with a note saying why it does not state the answer)."""
    old = {c.id: c for c in v2.cases if c.tier == "concept"}
    new = {c.id: c for c in v3.cases if c.tier == "concept"}
    assert list(old) == list(new)
    for cid, case in new.items():
        assert case.query != old[cid].query, cid
        best = {u for u, g in case.qrels.items() if g == 2}
        assert best and best <= set(old[cid].expected), cid
        assert set(old[cid].expected) <= set(case.qrels), cid
    demoted = sorted((cid, u) for cid, c in new.items() for u in old[cid].expected if c.qrels[u] == 0)
    assert demoted == [
        ("v2-concept-020", "src/evalpipe/tokenize.py::CodeTokenizer.__call__"),
        ("v2-concept-034", "src/evalpipe/corpus/markdown.py::Slugger.base"),
    ]


def test_concept_sets_are_small(v3):
    assert max(len(c.expected) for c in v3.cases if c.tier == "concept") == 3


def test_v3_concept_sets_list_the_modules_and_readme_sections_that_answer(v2, v3):
    """v2 listed 6 module units and 10 README sections as concept answers; v3 lists 32 and 18
    (counted by unit kind here; by ID shape when the fixture was written)."""

    def kinds(f):
        units = [f.corpus.get(u) for c in f.cases if c.tier == "concept" for u in c.expected]
        return sum(u.kind == "module" for u in units), sum(u.kind == "section" for u in units)

    assert kinds(v2) == (6, 10)
    assert kinds(v3) == (32, 18)
    qrels = {c.id: c.qrels for c in v3.cases}
    # the review's examples: a module or README unit that states the answer is an answer
    assert qrels["v2-concept-078"]["src/evalpipe/__main__.py"] == 1  # v2: grade 0
    assert qrels["v2-concept-051"]["README.md#metrics"] == 1  # retrieval_errors vs empty_results
    assert qrels["v2-concept-011"]["src/evalpipe/rankers/rrf.py"] == 1  # the RRF formula
    assert qrels["v2-concept-060"]["README.md#metrics~2"] == 1  # no relevant document: scored 0


#: Words of this project's domain a developer types into its code search (hand-picked).
DOMAIN_WORDS = {
    "ranker", "rankers", "fixture", "recall", "sweep", "mlflow", "bm25", "bm25l", "tier", "qrels",
    "corpus", "embedding", "embeddings", "tokenizer", "trec_eval", "pytrec_eval", "rag", "ndcg",
    "mrr", "beir", "hydra", "plugin", "winnow", "winnow_constraints", "jsonl", "tiktoken", "p95",
    "qid", "gold", "retriever", "retrievers", "semantic", "hybrid", "readme", "latency", "sqlite",
    "trec", "snowball", "ks", "qa",
}  # fmt: skip


def domain_queries(f: Fixture) -> int:
    words = (set(re.findall(r"[a-z0-9_@+]+", c.query.lower())) for c in f.cases if c.tier == "concept")
    return sum(1 for w in words if w & DOMAIN_WORDS)


def test_v3_concept_queries_use_the_domain_vocabulary(v1, v2, v3):
    assert (domain_queries(v1), domain_queries(v2), domain_queries(v3)) == (19, 10, 55)


def test_v3_concept_wording_as_the_checker_measures_it(v2, v3):
    from evalpipe.fixture_check.check import check_fixture

    def concept(f):
        (tier,) = [t for t in check_fixture(f).tiers if t.tier == "concept"]
        return tier

    old, new = concept(v2), concept(v3)
    assert round(old.mean_overlap_stemmed, 2) == 0.08 and round(new.mean_overlap_stemmed, 2) == 0.35
    assert new.kind == "paraphrase" and new.flagged == 0 and new.phrase_share == 0.0


def test_grade_zero_only_on_reviewed_cases(v3):
    notes = notes_of("gold.yaml")
    zero = {c.id for c in v3.cases if any(g == 0 for g in c.qrels.values())}
    assert len(zero) == 23  # 19 concept (v3, judged anew) + 4 multi_hop (unchanged since v2)
    assert sum(cid.startswith("v2-concept-") for cid in zero) == 19
    assert all(notes[cid].startswith("grade 0:") for cid in zero)


def test_multi_hop_labels_match_the_corpus(v3):
    """31 of 40 need a relation: no identifier they name occurs in every expected unit's text.

    The other 9 are labelled answerable by name, and there the identifier does occur in
    every expected unit (callers contain the callee's name).
    """
    notes = notes_of("gold.yaml")
    unit_names = {str(u.metadata.get(k)) for u in v3.corpus for k in ("name", "qualname")}
    needs = by_name = 0
    for case in (c for c in v3.cases if c.tier == "multi_hop"):
        texts = [f"{u.title}\n{u.text}" for u in map(v3.corpus.get, case.expected)]
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


@pytest.mark.parametrize("choice, version", [("gold_v1", "1"), ("gold_v2", "2")])
def test_old_version_run_is_tagged_with_its_version(tmp_path, choice, version):
    """A real CLI run on fixture=gold_v1 / gold_v2 lands in its own experiment, tagged with its version."""
    import os
    import subprocess
    import sys

    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONPATH": str(PROJECT_ROOT / "src")}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run(
        [sys.executable, "-m", "evalpipe", f"fixture={choice}", "ks=[1]", "metrics=[recall]",
         f"tracking.uri={uri}", f"hydra.run.dir={tmp_path / 'out'}"],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    client = MlflowClient(tracking_uri=uri)
    (exp,) = [e for e in client.search_experiments() if e.name.startswith("evalpipe/")]
    assert exp.name == f"evalpipe/{choice}"
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.tags["evalpipe.fixture"] == choice
    assert run.data.tags["evalpipe.fixture_version"] == version
    assert run.data.metrics["count/cases"] == 204  # MLflow name of `cases` (docs/tracking.md)
