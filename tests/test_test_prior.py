"""The test-file prior: test units rank after non-test units unless the query asks for tests."""

from __future__ import annotations

import numpy as np
import pytest

from evalpipe.core import Unit
from evalpipe.core.testpaths import is_test_path
from evalpipe.core.unit import is_test_unit
from evalpipe.corpus import Corpus
from evalpipe.rankers.lexical.bm25 import BM25Ranker
from evalpipe.rankers.lexical.bm25f import BM25FRanker
from evalpipe.rankers.lexical.exact import ExactSymbolRanker
from evalpipe.rankers.lexical.grep import GrepRanker
from evalpipe.rankers.lexical.winnow import WinnowRanker
from evalpipe.rankers.priors import test_prior
from evalpipe.rankers.priors.test_prior import TestPrior, demote_rows, has_test_word
from evalpipe.rankers.structure import graph_structure


@pytest.mark.parametrize(
    ("path", "test"),
    [
        ("pkg/store/store_test.go", True),
        ("web/src/app.test.ts", True),
        ("web/src/app.spec.tsx", True),
        ("web/src/__tests__/app.ts", True),
        ("tests/test_x.py", True),
        ("pkg/test_util.py", True),
        ("pkg/util_test.py", True),
        ("src/conftest.py", True),
        ("internal/testdata/input.go", True),
        ("spec/models/user_spec.rb", True),
        ("src/test/java/com/x/StoreTest.java", True),
        ("src/testing.py", False),
        ("src/contest.py", False),
        ("pkg/attestation.go", False),
        ("docs/latest/index.md", False),
        ("src/evalpipe/rankers/test_prior.py", True),  # by convention a test_*.py file is a test
    ],
)
def test_test_paths_by_convention(path, test):
    assert is_test_path(path) is test
    unit = Unit(id=f"{path}::X", kind="function", path=path)
    assert is_test_unit(unit) is test
    assert unit.get("is_test") is test  # a corpus without the field: the same rule


def test_one_is_a_test_rule_for_the_prior_and_the_graph_layer():
    """The test prior and the graph layer ask the one rule; neither keeps a rule of its own."""
    assert test_prior.is_test_unit is is_test_unit
    assert graph_structure.is_test_unit is is_test_unit
    assert not hasattr(test_prior, "is_test_path") and not hasattr(graph_structure, "_TEST_PATH")


def test_is_test_field_wins_over_the_path():
    assert is_test_unit(Unit(id="a_test.go::X", kind="function", path="a_test.go")) is True
    assert (
        is_test_unit(Unit(id="a_test.go::X", kind="function", path="a_test.go", metadata={"is_test": False}))
        is False
    )
    assert is_test_unit(Unit(id="a.go::X", kind="function", path="a.go", metadata={"is_test": True})) is True
    assert is_test_unit(Unit(id="a.go::X", kind="function", path="a.go")) is False


@pytest.mark.parametrize(
    ("query", "asks"),
    [
        ("where is the config parsed", False),
        ("tests of the config parser", True),
        ("TestParseConfig", True),
        ("test_parse_config", True),
        ("BenchmarkSort", True),
        ("example of a custom ranker", True),
        ("the latest contest results", False),
    ],
)
def test_test_words(query, asks):
    assert has_test_word(query) is asks


