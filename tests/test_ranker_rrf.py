"""RRFRanker: fused scores against ranx and by hand, tie-breaks, unavailable components, Hydra config."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from evalpipe.core import Hit, Unit
from evalpipe.corpus import Corpus
from evalpipe.rankers.base import RankerUnavailable
from evalpipe.rankers.fusion.rrf import RRFRanker, rrf_fuse
from evalpipe.rankers.plugin_example import KeywordOverlapRanker

CONF = Path(__file__).resolve().parents[1] / "conf"
CORPUS = Corpus(
    [Unit(uid, "document", path=f"{'a' if i % 2 == 0 else 'b'}/{uid}") for i, uid in enumerate("pqrstuvwxyz")]
)


class FixedRanker:
    """Returns a fixed list per query (masked by the corpus like a CorpusRanker), recording its calls."""

    def __init__(self, lists: Mapping[str, list[str]], stats: Mapping[str, Any] | None = None, **_: Any):
        self.lists = lists
        self._stats = dict(stats or {})
        self.corpus: Corpus | None = None
        self.calls: list[tuple[str, int, Any]] = []

    def prepare(self, corpus: Corpus) -> None:
        self.corpus = corpus

    def search(self, query: str, k: int, constraints: Mapping[str, Any] | None = None) -> list[Hit]:
        self.calls.append((query, k, constraints))
        ids = self.lists.get(query, [])
        if self.corpus is not None and constraints:
            ids = [i for i in ids if self.corpus.allows(i, constraints)]
        return [Hit(i, float(100 - n)) for n, i in enumerate(ids[:k])]

    def stats(self) -> dict[str, Any]:
        return self._stats


class StubRanker:
    """Accepts any config params (stands in for a real ranker when instantiating composed configs)."""

    def __init__(self, **params: Any):
        self.params = params

    def search(self, query: str, k: int, constraints: Mapping[str, Any] | None = None) -> list[Hit]:
        return []


class Unavailable(FixedRanker):
    def prepare(self, corpus: Corpus) -> None:
        raise RankerUnavailable("model not installed")


def fused(ranker: RRFRanker, query: str, k: int = 100, constraints=None) -> list[tuple[str, float]]:
    return [(h.id, h.score) for h in ranker.search(query, k, constraints)]


RUNS = {
    "a": {"q1": ["p", "q", "r", "s"], "q2": ["t", "u", "v"]},
    "b": {"q1": ["r", "p", "t"], "q2": ["v", "w", "t", "x"]},
    "c": {"q1": ["s", "r", "u", "p", "v"], "q2": ["u"]},
}


def test_unweighted_fusion_matches_ranx():
    ranx = pytest.importorskip("ranx", reason="ranx not installed (pip install 'evalpipe[dev]')")
    runs = [
        ranx.Run({q: {d: 100.0 - i for i, d in enumerate(ids)} for q, ids in lists.items()}, name=n)
        for n, lists in RUNS.items()
    ]
    expected = ranx.fuse(runs, norm=None, method="rrf", params={"k": 60}).to_dict()
    r = RRFRanker({n: FixedRanker(lists) for n, lists in RUNS.items()}, k=60)
    r.prepare(CORPUS)
    for q in ("q1", "q2"):
        got = fused(r, q)
        assert {d: pytest.approx(s, rel=1e-12) for d, s in expected[q].items()} == dict(got)
        ranx_order = sorted(expected[q], key=lambda d: -expected[q][d])
        assert [d for d, _ in got] == ranx_order  # no exact ties in these runs


def test_unweighted_fusion_by_hand():
    # q1: p ranks a1 b2 c4 -> 1/61+1/62+1/64; r ranks a3 b1 c2 -> 1/63+1/61+1/62.
    r = RRFRanker({n: FixedRanker(lists) for n, lists in RUNS.items()}, k=60)
    r.prepare(CORPUS)
    got = dict(fused(r, "q1"))
    assert got["p"] == pytest.approx(1 / 61 + 1 / 62 + 1 / 64)
    assert got["r"] == pytest.approx(1 / 63 + 1 / 61 + 1 / 62)
    assert got["q"] == pytest.approx(1 / 62)


def test_weights_change_the_order_as_computed_by_hand():
    # a: [x, y], b: [y, z, x].  Unweighted: x = 1/61 + 1/63 = .032266, y = 1/62 + 1/61 = .032522 -> y first.
    # Weights a=3: x = 3/61 + 1/63 = .065054, y = 3/62 + 1/61 = .064781, z = 1/62 = .016129 -> x, y, z.
    comps = lambda: {"a": FixedRanker({"q": ["x", "y"]}), "b": FixedRanker({"q": ["y", "z", "x"]})}  # noqa: E731
    plain = RRFRanker(comps())
    plain.prepare(CORPUS)
    assert [d for d, _ in fused(plain, "q")] == ["y", "x", "z"]
    weighted = RRFRanker(comps(), weights={"a": 3})
    weighted.prepare(CORPUS)
    got = fused(weighted, "q")
    assert [d for d, _ in got] == ["x", "y", "z"]
    assert [s for _, s in got] == pytest.approx([3 / 61 + 1 / 63, 3 / 62 + 1 / 61, 1 / 62])


def test_depth_limits_counted_ranks_but_never_truncates_k():
    comps = {"a": FixedRanker({"q": ["p", "q", "r", "s"]}), "b": FixedRanker({"q": ["s"]})}
    r = RRFRanker(comps, depth=2)
    r.prepare(CORPUS)
    # depth 2: a contributes p, q only; s comes from b alone.
    assert dict(fused(r, "q", k=2)) == pytest.approx({"p": 1 / 61, "s": 1 / 61})
    assert comps["a"].calls[-1][1] == 2
    # asking for k=4 > depth fetches 4 per component, so s gets a's rank 4 too.
    got = dict(fused(r, "q", k=4))
    assert comps["a"].calls[-1][1] == 4
    assert got["s"] == pytest.approx(1 / 61 + 1 / 64)


def test_ties_break_by_best_rank_then_corpus_order():
    # Mirrored ranks -> equal fsum scores and equal best rank: corpus order decides (q before r in CORPUS).
    r = RRFRanker({"a": FixedRanker({"q": ["r", "q"]}), "b": FixedRanker({"q": ["q", "r"]})})
    r.prepare(CORPUS)
    got = fused(r, "q")
    assert got[0][1] == got[1][1] and [d for d, _ in got] == ["q", "r"]
    # k=0: u at rank 2 in a -> 1/2; p at rank 4 in b and c -> 1/4 + 1/4 = 1/2 exactly.
    # Equal scores; u's best rank (2) beats p's (4) although p comes first in the corpus.
    comps = {
        "a": FixedRanker({"q": ["s", "u"]}),
        "b": FixedRanker({"q": ["t", "v", "w", "p"]}),
        "c": FixedRanker({"q": ["x", "y", "z", "p"]}),
    }
    r = RRFRanker(comps, k=0)
    r.prepare(CORPUS)
    ids = [d for d, _ in fused(r, "q")]
    assert ids.index("u") < ids.index("p")
    assert dict(fused(r, "q"))["u"] == dict(fused(r, "q"))["p"] == 0.5


def test_fsum_makes_mirrored_three_way_ties_exact():
    runs = {
        "a": [Hit("x"), Hit("y"), Hit("z")],
        "b": [Hit("y"), Hit("z"), Hit("x")],
        "c": [Hit("z"), Hit("x"), Hit("y")],
    }
    scores = {d: s for d, (s, _) in rrf_fuse(runs, k=60).items()}
    assert scores["x"] == scores["y"] == scores["z"]


def test_constraints_are_passed_down_and_enforced():
    a = FixedRanker({"q": ["p", "q", "r", "s"]})
    leaky = KeywordOverlapRankerStandIn(["q", "p"])  # a plug-in that ignores constraints
    r = RRFRanker({"a": a, "leaky": leaky})
    r.prepare(CORPUS)
    hits = fused(r, "q", constraints={"path_prefix": "a/"})
    assert a.calls[-1][2] == {"path_prefix": "a/"}
    assert leaky.constraints == {"path_prefix": "a/"}
    # CORPUS paths: p, r, t, ... are under a/ (even positions); q, s under b/.
    assert [d for d, _ in hits] == ["p", "r"]


class KeywordOverlapRankerStandIn:
    def __init__(self, ids: list[str]):
        self.ids = ids
        self.constraints: Any = None

    def search(self, query: str, k: int, constraints: Mapping[str, Any] | None = None) -> list[Hit]:
        self.constraints = constraints
        return [Hit(i) for i in self.ids[:k]]


def test_unavailable_component_fails_unless_allowed():
    comps = lambda: {"bm25": FixedRanker({"q": ["p", "q"]}), "semantic": Unavailable({})}  # noqa: E731
    with pytest.raises(RankerUnavailable, match="component 'semantic' unavailable: model not installed"):
        RRFRanker(comps()).prepare(CORPUS)
    r = RRFRanker(comps(), allow_skipped_components=True)
    r.prepare(CORPUS)
    assert [h.id for h in r.search("q", 10)] == ["p", "q"]
    assert [h.score for h in r.search("q", 10)] == pytest.approx([1 / 61, 1 / 62])
    assert r.stats()["skipped_components"] == "semantic"
    assert r.stats()["semantic.unavailable"] == "model not installed"
    with pytest.raises(RankerUnavailable, match="every component"):
        RRFRanker({"s": Unavailable({})}, allow_skipped_components=True).prepare(CORPUS)


def test_stats_are_prefixed_by_component_name():
    r = RRFRanker(
        {
            "bm25": FixedRanker({}, stats={"index_seconds": 0.5}),
            "semantic": FixedRanker({}, stats={"index_seconds": 2.0, "cache_hit": True}),
        }
    )
    r.prepare(CORPUS)
    assert r.stats() == {
        "components": "bm25,semantic",
        "bm25.index_seconds": 0.5,
        "semantic.index_seconds": 2.0,
        "semantic.cache_hit": True,
    }


def test_bad_configuration_is_rejected():
    with pytest.raises(ValueError, match="unknown components"):
        RRFRanker({"a": FixedRanker({})}, weights={"b": 1})
    with pytest.raises(ValueError, match="no components"):
        RRFRanker({})
    with pytest.raises(ValueError, match="no search"):
        RRFRanker({"a": object()})


def test_min_score_and_search_case_delegation():
    class ByCase(FixedRanker):
        def search_case(self, case_id, query, k, constraints=None):
            return [Hit(case_id)]

    r = RRFRanker({"a": FixedRanker({"q": ["p", "q"]}), "run": ByCase({})}, min_score=1 / 61.5)
    r.prepare(CORPUS)
    # search_case passes the case id to the replaying component: "s" gets 1/61 from it.
    assert [h.id for h in r.search_case("s", "q", 10)] == ["p", "s"]  # q (1/62) is below min_score
    assert [h.id for h in r.search("q", 10)] == ["p"]


def test_plugin_example_ranks_by_overlap_and_fuses(tmp_path):
    docs = tmp_path / "docs.jsonl"
    rows = [
        {"id": "p", "title": "parse json", "text": "read a json file", "path": "a/p"},
        {"id": "q", "title": "write csv", "text": "json to csv", "path": "b/q"},
        {"id": "r", "title": "http client", "text": "get a url", "path": "a/r"},
    ]
    docs.write_text("".join(json.dumps(row) + "\n" for row in rows))
    plugin = KeywordOverlapRanker(str(docs))
    # query words {parse, json, file}: p has all 3 -> 1.0, q has json -> 1/3, r none -> dropped.
    assert plugin.search("parse JSON file", 5) == [Hit("p", 1.0), Hit("q", pytest.approx(1 / 3))]
    assert plugin.search("parse JSON file", 5, {"path_prefix": "b/"}) == [Hit("q", pytest.approx(1 / 3))]
    r = RRFRanker({"plugin": plugin, "a": FixedRanker({"parse JSON file": ["r", "q"]})})
    r.prepare(CORPUS)  # the plug-in has no prepare(); RRF must cope
    # q: rank 2 in both -> 2/62; p (plug-in rank 1) and r (a rank 1) tie at 1/61: corpus order puts p first.
    got = fused(r, "parse JSON file")
    assert [d for d, _ in got] == ["q", "p", "r"]
    assert [s for _, s in got] == pytest.approx([2 / 62, 1 / 61, 1 / 61])


# -- Hydra configs ----------------------------------------------------------------------------------

BM25_STANDIN = "_target_: evalpipe.rankers.lexical.bm25.BM25Ranker\nk1: 1.5\nb: 0.75\nmin_score: null\n"


@pytest.fixture()
def config_dir(tmp_path):
    (tmp_path / "ranker").mkdir()
    for f in (CONF / "ranker").glob("*.yaml"):
        shutil.copy(f, tmp_path / "ranker" / f.name)
    if not (tmp_path / "ranker" / "bm25.yaml").exists():
        (tmp_path / "ranker" / "bm25.yaml").write_text(BM25_STANDIN)
    (tmp_path / "config.yaml").write_text("defaults:\n  - ranker: rrf\n  - _self_\n")
    return tmp_path


def _compose(config_dir: Path, overrides: list[str]):
    hydra = pytest.importorskip("hydra")
    with hydra.initialize_config_dir(str(config_dir), version_base="1.3"):
        return hydra.compose("config", overrides=overrides)


def test_rrf_config_nests_bm25_and_semantic(config_dir):
    cfg = _compose(config_dir, [])
    assert list(cfg.ranker.components) == ["bm25", "semantic"]
    assert cfg.ranker.components.bm25._target_ == "evalpipe.rankers.lexical.bm25.BM25Ranker"
    assert cfg.ranker.components.semantic._target_ == "evalpipe.rankers.dense.semantic.SemanticRanker"
    assert cfg.ranker._target_ == "evalpipe.rankers.fusion.rrf.RRFRanker"
    assert (cfg.ranker.k, cfg.ranker.depth, cfg.ranker.weights) == (60, 100, None)
    assert "components" not in cfg  # the package is relative to `ranker`, not the root


def test_rrf_config_overrides_and_instantiation(config_dir):
    from hydra.utils import instantiate

    from evalpipe.rankers.dense.semantic import SemanticRanker

    cfg = _compose(
        config_dir,
        [
            "ranker.k=10",
            "ranker.weights={bm25:2,semantic:1}",
            "ranker.components.semantic.batch_size=8",
            f"ranker.components.bm25._target_={__name__}.StubRanker",
        ],
    )
    assert cfg.ranker.k == 10 and dict(cfg.ranker.weights) == {"bm25": 2, "semantic": 1}
    r = instantiate(cfg.ranker)  # cheap: no component loads anything before prepare()
    assert isinstance(r, RRFRanker) and r.k == 10 and r.weights == {"bm25": 2.0, "semantic": 1.0}
    assert list(r.components) == ["bm25", "semantic"]
    assert isinstance(r.components["bm25"], StubRanker)
    assert isinstance(r.components["semantic"], SemanticRanker) and r.components["semantic"].batch_size == 8


@pytest.mark.parametrize(
    ("name", "overrides", "cls"),
    [
        ("semantic", [], "SemanticRanker"),
        ("runfile", ["ranker.path=runs/x.trec"], "RunFileRanker"),
        ("plugin_example", ["ranker.path=docs.jsonl"], "KeywordOverlapRanker"),
    ],
)
def test_other_ranker_configs_compose(config_dir, name, overrides, cls):
    cfg = _compose(config_dir, [f"ranker={name}", *overrides])
    assert cfg.ranker._target_.endswith(f".{cls}")
    if name == "semantic":
        from hydra.utils import instantiate

        assert type(instantiate(cfg.ranker)).__name__ == cls
