"""Go var/const units and package/module-qualified names (issue 12).

Expected IDs, kinds and qualified names were worked out by hand from the sources below.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from evalpipe.core import Unit
from evalpipe.corpus.build import build_corpus
from evalpipe.corpus.qualify import name_parts, suffix_match, unit_qualified_name, unit_qualifier
from evalpipe.corpus.treesitter_src import TreeSitterUnavailable, get_parser


def _grammars_missing() -> str:
    try:
        for grammar in ("go", "typescript"):
            get_parser(grammar)
    except TreeSitterUnavailable as exc:
        return str(exc)
    return ""


_MISSING = _grammars_missing()
needs_grammars = pytest.mark.skipif(bool(_MISSING), reason=f"tree-sitter grammars unavailable: {_MISSING}")

GO_CMD = """
package cmd

import "example.com/m/store"

// initCmd sets a project up.
var initCmd = &cobra.Command{Run: func() { setup() }}

var (
	// Verbose turns logging up.
	Verbose, quiet bool
	_ = store.Open
)

const MaxItems = 10

const (
	ModeA = iota
	ModeB
)

func setup() {}
"""
# initCmd 6, Verbose/quiet 10, MaxItems 14, ModeA 17, ModeB 18

GO_STORE = """
package store

// Node is a stored item.
type Node struct{}

func (s *Store) AddNode() {}

func Open() {}
"""

TS_CONF = """
export const DEFAULTS = { retries: 3 };
let counter = 0;
export const load = () => DEFAULTS;
"""

PY_BASE = '''
def top_k(rows):
    """Best rows."""
    return rows


class Ranker:
    def search(self):
        return top_k([])
'''


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


@pytest.fixture
def units(tmp_path: Path) -> dict[str, Unit]:
    write(tmp_path, "go.mod", "module example.com/m\n")
    write(tmp_path, "cmd/root.go", GO_CMD)
    write(tmp_path, "store/store.go", GO_STORE)
    write(tmp_path, "web/conf.ts", TS_CONF)
    write(tmp_path, "src/pkg/__init__.py", "")
    write(tmp_path, "src/pkg/base.py", PY_BASE)
    return {u.id: u for u in build_corpus(tmp_path)}


@needs_grammars
def test_go_package_level_var_and_const_are_units(units: dict[str, Unit]) -> None:
    go = [u for u in units.values() if u.path == "cmd/root.go"]
    assert [(u.id, u.kind) for u in go] == [
        ("cmd/root.go", "module"),
        ("cmd/root.go::initCmd", "var"),
        ("cmd/root.go::Verbose", "var"),
        ("cmd/root.go::quiet", "var"),
        ("cmd/root.go::MaxItems", "const"),
        ("cmd/root.go::ModeA", "const"),
        ("cmd/root.go::ModeB", "const"),
        ("cmd/root.go::setup", "function"),
    ]
    init = units["cmd/root.go::initCmd"]
    assert init.metadata["docstring"] == "initCmd sets a project up."
    assert init.metadata["line"] == 6
    assert init.metadata["signature"].startswith("var initCmd = &cobra.Command")
    # the Run literal's call belongs to the var, not to the file
    assert init.relations["calls"] == ("cmd/root.go::setup",)
    assert units["cmd/root.go::Verbose"].metadata["docstring"] == "Verbose turns logging up."
    assert units["cmd/root.go::quiet"].metadata["line"] == 10
    assert (units["cmd/root.go::ModeB"].metadata["line"], units["cmd/root.go::ModeB"].kind) == (18, "const")
    assert "cmd/root.go::initCmd" in units["cmd/root.go"].relations["contains"]


@needs_grammars
def test_go_units_carry_package_and_qualified_name(units: dict[str, Unit]) -> None:
    node = units["store/store.go::Node"]
    assert (node.metadata["package"], node.metadata["qualifier"]) == ("store", "store")
    assert node.metadata["qualified_name"] == "store.Node"
    assert units["store/store.go::Store.AddNode"].metadata["qualified_name"] == "store.Store.AddNode"
    assert units["cmd/root.go::initCmd"].metadata["qualified_name"] == "cmd.initCmd"
    assert units["store/store.go"].metadata["qualified_name"] == "store"


@needs_grammars
def test_typescript_top_level_constants_and_module_qualifier(units: dict[str, Unit]) -> None:
    ts = [(u.id, u.kind) for u in units.values() if u.path == "web/conf.ts"]
    assert ts == [
        ("web/conf.ts", "module"),
        ("web/conf.ts::DEFAULTS", "const"),
        ("web/conf.ts::counter", "var"),
        ("web/conf.ts::load", "function"),
    ]
    assert units["web/conf.ts::DEFAULTS"].metadata["qualified_name"] == "web/conf.DEFAULTS"
    assert units["web/conf.ts::load"].metadata["qualifier"] == "web/conf"
    assert units["web/conf.ts::counter"].metadata["line"] == 2


def test_python_units_carry_dotted_module(units: dict[str, Unit]) -> None:
    assert units["src/pkg/base.py::top_k"].metadata["qualified_name"] == "pkg.base.top_k"
    assert units["src/pkg/base.py::Ranker.search"].metadata["qualified_name"] == "pkg.base.Ranker.search"
    assert units["src/pkg/base.py"].metadata["qualifier"] == "pkg.base"


def test_qualifiers_are_derived_for_corpora_built_before_the_field() -> None:
    """The frozen gold corpus has no `qualifier`: it is derived from what the units do carry."""
    py = Unit("src/a/b.py::f", "function", path="src/a/b.py", language="python",
              metadata={"qualname": "f", "module": "a.b"})  # fmt: skip
    go = Unit("x/store/s.go::Node", "type", path="x/store/s.go", language="go", metadata={"qualname": "Node"})
    ts = Unit("web/u.ts::h", "function", path="web/u.ts", language="typescript", metadata={"qualname": "h"})
    sec = Unit("README.md#x", "section", path="README.md", language="markdown")
    assert [unit_qualified_name(u) for u in (py, go, ts, sec)] == ["a.b.f", "store.Node", "web/u.h", ""]
    assert unit_qualifier(go) == "store"


def test_suffix_match_on_name_components() -> None:
    assert suffix_match(("base", "top_k"), name_parts("evalpipe.rankers.base.top_k"))
    assert suffix_match(("u", "h"), name_parts("web/u.h"))
    assert not suffix_match(("store", "Node"), name_parts("store.Store.AddNode"))
    assert not suffix_match((), name_parts("a.b"))
