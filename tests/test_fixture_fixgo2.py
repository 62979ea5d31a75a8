"""The second Go fixture, over Go 1.19's net/http (fixture=fixgo2): what its header and docs promise.

gin (fixture=fixgo) is 1.4k units; a ranker chosen on it alone may fit small corpora. This fixture
is three times larger and, like the hold-out, 39% tests, so these tests pin what makes its figures
mean something: the counts (tiers, units, tests, relations) recomputed here from the raw YAML and
JSONL, not through the loader; every expected ID in the frozen corpus; no test or module answers
unless the query asks for tests; the interface-implementation sets agree with method sets read
from the units' signatures (an oracle independent of the builder's `implements` edges); the
multi_hop labels agree with the checker; `check-fixture --strict` passes; and the dev/test split
keeps enough cases of every tier on both sides.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from cli_helpers import check_fixture_json
from evalpipe.inputs.fixture import Fixture
from evalpipe.inputs.split import MIN_TIER_CASES
from evalpipe.paths import PROJECT_ROOT

FIXTURE = PROJECT_ROOT / "fixtures" / "fixgo2_nethttp.yaml"
CORPUS = PROJECT_ROOT / "fixtures" / "fixgo2_nethttp_corpus.jsonl"
GO_SOURCE = Path("/usr/lib/go-1.19/src")
INCLUDES = ["net/http/**/*.go", "net/url/**/*.go", "net/textproto/**/*.go", "mime/**/*.go"]


def load(*overrides: str) -> Fixture:
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["fixture=fixgo2", *overrides])
    return instantiate(cfg.fixture)


@pytest.fixture(scope="module")
def fixture() -> Fixture:
    return load()


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


def relevant(case: dict) -> set[str]:
    return {i for i, g in all_ids(case).items() if g >= 1}


def asks_for_tests(query: str) -> bool:
    return re.search(r"\btests\b", query) is not None


def by_query(raw_cases: list[dict], query: str) -> dict:
    (case,) = [c for c in raw_cases if c["query"] == query]
    return case


def test_sizes_through_the_hydra_config(fixture, raw_cases):
    assert fixture.name == "go_nethttp"
    assert fixture.version == "1"
    assert Counter(c["tier"] for c in raw_cases) == {"exact": 64, "concept": 64, "multi_hop": 40}
    assert fixture.tier_counts() == {"exact": 64, "concept": 64, "multi_hop": 40}
    assert len(fixture.corpus) == 4258


def test_corpus_is_net_http_with_its_tests(units):
    """The figures the header and docs quote, counted straight from the JSONL."""
    assert all(u["language"] == "go" for u in units.values())
    assert Counter(u["kind"] for u in units.values()) == {
        "function": 1564, "method": 1150, "const": 597, "type": 424, "var": 361, "module": 130,
        "interface": 32,
    }  # fmt: skip
    in_tests = [i for i in units if i.endswith("_test.go") or "_test.go::" in i]
    assert len(in_tests) == 1668  # 39% of 4258
    assert sum(u["is_test"] for u in units.values()) == 1668
    relations = Counter(k for u in units.values() for k, v in u.get("relations", {}).items() for _ in v)
    assert relations == {
        "contains": 4128, "calls": 3005, "imports": 2656, "implements": 143, "references": 106, "inherits": 3,
    }  # fmt: skip
    packages = {u["path"].split("/")[0] + "/" + u["path"].split("/")[1] for u in units.values()}
    assert {"net/http", "net/url", "net/textproto", "mime/type.go", "mime/multipart"} <= packages
    assert "net/http/serve_test.go::TestServerShutdown_h1" in units
    assert CORPUS.stat().st_size < 8 * 1024 * 1024


def test_header_records_the_debian_source(raw_cases):
    header = FIXTURE.read_text(encoding="utf-8").split("\nname:", 1)[0]
    assert "golang-1.19-src 1.19.8-2" in header
    assert "--include 'net/http/**/*.go' 'net/url/**/*.go' 'net/textproto/**/*.go' 'mime/**/*.go'" in header


def test_every_expected_id_is_in_the_corpus(raw_cases, units):
    missing = [(c["id"], i) for c in raw_cases for i in all_ids(c) if i not in units]
    assert missing == []


def test_no_answer_is_a_test_or_module_unless_asked(raw_cases, units):
    for case in raw_cases:
        answers = relevant(case)
        assert answers, case["id"]
        assert all(units[i]["kind"] != "module" for i in answers), case["id"]
        tests = {i for i in answers if units[i]["is_test"]}
        if asks_for_tests(case["query"]):
            assert tests == answers, case["id"]  # a question about tests is answered by tests
        else:
            assert tests == set(), case["id"]
    assert sum(asks_for_tests(c["query"]) for c in raw_cases) == 4


def test_exact_queries_spell_their_target(raw_cases, units):
    """`parse_basic_auth`, `writeloop`, `etag strong match`, `u.Redacted` all spell the name."""
    for case in (c for c in raw_cases if c["tier"] == "exact"):
        squashed = re.sub(r"[\s_.]", "", case["query"]).lower()
        for unit_id in all_ids(case):
            assert units[unit_id]["name"].lower() in squashed, case["id"]
        assert len(all_ids(case)) <= 2, case["id"]


def test_build_tag_twins_are_graded_below_the_default_build(raw_cases):
    twins = {c["id"]: all_ids(c) for c in raw_cases if len(all_ids(c)) == 2 and c["tier"] == "exact"}
    assert twins == {
        "go2-exact-033": {
            "net/http/roundtrip.go::Transport.RoundTrip": 2,
            "net/http/roundtrip_js.go::Transport.RoundTrip": 1,
        },
        "go2-exact-064": {
            "net/http/h2_bundle.go::http2ConfigureServer": 2,
            "net/http/omithttp2.go::http2ConfigureServer": 1,
        },
    }


def test_grade_zero_is_reviewed_and_explained(raw_cases):
    zero = [c for c in raw_cases if 0 in all_ids(c).values()]
    assert len(zero) == 18
    assert all(c["notes"].startswith("grade 0:") for c in zero)


def test_concept_sets_are_small_and_graded(raw_cases):
    concept = [c for c in raw_cases if c["tier"] == "concept"]
    assert max(len(relevant(c)) for c in concept) == 3
    assert all(2 in all_ids(c).values() for c in concept)  # every concept case names its best answer


def method_sets(units: dict[str, dict]) -> dict[str, dict[str, str]]:
    """type unit ID -> {method name: signature}, from the method units' own signatures.

    A method declared in another file than its type (`Transport.RoundTrip` in roundtrip.go) has
    its module as parent; it belongs to the type of that name in the same directory (package).
    """
    types: dict[tuple[str, str], list[str]] = {}
    for u in units.values():
        if u["kind"] in ("type", "interface") and not u["is_test"]:
            types.setdefault((u["path"].rsplit("/", 1)[0], u["name"]), []).append(u["id"])
    sets: dict[str, dict[str, str]] = {}
    for u in units.values():
        if u["kind"] != "method" or u["is_test"]:
            continue
        parent = u.get("parent", "")
        if parent in units and units[parent]["kind"] != "module":
            owners = [parent]
        else:
            owners = types.get((u["path"].rsplit("/", 1)[0], u["qualname"].split(".")[0]), [])
        for owner in owners:
            sets.setdefault(owner, {})[u["name"]] = u["signature"]
    return sets


# Interface -> (methods with a pattern their signature must match, path prefix, expected case query).
IMPLEMENTATIONS = {
    "RoundTripper": (
        {"RoundTrip": r"RoundTrip\(\w* ?\*Request\) \((\w+ )?\*Response, (\w+ )?error\)"},
        "net/http/",
        "which non-test types implement the RoundTripper interface",
    ),
    "ResponseWriter": (
        {
            "Header": r"Header\(\) (http\.)?Header$",
            "Write": r"Write\(\w+ \[\]byte\) \((\w+ )?int, (\w+ )?error\)",
            "WriteHeader": r"WriteHeader\(\w+ int\)$",
        },
        "net/http/",
        "which concrete types can a handler be given as its http.ResponseWriter",
    ),
    "Flusher": (
        {"Flush": r"Flush\(\)$"},
        "net/http/",
        "which response writers can push buffered output to the client on demand (satisfy Flusher)",
    ),
    "sniffSig": (
        {"match": r"match\(data \[\]byte, firstNonWS int\) string"},
        "net/http/sniff.go",
        "what implements the signature interface content sniffing walks through",
    ),
    "FileSystem": (
        {"Open": r"Open\(\w+ string\) \(File, error\)"},
        "net/http/fs.go",
        "which types implement http.FileSystem",
    ),
}


@pytest.mark.parametrize("interface", sorted(IMPLEMENTATIONS))
def test_implementation_sets_match_the_method_sets(interface, raw_cases, units):
    """The set a case expects is exactly the non-test types whose method set satisfies the interface."""
    methods, scope, query = IMPLEMENTATIONS[interface]
    found = {
        type_id
        for type_id, have in method_sets(units).items()
        if type_id.startswith(scope)
        and all(name in have and re.search(sig, have[name]) for name, sig in methods.items())
    }
    assert found == relevant(by_query(raw_cases, query))


def test_callee_sets_are_read_from_the_bodies(raw_cases, units):
    """A callees case lists what the body calls, including calls the builder's `calls` edges miss."""
    shutdown = relevant(by_query(raw_cases, "what does Server.Shutdown call"))
    edges = set(units["net/http/server.go::Server.Shutdown"]["relations"]["calls"])
    assert edges < shutdown  # srv.inShutdown.setTrue() is a call on a field, read from the body
    assert shutdown - edges == {"net/http/server.go::atomicBool.setTrue"}
    assert "srv.inShutdown.setTrue()" in units["net/http/server.go::Server.Shutdown"]["text"]


