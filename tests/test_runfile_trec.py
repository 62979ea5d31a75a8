"""TREC/BEIR/JSONL run and qrels files, checked against pytrec_eval, and RunFileRanker replay."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from evalpipe.core import Hit, Unit
from evalpipe.corpus import Corpus
from evalpipe.inputs.trec import (
    TrecFormatError,
    read_jsonl_run,
    read_trec_qrels,
    read_trec_run,
    write_trec_run,
)
from evalpipe.rankers.replay.runfile import RunFileRanker

SHARED = Path(__file__).resolve().parents[2] / "shared"

RESULTS = {
    "q1": [Hit("d3", 2.5), Hit("d1", 1.25), Hit("d7", -0.5)],
    "q2": [Hit("d2", 0.9), Hit("d9", 0.1)],
}
QRELS = {"q1": {"d1": 1, "d7": 2, "d4": 1}, "q2": {"d2": 1}}


def _pytrec(qrels, run, measures=("map", "recip_rank", "ndcg", "P_5")):
    pytrec_eval = pytest.importorskip("pytrec_eval", reason="pytrec_eval not installed")
    return pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)


def _order_scores(hits) -> dict[str, float]:
    """A pytrec_eval run that encodes exactly the hit-list order (strictly decreasing scores)."""
    return {h.id: float(len(hits) - i) for i, h in enumerate(hits)}


# -- TREC runs -------------------------------------------------------------------------------------


def test_trec_run_round_trip(tmp_path):
    path = tmp_path / "run.trec"
    assert write_trec_run(path, RESULTS, tag="sys1") == 5
    assert path.read_text().splitlines()[0] == "q1 Q0 d3 1 2.5 sys1"
    assert read_trec_run(path) == {q: [(h.id, h.score) for h in hits] for q, hits in RESULTS.items()}


def test_trec_run_round_trip_gzip(tmp_path):
    path = tmp_path / "run.trec.gz"
    write_trec_run(path, RESULTS)
    with gzip.open(path, "rt") as fh:
        assert fh.readline().startswith("q1 Q0 d3 1 ")
    assert [d for d, _ in read_trec_run(path)["q2"]] == ["d2", "d9"]


def test_written_run_scores_like_the_hit_lists_under_pytrec_eval(tmp_path):
    path = tmp_path / "run.trec"
    write_trec_run(path, RESULTS)
    from_file = {q: dict(hits) for q, hits in read_trec_run(path).items()}
    from_hits = {q: _order_scores(hits) for q, hits in RESULTS.items()}
    assert _pytrec(QRELS, from_file) == _pytrec(QRELS, from_hits)
    # by hand, q1 ranks d3(0) d1(1) d7(2); relevant d1, d7, d4: AP = (1/2 + 2/3) / 3, RR = 1/2.
    got = _pytrec(QRELS, from_file)["q1"]
    assert got["map"] == pytest.approx((1 / 2 + 2 / 3) / 3)
    assert got["recip_rank"] == pytest.approx(0.5)


def test_tied_scores_are_written_so_trec_eval_keeps_the_list_order(tmp_path):
    # trec_eval breaks score ties by docid descending, which would put "b" above "a" and give RR 1/2.
    hits = {"q": [Hit("a", 1.0), Hit("b", 1.0), Hit("c", None)]}
    qrels = {"q": {"a": 1}}
    assert _pytrec(qrels, {"q": {"a": 1.0, "b": 1.0, "c": 0.0}})["q"]["recip_rank"] == pytest.approx(0.5)
    path = tmp_path / "run.trec"
    write_trec_run(path, hits)
    assert [d for d, _ in read_trec_run(path)["q"]] == ["a", "b", "c"]
    assert _pytrec(qrels, {q: dict(h) for q, h in read_trec_run(path).items()})["q"]["recip_rank"] == 1.0


def test_reader_orders_like_trec_eval(tmp_path):
    # The rank column is ignored; order = score desc, ties by docid desc. Confirm that is trec_eval's
    # order: with only "a" relevant and a/b tied, pytrec_eval gives RR 1/2 (b first).
    path = tmp_path / "run.trec"
    path.write_text("q 0 a 1 3.0 t\nq 0 z 2 1.0 t\nq 0 b 3 3.0 t\nq 0 m 4 5.0 t\n")
    run = read_trec_run(path)
    assert run["q"] == [("m", 5.0), ("b", 3.0), ("a", 3.0), ("z", 1.0)]
    assert _pytrec({"q": {"a": 1}}, {"q": dict(run["q"])})["q"]["recip_rank"] == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("q Q0 d1 1 1.0 t\nq Q0 d2 2 0.5\n", r"run\.trec:2: expected 'qid Q0 docid rank score tag', got 5"),
        ("q Q0 d1 1 high t\n", r"run\.trec:1: score 'high' is not a number"),
        ("q Q0 d1 1 nan t\n", r"run\.trec:1: .*not finite"),
        ("q Q0 d1 1 1.0 t\n\nq Q0 d1 2 0.5 t\n", r"run\.trec:3: docid 'd1' listed twice for query 'q'"),
    ],
)
def test_bad_trec_run_names_file_and_line(tmp_path, content, message):
    path = tmp_path / "run.trec"
    path.write_text(content)
    with pytest.raises(TrecFormatError, match=message):
        read_trec_run(path)


def test_write_rejects_what_trec_cannot_represent(tmp_path):
    with pytest.raises(ValueError, match="whitespace"):
        write_trec_run(tmp_path / "r", {"q": [Hit("a b", 1.0)]})
    with pytest.raises(ValueError, match="tag"):
        write_trec_run(tmp_path / "r", RESULTS, tag="my run")
    with pytest.raises(ValueError, match="twice"):
        write_trec_run(tmp_path / "r", {"q": [Hit("a", 2.0), Hit("a", 1.0)]})


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.trec"):
        read_trec_run(tmp_path / "nope.trec")


# -- qrels -----------------------------------------------------------------------------------------


def test_trec_and_beir_qrels(tmp_path):
    trec = tmp_path / "qrels.txt"
    trec.write_text("q1 0 d1 1\nq1 0 d7 2\nq1 0 d4 1\nq2 0 d2 1\nq2 0 d5 0\n")
    beir = tmp_path / "test.tsv"
    beir.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td7\t2\nq1\td4\t1\nq2\td2\t1\nq2\td5\t0\n")
    expected = {"q1": {"d1": 1, "d7": 2, "d4": 1}, "q2": {"d2": 1, "d5": 0}}
    assert read_trec_qrels(trec) == expected
    assert read_trec_qrels(beir) == expected


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("q1 0 d1\tx y\n", r"qrels:1: expected 'qid 0 docid rel'"),
        ("q1 0 d1 1\nq1 0 d2 0.5\n", r"qrels:2: relevance '0.5' is not an integer"),
        ("q1 0 d1 1\nq1 0 d1 2\n", r"qrels:2: 'q1'/'d1' judged 1 earlier and 2 here"),
        ("a b c d e\n", r"qrels:1: .*got 5 columns"),
    ],
)
def test_bad_qrels_name_file_and_line(tmp_path, content, message):
    path = tmp_path / "qrels"
    path.write_text(content)
    with pytest.raises(TrecFormatError, match=message):
        read_trec_qrels(path)


def test_real_scifact_qrels():
    path = SHARED / "datasets" / "scifact" / "qrels" / "test.tsv"
    if not path.is_file():
        pytest.skip(f"shared datasets not present: {path}")
    qrels = read_trec_qrels(path)
    # SOURCE.md: 339 judgements over 300 queries, all grade 1; first data line "1 31715818 1".
    assert len(qrels) == 300
    assert sum(len(d) for d in qrels.values()) == 339
    assert {g for d in qrels.values() for g in d.values()} == {1}
    assert qrels["1"] == {"31715818": 1}


# -- JSONL runs ------------------------------------------------------------------------------------


def test_jsonl_run_layouts(tmp_path):
    per_query = tmp_path / "a.jsonl"
    per_query.write_text(
        json.dumps({"qid": "q1", "query": "first", "hits": [{"id": "d3", "score": 0.1}, {"id": "d1"}]})
        + "\n"
        + json.dumps({"qid": 2, "hits": [{"docid": "d2", "score": "0.5"}]})
        + "\n"
    )
    # list order is the ranking even when the scores disagree; a missing score is None
    assert read_jsonl_run(per_query) == {"q1": [("d3", 0.1), ("d1", None)], "2": [("d2", 0.5)]}

    flat = tmp_path / "b.jsonl"
    rows = [
        {"qid": "q", "docid": "x", "score": 0.2},
        {"qid": "q", "docid": "y", "score": 0.9},
        {"qid": "q", "docid": "z", "score": 0.2},
        {"qid": "r", "docid": "u", "score": 0.1, "rank": 2},
        {"qid": "r", "docid": "v", "score": 0.0, "rank": 1},
    ]
    flat.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # q: by score desc, file order on ties; r: every line has a rank, so by rank.
    assert read_jsonl_run(flat) == {"q": [("y", 0.9), ("x", 0.2), ("z", 0.2)], "r": [("v", 0.0), ("u", 0.1)]}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{bad json", r"run\.jsonl:2: invalid JSON"),
        ('{"hits": []}', r"run\.jsonl:2: expected an object with a 'qid'"),
        ('{"qid": "q", "hits": [{"score": 1}]}', r"run\.jsonl:2: hit has no 'id'"),
        ('{"qid": "q", "docid": "d", "score": "high"}', r"run\.jsonl:2: score 'high' is not a number"),
        ('{"qid": "q"}', r"run\.jsonl:2: expected 'hits'"),
    ],
)
def test_bad_jsonl_run_names_file_and_line(tmp_path, line, message):
    path = tmp_path / "run.jsonl"
    path.write_text('{"qid": "ok", "hits": []}\n' + line + "\n")
    with pytest.raises(TrecFormatError, match=message):
        read_jsonl_run(path)


# -- RunFileRanker ---------------------------------------------------------------------------------

CORPUS = Corpus(
    [
        Unit("d1", "document", path="src/a.py"),
        Unit("d2", "document", path="docs/b.md"),
        Unit("d3", "document", path="src/c.py"),
        Unit("d9", "document", path="src/d.py"),
    ]
)


@pytest.fixture()
def trec_run(tmp_path):
    path = tmp_path / "system.trec"
    write_trec_run(path, RESULTS)
    return path


def test_replays_trec_run_by_case_id(trec_run):
    r = RunFileRanker(str(trec_run))
    r.prepare(CORPUS)
    assert r.search_case("q1", "ignored", 2) == [Hit("d3", 2.5), Hit("d1", 1.25)]
    assert r.search_case("q2", "ignored", 10) == [Hit("d2", 0.9), Hit("d9", 0.1)]
    assert r.search_case("q404", "ignored", 10) == []
    assert r.search_case("q405", "ignored", 10) == []
    s = r.stats()
    assert (s["run_format"], s["run_queries"], s["run_hits"]) == ("trec", 2, 5)
    assert (s["cases_looked_up"], s["missing_cases"]) == (4, 2)
    assert s["unknown_ids"] == 1  # d7 is not in CORPUS


def test_constraints_filter_the_replayed_list(trec_run):
    r = RunFileRanker(str(trec_run))
    r.prepare(CORPUS)
    # q1 recorded d3 (src), d1 (src), d7 (not in corpus): under src/ only d3, d1 survive; k=1 keeps d3.
    assert r.search_case("q1", "", 10, {"path_prefix": "src/"}) == [Hit("d3", 2.5), Hit("d1", 1.25)]
    assert r.search_case("q2", "", 1, {"path_prefix": "src/"}) == [Hit("d9", 0.1)]
    # without a corpus there is nothing to check constraints against: the list is replayed as is
    bare = RunFileRanker(str(trec_run))
    assert [h.id for h in bare.search_case("q1", "", 10, {"path_prefix": "src/"})] == ["d3", "d1", "d7"]


def test_min_score(trec_run):
    r = RunFileRanker(str(trec_run), min_score=1.0)
    assert [h.id for h in r.search_case("q1", "", 10)] == ["d3", "d1"]


def test_search_by_query_text_needs_a_jsonl_query_field(tmp_path, trec_run):
    path = tmp_path / "run.jsonl"
    path.write_text(
        json.dumps({"qid": "c1", "query": "how to parse", "hits": [{"id": "d1", "score": 2}]})
        + "\n"
        + json.dumps({"qid": "c2", "query": "dup", "hits": []})
        + "\n"
        + json.dumps({"qid": "c3", "query": "dup", "hits": []})
        + "\n"
    )
    r = RunFileRanker(str(path))
    assert r.search("how to parse", 5) == [Hit("d1", 2.0)]
    assert r.stats()["run_format"] == "jsonl"
    with pytest.raises(LookupError, match="not recorded"):
        r.search("never asked", 5)
    with pytest.raises(LookupError, match="several qids"):
        r.search("dup", 5)
    with pytest.raises(LookupError, match="search_case"):
        RunFileRanker(str(trec_run)).search("how to parse", 5)


def test_explicit_format_and_missing_file(tmp_path, trec_run):
    with pytest.raises(TrecFormatError, match="invalid JSON"):
        RunFileRanker(str(trec_run), format="jsonl").prepare(CORPUS)
    missing = RunFileRanker(str(tmp_path / "runs" / "absent.trec"))  # constructing is cheap and lazy
    with pytest.raises(FileNotFoundError, match=r"absent\.trec.*ranker\.path"):
        missing.prepare(CORPUS)
    with pytest.raises(ValueError, match="format"):
        RunFileRanker(str(trec_run), format="csv")  # type: ignore[arg-type]
