"""Property-based: every spelling of an identifier finds it, in every lexical ranker.

Hypothesis draws a small corpus of functions with distinct generated names (two or three
words, including words ending in -ed, -s and -ing, which the stemmer changes), picks one as
the target, and asks for it in every spelling a developer types: camelCase, PascalCase,
snake_case, UPPER_SNAKE, kebab-case, all lowercase run together, space-separated, and inside
a sentence. Where the target's name is unique (its key differs from every other unit's), the
target must be the first hit of `bm25`, `bm25f`, `exact`, `winnow` (over `bm25f`) and `graph`
(over `bm25`). `grep` is a literal baseline, so it is held only to the spellings a literal
search can match: the name as written and its lowercase.
"""

from __future__ import annotations

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from evalpipe.core import Unit  # noqa: E402
from evalpipe.corpus import Corpus  # noqa: E402
from evalpipe.rankers.lexical.bm25 import BM25Ranker  # noqa: E402
from evalpipe.rankers.lexical.bm25f import BM25FRanker  # noqa: E402
from evalpipe.rankers.lexical.exact import ExactSymbolRanker  # noqa: E402
from evalpipe.rankers.lexical.grep import GrepRanker  # noqa: E402
from evalpipe.rankers.lexical.winnow import WinnowRanker  # noqa: E402
from evalpipe.rankers.structure.graph import GraphRanker  # noqa: E402
from evalpipe.rankers.tokenize import identifier_key  # noqa: E402

#: Name words: plain, and inflected forms the English stemmer changes.
WORDS = (
    "register",
    "registered",
    "handlers",
    "handler",
    "parse",
    "parsing",
    "config",
    "settings",
    "merged",
    "load",
    "loading",
    "cache",
    "entries",
    "file",
    "ops",
    "request",
    "retries",
    "token",
    "counts",
    "index",
    "built",
    "query",
    "plans",
    "stream",
    "writer",
)
FILLER = [
    "the",
    "value",
    "is",
    "returned",
    "to",
    "the",
    "caller",
    "after",
    "it",
    "is",
    "checked",
    "and",
    "stored",
]


def camel(words: list[str]) -> str:
    return words[0] + "".join(w.capitalize() for w in words[1:])


SPELLINGS = {
    "camel": camel,
    "pascal": lambda ws: "".join(w.capitalize() for w in ws),
    "snake": "_".join,
    "upper_snake": lambda ws: "_".join(ws).upper(),
    "kebab": "-".join,
    "lowercase": "".join,
    "spaced": " ".join,
}

names = st.lists(st.sampled_from(WORDS), min_size=2, max_size=3, unique=True)


@st.composite
def corpora(draw):
    """(corpus, target words, target's written name): distinct keys, the target unique."""
    all_names = draw(st.lists(names, min_size=3, max_size=8, unique_by=lambda ws: "".join(ws)))
    styles = draw(st.lists(st.sampled_from(["camel", "snake", "pascal"]), min_size=len(all_names)))
    target = draw(st.integers(0, len(all_names) - 1))
    units = []
    for i, words in enumerate(all_names):
        written = SPELLINGS[styles[i % len(styles)]](words)
        body = f"def {written}(value):\n    # {' '.join(FILLER[i % 5 :])}\n    return value\n"
        units.append(
            Unit(
                id=f"pkg/mod{i}.py::{written}",
                kind="function",
                title=written,
                text=body,
                path=f"pkg/mod{i}.py",
                language="python",
                metadata={"name": written, "qualname": written},
            )
        )
    written = units[target].metadata["name"]
    return Corpus(units), all_names[target], written


def rankers() -> dict:
    return {
        "bm25": BM25Ranker(),
        "bm25f": BM25FRanker(),
        "exact": ExactSymbolRanker(),
        "winnow": WinnowRanker(base=BM25FRanker()),
        "graph": GraphRanker(base=BM25Ranker(), intent=True),
    }


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(corpora(), st.sampled_from(sorted(SPELLINGS)))
def test_every_spelling_finds_a_unique_name_first(drawn, spelling):
    corpus, words, written = drawn
    target = next(u.id for u in corpus if u.metadata["name"] == written)
    assert sum(identifier_key(u.metadata["name"]) == identifier_key(written) for u in corpus) == 1
    query = SPELLINGS[spelling](words)
    for name, ranker in rankers().items():
        ranker.prepare(corpus)
        hits = ranker.search(query, 5)
        assert hits and hits[0].id == target, (name, query, [h.id for h in hits])


@SETTINGS
@given(corpora(), st.sampled_from(["camel", "snake", "lowercase", "kebab"]))
def test_a_spelling_inside_a_sentence_finds_it_in_the_top_3(drawn, spelling):
    """In a sentence the other words also score, so the bound is the top 3, not rank 1."""
    corpus, words, written = drawn
    target = next(u.id for u in corpus if u.metadata["name"] == written)
    query = f"where is {SPELLINGS[spelling](words)} defined"
    for name, ranker in rankers().items():
        ranker.prepare(corpus)
        ids = [h.id for h in ranker.search(query, 3)]
        assert target in ids, (name, query, ids)


@SETTINGS
@given(corpora(), st.booleans())
def test_grep_finds_the_literal_name_and_its_lowercase(drawn, lower):
    corpus, _words, written = drawn
    target = next(u.id for u in corpus if u.metadata["name"] == written)
    ranker = GrepRanker()
    ranker.prepare(corpus)
    query = written.lower() if lower else written
    hits = ranker.search(query, 5)
    # any unit whose text contains the query (case-insensitive) is a literal match; the
    # target's own name line must be among the best of them
    assert target in [h.id for h in hits if h.score == hits[0].score], (query, hits)
