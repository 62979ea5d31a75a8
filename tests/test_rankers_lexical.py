"""BM25 and exact-symbol rankers on hand-built corpora; BM25 on SciFact against bm25s's published score."""

from __future__ import annotations

import csv
import gzip
import json
import math
from pathlib import Path

import pytest

from evalpipe.core import Unit
from evalpipe.corpus import Corpus, load_jsonl_corpus
from evalpipe.rankers.base import Ranker
from evalpipe.rankers.lexical.bm25 import METHODS, BM25Ranker
from evalpipe.rankers.lexical.exact import (
    EXACT_CASE_SCORE,
    FULL_SCORE,
    WHOLE_QUERY_BONUS,
    ExactSymbolRanker,
    normalise,
)

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"


def doc(uid: str, text: str, **kw) -> Unit:
    return Unit(id=uid, kind=kw.pop("kind", "document"), text=text, **kw)


# --- BM25 -------------------------------------------------------------------------------

FRUIT = Corpus(
    [
        doc("d1", "apple banana apple"),  # dl 3
        doc("d2", "banana cherry"),  # dl 2
        doc("d3", "cherry cherry cherry date"),  # dl 4
        doc("d4", "eggplant fig"),  # dl 2
    ]
)


def plain_bm25(**kw) -> BM25Ranker:
    params = dict(stemmer=None, stopwords=None, code_aware=False, fields=["text"])
    params.update(kw)
    ranker = BM25Ranker(**params)
    ranker.prepare(FRUIT)
    return ranker


def test_bm25_lucene_scores_by_hand():
    # N = 4, avgdl = (3+2+4+2)/4 = 2.75, k1 = 1.5, b = 0.75. Query "apple cherry".
    # idf(apple)  = ln(1 + (4-1+0.5)/(1+0.5)) = ln(10/3) = 1.2039728
    # idf(cherry) = ln(1 + (4-2+0.5)/(2+0.5)) = ln(2)    = 0.6931472
    # norm(dl) = 1 - b + b*dl/avgdl: dl=3 -> 1.0681818, dl=2 -> 0.7954545, dl=4 -> 1.3409091
    # bm25s "lucene" uses tf/(tf + k1*norm), i.e. the textbook tf*(k1+1)/(tf + k1*norm)
    # divided by the constant (k1+1) = 2.5 (Lucene >= 8 drops it; the order is unchanged):
    # d1: apple tf=2: 1.2039728 * 2/(2 + 1.5*1.0681818) = 1.2039728 * 0.5551924 = 0.6684518
    # d3: cherry tf=3: 0.6931472 * 3/(3 + 1.5*1.3409091) = 0.6931472 * 0.5986395 = 0.4149453
    # d2: cherry tf=1: 0.6931472 * 1/(1 + 1.5*0.7954545) = 0.6931472 * 0.4559585 = 0.3160464
    # d4 shares no term: not returned.
    hits = plain_bm25(k1=1.5, b=0.75, method="lucene").search("apple cherry", 10)
    assert [h.id for h in hits] == ["d1", "d3", "d2"]
    assert [h.score for h in hits] == pytest.approx([0.6684518, 0.4149453, 0.3160464], rel=1e-5)


def test_bm25_atire_scores_by_hand():
    # ATIRE: idf = ln(N/df): apple ln 4 = 1.3862944, cherry ln 2 = 0.6931472;
    # tf part with the (k1+1) factor: tf*2.5/(tf + 1.5*norm)
    # d1: 1.3862944 * 5/3.6022727 = 1.9241941; d3: 0.6931472 * 7.5/5.0113636 = 1.0373631;
    # d2: 0.6931472 * 2.5/2.1931818 = 0.7901160
    hits = plain_bm25(method="atire").search("apple cherry", 10)
    assert [h.id for h in hits] == ["d1", "d3", "d2"]
    assert [h.score for h in hits] == pytest.approx([1.9241941, 1.0373631, 0.7901160], rel=1e-5)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_ranks_and_drops_non_matching(method):
    hits = plain_bm25(method=method).search("apple cherry", 10)
    ids = [h.id for h in hits]
    assert ids[0] == "d1"
    # Robertson clips idf at 0 when df >= N/2: ln(max(1, (4-2+0.5)/2.5)) = 0, so the
    # cherry-only documents score 0 and are dropped. BM25L/BM25+ give every document a
    # floor score per query term; d4 (no shared term) must still not come back.
    assert set(ids) == ({"d1"} if method == "robertson" else {"d1", "d2", "d3"})
    assert all(h.score > 0 for h in hits)


