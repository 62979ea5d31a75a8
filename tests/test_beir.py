"""BEIR and TREC collections as fixtures, and the SciFact BM25 run checked against trec_eval."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from conftest import shared_dataset
from evalpipe.inputs.beir import load_beir, load_trec
from evalpipe.safety.errors import FixtureError

DOCS = [
    {"_id": "d1", "title": "Cats", "text": "Cats purr and sleep."},
    {"_id": "d2", "title": "Dogs", "text": "Dogs bark at cats."},
    {"_id": "d3", "title": "Birds", "text": "Birds sing."},
]
QUERIES = [
    {"_id": "q1", "text": "purring cats"},
    {"_id": "q2", "text": "barking"},
    {"_id": "q9", "text": "unjudged"},
]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t1\nq2\td2\t1\nq2\td3\t0\n"


def make_beir(folder: Path, gz: bool) -> Path:
    (folder / "qrels").mkdir(parents=True)
    for name, rows in (("corpus.jsonl", DOCS), ("queries.jsonl", QUERIES)):
        text = "".join(json.dumps(r) + "\n" for r in rows)
        if gz:
            (folder / f"{name}.gz").write_bytes(gzip.compress(text.encode()))
        else:
            (folder / name).write_text(text)
    (folder / "qrels" / "test.tsv").write_text(QRELS)
    return folder


@pytest.mark.parametrize("gz", [False, True])
def test_beir_folder_loads_plain_and_gzipped(tmp_path, gz):
    fx = load_beir(make_beir(tmp_path / "ds", gz))
    assert fx.name == "ds" and len(fx.corpus) == 3
    assert [c.id for c in fx.cases] == ["q1", "q2"]  # judged queries only, unjudged q9 dropped
    assert fx.cases[0].qrels == {"d1": 2, "d2": 1} and fx.cases[0].query == "purring cats"
    assert fx.cases[1].qrels == {"d2": 1, "d3": 0}
    assert fx.tiers == ["all"]
    assert fx.corpus.get("d2").title == "Dogs" and fx.corpus.get("d2").text == "Dogs bark at cats."
    corpus_file = tmp_path / "ds" / ("corpus.jsonl.gz" if gz else "corpus.jsonl")
    assert fx.corpus.sha256 == hashlib.sha256(corpus_file.read_bytes()).hexdigest()  # hashed while read


def test_beir_errors_are_clear(tmp_path):
    folder = make_beir(tmp_path / "ds", False)
    with pytest.raises(FixtureError, match=r"no qrels/dev.tsv .*available: \['test'\]"):
        load_beir(folder, qrels_split="dev")
    with pytest.raises(FixtureError, match="BEIR folder not found"):
        load_beir(tmp_path / "missing")
    (folder / "qrels" / "test.tsv").write_text(QRELS + "q2\td404\t1\n")
    with pytest.raises(FixtureError, match="not in the corpus"):
        load_beir(folder)


def test_tier_file_slices_beir_queries(tmp_path):
    folder = make_beir(tmp_path / "ds", False)
    tiers = tmp_path / "tiers.tsv"
    tiers.write_text("q1\teasy\n")
    fx = load_beir(folder, tiers=str(tiers))
    assert [c.tier for c in fx.cases] == ["easy", "all"]


def test_trec_qrels_as_fixture(tmp_path):
    folder = make_beir(tmp_path / "ds", False)
    qrels = tmp_path / "q.qrels"
    qrels.write_text("q1 0 d1 1\nq2 0 d3 2\n")
    queries = tmp_path / "queries.tsv"
    queries.write_text("q1\tpurring cats\nq2\tsinging\n")
    fx = load_trec(qrels, queries, folder / "corpus.jsonl")
    assert [(c.id, c.query, dict(c.qrels)) for c in fx.cases] == [
        ("q1", "purring cats", {"d1": 1}),
        ("q2", "singing", {"d3": 2}),
    ]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["scifact", "cranfield"])
def test_bm25_run_metrics_equal_trec_eval(name, tmp_path):
    """The pipeline's own metrics on a real BM25 run equal pytrec_eval's on the exported run.trec."""
    import pytrec_eval

    from evalpipe.evaluation.files import trec_run_text
    from evalpipe.evaluation.runner import prepare_ranker, run_cases
    from evalpipe.inputs.trec import read_trec_run
    from evalpipe.rankers.lexical.bm25 import BM25Ranker
    from evalpipe.scoring.run import score_results

    fx = load_beir(shared_dataset(name))
    ranker = BM25Ranker(k1=0.9, b=0.4, code_aware=False, fields=["title", "text"])
    prepared = prepare_ranker(ranker, fx.corpus)
    results = run_cases(prepared.ranker, fx, 100, lambda s: 0)
    ks = [1, 5, 10, 100]
    scores = score_results(results, ks)
    path = tmp_path / "run.trec"
    path.write_text(trec_run_text(results, "bm25"))
    run = {q: {d: s for d, s in hits} for q, hits in read_trec_run(path).items()}
    qrels = {c.id: dict(c.qrels) for c in fx.cases}
    measures = {
        "ndcg_cut.1,5,10,100",
        "map_cut.1,5,10,100",
        "P.1,5,10,100",
        "recall.1,5,10,100",
        "recip_rank",
    }
    trec = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    index = {c.id: i for i, c in enumerate(fx.cases)}
    judged = [q for q in trec if any(g > 0 for g in qrels[q].values())]
    rows = np.array([index[q] for q in judged])
    pairs = [("mrr", "recip_rank")] + [
        (f"{ours}_at_{k}", f"{theirs}_{k}")
        for k in ks
        for ours, theirs in (
            ("ndcg", "ndcg_cut"),
            ("map", "map_cut"),
            ("precision", "P"),
            ("frac_recall", "recall"),
        )
    ]
    for ours, theirs in pairs:
        expected = np.array([trec[q][theirs] for q in judged])
        np.testing.assert_allclose(scores.per_case[ours][rows], expected, atol=1e-6, err_msg=ours)
    if name == "scifact":  # SOURCE.md: bm25s k1=0.9 b=0.4 lucene -> nDCG@10 0.6762
        assert scores.overall["ndcg_at_10"] == pytest.approx(0.6762, abs=0.002)
