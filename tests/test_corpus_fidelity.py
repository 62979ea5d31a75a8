"""Builder fidelity over real sources shipped by packages (issue 25, item 6).

For every definition the language's own parser finds (TypeScript: the `typescript` compiler
from npm; Go: `go/parser` through a tiny `go run` helper; Python: `ast`), the unit with the
plain qualified-name ID exists and its text holds the definition's whole source span: every
declaration of the name (overload signatures, the implementation, each side of a declaration
merge) with its doc comment. "Holds" is checked on words, as a multiset: each word (`\\w+`) of
the span's identifiers, literals and comments occurs in the unit text at least as often. The
builder reformats signatures and strips comment markers, so a byte-for-byte comparison would
test formatting, not content. The corpus is built with an excerpt limit large enough never to
clip (`excerpt_chars` is a deliberate size bound, tested elsewhere).

Packages: rxjs 7.8.1 from the npm registry (251 `.ts` sources: 81 overloaded functions, error
classes declared as `interface X` + `const X`), installed once into a cache directory; click and
pydantic from this venv (`@t.overload`, `@overload`, `@typing.overload`); Go's own `go/types`
(methods of `Checker` spread over dozens of files). Each part skips with the reason when its
tool or package is missing (no node/npm, no registry, no Go toolchain).
"""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import textwrap
import tokenize
from collections import Counter
from pathlib import Path

import pytest

from evalpipe.corpus.build import build_corpus
from evalpipe.corpus.treesitter_src import TreeSitterUnavailable, get_parser

HUGE = 10**9  # never clip: the check is about what the builder keeps, not the size bound
WORD = re.compile(r"\w+")
RXJS = "rxjs@7.8.1"
TYPESCRIPT = "typescript@5.4.5"
NPM_CACHE = Path(os.environ.get("EVALPIPE_TEST_CACHE", Path.home() / ".cache" / "evalpipe-tests")) / "npm"


def _words(text: str) -> Counter:
    return Counter(WORD.findall(text))


def _missing(span_words: Counter, unit_text: str) -> Counter:
    return span_words - _words(unit_text)


def _grammar_missing(grammar: str) -> str:
    try:
        get_parser(grammar)
    except TreeSitterUnavailable as exc:
        return str(exc)
    return ""


def _report(failures: list[str], checked: int) -> str:
    head = f"{len(failures)} of {checked} definitions lose source words:\n"
    return head + "\n".join(failures[:25])


# ---------------------------------------------------------------------------
# TypeScript: rxjs sources, spans from the TypeScript compiler

TS_SPANS_JS = r"""
// Declarations and their source spans as the TypeScript compiler's own parser sees them.
const ts = require(process.argv[2]);
const fs = require("fs");
const path = require("path");
const root = process.argv[3];
const files = JSON.parse(fs.readFileSync(0, "utf8"));
const out = [];
const nameOf = (n) =>
  n.name && (ts.isIdentifier(n.name) || ts.isPrivateIdentifier(n.name)) ? n.name.text : null;
for (const rel of files) {
  const text = fs.readFileSync(path.join(root, rel), "utf8");
  const sf = ts.createSourceFile(rel, text, ts.ScriptTarget.Latest, true);
  const add = (qualname, kind, node) =>
    out.push({ file: rel, qualname, kind, start: node.getStart(sf, true), end: node.getEnd() });
  for (const st of sf.statements) {
    if (ts.isFunctionDeclaration(st) && nameOf(st)) add(nameOf(st), "function", st);
    else if (ts.isInterfaceDeclaration(st)) add(st.name.text, "interface", st);
    else if (ts.isTypeAliasDeclaration(st) || ts.isEnumDeclaration(st)) add(st.name.text, "type", st);
    else if (ts.isModuleDeclaration(st) && ts.isIdentifier(st.name)) {
      // `declare global { }` declares no name: it is module code
      if (!(st.flags & ts.NodeFlags.GlobalAugmentation)) add(st.name.text, "namespace", st);
    }
    else if (ts.isVariableStatement(st)) {
      const decls = st.declarationList.declarations;
      if (decls.length === 1 && ts.isIdentifier(decls[0].name)) add(decls[0].name.text, "variable", st);
    } else if (ts.isClassDeclaration(st) && nameOf(st)) {
      for (const m of st.members) {
        const ctor = ts.isConstructorDeclaration(m);
        const n = ctor ? "constructor" : nameOf(m);
        if (n && (ctor || ts.isMethodDeclaration(m) || ts.isGetAccessor(m) || ts.isSetAccessor(m)))
          add(`${st.name.text}.${n}`, "method", m);
      }
    }
  }
}
process.stdout.write(JSON.stringify(out));
"""

# Words the builder leaves out by design: `export`/`declare`/`default` wrap a declaration
# (they are not part of it in tree-sitter's tree, and no question is about them).
TS_WRAPPERS = Counter({"export": 99, "declare": 99, "default": 99})