def test_bm25_edge_queries_and_params():
    ranker = plain_bm25()
    assert ranker.search("", 5) == []
    assert ranker.search("zucchini quince", 5) == []  # all terms out of vocabulary
    assert [h.id for h in ranker.search("zucchini apple", 5)] == ["d1"]
    assert ranker.search("apple cherry", 0) == []
    # min_score 0.4 keeps d1 (0.668) and d3 (0.415), drops d2 (0.316)
    assert [h.id for h in plain_bm25(min_score=0.4).search("apple cherry", 10)] == ["d1", "d3"]
    assert ranker.stats()["index_units"] == 4
    assert ranker.stats()["vocab_size"] == 6
    assert isinstance(ranker, Ranker)
    with pytest.raises(ValueError, match="unknown method 'bm26'.*robertson, lucene, atire, bm25l, bm25\\+"):
        BM25Ranker(method="bm26")
    with pytest.raises(ValueError, match="bad fields"):
        BM25Ranker(fields=["body"])
    with pytest.raises(ValueError, match="b must be in"):
        BM25Ranker(b=1.5)
    with pytest.raises(RuntimeError, match="before prepare"):
        BM25Ranker().search("apple", 3)


MIXED = Corpus(
    [
        doc("p1", "parse config parse config", language="python", kind="function", path="src/a.py"),
        doc("p2", "parse config file", language="python", kind="function", path="src/a.py"),
        doc("p3", "parse config", language="python", kind="method", path="lib/b.py"),
        doc("g1", "parse input", language="go", kind="function", path="src/c.go"),
        doc("g2", "config loader", language="go", kind="method", path="lib/d.go"),
        doc("g3", "unrelated words", language="go", kind="function", path="src/e.go"),
    ]
)


def test_winnow_filters_before_top_k():
    ranker = BM25Ranker(stemmer=None, stopwords=None, code_aware=False, fields=["text"])
    ranker.prepare(MIXED)
    top2 = [h.id for h in ranker.search("parse config", 2)]
    assert all(i.startswith("p") for i in top2)  # post-filtering these would leave no go unit
    # g1 and g2 each share one term with equal df (4) and equal length, so they tie: corpus order.
    assert [h.id for h in ranker.search("parse config", 2, {"language": "go"})] == ["g1", "g2"]
    # g3 shares no term: never returned, even with room for it
    assert [h.id for h in ranker.search("parse config", 5, {"language": "go"})] == ["g1", "g2"]
    assert [h.id for h in ranker.search("parse config", 5, {"kind": ["method"]})] == ["p3", "g2"]
    got = [h.id for h in ranker.search("parse config", 5, {"path_prefix": "src/", "language": "python"})]
    assert sorted(got) == ["p1", "p2"]


def test_identifiers_field_indexes_ids_and_names():
    units = Corpus(
        [
            Unit(id="src/cfg.py::merge_settings", kind="function", path="src/cfg.py"),
            Unit(
                id="src/x.py::f", kind="function", text="unrelated body", metadata={"qualname": "Pool.drain"}
            ),
        ]
    )
    ranker = BM25Ranker()
    ranker.prepare(units)
    assert [h.id for h in ranker.search("merge settings", 3)] == ["src/cfg.py::merge_settings"]
    assert [h.id for h in ranker.search("drain the pool", 3)] == ["src/x.py::f"]
    text_only = BM25Ranker(fields=["text"])
    text_only.prepare(units)
    assert text_only.search("merge settings", 3) == []


# --- exact symbol ------------------------------------------------------------------------


def sym(uid: str, name: str, qualname: str | None = None) -> Unit:
    return Unit(id=uid, kind="function", title=name, metadata={"name": name, "qualname": qualname or name})


SYMBOLS = Corpus(
    [
        sym("a.py::Session.merge", "merge", "Session.merge"),  # 0
        sym("a.py::merge_settings", "merge_settings"),  # 1
        sym("b.py::MergeSettingsLoader", "MergeSettingsLoader"),  # 2
        sym("b.py::settings", "settings"),  # 3
        sym("c.go::mergeSettings", "mergeSettings"),  # 4: same key as merge_settings
        sym("c.go::parse", "parse"),  # 5
    ]
)


@pytest.fixture(scope="module")
def exact() -> ExactSymbolRanker:
    ranker = ExactSymbolRanker()
    ranker.prepare(SYMBOLS)
    return ranker


def test_normalise_is_case_and_separator_insensitive():
    keys = {normalise(s) for s in ("merge_settings", "mergeSettings", "MergeSettings", "merge settings")}
    assert keys == {"mergesettings"}
    assert normalise("Session.merge") == normalise("session::merge") == "sessionmerge"