def check_json(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    return check_fixture_json(tmp_path, FIXTURE, *extra)


def test_check_fixture_strict_passes(tmp_path):
    """The real CLI, ambiguity candidates included: nothing flagged, no tier flag."""
    proc, report = check_json(tmp_path, "--strict")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["flagged_cases"] == [] and report["tier_flags"] == []


def test_no_concept_query_copies_half_its_target(tmp_path):
    """Below what a stricter checker would allow: every concept query shares < 50% of its words."""
    proc, report = check_json(tmp_path, "--no-ambiguity")
    assert proc.returncode == 0, proc.stderr
    concept = [c for c in report["cases"] if c["tier"] == "concept"]
    assert len(concept) == 64
    assert max(c["overlap_stemmed"] for c in concept) < 0.4
    assert all(c["phrase_words"] < 2 for c in concept)


def test_multi_hop_labels_agree_with_the_checker(tmp_path, raw_cases):
    """Notes say 'needs a relation' or 'answerable by name (X ...)' exactly where the checker does."""
    proc, report = check_json(tmp_path, "--no-ambiguity")
    assert proc.returncode == 0, proc.stderr
    notes = {c["id"]: c.get("notes", "") for c in raw_cases}
    checked = {c["case_id"]: c for c in report["cases"] if c["tier"] == "multi_hop"}
    assert len(checked) == 40
    for case_id, c in checked.items():
        if c["needs_relation"]:
            assert notes[case_id].endswith("needs a relation"), case_id
        else:
            assert f"answerable by name ({c['name_matched']} " in notes[case_id], case_id
    assert sum(c["needs_relation"] for c in checked.values()) == 31


def test_split_keeps_every_tier_on_both_sides(fixture):
    """fixture.split=dev|test: disjoint, complete, stratified (half of each tier, rounded, on test)."""
    dev, test = load("fixture.split=dev"), load("fixture.split=test")
    dev_ids, test_ids = {c.id for c in dev.cases}, {c.id for c in test.cases}
    assert dev_ids.isdisjoint(test_ids)
    assert dev_ids | test_ids == {c.id for c in fixture.cases}
    assert test.tier_counts() == {"exact": 32, "concept": 32, "multi_hop": 20}
    assert dev.tier_counts() == {"exact": 32, "concept": 32, "multi_hop": 20}
    assert min(min(dev.tier_counts().values()), min(test.tier_counts().values())) >= MIN_TIER_CASES
    assert load("fixture.split=test").tier_counts() == test.tier_counts()  # deterministic
    assert len(dev.corpus) == len(test.corpus) == 4258  # the split cuts cases, never the corpus


@pytest.mark.skipif(
    not (GO_SOURCE / "net/http").is_dir(),
    reason=f"{GO_SOURCE} absent: apt-get install golang-1.19-src to rebuild the corpus",
)
def test_expected_ids_survive_a_rebuild(tmp_path, raw_cases, units):
    """The header's rebuild command still yields every expected ID and every unit (IDs are the contract)."""
    pytest.importorskip("tree_sitter")
    out = tmp_path / "nethttp.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "evalpipe.corpus", str(GO_SOURCE), "-o", str(out), "--include", *INCLUDES],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT / "src")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    with out.open(encoding="utf-8") as f:
        rebuilt = {json.loads(line)["id"] for line in f}
    assert [i for c in raw_cases for i in all_ids(c) if i not in rebuilt] == []
    assert set(units) - rebuilt == set()


def test_cli_run_lands_in_its_own_experiment(tmp_path):
    """A real `python -m evalpipe fixture=fixgo2` run on the test split: experiment evalpipe/go_nethttp."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONPATH": str(PROJECT_ROOT / "src")}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run(
        [sys.executable, "-m", "evalpipe", "fixture=fixgo2", "fixture.split=test", "ranker=bm25", "ks=[5]",
         "metrics=[recall]", f"tracking.uri={uri}", f"hydra.run.dir={tmp_path / 'out'}"],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    client = MlflowClient(tracking_uri=uri)
    (exp,) = [e for e in client.search_experiments() if e.name.startswith("evalpipe/")]
    assert exp.name == "evalpipe/go_nethttp"
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.tags["evalpipe.fixture"] == "go_nethttp"
    assert run.data.tags["evalpipe.split"] == "test"
    assert run.data.metrics["count/cases"] == 84
