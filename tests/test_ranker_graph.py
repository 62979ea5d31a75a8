"""Graph expansion order worked out by hand, and Hydra composition of the nested base ranker."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from evalpipe.core import Hit, Unit
from evalpipe.corpus import Corpus
from evalpipe.rankers.lexical.bm25 import BM25Ranker
from evalpipe.rankers.lexical.exact import ExactSymbolRanker
from evalpipe.rankers.structure.graph import GraphRanker

CONF_RANKER = Path(__file__).resolve().parents[1] / "conf" / "ranker"

# A (module) contains B and C;  B calls D (and an unresolved os.path.join);  D calls E;  F calls E.
GRAPH = Corpus(
    [
        Unit(id="A", kind="module", relations={"contains": ("B", "C")}),
        Unit(id="B", kind="function", text="alpha", relations={"calls": ("D", "os.path.join")}),
        Unit(id="C", kind="function"),
        Unit(id="D", kind="function", relations={"calls": ("E",)}),
        Unit(id="E", kind="function"),
        Unit(id="F", kind="function", text="beta", relations={"calls": ("E",)}),
    ]
)


class FixedRanker:
    """A base ranker returning fixed scores (B 4.0, F 2.0), honouring k and constraints."""

    def __init__(self):
        self.prepared = None

    def prepare(self, corpus: Corpus) -> None:
        self.prepared = corpus

    def search(self, query, k, constraints=None):
        hits = [Hit("B", 4.0), Hit("F", 2.0)]
        return [h for h in hits if self.prepared.allows(h.id, constraints)][:k]


def graph(**kw) -> GraphRanker:
    ranker = GraphRanker(base=FixedRanker(), **kw)
    ranker.prepare(GRAPH)
    return ranker


def ranked(ranker: GraphRanker, k: int = 10, constraints=None, query: str = "q") -> list[tuple[str, float]]:
    return [(h.id, round(h.score, 6)) for h in ranker.search(query, k, constraints)]


def test_expansion_with_decay_max():
    # Seeds normalised by the top score: B 4/4 = 1.0, F 2/4 = 0.5. decay 0.5, hops 2.
    # From B: hop 1 A (contained_by), D (calls) = 0.5; hop 2 C (A contains) and E (D calls) = 0.25.
    # From F: hop 1 E = 0.25; hop 2 D (E called_by) = 0.125.
    # max: A 0.5, D max(0.5, 0.125) = 0.5, F 0.5, C 0.25, E max(0.25, 0.25) = 0.25.
    # Ties at 0.5 (A, D, F) and 0.25 (C, E) break by corpus order.
    assert ranked(graph()) == [("B", 1.0), ("A", 0.5), ("D", 0.5), ("F", 0.5), ("C", 0.25), ("E", 0.25)]
    assert [i for i, _ in ranked(graph(), k=3)] == ["B", "A", "D"]


def test_expansion_with_sum():
    # sum: D 0.5 + 0.125 = 0.625; E 0.25 + 0.25 = 0.5; A 0.5; F 0.5; C 0.25.
    assert ranked(graph(combine="sum")) == [
        ("B", 1.0),
        ("D", 0.625),
        ("A", 0.5),
        ("E", 0.5),
        ("F", 0.5),
        ("C", 0.25),
    ]


def test_hops_decay_and_seed_count():
    # hops 1: only direct neighbours. B -> A, D at 0.5; F -> E at 0.25.
    assert ranked(graph(hops=1)) == [("B", 1.0), ("A", 0.5), ("D", 0.5), ("F", 0.5), ("E", 0.25)]
    # seeds 1: F is kept at its own score but not expanded, so E is not reached in one hop.
    assert ranked(graph(hops=1, seeds=1)) == [("B", 1.0), ("A", 0.5), ("D", 0.5), ("F", 0.5)]
    # decay 0.8, hops 1: B's neighbours 0.8, F's neighbour E 0.5*0.8 = 0.4; A, D outrank F now.
    assert ranked(graph(hops=1, decay=0.8)) == [("B", 1.0), ("A", 0.8), ("D", 0.8), ("F", 0.5), ("E", 0.4)]
    # hops 0 is the base ranking
    assert ranked(graph(hops=0)) == [("B", 1.0), ("F", 0.5)]


def test_relations_filter_and_reverse_edges():
    # Without contained_by, B cannot reach A, nor C through A.
    got = ranked(graph(relations=["calls", "called_by"]))
    assert got == [("B", 1.0), ("D", 0.5), ("F", 0.5), ("E", 0.25)]
    # Only called_by: B has no callers, F has none either: the base ranking.
    assert ranked(graph(relations=["called_by"])) == [("B", 1.0), ("F", 0.5)]


def test_winnow_traverses_but_never_returns_excluded_units():
    # kind=function excludes module A, yet C is still reached through A (B -> A -> C).
    got = ranked(graph(), constraints={"kind": "function"})
    assert got == [("B", 1.0), ("D", 0.5), ("F", 0.5), ("C", 0.25), ("E", 0.25)]


def test_graph_stats_params_and_empty_base():
    ranker = graph()
    stats = ranker.stats()
    # forward edges A->B, A->C, B->D, D->E, F->E (+ their reverses) with calls/called_by/contains/contained_by
    assert stats["graph_edges"] == 10
    assert stats["unresolved_targets"] == 1
    assert ranker.base.prepared is GRAPH
    assert ranker.search("q", 0) == []
    with pytest.raises(ValueError, match="unknown relations \\['friends'\\]"):
        GraphRanker(base=FixedRanker(), relations=["friends"])
    with pytest.raises(ValueError, match="combine"):
        GraphRanker(base=FixedRanker(), combine="avg")
    with pytest.raises(ValueError, match="decay"):
        GraphRanker(base=FixedRanker(), decay=0.0)


def test_graph_over_bm25_base():
    ranker = GraphRanker(base=BM25Ranker(stemmer=None, stopwords=None, fields=["text"]), hops=1)
    ranker.prepare(GRAPH)
    # BM25 finds only B ("alpha"); one hop adds A and D at 0.5.
    assert ranked(ranker, query="alpha") == [("B", 1.0), ("A", 0.5), ("D", 0.5)]
    assert ranked(ranker, query="gamma") == []
    assert ranker.stats()["base_index_units"] == 6


@pytest.fixture
def conf_dir(tmp_path: Path) -> Path:
    shutil.copytree(CONF_RANKER, tmp_path / "ranker")
    (tmp_path / "config.yaml").write_text("defaults:\n  - ranker: graph\n  - _self_\n", encoding="utf-8")
    return tmp_path


def test_hydra_graph_nests_bm25_base(conf_dir: Path):
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["ranker.base.k1=0.9", "ranker.hops=1"])
    assert cfg.ranker.base._target_ == "evalpipe.rankers.lexical.bm25.BM25Ranker"
    ranker = instantiate(cfg.ranker)
    assert isinstance(ranker, GraphRanker)
    assert isinstance(ranker.base, BM25Ranker)
    assert (ranker.base.k1, ranker.base.b, ranker.hops) == (0.9, 0.75, 1)
    assert ranker.relations == ("calls", "called_by", "contains", "contained_by", "inherits", "imports")


@pytest.mark.parametrize(("name", "cls"), [("bm25", BM25Ranker), ("exact", ExactSymbolRanker)])
def test_hydra_instantiates_each_ranker(conf_dir: Path, name, cls):
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"ranker={name}"])
    ranker = instantiate(cfg.ranker)
    assert type(ranker) is cls
    assert ranker.min_score is None


def test_graph_ranker_reused_index_prepares_its_base():
    """A second GraphRanker with the same index settings (e.g. another min_score in a sweep)
    restores the memoised graph and must still have a prepared base ranker."""
    from evalpipe.core import Unit
    from evalpipe.corpus import Corpus
    from evalpipe.rankers.lexical.bm25 import BM25Ranker
    from evalpipe.rankers.structure.graph import GraphRanker

    corpus = Corpus(
        [
            Unit("m.py::a", "function", "a", "alpha parses input", relations={"calls": ("m.py::b",)}),
            Unit("m.py::b", "function", "b", "beta writes output"),
        ]
    )
    first = GraphRanker(base=BM25Ranker())
    first.prepare(corpus)
    second = GraphRanker(base=BM25Ranker(), min_score=0.0)
    second.prepare(corpus)
    assert second.index_reused and second.base.index_reused
    # 'alpha' seeds a (score 1 after normalising); b is one 'calls' hop away: 1 * decay 0.5.
    hits = second.search("alpha", 5)
    assert [h.id for h in hits] == ["m.py::a", "m.py::b"]
    assert [h.score for h in hits] == pytest.approx([1.0, 0.5])