@pytest.fixture(scope="session")
def npm_packages() -> Path:
    """rxjs and the TypeScript compiler from the npm registry, cached across runs."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if not npm or not node:
        pytest.skip("node/npm not installed: the TypeScript fidelity check needs them")
    target = NPM_CACHE / "fidelity"
    modules = target / "node_modules"
    if not (modules / "rxjs" / "src" / "index.ts").is_file() or not (modules / "typescript").is_dir():
        target.mkdir(parents=True, exist_ok=True)
        cmd = [
            npm,
            "install",
            "--prefix",
            str(target),
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            RXJS,
            TYPESCRIPT,
        ]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            pytest.skip("npm registry unreachable (npm install timed out after 300 s)")
        if done.returncode != 0:
            pytest.skip(f"npm install {RXJS} {TYPESCRIPT} failed: {done.stderr.strip()[-300:]}")
    return modules


@pytest.mark.skipif(bool(_grammar_missing("typescript")), reason="tree-sitter TypeScript grammar unavailable")
def test_typescript_units_hold_every_declaration_of_rxjs(npm_packages: Path, tmp_path: Path) -> None:
    root = npm_packages / "rxjs" / "src"
    units = {u.id: u for u in build_corpus(root, include=["**/*.ts"], excerpt_chars=HUGE)}
    files = sorted({u.path for u in units.values()})
    assert len(files) == 251
    script = tmp_path / "ts_spans.js"
    script.write_text(TS_SPANS_JS, encoding="utf-8")
    done = subprocess.run(
        ["node", str(script), str(npm_packages / "typescript"), str(root)],
        input=json.dumps(files),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    spans = json.loads(done.stdout)
    by_name: dict[str, list[dict]] = {}
    for s in spans:
        by_name.setdefault(f"{s['file']}::{s['qualname']}", []).append(s)
    sources = {f: (root / f).read_text(encoding="utf-8") for f in files}
    failures = []
    for uid, decls in by_name.items():
        unit = units.get(uid)
        if unit is None:
            failures.append(f"{uid}: no unit")
            continue
        words = sum((_words(sources[d["file"]][d["start"] : d["end"]]) for d in decls), Counter())
        lost = _missing(words, unit.text) - TS_WRAPPERS
        if lost:
            failures.append(f"{uid}: {dict(lost.most_common(6))}")
    assert not failures, _report(failures, len(by_name))
    # the check is not vacuous: overloads and declaration merges are among the definitions
    overloaded = [
        uid for uid, decls in by_name.items() if sum(d["kind"] in ("function", "method") for d in decls) > 1
    ]
    merged = [uid for uid, decls in by_name.items() if len({d["kind"] for d in decls}) > 1]
    assert len(overloaded) >= 81 and len(merged) >= 9
    assert all(units[uid].metadata.get("overloads") for uid in overloaded)
    assert all(units[uid].metadata.get("merged_kinds") for uid in merged)


# ---------------------------------------------------------------------------
# Python: packages in this venv, spans from `ast`


def _python_words(segment: str, docstring_row: int) -> Counter:
    """Words of names, numbers, strings and comments, via the `tokenize` module.

    The docstring (the string token starting on `docstring_row`, 1-based in `segment`; 0 for
    none) counts as its value, as `ast.get_docstring` gives it: escapes such as `\\n` are not
    words of the text a reader sees.
    """
    words: Counter = Counter()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(segment).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return _words(segment)
    for tok in tokens:
        if tok.type == tokenize.STRING and tok.start[0] == docstring_row:
            try:
                value = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError):
                value = tok.string
            words += _words(value if isinstance(value, str) else tok.string)
        elif tok.type in (tokenize.NAME, tokenize.NUMBER, tokenize.COMMENT, tokenize.STRING):
            words += _words(tok.string)
    return words


def _python_definitions(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    out: list[tuple[str, ast.AST]] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                out.append((f"{prefix}{node.name}", node))
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")

    visit(tree.body, "")
    return out


@pytest.mark.parametrize("package", ["click", "pydantic"])
def test_python_units_hold_every_definition(package: str) -> None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{package} is not installed in this environment")
    root = Path(next(iter(spec.submodule_search_locations)))
    units = {u.id: u for u in build_corpus(root, include=["**/*.py"], excerpt_chars=HUGE)}
    checked, overloaded, failures = 0, 0, []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if "__pycache__" in rel:
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        groups: dict[str, list[ast.AST]] = {}
        for qualname, node in _python_definitions(ast.parse("\n".join(lines))):
            groups.setdefault(qualname, []).append(node)
        for qualname, nodes in groups.items():
            checked += 1
            uid = f"{rel}::{qualname}"
            unit = units.get(uid)
            if unit is None:
                failures.append(f"{uid}: no unit")
                continue
            overloaded += len(nodes) > 1 and bool(unit.metadata.get("overloads"))
            words: Counter = Counter()
            for node in nodes:
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
                segment = "\n".join(lines[start : node.end_lineno])
                first = node.body[0]
                is_doc = isinstance(first, ast.Expr) and isinstance(
                    getattr(first, "value", None), ast.Constant
                )
                doc_row = first.lineno - start if is_doc and isinstance(first.value.value, str) else 0
                words += _python_words(textwrap.dedent(segment), doc_row)
            lost = _missing(words, unit.text)
            if lost:
                failures.append(f"{uid}: {dict(lost.most_common(6))}")
    assert not failures, _report(failures, checked)
    assert overloaded >= 5, f"{package}: only {overloaded} overloaded functions found; the check needs them"


# ---------------------------------------------------------------------------
# Go: go/types from the Go toolchain's own sources, spans from go/parser

GO_SPANS = r"""
package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
)