# Full-match scores of the whole query: 5.0 exact case / 4.0 any case, + 0.25 declaration
# + 0.1 top-level symbol.
@pytest.mark.parametrize(
    ("query", "first_two", "full_scores"),
    [
        ("merge_settings", ["a.py::merge_settings", "c.go::mergeSettings"], [5.35, 4.35]),
        ("mergeSettings", ["c.go::mergeSettings", "a.py::merge_settings"], [5.35, 4.35]),
        ("MergeSettings", ["a.py::merge_settings", "c.go::mergeSettings"], [4.35, 4.35]),  # corpus order
        ("merge settings", ["a.py::merge_settings", "c.go::mergeSettings"], [4.35, 4.35]),
    ],
)
def test_exact_full_before_partial(exact, query, first_two, full_scores):
    hits = exact.search(query, 10)
    # Partial, Jaccard of pieces vs {merge, settings}: MergeSettingsLoader {merge, settings, loader}
    # 2/3; merge {merge} 1/2 (its qualname {session, merge} gives only 1/3); settings {settings}
    # 1/2 -> tie, corpus order. parse: 0.
    assert [h.id for h in hits] == [
        *first_two,
        "b.py::MergeSettingsLoader",
        "a.py::Session.merge",
        "b.py::settings",
    ]
    assert [h.score for h in hits] == pytest.approx([*full_scores, 2 / 3, 0.5, 0.5])


def test_exact_qualname_and_symbol_in_sentence(exact):
    hits = exact.search("Session.merge", 3)
    # whole query, exact case on qualname (5.0 + 0.25 declaration, not top level); then {merge, settings} vs
    # {session, merge}: 1/3; {merge, settings, loader}: 1/4
    assert [h.id for h in hits] == ["a.py::Session.merge", "a.py::merge_settings", "c.go::mergeSettings"]
    assert hits[0].score == pytest.approx(EXACT_CASE_SCORE + WHOLE_QUERY_BONUS + 0.25)
    assert hits[1].score == pytest.approx(1 / 3)
    hits = exact.search("where is `merge_settings()` defined?", 3)
    assert [h.id for h in hits] == [
        "a.py::merge_settings",
        "c.go::mergeSettings",
        "b.py::MergeSettingsLoader",
    ]
    # `merge_settings` is an identifier in the query: 3.0 exact case / 2.0 any case
    assert [h.score for h in hits] == pytest.approx([3.35, 2.35, 2 / 3])


def test_exact_no_match_substring_and_constraints(exact):
    assert exact.search("quantum_flux", 5) == []
    assert exact.search("", 5) == []
    # "setting" is no piece of any name, but a substring of keys: 0.5 * len/len(key)
    hits = exact.search("setting", 10)
    assert [h.id for h in hits][:1] == ["b.py::settings"]  # 0.5 * 7/8 = 0.4375
    assert hits[0].score == pytest.approx(0.4375)
    # min_score = FULL_SCORE keeps only full matches
    full_only = ExactSymbolRanker(min_score=FULL_SCORE)
    full_only.prepare(SYMBOLS)
    assert [h.id for h in full_only.search("merge settings", 10)] == [
        "a.py::merge_settings",
        "c.go::mergeSettings",
    ]


def test_exact_respects_winnow():
    units = Corpus(
        [
            Unit(id="a.py::merge", kind="function", language="python", metadata={"name": "merge"}),
            Unit(id="b.go::merge", kind="function", language="go", metadata={"name": "merge"}),
        ]
    )
    ranker = ExactSymbolRanker()
    ranker.prepare(units)
    assert [h.id for h in ranker.search("merge", 1, {"language": "go"})] == ["b.go::merge"]


# --- SciFact ----------------------------------------------------------------------------


@pytest.mark.slow
def test_bm25_scifact_matches_bm25s_reference():
    """bm25s reports nDCG@10 = 0.6762 on SciFact with this exact setup (k1 0.9, b 0.4, lucene)."""
    if not SCIFACT.is_dir():
        pytest.skip(f"{SCIFACT} not found: the shared BEIR datasets sit beside the repo")
    pytrec_eval = pytest.importorskip("pytrec_eval")
    root = SCIFACT
    corpus = load_jsonl_corpus(root / "corpus.jsonl.gz")
    with gzip.open(root / "queries.jsonl.gz", "rt", encoding="utf-8") as fh:
        queries = {r["_id"]: r["text"] for r in map(json.loads, fh)}
    qrels: dict[str, dict[str, int]] = {}
    with (root / "qrels" / "test.tsv").open(encoding="utf-8") as fh:
        rows = csv.reader(fh, delimiter="\t")
        next(rows)
        for qid, did, rel in rows:
            qrels.setdefault(qid, {})[did] = int(rel)
    assert len(qrels) == 300

    ranker = BM25Ranker(
        k1=0.9,
        b=0.4,
        method="lucene",
        stemmer="english",
        stopwords="en",
        code_aware=False,
        fields=["title", "text"],
    )
    ranker.prepare(corpus)
    run = {qid: {h.id: h.score for h in ranker.search(queries[qid], 100)} for qid in qrels}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
    ndcg = sum(per_query.get(q, {}).get("ndcg_cut_10", 0.0) for q in qrels) / len(qrels)
    assert math.isclose(ndcg, 0.6762, abs_tol=0.002)
