"""tree-sitter units for Go and TypeScript/JavaScript; skipped when no grammar is installed.

Expected IDs, lines and relations were worked out by hand from the sources below
(line numbers in the trailing comments).
"""

from __future__ import annotations

import builtins
import textwrap
from pathlib import Path

import pytest

from evalpipe.corpus import treesitter_src
from evalpipe.corpus.build import SkippedFileWarning, build_corpus
from evalpipe.corpus.treesitter_src import TreeSitterUnavailable, get_parser


def _grammars_missing() -> str:
    try:
        for grammar in ("go", "typescript", "javascript"):
            get_parser(grammar)
    except TreeSitterUnavailable as exc:
        return str(exc)
    return ""


_MISSING = _grammars_missing()
needs_grammars = pytest.mark.skipif(bool(_MISSING), reason=f"tree-sitter grammars unavailable: {_MISSING}")

GO_A = """
package shapes

import (
	"fmt"
	u "example.com/m/util"
)

// Shape is a thing.
type Shape interface {
	Area() float64
}

type (
	Rect struct{ W, H float64 }
	Num  int
)

// Area computes.
// Second line.
func (r *Rect) Area() float64 { return helper(r.W)*r.H + r.Scale() }

func helper(x float64) float64 { fmt.Println(x); return u.Twice(x) }
"""
# lines: Shape 9, Rect 14, Num 15, Area 20, helper 22

GO_B = """
package shapes

func (r *Rect) Scale() float64 { return helper(1) }
"""

GO_UTIL = """
package util

// Twice doubles.
func Twice(x float64) float64 { return x * 2 }
"""

TS_A = """
import { helper } from "./util";
import * as fs from "fs";

/** Base doc. */
export class Base { run(): void {} }

// Widget does things
export class Widget extends Base implements I {
  /** Render it. */
  render(x: number): string { return helper(this.name(x)); }
  private name(x: number) { this.run(); return "a"; }
}

export interface I { render(x: number): string; }
export type Alias = string;
export function top(a: string): number { return 1; }
export const arrow = (y: number): number => top("x");
"""
# lines: Base 5, Widget 8, render 10, name 11, I 14, Alias 15, top 16, arrow 17

TS_UTIL = """
export function helper(s: string): string { return s; }
"""

JS_A = """
import { x } from "./b.js";
const y = require("./c");
class A extends B { m() { return f(); } }
function f() { return new A(); }
"""


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


@pytest.fixture
def tree(tmp_path: Path) -> dict:
    write(tmp_path, "go.mod", "module example.com/m\n\ngo 1.22\n")
    write(tmp_path, "shapes/a.go", GO_A)
    write(tmp_path, "shapes/b.go", GO_B)
    write(tmp_path, "util/util.go", GO_UTIL)
    write(tmp_path, "web/a.ts", TS_A)
    write(tmp_path, "web/util.ts", TS_UTIL)
    write(tmp_path, "web/c.js", "module.exports = {};\n")
    write(tmp_path, "web/a.js", JS_A)
    return {u.id: u for u in build_corpus(tmp_path)}


@needs_grammars
def test_go_units(tree: dict) -> None:
    go = {k: v for k, v in tree.items() if v.language == "go"}
    assert list(go) == [
        "shapes/a.go",
        "shapes/a.go::Shape",
        "shapes/a.go::Rect",
        "shapes/a.go::Num",
        "shapes/a.go::Rect.Area",
        "shapes/a.go::helper",
        "shapes/b.go",
        "shapes/b.go::Rect.Scale",
        "util/util.go",
        "util/util.go::Twice",
    ]
    kinds = [
        go[i].kind
        for i in ("shapes/a.go", "shapes/a.go::Shape", "shapes/a.go::Rect", "shapes/a.go::Rect.Area")
    ]
    assert kinds == ["module", "interface", "type", "method"]
    area = go["shapes/a.go::Rect.Area"]
    assert area.metadata["signature"] == "func (r *Rect) Area() float64"
    assert area.metadata["docstring"] == "Area computes.\nSecond line."
    assert (area.metadata["line"], area.title) == (20, "Rect.Area")
    assert go["shapes/a.go::Shape"].metadata["docstring"] == "Shape is a thing."
    assert go["shapes/a.go::Shape"].metadata["signature"] == "type Shape interface"
    assert go["shapes/a.go::Num"].metadata["line"] == 15
    assert go["shapes/a.go"].metadata["imports_raw"] == ["fmt", "example.com/m/util"]
    assert go["shapes/a.go"].title == "shapes"


