"""winnow (fan-in re-scoring) on a toy source tree, grep (match quality) on toy units (issue 12)."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest

from evalpipe.core import Hit, Unit
from evalpipe.corpus import Corpus
from evalpipe.corpus.build import build_corpus
from evalpipe.rankers.lexical.grep import GrepRanker
from evalpipe.rankers.lexical.winnow import WinnowRanker, fan_in

STORE = '''
def open_store(path):
    """Open the store."""
    return Store(path)


class Store:
    def add_item(self, item):
        return save(item)


def save(item):
    return item
'''

CLI = """
from pkg.store import open_store, save


def main():
    open_store("x")
    save(1)


def helper():
    save(2)
"""


@pytest.fixture
def tree(tmp_path: Path) -> Corpus:
    for rel, text in {"pkg/__init__.py": "", "pkg/store.py": STORE, "pkg/cli.py": CLI}.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return Corpus(build_corpus(tmp_path))


class FixedBase:
    def __init__(self, hits: list[Hit]):
        self.hits = hits

    def search(self, query, k, constraints=None):
        return self.hits[:k]


def test_fan_in_counts_distinct_callers_and_importers(tree):
    counts = dict(zip(tree.ids, fan_in(tree), strict=True))
    # save: called by Store.add_item, main, helper; open_store: by main; Store: by open_store;
    # pkg/store.py: imported by pkg/cli.py
    assert counts["pkg/store.py::save"] == 3
    assert counts["pkg/store.py::open_store"] == 1
    assert counts["pkg/store.py::Store"] == 1
    assert counts["pkg/store.py"] == 1
    assert counts["pkg/cli.py::main"] == 0


def test_winnow_breaks_relevance_ties_by_fan_in(tree):
    base = FixedBase(
        [Hit("pkg/cli.py::helper", 2.0), Hit("pkg/store.py::open_store", 2.0), Hit("pkg/store.py::save", 1.0)]
    )
    ranker = WinnowRanker(base, fan_in_weight=0.2)
    ranker.prepare(tree)
    hits = ranker.search("store", 10)
    # rel = score / top: helper 1, open_store 1, save 0.5; + 0.2 * ln(1 + fan_in) / ln(1 + 3)
    assert [h.id for h in hits] == ["pkg/store.py::open_store", "pkg/cli.py::helper", "pkg/store.py::save"]
    assert [h.score for h in hits] == pytest.approx([1 + 0.2 * math.log(2) / math.log(4), 1.0, 0.5 + 0.2])
    # the constraint filter applies to the re-scored list
    assert [h.id for h in ranker.search("store", 10, {"path_prefix": "pkg/cli"})] == ["pkg/cli.py::helper"]


def unit(uid: str, text: str, name: str = "", signature: str = "") -> Unit:
    meta = {"name": name or uid.split("::")[-1], "signature": signature}
    return Unit(id=uid, kind="function", text=text, metadata=meta)


GREP = Corpus(
    [
        unit("a.go::addItem", "func addItem() { AddItem(); AddItem() }", signature="func addItem()"),  # 0
        unit("b.go::AddItem", "func AddItem() {}", signature="func AddItem()"),  # 1
        unit("c.go::Sum", "total := AddItems(x)"),  # 2
        unit("d.go::Cache", "cache of items, cleared on add"),  # 3
    ]
)


@pytest.fixture(scope="module")
def grep() -> GrepRanker:
    ranker = GrepRanker()
    ranker.prepare(GREP)
    return ranker


def test_grep_grades_by_match_quality(grep):
    hits = grep.search("AddItem", 10)
    # b: its name (4.0). a: whole word twice in the text, not in its head -> 3 + 0.2 * 2/5.
    # c: "AddItems" is no whole word, but contains the query in any case -> 2 + 0.2 * 1/5.
    # d: no substring; word "additem" is not in it -> 0.
    assert [(h.id, round(h.score, 6)) for h in hits] == [
        ("b.go::AddItem", 4.0),
        ("a.go::addItem", 3.08),
        ("c.go::Sum", 2.04),
    ]


def test_grep_words_and_regex(grep):
    # no unit contains the phrase: share of the words {cache, items} found (any case)
    hits = grep.search("cache items", 10)
    assert [(h.id, h.score) for h in hits] == [("d.go::Cache", 1.0), ("c.go::Sum", 0.5)]
    rx = GrepRanker(regex=True)
    rx.prepare(GREP)
    # case-sensitive match 3.0 + count; `Add\w+s\b` matches only AddItems (in c's text)
    assert [(h.id, round(h.score, 6)) for h in rx.search(r"Add\w+s\b", 10)] == [("c.go::Sum", 3.04)]
    # an invalid regex is searched literally, without an error. b: in its signature (+0.3), and
    # twice in what grep sees (signature line + text): 3 + 0.3 + 0.2 * 2/5
    assert [(h.id, round(h.score, 6)) for h in rx.search("AddItem(", 10)] == [
        ("b.go::AddItem", 3.38),
        ("a.go::addItem", 3.08),
    ]