def test_demote_rows_by_hand():
    # one band: the lowest positive non-test score is 1.0; the test scoring 5.0 (the top test)
    # goes to half of it, 0.5; a test scoring 0 stays 0 (never returned)
    out = demote_rows(np.array([3.0, 2.0, 5.0, 1.0, 0.0]), np.array([0, 0, 1, 0, 1], dtype=bool))
    assert out.tolist() == [3.0, 2.0, 0.5, 1.0, 0.0]
    # two tests keep their order: 4 * 0.5 * 6/6 = 2.0 and 4 * 0.5 * 3/6 = 1.0
    out = demote_rows(np.array([4.0, 6.0, 3.0]), np.array([0, 1, 1], dtype=bool))
    assert out.tolist() == [4.0, 2.0, 1.0]
    # graded: bands [5, 6), [4, 5) and (0, 2). Band 5: the test at 5.0 is already below the
    # non-test 5.35 and at the floor: stays 5.0. Band 4 has no non-test: 4.35 stays. Band 0:
    # 0.8 -> 0.5 * 0.5 * 0.8/0.8 = 0.25.
    scores = np.array([5.35, 5.0, 4.35, 0.5, 0.8])
    out = demote_rows(scores, np.array([0, 1, 1, 0, 1], dtype=bool), graded=True)
    assert out.tolist() == pytest.approx([5.35, 5.0, 4.35, 0.5, 0.25])


def unit(uid: str, text: str, path: str, name: str, **meta) -> Unit:
    return Unit(
        id=uid,
        kind="function",
        title=name,
        text=text,
        path=path,
        metadata={"name": name, "qualname": name, **meta},
    )


CORPUS = Corpus(
    [
        unit(
            "cfg/load.go::LoadConfig",
            "func LoadConfig(path string) parses the config file",
            "cfg/load.go",
            "LoadConfig",
        ),
        unit(
            "cfg/load_test.go::TestLoadConfig",
            "func TestLoadConfig(t) { LoadConfig(p); LoadConfig(q); parse config file; config file config }",
            "cfg/load_test.go",
            "TestLoadConfig",
        ),
        unit(
            "cfg/load_test.go::mustLoad",
            "func mustLoad(t) config file helper",
            "cfg/load_test.go",
            "mustLoad",
        ),
        unit("cfg/other.go::Other", "func Other() unrelated", "cfg/other.go", "Other"),
    ]
)


@pytest.mark.parametrize(
    "make", [BM25Ranker, BM25FRanker, lambda **kw: WinnowRanker(base=BM25FRanker(**kw), **kw)]
)
def test_score_rankers_put_tests_last_unless_asked(make):
    off = make(test_prior="off")
    off.prepare(CORPUS)
    assert [h.id for h in off.search("config file", 3)][0] == "cfg/load_test.go::TestLoadConfig"
    last = make()
    last.prepare(CORPUS)
    hits = last.search("config file", 3)
    assert [h.id for h in hits][0] == "cfg/load.go::LoadConfig"
    assert all(a.score > b.score for a, b in zip(hits, hits[1:], strict=False))  # scores agree with order
    assert last.search("tests of config file", 1)[0].id == "cfg/load_test.go::TestLoadConfig"
    # naming a symbol only tests have asks for tests too
    assert last.search("mustLoad", 1)[0].id == "cfg/load_test.go::mustLoad"


def test_bm25_batch_applies_the_prior_like_search():
    ranker = BM25Ranker()
    ranker.prepare(CORPUS)
    queries = ["config file", "tests of config file", "mustLoad", "LoadConfig"]
    assert ranker.search_batch(queries, 3) == [ranker.search(q, 3) for q in queries]


def test_graded_rankers_order_tests_within_a_grade():
    exact = ExactSymbolRanker()
    exact.prepare(CORPUS)
    # "load config" names LoadConfig in full (any case); the test's name only partly
    assert exact.search("load config", 1)[0].id == "cfg/load.go::LoadConfig"
    grep = GrepRanker()
    grep.prepare(CORPUS)
    # both texts contain "config file" (grade 2); the test has more occurrences but comes after
    ids = [h.id for h in grep.search("config file", 3)]
    assert ids.index("cfg/load.go::LoadConfig") < ids.index("cfg/load_test.go::TestLoadConfig")
    grep_off = GrepRanker(test_prior="off")
    grep_off.prepare(CORPUS)
    assert grep_off.search("config file", 1)[0].id == "cfg/load_test.go::TestLoadConfig"