type span struct {
	File, Qualname, Kind string
	Start, End           int
}

func recvName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

func main() {
	root := os.Args[1]
	var out []span
	fset := token.NewFileSet()
	for _, rel := range os.Args[2:] {
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.ParseComments)
		if err != nil {
			panic(err)
		}
		off := func(p token.Pos) int { return fset.Position(p).Offset }
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				name, kind := d.Name.Name, "function"
				if d.Recv != nil && len(d.Recv.List) > 0 {
					name, kind = recvName(d.Recv.List[0].Type)+"."+name, "method"
				}
				start := d.Pos()
				if d.Doc != nil {
					start = d.Doc.Pos()
				}
				out = append(out, span{rel, name, kind, off(start), off(d.End())})
			case *ast.GenDecl:
				if d.Tok != token.TYPE {
					continue
				}
				for _, s := range d.Specs {
					ts := s.(*ast.TypeSpec)
					start := ts.Pos()
					if ts.Doc != nil {
						start = ts.Doc.Pos()
					} else if len(d.Specs) == 1 && d.Doc != nil {
						start = d.Doc.Pos()
					}
					out = append(out, span{rel, ts.Name.Name, "type", off(start), off(ts.End())})
				}
			}
		}
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
"""


def _goroot() -> Path | None:
    go = shutil.which("go")
    if not go:
        return None
    done = subprocess.run([go, "env", "GOROOT"], capture_output=True, text=True, timeout=60)
    root = Path(done.stdout.strip())
    return root if (root / "src" / "go" / "types").is_dir() else None


@pytest.mark.skipif(bool(_grammar_missing("go")), reason="tree-sitter Go grammar unavailable")
def test_go_units_hold_every_declaration_of_go_types(tmp_path: Path) -> None:
    goroot = _goroot()
    if goroot is None:
        pytest.skip("no Go toolchain with sources (Debian: apt-get install golang-go)")
    src = goroot / "src"
    units = {u.id: u for u in build_corpus(src, include=["go/types/*.go"], excerpt_chars=HUGE)}
    files = sorted({u.path for u in units.values()})
    helper = tmp_path / "spans.go"
    helper.write_text(GO_SPANS, encoding="utf-8")
    env = {**os.environ, "GOCACHE": str(tmp_path / "gocache"), "GOFLAGS": "", "GO111MODULE": "off"}
    done = subprocess.run(
        ["go", "run", str(helper), str(src), *files],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    spans = json.loads(done.stdout)
    sources = {f: (src / f).read_bytes() for f in files}
    failures = []
    declared_in: dict[str, str] = {s["Qualname"]: s["File"] for s in spans if s["Kind"] == "type"}
    across = 0
    for s in spans:
        uid = f"{s['File']}::{s['Qualname']}"
        unit = units.get(uid)
        if unit is None:
            failures.append(f"{uid}: no unit")
            continue
        text = sources[s["File"]][s["Start"] : s["End"]].decode("utf-8")
        lost = _missing(_words(text), unit.text) - Counter({"type": 1})  # `type` of a grouped block
        if s["Qualname"] == "init":
            lost = Counter()  # several init() in one file are one unit: checked as a group below
        if lost:
            failures.append(f"{uid}: {dict(lost.most_common(6))}")
        recv = s["Qualname"].split(".")[0] if s["Kind"] == "method" else ""
        across += bool(recv) and declared_in.get(recv, s["File"]) != s["File"]
    inits: dict[str, Counter] = {}
    for s in spans:
        if s["Qualname"] == "init":
            text = sources[s["File"]][s["Start"] : s["End"]].decode("utf-8")
            inits[s["File"]] = inits.get(s["File"], Counter()) + _words(text)
    for file, words in inits.items():
        lost = _missing(words, units[f"{file}::init"].text)
        if lost:
            failures.append(f"{file}::init: {dict(lost.most_common(6))}")
    assert not failures, _report(failures, len(spans))
    assert across >= 100, f"only {across} methods declared away from their type; the check needs them"
