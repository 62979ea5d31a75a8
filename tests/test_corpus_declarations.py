"""Code units as they really are (issues 17 and 25): overloads, declaration merging, module
units, test units, and the implements / references / subcommands relations.

Every expected ID, text fragment and edge below was worked out by hand from the sources in
this file (no builder output was pasted in).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from evalpipe.core import Hit, Unit
from evalpipe.core.testpaths import is_test_path
from evalpipe.corpus import Corpus, corpus_stats, load_jsonl_corpus
from evalpipe.corpus.__main__ import main
from evalpipe.corpus.build import build_corpus
from evalpipe.corpus.python_src import build_python_units
from evalpipe.corpus.treesitter_src import TreeSitterUnavailable, get_parser
from evalpipe.rankers.structure.graph import GraphRanker


def _grammars_missing() -> str:
    try:
        for grammar in ("go", "typescript"):
            get_parser(grammar)
    except TreeSitterUnavailable as exc:
        return str(exc)
    return ""


_MISSING = _grammars_missing()
needs_grammars = pytest.mark.skipif(bool(_MISSING), reason=f"tree-sitter grammars unavailable: {_MISSING}")


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


# ---------------------------------------------------------------------------
# Python @overload

PY_OVERLOAD = '''
"""Parsing helpers."""
import typing as t
from typing import overload

LIMIT = 3


@overload
def parse(x: int) -> int: ...
@t.overload
def parse(x: str) -> str: ...
def parse(x):
    """Parse a value, keeping its type."""
    # ints pass through unchanged
    return convert(x)


def convert(x):
    return x


class Box:
    @typing.overload
    def get(self, key: int) -> int: ...
    @typing.overload
    def get(self, key: str) -> str: ...
    def get(self, key):
        """Look the key up."""
        return self.lookup(key)

    def lookup(self, key):
        return key
'''


def test_python_overloads_are_one_unit_with_every_signature_docstring_and_body() -> None:
    units = {u.id: u for u in build_python_units([("m.py", PY_OVERLOAD)])}
    assert list(units) == [
        "m.py",
        "m.py::parse",
        "m.py::convert",
        "m.py::Box",
        "m.py::Box.get",
        "m.py::Box.lookup",
    ]
    parse = units["m.py::parse"]
    assert parse.text == (
        "@overload\ndef parse(x: int) -> int\n@t.overload\ndef parse(x: str) -> str\ndef parse(x)\n\n"
        "Parse a value, keeping its type.\n\n# ints pass through unchanged\nreturn convert(x)"
    )
    assert parse.metadata["signature"] == "def parse(x)"
    assert parse.metadata["overloads"] == ["def parse(x: int) -> int", "def parse(x: str) -> str"]
    assert parse.metadata["docstring"] == "Parse a value, keeping its type."
    # line 1 is the source's leading newline; `line` is the first `def` (its decorator is line 9)
    assert (parse.metadata["line"], parse.metadata["end_line"]) == (10, 16)
    assert parse.relations["calls"] == ("m.py::convert",)
    get = units["m.py::Box.get"]
    assert "return self.lookup(key)" in get.text and "Look the key up." in get.text
    assert get.text.count("def get(") == 3
    assert get.metadata["overloads"] == ["def get(self, key: int) -> int", "def get(self, key: str) -> str"]
    assert get.relations["calls"] == ("m.py::Box.lookup",)


def test_python_module_unit_holds_only_what_the_module_has() -> None:
    units = {u.id: u for u in build_python_units([("m.py", PY_OVERLOAD)])}
    mod = units["m.py"]
    assert (
        mod.text
        == "module m\n\nParsing helpers.\n\nimport typing as t\nfrom typing import overload\nLIMIT = 3"
    )
    assert "parse" not in mod.text and "defines" not in mod.text
    assert mod.relations["contains"] == ("m.py::parse", "m.py::convert", "m.py::Box")


# ---------------------------------------------------------------------------
# TypeScript overloads, declaration merging, implements

TS_LIB = """
import { Base } from "./base";

/** Lift a value into a box. */
export function lift(x: number): Box<number>;
export function lift(x: string): Box<string>;
export function lift(x: any): Box<any> {
  return wrap(x);
}

function wrap(x: any): any { return x; }