@needs_grammars
def test_go_relations(tree: dict) -> None:
    rel = {k: dict(v.relations) for k, v in tree.items()}
    assert rel["shapes/a.go"]["contains"] == (
        "shapes/a.go::Shape",
        "shapes/a.go::Rect",
        "shapes/a.go::Num",
        "shapes/a.go::helper",
    )
    assert rel["shapes/a.go::Rect"]["contains"] == ("shapes/a.go::Rect.Area",)
    # helper: same file; r.Scale(): receiver method declared in another file of the package
    assert rel["shapes/a.go::Rect.Area"]["calls"] == ("shapes/a.go::helper", "shapes/b.go::Rect.Scale")
    # fmt.Println is outside the corpus; u.Twice goes through go.mod's module path
    assert rel["shapes/a.go::helper"]["calls"] == ("util/util.go::Twice",)
    assert rel["shapes/b.go::Rect.Scale"]["calls"] == ("shapes/a.go::helper",)
    assert rel["shapes/a.go"]["imports"] == ("util/util.go",)


@needs_grammars
def test_typescript_units_and_relations(tree: dict) -> None:
    ts = {k: v for k, v in tree.items() if v.language == "typescript"}
    assert list(ts) == [
        "web/a.ts",
        "web/a.ts::Base",
        "web/a.ts::Base.run",
        "web/a.ts::Widget",
        "web/a.ts::Widget.render",
        "web/a.ts::Widget.name",
        "web/a.ts::I",
        "web/a.ts::Alias",
        "web/a.ts::top",
        "web/a.ts::arrow",
        "web/util.ts",
        "web/util.ts::helper",
    ]
    assert [ts[f"web/a.ts::{n}"].kind for n in ("Base", "Base.run", "I", "Alias", "top", "arrow")] == [
        "class",
        "method",
        "interface",
        "type",
        "function",
        "function",
    ]
    widget = ts["web/a.ts::Widget"]
    assert widget.metadata["signature"] == "class Widget extends Base implements I"
    assert widget.metadata["docstring"] == "Widget does things"
    assert widget.relations["inherits"] == ("web/a.ts::Base",)
    assert widget.relations["contains"] == ("web/a.ts::Widget.render", "web/a.ts::Widget.name")
    render = ts["web/a.ts::Widget.render"]
    assert render.metadata["signature"] == "render(x: number): string"
    assert (render.metadata["docstring"], render.metadata["line"]) == ("Render it.", 10)
    # helper is imported from a corpus file; this.name is a method of the class
    assert render.relations["calls"] == ("web/util.ts::helper", "web/a.ts::Widget.name")
    # this.run() is inherited from Base
    assert ts["web/a.ts::Widget.name"].relations["calls"] == ("web/a.ts::Base.run",)
    assert ts["web/a.ts::Base"].metadata["docstring"] == "Base doc."
    arrow = ts["web/a.ts::arrow"]
    assert (arrow.metadata["signature"], arrow.metadata["line"]) == ("const arrow = (y: number): number", 17)
    assert arrow.relations["calls"] == ("web/a.ts::top",)
    mod = ts["web/a.ts"]
    assert mod.metadata["imports_raw"] == ["./util", "fs"]
    assert mod.relations["imports"] == ("web/util.ts",)


@needs_grammars
def test_javascript_units(tree: dict) -> None:
    js = {k: v for k, v in tree.items() if v.path == "web/a.js"}
    assert list(js) == ["web/a.js", "web/a.js::A", "web/a.js::A.m", "web/a.js::f"]
    assert all(u.language == "javascript" for u in js.values())
    assert js["web/a.js::A.m"].relations["calls"] == ("web/a.js::f",)
    assert js["web/a.js::f"].relations["calls"] == ("web/a.js::A",)  # `new A()`
    assert "inherits" not in js["web/a.js::A"].relations  # B is not defined in the corpus
    # ./b.js is not a corpus file; require("./c") resolves to web/c.js
    assert js["web/a.js"].metadata["imports_raw"] == ["./b.js", "./c"]
    assert js["web/a.js"].relations["imports"] == ("web/c.js",)


@needs_grammars
def test_syntax_error_skips_file_with_line(tmp_path: Path) -> None:
    write(tmp_path, "ok.go", "package p\n\nfunc A() {}\n")
    write(tmp_path, "bad.go", "package p\n\nfunc B( {\n")
    with pytest.warns(SkippedFileWarning, match=r"bad\.go:3: skipped \(go syntax error"):
        units = build_corpus(tmp_path)
    assert [u.id for u in units] == ["ok.go", "ok.go::A"]


def test_missing_tree_sitter_names_the_extra(tmp_path: Path, monkeypatch) -> None:
    write(tmp_path, "a.go", "package p\n")
    real_import = builtins.__import__

    def no_tree_sitter(name, *args, **kwargs):
        if name.startswith("tree_sitter"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(treesitter_src, "_PARSERS", {})
    monkeypatch.setattr(builtins, "__import__", no_tree_sitter)
    with pytest.raises(TreeSitterUnavailable, match=r"pip install 'evalpipe\[treesitter\]'"):
        build_corpus(tmp_path)
