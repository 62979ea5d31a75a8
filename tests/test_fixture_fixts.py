"""The TypeScript fixture over rxjs 7.8.1 (fixture=fixts, fixtures/fixts_rxjs.yaml).

These pin what the fixture's header and docs/fixtures.md promise: the frozen snapshot, the tier
sizes, expected IDs that exist and are never module units, and `check-fixture --strict` passing.
The set questions are also checked against an oracle independent of the case file: the corpus's
own `inherits` / `calls` / `contains` edges and the members' signatures (which the builder copies
from the source), so a case whose set drifts from the code fails here.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from evalpipe.inputs.fixture import Fixture
from evalpipe.paths import PROJECT_ROOT

YAML = PROJECT_ROOT / "fixtures" / "fixts_rxjs.yaml"
CORPUS = PROJECT_ROOT / "fixtures" / "fixts_rxjs_corpus.jsonl"
CORPUS_SHA256 = "106b5338ff8cdc9db4b8195ac7eecd96e6eccc6d4ee196a9991639495c0763f8"
P = "src/internal/"


@pytest.fixture(scope="module")
def fx() -> Fixture:
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["fixture=fixts"])
    return instantiate(cfg.fixture)


def case(fx: Fixture, case_id: str):
    (found,) = [c for c in fx.cases if c.id == case_id]
    return found


def relevant(c) -> set[str]:
    return {uid for uid, grade in c.qrels.items() if grade >= 1}


def test_loads_through_its_config_with_the_promised_sizes(fx):
    assert fx.name == "ts_rxjs"
    assert fx.version == "1"
    assert fx.tier_counts() == {"exact": 72, "concept": 83, "multi_hop": 42}
    assert len(fx.cases) >= 150
    assert len(fx.corpus) == 857


def test_the_snapshot_is_frozen_and_small():
    assert hashlib.sha256(CORPUS.read_bytes()).hexdigest() == CORPUS_SHA256
    assert CORPUS.stat().st_size < 6 * 1024 * 1024
    header = YAML.read_text(encoding="utf-8").split("\nname:", 1)[0]
    assert "npm pack rxjs@7.8.1" in header and "--include 'src/**/*.ts' 'README.md'" in header


def test_every_expected_id_exists_and_none_is_a_module_or_section(fx):
    ids = {u.id for u in fx.corpus}
    kinds = {u.id: u.kind for u in fx.corpus}
    allowed = {"function", "method", "class", "interface", "type", "const", "var"}
    for c in fx.cases:
        assert c.qrels, c.id
        for uid in c.qrels:  # grade 0 included: a judged near-miss must exist too
            assert uid in ids, (c.id, uid)
            assert kinds[uid] in allowed, (c.id, uid, kinds[uid])
        assert relevant(c), c.id


def test_exact_cases_name_their_target(fx):
    """An exact query spells its target's name, in any case or with spaces between the words."""

    def squash(s: str) -> str:
        return "".join(ch for ch in s.lower() if ch.isalnum())

    for c in (c for c in fx.cases if c.tier == "exact"):
        best = max(relevant(c), key=lambda uid: c.qrels[uid])
        name = best.split("::", 1)[1]
        assert squash(name.rsplit(".", 1)[-1]) in squash(c.query), (c.id, c.query, name)


def test_concept_sets_are_small_and_near_misses_are_explained(fx):
    import yaml

    notes = {c["id"]: c.get("notes", "") for c in yaml.safe_load(YAML.read_text(encoding="utf-8"))["cases"]}
    for c in (c for c in fx.cases if c.tier == "concept"):
        assert 1 <= len(relevant(c)) <= 3, c.id
        if any(g == 0 for g in c.qrels.values()):
            assert "grade 0" in notes[c.id], c.id


def subclasses(fx: Fixture, base: str, transitive: bool) -> set[str]:
    found, frontier = set(), {base}
    while frontier:
        step = {
            u.id for u in fx.corpus if u.kind == "class" and set(u.relations.get("inherits", ())) & frontier
        }
        step -= found
        found |= step
        frontier = step if transitive else set()
    return found


