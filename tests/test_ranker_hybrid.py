"""Hybrid fusion: min-max linear fusion and the exact-name router, checked by hand (issue 12)."""

from __future__ import annotations

import pytest

from evalpipe.core import Hit, Unit
from evalpipe.corpus import Corpus
from evalpipe.rankers.fusion.hybrid import HybridRanker, minmax_fuse, rank_fuse, top_gap
from evalpipe.rankers.fusion.rrf import RRFRanker


class Fixed:
    def __init__(self, hits: list[tuple[str, float]]):
        self.hits = [Hit(i, s) for i, s in hits]

    def search(self, query, k, constraints=None):
        return self.hits[:k]


CORPUS = Corpus([Unit(id=i, kind="function" if i != "r" else "class") for i in ("p", "q", "r")])


def test_minmax_fuse_by_hand():
    runs = {
        "a": [Hit("x", 3.0), Hit("y", 2.0), Hit("z", 1.0)],  # normalised: x 1, y 0.5, z 0
        "b": [Hit("y", 0.9), Hit("w", 0.5), Hit("x", 0.1)],  # normalised: y 1, w 0.5, x 0
    }
    fused = minmax_fuse(runs, {"a": 1.0, "b": 2.0})
    assert fused == {"x": (1.0, 1), "y": (2.5, 1), "z": (0.0, 3), "w": (1.0, 2)}
    # equal (or missing) scores keep the run's order: 1/rank
    assert minmax_fuse({"a": [Hit("x", None), Hit("y", None)]}) == {"x": (1.0, 1), "y": (0.5, 2)}


def hybrid(**kw) -> HybridRanker:
    components = {
        "exact": Fixed([("p", 4.35), ("q", 2.0)]),
        "lex": Fixed([("q", 10.0), ("r", 9.0), ("p", 1.0)]),
    }
    ranker = HybridRanker(components, weights={"exact": 0.5, "lex": 1.0}, **kw)
    ranker.prepare(CORPUS)
    return ranker


def test_router_puts_whole_query_name_matches_first():
    # fused: exact p 0.5 x 1, q 0; lex q 1, r 8/9, p 0 -> q 1.0, r 0.889, p 0.5
    assert [(h.id, round(h.score, 4)) for h in hybrid(router=None).search("x", 10)] == [
        ("q", 1.0),
        ("r", 0.8889),
        ("p", 0.5),
    ]
    # p's exact score 4.35 >= router_min_score 4.0: first, scored top fused (1.0) + 4.35
    assert [(h.id, round(h.score, 4)) for h in hybrid().search("x", 10)] == [
        ("p", 5.35),
        ("q", 1.0),
        ("r", 0.8889),
    ]
    assert [h.id for h in hybrid(router_min_score=5.0).search("x", 10)] == ["q", "r", "p"]


def test_constraints_and_bad_parameters():
    assert [h.id for h in hybrid().search("x", 10, {"kind": "class"})] == ["r"]
    with pytest.raises(ValueError, match="router 'nope' is not a component"):
        hybrid(router="nope")
    with pytest.raises(ValueError, match="unknown method 'sum'"):
        hybrid(method="sum")


def test_component_hits_are_memoised_across_fusion_settings(monkeypatch):
    """A sweep over weights builds new rankers with the same components: no component search reruns."""
    from evalpipe.rankers.fusion import hybrid as hybrid_module
    from evalpipe.rankers.lexical.bm25f import BM25FRanker

    hybrid_module.clear_hits_cache()
    corpus = Corpus(
        [Unit(id="a", kind="function", text="parse file"), Unit(id="b", kind="function", text="load")]
    )
    calls: list[str] = []
    real = BM25FRanker.search

    def counting(self, query, k, constraints=None):
        calls.append(query)
        return real(self, query, k, constraints)

    monkeypatch.setattr(BM25FRanker, "search", counting)
    first = HybridRanker({"lex": BM25FRanker(weights={"body": 1.0})}, router=None)
    first.prepare(corpus)
    second = HybridRanker({"lex": BM25FRanker(weights={"body": 1.0})}, router=None, method="rrf", k=1)
    second.prepare(corpus)
    assert [h.id for h in first.search("parse", 5)] == ["a"]
    assert [h.id for h in second.search("parse", 5)] == ["a"]
    assert calls == ["parse"]
    # other component arguments are another entry
    third = HybridRanker({"lex": BM25FRanker(weights={"body": 2.0})}, router=None)
    third.prepare(corpus)
    third.search("parse", 5)
    assert calls == ["parse", "parse"]
    hybrid_module.clear_hits_cache()


