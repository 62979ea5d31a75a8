"""Graph ranker, relation-intent mode, on a hand-built relation graph (issue 12)."""

from __future__ import annotations

import pytest

from evalpipe.core import Hit, Unit
from evalpipe.corpus import Corpus
from evalpipe.rankers.structure.graph import GraphRanker
from evalpipe.rankers.structure.relation_intent import RelationIntent, detect_relation


def fn(name: str, kind: str = "function", **relations: tuple[str, ...]) -> Unit:
    meta = {"name": name, "qualname": name}
    return Unit(
        id=f"m.py::{name}", kind=kind, path="m.py", language="python", relations=relations, metadata=meta
    )


#  search -> top_k <- other;  outer -> search;  Child inherits Base;  GrandChild inherits Child
CORPUS = Corpus(
    [
        Unit(id="m.py", kind="module", path="m.py", language="python"),
        fn("top_k"),
        fn("search", calls=("m.py::top_k",)),
        fn("other", calls=("m.py::top_k",)),
        fn("outer", calls=("m.py::search",)),
        fn("Base", "class"),
        fn("Child", "class", inherits=("m.py::Base",)),
        fn("GrandChild", "class", inherits=("m.py::Child",)),
    ]
)


class FixedBase:
    """A base ranker that always returns the same list (so the expected order is known)."""

    def __init__(self, ids: list[str]):
        self.ids = ids

    def search(self, query, k, constraints=None):
        return [Hit(i, 1.0 / (r + 1)) for r, i in enumerate(self.ids)][:k]


@pytest.fixture
def graph() -> GraphRanker:
    ranker = GraphRanker(FixedBase(["m.py::other", "m.py::top_k"]), intent=True, hops=2, decay=0.5)
    ranker.prepare(CORPUS)
    return ranker


def test_callers_ranked_by_walk_then_base(graph):
    # seed top_k (exact name). Hop 1 (called_by): search, other 1/2 each; hop 2 (x decay 0.5): outer
    # gets search's 1/2 -> 0.25. Normalised by 0.5: search 1, other 1, outer 0.5; score 2 + that
    # + 0.3 x base (other is the base's rank 1 -> 1.0). Then the seed (1.5).
    hits = graph.search("what calls top_k", 10)
    assert [(h.id, round(h.score, 6)) for h in hits] == [
        ("m.py::other", 3.3),
        ("m.py::search", 3.0),
        ("m.py::outer", 2.5),
        ("m.py::top_k", 1.5),
    ]


def test_subclasses_and_callees(graph):
    assert [h.id for h in graph.search("subclasses of Base", 10)][:3] == [
        "m.py::Child",
        "m.py::GrandChild",
        "m.py::Base",
    ]
    # callees of outer: search (hop 1), top_k (hop 2); then outer itself; then the rest of the base
    assert [h.id for h in graph.search("what does outer call", 10)] == [
        "m.py::search",
        "m.py::top_k",
        "m.py::outer",
        "m.py::other",
    ]


def test_described_symbol_is_seeded_by_the_base(graph):
    # "the function that ..." names no symbol: seeds are the base's hits for the description,
    # other 1.0 and top_k 0.5 (1/rank). Hop 1: other has no callers; top_k passes 0.25 to each of
    # search and other. Hop 2 (x 0.5): search passes its 0.25 to outer -> 0.125. Seeds are not
    # answers: search 0.25, outer 0.125 -> normalised 1, 0.5 -> 3.0, 2.5; then both seeds (1.5,
    # corpus order).
    hits = graph.search("what calls the function that picks the best rows", 10)
    assert [(h.id, round(h.score, 6)) for h in hits] == [
        ("m.py::search", 3.0),
        ("m.py::outer", 2.5),
        ("m.py::top_k", 1.5),
        ("m.py::other", 1.5),
    ]


def test_other_questions_keep_the_base_ranking(graph):
    assert [h.id for h in graph.search("merge two settings", 10)] == ["m.py::other", "m.py::top_k"]
    # relational, but nothing calls outer: the base list, unchanged
    assert [h.id for h in graph.search("what calls outer", 10)] == ["m.py::other", "m.py::top_k"]


def test_constraints_apply_to_reached_units(graph):
    # every reached unit is a function: none is allowed, so the (constrained) base list is returned
    hits = graph.search("what calls top_k", 10, {"kind": "class"})
    assert [h.id for h in hits] == ["m.py::other", "m.py::top_k"]
    hits = graph.search("subclasses of Base", 10, {"kind": "class"})
    assert [h.id for h in hits][:2] == ["m.py::Child", "m.py::GrandChild"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("what calls top_k", RelationIntent("called_by", "top_k")),
        ("who calls `search_case`?", RelationIntent("called_by", "search_case")),
        ("where is read_trec_qrels used", RelationIntent("called_by", "read_trec_qrels")),
        ("callers of Corpus.allowed_mask", RelationIntent("called_by", "Corpus.allowed_mask")),
        ("which functions does RRFRanker._fuse call", RelationIntent("calls", "RRFRanker._fuse")),
        ("functions called by build_corpus", RelationIntent("calls", "build_corpus")),
        ("subclasses of EvalpipeError", RelationIntent("inherited_by", "EvalpipeError")),
        ("which modules import the trec module", RelationIntent("imported_by", "trec")),
        ("methods of the Corpus class", RelationIntent("contains", "Corpus")),
        ("combine two configuration layers", None),
        (
            "what calls the function that merges ranked lists",
            RelationIntent("called_by", "merges ranked lists", described=True),
        ),
        (
            "which methods belong to the class that turns titles into anchors",
            RelationIntent("contains", "turns titles into anchors", described=True),
        ),
        (
            "which modules import the one that defines the tokenizer",
            RelationIntent("imported_by", "defines the tokenizer", described=True),
        ),
        # a long "target" is a sentence, not a symbol
        (
            "automatically record the arguments every subclass constructor was called with so they "
            "can identify its built state",
            None,
        ),
    ],
)
def test_detect_relation(query, expected):
    assert detect_relation(query) == expected