def test_prior_counts_and_bad_values():
    prior = TestPrior(CORPUS)
    assert prior.count == 2
    assert "mustload" in prior.test_only_keys and "loadconfig" not in prior.test_only_keys
    with pytest.raises(ValueError, match="test_prior must be one of last, off"):
        BM25Ranker(test_prior="first")
    assert BM25Ranker(test_prior=False).test_prior == "off"


CALLS = Corpus(
    [
        unit(
            "cfg/load.go::LoadConfig",
            "func LoadConfig(path string) parses the config file",
            "cfg/load.go",
            "LoadConfig",
        ),
        Unit(
            id="cmd/main.go::main",
            kind="function",
            text="func main() { cfg := LoadConfig(os.Args[1]) }",
            path="cmd/main.go",
            relations={"calls": ("cfg/load.go::LoadConfig",)},
            metadata={"name": "main", "qualname": "main"},
        ),
        Unit(
            id="cfg/load_test.go::TestLoadConfig",
            kind="function",
            text="func TestLoadConfig(t) { LoadConfig(a); LoadConfig(b); LoadConfig(c) }",
            path="cfg/load_test.go",
            relations={"calls": ("cfg/load.go::LoadConfig",)},
            metadata={"name": "TestLoadConfig", "qualname": "TestLoadConfig"},
        ),
    ]
)


def test_graph_orders_reached_tests_after_reached_code():
    from evalpipe.rankers.structure.graph import GraphRanker

    # Both callers get the same walk mass; with the prior off, the base's rank of the whole
    # question breaks the tie, and the test (three mentions) is the base's first.
    off = GraphRanker(base=BM25Ranker(test_prior="off"), intent=True, test_prior="off")
    off.prepare(CALLS)
    assert [h.id for h in off.search("what calls LoadConfig", 2)] == [
        "cfg/load_test.go::TestLoadConfig",
        "cmd/main.go::main",
    ]
    on = GraphRanker(base=BM25Ranker(test_prior="off"), intent=True)
    on.prepare(CALLS)
    hits = on.search("what calls LoadConfig", 3)
    assert [h.id for h in hits] == [
        "cmd/main.go::main",
        "cfg/load_test.go::TestLoadConfig",
        "cfg/load.go::LoadConfig",
    ]
    assert hits[1].score >= 2.0  # still a reached unit, above the seed (1.5)
    assert on.search("which tests call LoadConfig", 1)[0].id == "cfg/load_test.go::TestLoadConfig"


@pytest.mark.parametrize("fusion", ["rrf", "hybrid"])
def test_fused_lists_put_tests_last(fusion):
    from evalpipe.rankers.fusion.hybrid import HybridRanker
    from evalpipe.rankers.fusion.rrf import RRFRanker

    cls = RRFRanker if fusion == "rrf" else HybridRanker
    # components without a prior, as a dense model is: the test is the lexical component's first
    comps = {"bm25f": BM25FRanker(test_prior="off"), "exact": ExactSymbolRanker(test_prior="off")}
    off = cls(comps, test_prior="off")
    off.prepare(CORPUS)
    assert "cfg/load_test.go::TestLoadConfig" in [h.id for h in off.search("config file", 2)]
    on = cls(comps)
    on.prepare(CORPUS)
    hits = on.search("config file", 3)
    assert [h.id for h in hits][0] == "cfg/load.go::LoadConfig"
    assert [h.id for h in hits][1:] == ["cfg/load_test.go::TestLoadConfig", "cfg/load_test.go::mustLoad"]
    assert all(a.score > b.score for a, b in zip(hits, hits[1:], strict=False))


def test_a_bad_test_prior_on_the_command_line_is_one_line_exit_2(tmp_path):
    from cli_helpers import cli, write_tiny

    write_tiny(tmp_path)
    proc = cli(tmp_path, "fixture.path=fx.yaml", "ranker=bm25f", "ranker.test_prior=first")
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("evalpipe:")]
    assert len(lines) == 1 and "test_prior must be one of last, off, got 'first'" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "mlruns").exists() or not any((tmp_path / "mlruns").rglob("meta.yaml"))
