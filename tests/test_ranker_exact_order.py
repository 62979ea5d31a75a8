"""Exact ranker ordering (issue 12): case first, declarations before tests and modules,
qualified names (`pkg.Name`, `Type.Method`, `path/file.go::Name`) and kind words.

Scores are worked out by hand from the grading in evalpipe.rankers.lexical.exact: a whole-query match
5.0 exact case / 4.0 any case, + 0.5 kind word, + 0.25 declaration outside tests, + 0.1
top-level symbol.
"""

from __future__ import annotations

import pytest

from evalpipe.core import Unit
from evalpipe.core.testpaths import is_test_path
from evalpipe.corpus import Corpus
from evalpipe.rankers.lexical.exact import ExactSymbolRanker, split_kind_words


def go(uid: str, kind: str) -> Unit:
    path, _, qualname = uid.partition("::")
    name = qualname.rsplit(".", 1)[-1] if qualname else path.rsplit("/", 1)[-1].removesuffix(".go")
    package = path.split("/")[0]
    meta = {"name": name, "qualname": qualname, "package": package}
    return Unit(id=uid, kind=kind, title=qualname or package, path=path, language="go", metadata=meta)


# Corpus order is alphabetical by path, so the test file comes before the declaration.
CORPUS = Corpus(
    [
        go("cache/cache.go", "module"),  # 0
        go("cache/cache.go::Cache", "type"),  # 1
        go("list/a_test.go::addItem", "function"),  # 2
        go("list/list.go::AddItem", "function"),  # 3
        go("store/store.go::Node", "type"),  # 4
        go("store/store.go::Store.AddNode", "method"),  # 5
        go("store/store.go::Store.cache", "method"),  # 6
    ]
)


@pytest.fixture(scope="module")
def exact() -> ExactSymbolRanker:
    ranker = ExactSymbolRanker(partial=False)
    ranker.prepare(CORPUS)
    return ranker


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # exact case wins, so the declaration beats the test helper that sorts first
        ("AddItem", [("list/list.go::AddItem", 5.35), ("list/a_test.go::addItem", 4.0)]),
        # ... and the other way round when the query is spelt like the helper (Go is case-sensitive)
        ("addItem", [("list/a_test.go::addItem", 5.0), ("list/list.go::AddItem", 4.35)]),
        # the type, then the method of another case, then the file (a module gets no bonus)
        (
            "Cache",
            [("cache/cache.go::Cache", 5.35), ("store/store.go::Store.cache", 4.25), ("cache/cache.go", 4.0)],
        ),
        # pkg.Name: the type Node of package store, never Store.AddNode
        ("store.Node", [("store/store.go::Node", 5.35)]),
        ("Store.AddNode", [("store/store.go::Store.AddNode", 5.25)]),
        ("store/store.go::Node", [("store/store.go::Node", 5.35)]),
        ("store.go::Node", [("store/store.go::Node", 5.35)]),
        # kind words: "type" boosts types (+0.5), "func" functions and methods
        (
            "type Cache",
            [("cache/cache.go::Cache", 5.85), ("store/store.go::Store.cache", 4.25), ("cache/cache.go", 4.0)],
        ),
        (
            "func cache",
            [("store/store.go::Store.cache", 5.75), ("cache/cache.go::Cache", 4.35), ("cache/cache.go", 4.0)],
        ),
        # a module is found by two or more path components
        ("cache/cache.go", [("cache/cache.go", 5.0)]),
    ],
)
def test_exact_ordering(exact, query, expected):
    hits = exact.search(query, 10)
    assert [(h.id, round(h.score, 6)) for h in hits] == expected


def test_kind_filter_drops_other_kinds():
    ranker = ExactSymbolRanker(partial=False, kind_filter=True)
    ranker.prepare(CORPUS)
    assert [h.id for h in ranker.search("method cache", 10)] == ["store/store.go::Store.cache"]


def test_python_module_qualified_names_from_a_corpus_without_the_field():
    units = Corpus(
        [
            Unit(
                id="src/evalpipe/rankers/base.py::top_k",
                kind="function",
                path="src/evalpipe/rankers/base.py",
                language="python",
                metadata={"name": "top_k", "qualname": "top_k", "module": "evalpipe.rankers.base"},
            ),
            Unit(
                id="src/evalpipe/other.py::top_k",
                kind="function",
                path="src/evalpipe/other.py",
                language="python",
                metadata={"name": "top_k", "qualname": "top_k", "module": "evalpipe.other"},
            ),
        ]
    )
    ranker = ExactSymbolRanker(partial=False)
    ranker.prepare(units)
    # both are exact on `top_k`; only one is `base.top_k`
    assert [h.id for h in ranker.search("base.top_k", 5)] == ["src/evalpipe/rankers/base.py::top_k"]
    assert [h.id for h in ranker.search("evalpipe.other.top_k", 5)] == ["src/evalpipe/other.py::top_k"]


def test_helpers():
    assert split_kind_words("type Cache") == ("Cache", frozenset({"type", "class", "interface"}))
    assert split_kind_words("type") == ("type", frozenset())
    assert [is_test_path(p) for p in ("a/b_test.go", "tests/x.py", "web/a.spec.ts", "src/testing.py")] == [
        True,
        True,
        True,
        False,
    ]