@pytest.mark.parametrize(
    ("case_id", "base", "transitive"),
    [
        ("ts-multi_hop-001", P + "scheduler/AsyncAction.ts::AsyncAction", False),
        ("ts-multi_hop-003", P + "Subject.ts::Subject", True),
        ("ts-multi_hop-007", P + "Observable.ts::Observable", False),
    ],
)
def test_subclass_sets_match_the_inherits_edges(fx, case_id, base, transitive):
    assert relevant(case(fx, case_id)) == subclasses(fx, base, transitive)


def test_the_async_scheduler_family_matches_the_inherits_edges(fx):
    c = case(fx, "ts-multi_hop-002")
    base = P + "scheduler/AsyncScheduler.ts::AsyncScheduler"
    direct = subclasses(fx, base, transitive=False)
    assert {u for u, g in c.qrels.items() if g == 2} == direct
    assert relevant(c) == subclasses(fx, base, transitive=True)  # TestScheduler, through VirtualTimeScheduler


@pytest.mark.parametrize(
    ("case_id", "callee"),
    [
        ("ts-multi_hop-022", P + "operators/mergeInternals.ts::mergeInternals"),
        ("ts-multi_hop-023", P + "operators/scanInternals.ts::scanInternals"),
        ("ts-multi_hop-024", P + "operators/joinAllInternals.ts::joinAllInternals"),
        ("ts-multi_hop-026", P + "util/createErrorClass.ts::createErrorClass"),
        ("ts-multi_hop-037", P + "operators/throwIfEmpty.ts::throwIfEmpty"),
        ("ts-multi_hop-038", P + "operators/filter.ts::filter"),
    ],
)
def test_caller_sets_match_the_calls_edges(fx, case_id, callee):
    callers = {u.id for u in fx.corpus if callee in u.relations.get("calls", ())}
    assert relevant(case(fx, case_id)) == callers


@pytest.mark.parametrize(
    ("case_id", "cls"),
    [
        ("ts-multi_hop-016", P + "BehaviorSubject.ts::BehaviorSubject"),
        ("ts-multi_hop-017", P + "Subscription.ts::Subscription"),
        ("ts-multi_hop-018", P + "testing/TestScheduler.ts::TestScheduler"),
    ],
)
def test_public_member_sets_match_the_signatures(fx, case_id, cls):
    """Public instance methods: contained methods that are not constructors, private, protected or static."""
    members = [fx.corpus.get(m) for m in fx.corpus.get(cls).relations["contains"]]
    public = {
        m.id
        for m in members
        if m.kind == "method"
        and not m.id.endswith(".constructor")
        and not str(m.metadata["signature"]).startswith(("private ", "protected ", "static "))
    }
    assert relevant(case(fx, case_id)) == public


def test_multi_hop_mostly_needs_a_relation_and_strict_check_passes(tmp_path):
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT / "src"), env.get("PYTHONPATH", "")])
    out = tmp_path / "check.json"
    proc = subprocess.run(
        [sys.executable, "-m", "evalpipe", "check-fixture", str(YAML), "--strict", "--json", str(out)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["flagged_cases"] == [] and report["tier_flags"] == []
    multi = [c for c in report["cases"] if c["tier"] == "multi_hop"]
    assert sum(bool(c["needs_relation"]) for c in multi) / len(multi) >= 0.5


def test_the_current_builder_still_produces_every_expected_id(fx, tmp_path):
    """Rebuild from the unpacked npm package (the header's fetch command) when it is there.

    The snapshot is frozen, but a newer builder must keep the IDs the cases name, or the next
    version of the fixture could not be rebuilt from the same cases.
    """
    package = os.environ.get("EVALPIPE_RXJS_PACKAGE", "/tmp/rxjs/package")
    if not (os.path.isdir(package) and os.path.isdir(os.path.join(package, "src", "internal"))):
        pytest.skip(
            f"{package} not found: unpack rxjs@7.8.1 there (fixture header) or set EVALPIPE_RXJS_PACKAGE"
        )
    out = tmp_path / "rxjs.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "evalpipe.corpus", package, "-o", str(out),
         "--include", "src/**/*.ts", "README.md"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    built = {json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()}
    expected = {uid for c in fx.cases for uid in c.qrels}
    assert expected - built == set()
    assert {u.id for u in fx.corpus} - built == set()  # no unit of the snapshot disappears