export function pick(a: string): string;
/** Pick the first non-empty argument. */
export function pick(a: any, b?: any): any {
  return a || b;
}

export interface TimeoutError extends Error {
  info: string;
}

export interface TimeoutErrorCtor {
  new (info: string): TimeoutError;
}

/** Raised when a deadline passes. */
export const TimeoutError: TimeoutErrorCtor = createErrorClass((_super) => function impl(this: any) {
  _super(this);
  this.info = "late";
});

export interface Shape { area(): number; }
export interface Solid extends Shape { volume(): number; }

export class Cube extends Base implements Solid, Shape {
  /** Scale by a number. */
  scale(n: number): Cube;
  scale(n: string): Cube;
  scale(n: any): Cube { return this.area() > n ? this : this; }
  area(): number { return 1; }
  volume(): number { return 1; }
}

export class Registry {}
export namespace Registry {
  export const empty = new Registry();
}

declare const marker: unique symbol;

console.log("loaded");
"""

TS_BASE = """
export class Base {}
"""


@pytest.fixture
def ts_units(tmp_path: Path) -> dict[str, Unit]:
    write(tmp_path, "src/lib.ts", TS_LIB)
    write(tmp_path, "src/base.ts", TS_BASE)
    write(tmp_path, "src/lib.spec.ts", "import { lift } from './lib';\ndescribe('lift', () => {});\n")
    return {u.id: u for u in build_corpus(tmp_path)}


@needs_grammars
def test_ts_ids_stay_plain_qualified_names(ts_units: dict[str, Unit]) -> None:
    lib = [uid for uid in ts_units if uid.startswith("src/lib.ts")]
    assert lib == [
        "src/lib.ts",
        "src/lib.ts::lift",
        "src/lib.ts::wrap",
        "src/lib.ts::pick",
        "src/lib.ts::TimeoutError",
        "src/lib.ts::TimeoutErrorCtor",
        "src/lib.ts::Shape",
        "src/lib.ts::Solid",
        "src/lib.ts::Cube",
        "src/lib.ts::Cube.scale",
        "src/lib.ts::Cube.area",
        "src/lib.ts::Cube.volume",
        "src/lib.ts::Registry",
        "src/lib.ts::marker",
    ]


@needs_grammars
def test_ts_overloads_keep_every_signature_the_doc_and_the_body(ts_units: dict[str, Unit]) -> None:
    lift = ts_units["src/lib.ts::lift"]
    assert lift.text == (
        "function lift(x: number): Box<number>\nfunction lift(x: string): Box<string>\n"
        "function lift(x: any): Box<any>\n\nLift a value into a box.\n\nreturn wrap(x);"
    )
    assert lift.metadata["overloads"] == [
        "function lift(x: number): Box<number>",
        "function lift(x: string): Box<string>",
    ]
    assert lift.metadata["signature"] == "function lift(x: any): Box<any>"
    assert (lift.metadata["line"], lift.metadata["end_line"]) == (4, 8)
    assert lift.relations["calls"] == ("src/lib.ts::wrap",)
    # the doc comment sits on the implementation, not on the first overload
    pick = ts_units["src/lib.ts::pick"]
    assert pick.metadata["docstring"] == "Pick the first non-empty argument."
    assert "return a || b;" in pick.text
    scale = ts_units["src/lib.ts::Cube.scale"]
    assert scale.text.count("scale(n: ") == 3
    assert "Scale by a number." in scale.text and "return this.area() > n ? this : this;" in scale.text
    assert scale.relations["calls"] == ("src/lib.ts::Cube.area",)
    assert len(scale.metadata["overloads"]) == 2


@needs_grammars
def test_ts_declaration_merging_keeps_the_runtime_code(ts_units: dict[str, Unit]) -> None:
    err = ts_units["src/lib.ts::TimeoutError"]
    assert err.kind == "interface"  # the first declaration's kind; both are recorded
    assert err.metadata["merged_kinds"] == ["interface", "const"]
    assert "info: string;" in err.text  # the interface
    assert "createErrorClass((_super) => function impl" in err.text  # the runtime value
    assert 'this.info = "late";' in err.text
    assert err.metadata["docstring"] == "Raised when a deadline passes."
    reg = ts_units["src/lib.ts::Registry"]
    assert reg.metadata["merged_kinds"] == ["class", "namespace"]
    assert "export const empty = new Registry();" in reg.text


@needs_grammars
def test_ts_implements_and_interface_extends(ts_units: dict[str, Unit]) -> None:
    cube = ts_units["src/lib.ts::Cube"]
    assert cube.relations["inherits"] == ("src/base.ts::Base",)
    assert cube.relations["implements"] == ("src/lib.ts::Solid", "src/lib.ts::Shape")
    assert ts_units["src/lib.ts::Solid"].relations["inherits"] == ("src/lib.ts::Shape",)


@needs_grammars
def test_ts_module_unit_has_imports_and_top_level_code_only(ts_units: dict[str, Unit]) -> None:
    mod = ts_units["src/lib.ts"]
    assert mod.text == 'module src/lib\n\nimports: ./base\n\nconsole.log("loaded");'


@needs_grammars
def test_test_units_are_marked(ts_units: dict[str, Unit]) -> None:
    assert ts_units["src/lib.spec.ts"].metadata["is_test"] is True
    assert ts_units["src/lib.ts::lift"].metadata["is_test"] is False


# ---------------------------------------------------------------------------
# Go: implicit implementations, function values, subcommands, methods across files

GO_SHAPES = """
package shapes