def test_rank_fuse_by_hand():
    runs = {
        "a": [Hit("x", 30.0), Hit("y", 29.9), Hit("z", 1.0)],
        "b": [Hit("y", 0.9), Hit("w", 0.5)],
    }
    # depth 4: rank 1 -> 1, rank 2 -> 0.75, rank 3 -> 0.5; scores are never read
    fused = rank_fuse(runs, {"a": 1.0, "b": 2.0}, depth=4)
    assert fused == {"x": (1.0, 1), "y": (0.75 + 2.0, 1), "z": (0.5, 3), "w": (1.5, 2)}
    # a run longer than depth contributes nothing past it
    assert rank_fuse({"a": [Hit("x"), Hit("y"), Hit("z")]}, depth=2) == {"x": (1.0, 1), "y": (0.5, 2)}


def test_top_gap_by_hand():
    peaked = [Hit(str(i), s) for i, s in enumerate([10.0, 4.0, 3.0, 2.0, 1.0])]
    flat = [Hit(str(i), s) for i, s in enumerate([0.50, 0.49, 0.48, 0.47, 0.10])]
    # n = 3: (10 - 3) / (10 - 1) = 7/9; (0.50 - 0.48) / (0.50 - 0.10) = 0.05
    assert top_gap(peaked, 3) == pytest.approx(7 / 9)
    assert top_gap(flat, 3) == pytest.approx(0.05)
    assert top_gap(peaked[:3], 3) == 1.0  # no more hits than n: selective
    assert top_gap([Hit("a", 1.0)] * 5, 3) == 0.0  # all tied
    assert top_gap([Hit("a"), Hit("b"), Hit("c"), Hit("d")], 2) == 1.0  # order only


def test_confidence_gap_lets_the_sure_component_decide():
    # "dense" has the larger weight but its scores are flat; "lex" has one clear winner.
    dense = [("d1", 0.52), ("d2", 0.51), ("d3", 0.50), ("d4", 0.49), ("lx", 0.30)]
    lex = [("lx", 12.0), ("d4", 2.0), ("d3", 1.5), ("d2", 1.2), ("d1", 1.0)]
    corpus = Corpus([Unit(id=i, kind="function") for i in ("d1", "d2", "d3", "d4", "lx")])

    def build(**kw):
        ranker = HybridRanker(
            {"dense": Fixed(dense), "lex": Fixed(lex)}, weights={"dense": 1.85, "lex": 0.2}, router=None, **kw
        )
        ranker.prepare(corpus)
        return [h.id for h in ranker.search("q", 5)]

    # linear: dense d1 = 1.85 x 1 + 0.2 x 0 = 1.85 beats lx = 1.85 x 0 + 0.2 x 1 = 0.2
    assert build()[0] == "d1"
    # gap with n = 3: dense (0.52 - 0.50) / (0.52 - 0.30) = 1/11 -> weight 0.168;
    # lex (12 - 1.5) / (12 - 1) = 21/22 -> weight 0.191. lx: 0.191 x 1 + 0 = 0.191;
    # d1: 0.168 x 1 + 0.191 x 0 = 0.168 -> lx first
    assert build(confidence="gap", confidence_depth=3)[0] == "lx"


def test_rank_method_and_bad_options():
    # rank fusion, depth 100: p = 0.5 x 1 + 1.0 x (1 - 2/100) = 1.48; q = 0.5 x 0.99 + 1.0 x 1 = 1.495
    ranker = hybrid(method="rank", router=None)
    assert [h.id for h in ranker.search("q", 3)] == ["q", "p", "r"]
    with pytest.raises(ValueError, match="confidence"):
        hybrid(confidence="softmax")
    with pytest.raises(ValueError, match="confidence_depth"):
        hybrid(confidence="gap", confidence_depth=1)


def test_errors_shared_with_rrf_name_the_hybrid_ranker():
    # HybridRanker's checks inherited from RRFRanker say which ranker was configured.
    with pytest.raises(ValueError, match=r"^hybrid ranker: no components configured"):
        HybridRanker({})
    with pytest.raises(ValueError, match=r"^hybrid ranker: weights name unknown components \['nope'\]"):
        HybridRanker({"lex": Fixed([])}, weights={"nope": 1.0}, router=None)
    with pytest.raises(ValueError, match=r"^rrf ranker: no components configured"):
        RRFRanker({})
