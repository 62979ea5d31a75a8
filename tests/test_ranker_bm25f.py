"""BM25F scores checked by hand on a toy corpus (issue 12)."""

from __future__ import annotations

import math

import pytest

from evalpipe.core import Unit
from evalpipe.corpus import Corpus
from evalpipe.rankers.lexical.bm25f import BM25FRanker, unit_bm25f_fields


def unit(uid: str, name: str, text: str) -> Unit:
    return Unit(id=uid, kind="function", title=name, text=text, metadata={"name": name})


# name field: parse | load | save (1 term each); body: 2, 3, 2 terms (average 7/3)
TOY = Corpus(
    [
        unit("u0", "parse", "read file"),
        unit("u1", "load", "parse parse file"),
        unit("u2", "save", "write file"),
    ]
)


@pytest.fixture(scope="module")
def ranker() -> BM25FRanker:
    r = BM25FRanker(
        weights={"name": 2.0, "body": 1.0}, b={"name": 0.0, "body": 0.5}, k1=1.2, stemmer=None, stopwords=None
    )
    r.prepare(TOY)
    return r


def test_bm25f_scores_by_hand(ranker):
    # "parse": df 2 of 3 -> idf ln(1 + 1.5/2.5) = ln 1.6.
    # u0: name tf 1 * weight 2 (b_name 0: no length normalisation) -> tf~ 2 -> 2/(1.2+2)
    # u1: body tf 2, norm 1 - 0.5 + 0.5 * 3/(7/3) = 8/7 -> tf~ 2 * 7/8 = 1.75 -> 1.75/2.95
    hits = ranker.search("parse", 10)
    assert [h.id for h in hits] == ["u0", "u1"]
    assert [h.score for h in hits] == pytest.approx([math.log(1.6) * 2 / 3.2, math.log(1.6) * 1.75 / 2.95])
    # "file": in every body, df 3 -> idf ln(1 + 0.5/3.5) = ln(8/7)
    # u0, u2: norm 0.5 + 0.5 * 2/(7/3) = 13/14 -> tf~ 14/13; u1: tf~ 7/8
    idf = math.log(8 / 7)
    hits = ranker.search("file", 10)
    assert [h.id for h in hits] == ["u0", "u2", "u1"]  # u0/u2 tie: corpus order
    assert [h.score for h in hits] == pytest.approx(
        [idf * (14 / 13) / (1.2 + 14 / 13), idf * (14 / 13) / (1.2 + 14 / 13), idf * 0.875 / 2.075]
    )
    # repeated query terms count once; terms absent from the corpus add nothing
    assert [h.score for h in ranker.search("parse parse quantum", 10)] == pytest.approx(
        [h.score for h in ranker.search("parse", 10)]
    )
    assert ranker.search("quantum", 10) == []


def test_zero_weight_fields_are_not_indexed():
    body_only = BM25FRanker(weights={"body": 1.0}, stemmer=None, stopwords=None)
    body_only.prepare(TOY)
    assert [h.id for h in body_only.search("parse", 10)] == ["u1"]
    assert body_only.stats()["fields"] == "body"


def test_fields_of_a_code_unit():
    u = Unit(
        id="src/pkg/base.py::Ranker.search",
        kind="method",
        text="def search(self)\n\nbody",
        path="src/pkg/base.py",
        language="python",
        metadata={
            "name": "search",
            "qualname": "Ranker.search",
            "module": "pkg.base",
            "signature": "def search(self)",
        },
    )
    fields = unit_bm25f_fields(u)
    assert fields["name"] == "search"
    assert fields["qualified"].splitlines() == [
        "Ranker.search",
        "pkg.base.Ranker.search",
        "src/pkg/base.py::Ranker.search",
    ]
    assert (fields["signature"], fields["docstring"], fields["path"]) == (
        "def search(self)",
        "",
        "src/pkg/base.py",
    )


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"weights": {"nmae": 1.0}}, "unknown field(s) ['nmae']"),
        ({"weights": {"name": 0.0}}, "not all 0"),
        ({"b": {"body": 1.5}}, "every b must be in [0, 1]"),
        ({"weights": {"name": "x"}}, "weights.name must be a number"),
    ],
)
def test_bad_parameters_name_the_parameter(kwargs, needle):
    with pytest.raises(ValueError) as info:
        BM25FRanker(**kwargs)
    assert needle in str(info.value)