import "example.com/m/ext"

// Shape has an area.
type Shape interface {
	Area() float64
}

// Solid is a shape with a volume.
type Solid interface {
	Shape
	Volume(scale float64) (v float64, err error)
}

type sized interface {
	size() int
}

// Number is a type-set constraint, not a method set.
type Number interface{ ~int | ~float64 }

// Remote embeds an interface from outside the corpus.
type Remote interface {
	ext.Conn
	Area() float64
}

type Square struct{ side float64 }

type Cube struct {
	Square
}

type Flat struct{}

func (s Square) Area() float64 { return s.side * s.side }

func (f *Flat) Area() int { return 0 }

func (s *Square) size() int { return 1 }
"""

GO_CUBE = """
package shapes

// Volume of the cube.
func (c *Cube) Volume(s float64) (float64, error) { return c.Area() * s, nil }

func init() { register("a") }

func init() { register("b") }

func register(name string) {}
"""

GO_OTHER = """
package other

import "net/http"

type Disk struct{}

func (Disk) Area() float64 { return 3 }

func (d Disk) size() int { return 2 }

type Server struct{ mux *http.ServeMux }

func (s *Server) routes() {
	s.mux.HandleFunc("/area", s.handleArea)
	http.HandleFunc("/health", health)
	go run(health)
}

func (s *Server) handleArea(w http.ResponseWriter, r *http.Request) {}

func health(w http.ResponseWriter, r *http.Request) {}

func run(f func(http.ResponseWriter, *http.Request)) {}
"""

GO_CMD = """
package cmd

var rootCmd = &cobra.Command{Use: "app", RunE: runRoot}

var serveCmd = &cobra.Command{Use: "serve", Run: runServe}

func runRoot(cmd *cobra.Command, args []string) error { return nil }

func runServe(cmd *cobra.Command, args []string) {}

func newVersionCmd() *cobra.Command { return &cobra.Command{Use: "version"} }

func init() {
	rootCmd.AddCommand(serveCmd, newVersionCmd())
}

func newToolCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "tool"}
	cmd.AddCommand(newVersionCmd())
	return cmd
}
"""


@pytest.fixture
def go_units(tmp_path: Path) -> dict[str, Unit]:
    write(tmp_path, "go.mod", "module example.com/m\n")
    write(tmp_path, "shapes/shapes.go", GO_SHAPES)
    write(tmp_path, "shapes/cube.go", GO_CUBE)
    write(tmp_path, "shapes/shapes_test.go", "package shapes\n\nfunc TestArea(t *testing.T) {}\n")
    write(tmp_path, "other/other.go", GO_OTHER)
    write(tmp_path, "cmd/root.go", GO_CMD)
    return {u.id: u for u in build_corpus(tmp_path)}


@needs_grammars
def test_go_implicit_implementations(go_units: dict[str, Unit]) -> None:
    rel = {uid: dict(u.relations) for uid, u in go_units.items()}
    # Square: value method Area -> Shape; its pointer method size -> sized (same package)
    assert rel["shapes/shapes.go::Square"]["implements"] == (
        "shapes/shapes.go::Shape",
        "shapes/shapes.go::sized",
    )
    # Cube: Area and size promoted from the embedded Square, Volume on *Cube -> Shape, Solid, sized
    assert rel["shapes/shapes.go::Cube"]["implements"] == (
        "shapes/shapes.go::Shape",
        "shapes/shapes.go::Solid",
        "shapes/shapes.go::sized",
    )
    # Flat.Area returns int, not float64: no edge. Disk (another package) implements the exported
    # Shape but not the unexported `sized`.
    assert "implements" not in rel["shapes/shapes.go::Flat"]
    assert rel["other/other.go::Disk"]["implements"] == ("shapes/shapes.go::Shape",)
    # Number (type set) and Remote (embeds ext.Conn, outside the corpus) are never implemented
    implemented = {t for r in rel.values() for t in r.get("implements", ())}
    assert "shapes/shapes.go::Number" not in implemented
    assert "shapes/shapes.go::Remote" not in implemented
    # interface embedding is `inherits`
    assert rel["shapes/shapes.go::Solid"]["inherits"] == ("shapes/shapes.go::Shape",)


@needs_grammars
def test_go_function_values_and_subcommands(go_units: dict[str, Unit]) -> None:
    rel = {uid: dict(u.relations) for uid, u in go_units.items()}
    assert rel["other/other.go::Server.routes"]["references"] == (
        "other/other.go::Server.handleArea",
        "other/other.go::health",
    )
    assert rel["other/other.go::Server.routes"]["calls"] == ("other/other.go::run",)
    # composite-literal fields: `RunE: runRoot`, `Run: runServe`
    assert rel["cmd/root.go::rootCmd"]["references"] == ("cmd/root.go::runRoot",)
    assert rel["cmd/root.go::serveCmd"]["references"] == ("cmd/root.go::runServe",)
    # rootCmd.AddCommand(...) in init(): stored on rootCmd; a local `cmd` registers on its function
    assert rel["cmd/root.go::rootCmd"]["subcommands"] == (
        "cmd/root.go::serveCmd",
        "cmd/root.go::newVersionCmd",
    )
    assert rel["cmd/root.go::newToolCmd"]["subcommands"] == ("cmd/root.go::newVersionCmd",)
    assert "subcommands" not in rel["cmd/root.go::init"]


@needs_grammars
def test_go_methods_across_files_and_repeated_init(go_units: dict[str, Unit]) -> None:
    volume = go_units["shapes/cube.go::Cube.Volume"]
    assert volume.text == (
        "func (c *Cube) Volume(s float64) (float64, error)\n\nVolume of the cube.\n\n"
        "{ return c.Area() * s, nil }"
    )
    # c.Area() is promoted from Square, which the name-based resolver does not follow: no call edge
    assert "calls" not in volume.relations
    init = go_units["shapes/cube.go::init"]
    assert 'register("a")' in init.text and 'register("b")' in init.text
    assert init.relations["calls"] == ("shapes/cube.go::register",)
    assert go_units["shapes/shapes_test.go::TestArea"].metadata["is_test"] is True
    assert go_units["shapes/cube.go::Cube.Volume"].metadata["is_test"] is False
    # the module unit: package name and imports, no list of its definitions
    assert go_units["shapes/shapes.go"].text == "module shapes\n\nimports: example.com/m/ext"


# ---------------------------------------------------------------------------
# test paths, old corpora, statistics, the graph ranker


@pytest.mark.parametrize(
    ("path", "language", "expected"),
    [
        ("pkg/server_test.go", "go", True),
        ("pkg/server.go", "go", False),
        ("pkg/testdata/x.go", "go", True),
        ("src/testing/testing.go", "go", False),  # Go's testing package is not a test
        ("src/a.test.ts", "typescript", True),
        ("src/a.spec.tsx", "typescript", True),
        ("src/__tests__/a.ts", "typescript", True),
        ("spec/helpers.js", "javascript", True),
        ("src/internal/testing/TestScheduler.ts", "typescript", False),
        ("src/latest.ts", "typescript", False),
        ("tests/test_x.py", "python", True),
        ("pkg/test_x.py", "python", True),
        ("pkg/x_test.py", "python", True),
        ("conftest.py", "python", True),
        ("src/evalpipe/testpaths.py", "python", False),
        ("src/contest.py", "python", False),
        ("docs/guide.md", "markdown", False),
        ("", "", False),
    ],
)
def test_is_test_path(path: str, language: str, expected: bool) -> None:
    assert is_test_path(path, language) is expected


def test_old_corpora_derive_is_test_from_the_path(tmp_path: Path) -> None:
    records = [
        {
            "id": "tests/test_a.py::test_x",
            "kind": "function",
            "path": "tests/test_a.py",
            "language": "python",
        },
        {"id": "src/a.py::f", "kind": "function", "path": "src/a.py", "language": "python"},
    ]
    path = tmp_path / "old.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    corpus = load_jsonl_corpus(path)
    assert [u.get("is_test") for u in corpus] == [True, False]
    assert "is_test" not in corpus.units[0].to_record()  # derived, never written back
    mask = corpus.allowed_mask({"is_test": False})
    assert mask.tolist() == [False, True]


@needs_grammars
def test_corpus_stats_and_cli(go_units: dict[str, Unit], tmp_path: Path, capsys) -> None:
    stats = corpus_stats(go_units.values())
    # hand count: 5 files -> 5 modules; shapes.go: Shape Solid sized Number Remote (interfaces),
    # Square Cube Flat (types), Square.Area Flat.Area Square.size; cube.go: Cube.Volume, init,
    # register (the two init() are one unit); shapes_test.go: TestArea; other.go: Disk Server
    # (types), Disk.Area Disk.size Server.routes Server.handleArea, health run; root.go:
    # rootCmd serveCmd (var), runRoot runServe newVersionCmd init newToolCmd
    assert stats.kinds == {"module": 5, "interface": 5, "type": 5, "method": 8, "function": 10, "var": 2}
    assert stats.test_units == 2  # shapes_test.go and its TestArea
    assert stats.relations["implements"] == 2 + 3 + 1
    assert stats.relations["subcommands"] == 3
    assert stats.relations["references"] == 2 + 1 + 1
    assert stats.metrics()["corpus/relation/implements"] == 6.0
    assert stats.metrics()["corpus/kind/method"] == 8.0

    out = tmp_path / "c.jsonl"
    assert main([str(tmp_path), "-o", str(out), "--stats", str(tmp_path / "s.json")]) == 0
    printed = capsys.readouterr().out
    assert "tests:     2 units" in printed
    assert "implements 6" in printed
    assert json.loads((tmp_path / "s.json").read_text())["relations"]["subcommands"] == 3
    assert main([str(out)]) == 0  # an existing corpus: statistics only
    assert "overloaded functions: 0; merged declarations: 0" in capsys.readouterr().out


@needs_grammars
def test_ts_stats_count_overloads_and_merges(ts_units: dict[str, Unit]) -> None:
    stats = corpus_stats(ts_units.values())
    assert (stats.overloaded, stats.merged_declarations) == (
        3,
        2,
    )  # lift pick Cube.scale; TimeoutError Registry
    assert stats.relations["implements"] == 2


class _Fixed:
    def __init__(self, ids: list[str]):
        self.ids = ids

    def search(self, query, k, constraints=None):
        return [Hit(i, 1.0 / (r + 1)) for r, i in enumerate(self.ids)][:k]


def test_graph_ranker_walks_implements_for_implementations_of() -> None:
    def unit(name: str, kind: str, **relations: tuple[str, ...]) -> Unit:
        return Unit(
            id=f"a.go::{name}",
            kind=kind,
            path="a.go",
            language="go",
            relations=relations,
            metadata={"name": name, "qualname": name},
        )

    corpus = Corpus(
        [
            unit("Shape", "interface"),
            unit("Square", "type", implements=("a.go::Shape",)),
            unit("Circle", "type", implements=("a.go::Shape",)),
            unit("Other", "type"),
        ]
    )
    ranker = GraphRanker(_Fixed(["a.go::Other"]), intent=True)
    ranker.prepare(corpus)
    top = [h.id for h in ranker.search("implementations of Shape", 3)]
    assert top[:2] == ["a.go::Square", "a.go::Circle"] and top[2] == "a.go::Shape"
    for kind in ("implemented_by", "referenced_by", "subcommand_of", "subcommands"):
        GraphRanker(_Fixed([]), relations=[kind])  # every kind and its reverse is accepted
