"""The module prior: a module unit ranks just below the best definition of its own file."""

from __future__ import annotations

import numpy as np
import pytest

from evalpipe.core import Unit
from evalpipe.corpus import Corpus
from evalpipe.rankers.lexical.bm25 import BM25Ranker
from evalpipe.rankers.lexical.bm25f import BM25FRanker
from evalpipe.rankers.priors.module_prior import ModulePrior, asks_for_modules, check_mode

UNITS = [
    # one-function-per-file: the module repeats its function's words (imports, re-export)
    Unit(
        "src/debounce.ts",
        "module",
        "debounce.ts",
        "debounce debounce time debounce operator import",
        path="src/debounce.ts",
    ),
    Unit(
        "src/debounce.ts::debounce",
        "function",
        "debounce",
        "debounce emits after a quiet time",
        path="src/debounce.ts",
    ),
    Unit(
        "src/other.ts",
        "module",
        "other.ts",
        "debounce mention only in a module without definitions",
        path="src/other.ts",
    ),
    Unit("src/map.ts::map", "function", "map", "map applies a function to each value", path="src/map.ts"),
]


def corpus() -> Corpus:
    return Corpus(UNITS, name="modules")


def test_check_mode():
    assert check_mode("r", None) == "off" and check_mode("r", False) == "off"
    assert check_mode("r", True) == "below_definitions"
    with pytest.raises(ValueError, match="module_prior must be one of below_definitions, off"):
        check_mode("r", "first")


@pytest.mark.parametrize(
    ("query", "asks"),
    [("which module imports debounce", True), ("the file that defines map", True), ("debounce time", False)],
)
def test_asks_for_modules(query, asks):
    assert asks_for_modules(query) is asks


def test_scores_move_a_module_just_below_its_files_best_definition():
    prior = ModulePrior(corpus())
    # rows: 0 module with a definition, 1 its definition, 2 module without definitions, 3 another function
    assert prior.module_rows.tolist() == [0]
    scores = np.array([3.0, 2.0, 5.0, 1.0])
    out = prior.demote(scores, "debounce time", "below_definitions")
    assert out[0] == np.nextafter(2.0, 0.0) and out[0] < out[1]  # just below its definition
    assert out[1:].tolist() == [2.0, 5.0, 1.0]  # the file-less module and the others keep their scores
    assert prior.demote(scores, "debounce time", "off") is scores
    assert prior.demote(scores, "which module has debounce", "below_definitions") is scores
    # a module under its definition already, or whose definition does not match, is left alone
    assert prior.demote(np.array([1.0, 2.0, 0.0, 0.0]), "q", "below_definitions")[0] == 1.0
    assert prior.demote(np.array([3.0, 0.0, 0.0, 0.0]), "q", "below_definitions")[0] == 3.0


def test_fused_lists_move_the_module_and_its_rank_below_the_definition():
    c = corpus()
    prior = ModulePrior(c)
    fused = {"src/debounce.ts": (0.9, 1), "src/debounce.ts::debounce": (0.8, 2), "src/map.ts::map": (0.1, 3)}
    out = prior.demote_fused(fused, c.index_of, "debounce", "below_definitions")
    assert out["src/debounce.ts"] == (float(np.nextafter(0.8, 0.0)), 3)
    assert out["src/debounce.ts::debounce"] == (0.8, 2) and out["src/map.ts::map"] == (0.1, 3)


@pytest.mark.parametrize("cls", [BM25Ranker, BM25FRanker])
def test_lexical_rankers_rank_the_definition_first_when_on(cls):
    c = corpus()
    off = cls(module_prior="off")
    off.prepare(c)
    on = cls(module_prior="below_definitions")
    on.prepare(c)
    before = [h.id for h in off.search("time operator", 4)]
    after = [h.id for h in on.search("time operator", 4)]
    # the module has both words, its function only "time": without the prior the module comes first
    assert before.index("src/debounce.ts") < before.index("src/debounce.ts::debounce")
    assert after.index("src/debounce.ts::debounce") == after.index("src/debounce.ts") - 1
    assert [h.id for h in on.search("module time operator", 4)][:2] == [
        h.id for h in off.search("module time operator", 4)
    ][:2]
