"""The Flask documents fixture (fixture=flask): what its header and docs/fixtures.md promise.

The labels are documents and sections, so what a case means must not depend on the chunker:
every answerable case has expected chunks under every chunker, those chunks hold text of the
labelled sections, the unanswerable share is what the header says, the vendored pages are the
sdist's with their licence, dev and test both cover every tier, and `check-fixture --strict`
passes with the pinned BM25's ambiguity candidates.
"""

from __future__ import annotations

from collections import Counter

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from cli_helpers import check_fixture_json
from evalpipe.corpus.chunkers import HeadingChunker, RecursiveChunker, TokenChunker
from evalpipe.corpus.documents import read_documents
from evalpipe.inputs.fixture import load_fixture
from evalpipe.inputs.split import apply, settings_from
from evalpipe.paths import PROJECT_ROOT

FIXTURE = PROJECT_ROOT / "fixtures" / "flask.yaml"
DOCS = PROJECT_ROOT / "fixtures" / "flask" / "docs"


@pytest.fixture(scope="module")
def raw_cases() -> list[dict]:
    return yaml.safe_load(FIXTURE.read_text(encoding="utf-8"))["cases"]


def test_sizes_and_tiers_through_the_hydra_config(tmp_path):
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[
                "fixture=flask",
                "chunker=tokens",
                "chunker.size=200",
                f"fixture.chunk_cache={tmp_path}",
            ],
        )
    fixture = instantiate(cfg.fixture)
    assert len(fixture.cases) == 176 and fixture.name == "flask"
    assert fixture.tier_counts() == {"exact": 50, "concept": 76, "multi_hop": 30, "unanswerable": 20}
    assert all(u.get("chunk_tokens") <= 200 for u in fixture.corpus)
    assert len(list(tmp_path.glob("*.jsonl"))) == 1  # the chunked corpus was cached where configured


def test_unanswerable_share_and_labels(raw_cases):
    unanswerable = [c for c in raw_cases if c.get("answerability") == "unanswerable"]
    assert len(unanswerable) / len(raw_cases) == pytest.approx(20 / 176)  # 11.4%, inside 10-15%
    assert all(not c.get("expected_documents") for c in unanswerable)
    answerable = [c for c in raw_cases if c.get("answerability") != "unanswerable"]
    assert all(c["expected_documents"] and c.get("expected_sections") for c in answerable)
    assert all(c["citation_required"] is True for c in raw_cases)


@pytest.mark.parametrize(
    "chunker",
    [
        HeadingChunker(),
        TokenChunker(size=128, overlap=0),
        TokenChunker(size=512, overlap=64),
        RecursiveChunker(256),
    ],
    ids=repr,
)
def test_every_answerable_case_has_expected_chunks_under_every_chunker(chunker):
    fixture = load_fixture(FIXTURE, chunker=chunker, chunk_cache=None)
    by_id = {u.id: u for u in fixture.corpus}
    for case in fixture.cases:
        if case.answerability == "unanswerable":
            assert not case.qrels
            continue
        assert case.qrels, (case.id, chunker)
        for uid in case.qrels:
            unit = by_id[uid]
            assert unit.get("document_id") in case.expected_documents
            assert set(unit.get("sections")) & set(case.expected_sections)


def test_vendored_documents_are_the_sdist_pages_with_their_licence():
    docs = read_documents(DOCS)
    assert len(docs.documents) == 20 and docs.skipped == 0
    assert sum(len(d.sections) for d in docs.documents) == 177
    licence = (PROJECT_ROOT / "fixtures" / "flask" / "LICENSE.txt").read_text(encoding="utf-8")
    assert licence.startswith("Copyright 2010 Pallets") and "Redistribution and use" in licence
    size = sum(p.stat().st_size for p in DOCS.rglob("*.rst"))
    assert 200_000 < size < 300_000


def test_dev_and_test_split_every_tier():
    fixture = load_fixture(FIXTURE, chunk_cache=None)
    sides = {}
    for side in ("dev", "test"):
        part, _ = apply(fixture, settings_from({"split": side}))
        sides[side] = Counter(c.tier for c in part.cases)
    total = Counter(c.tier for c in fixture.cases)
    for tier, n in total.items():
        assert sides["dev"][tier] + sides["test"][tier] == n
        assert sides["test"][tier] == round(n * 0.5)  # stratified: each tier keeps its share


def test_check_fixture_strict_passes(tmp_path):
    proc, report = check_fixture_json(tmp_path, FIXTURE, "--strict")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert report["flagged_cases"] == [] and report["tier_flags"] == []
