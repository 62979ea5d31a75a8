"""Go and TypeScript/JavaScript files -> symbol units, parsed with tree-sitter.

This module picks the grammar and the language's extractor (`go_src.GoExtractor`,
`ts_src.TsExtractor`, both following `syntax.Extractor`) by file extension, then resolves
references across files. Same ID convention as Python: `path/file.go` is the file (module)
unit, `path/file.go::Func`, `path/file.go::Type.Method` (receiver type without `*` or type
parameters), `path/file.ts::Class.method`, `path/file.ts::func` (a top-level
`const f = () => ...` counts as function `f`). Kinds: module, function, method, class (TS/JS
classes), interface, type (Go struct/other types, TS type aliases and enums), namespace (TS),
var and const (Go package-level `var`/`const`, one unit per name in grouped `var ( ... )`
blocks too; TS/JS top-level non-function declarations). Every unit records `qualifier` (Go
package name, TS/JS module path without extension) and `qualified_name` (`shapes.Rect.Area`),
so `pkg.Name` finds it.

Relations are resolved by name, without type inference: a call `f()` resolves to
a function of the same file (Go: then of the same package directory) or to a
name imported from a corpus file; `this.m()` / a Go receiver's `r.m()` to a
method of the enclosing type (TS: or of a corpus base class); `pkg.F()` /
`ns.f()` through an import of a corpus package/file. Anything else is dropped.
`imports` holds corpus file unit IDs; the raw import strings are kept in the
module unit's `imports_raw` metadata. `inherits`: TS `extends` (classes and interfaces),
Go interface embedding. `implements`: TS `implements`, Go method sets compared within the
corpus (`go_src.go_implements`). `references`: a function or method used as a value (passed
as an argument, `Run: runServe` in a composite literal). `subcommands`:
`parent.AddCommand(child, ...)`, stored on `parent` (a package-level command variable or
the factory function), else on the unit whose code registers.

Grammars come from the per-language wheels (`tree-sitter-go`,
`tree-sitter-typescript`, `tree-sitter-javascript`) or, failing that, from
`tree-sitter-language-pack` when it ships the grammar itself: the builder never
lets the pack download a grammar at run time.
"""

from __future__ import annotations

import importlib
import posixpath
from collections.abc import Callable, Sequence
from typing import Any

from evalpipe.core import Unit
from evalpipe.corpus.draft import SourceParseError, find_in_bases
from evalpipe.corpus.go_src import GoExtractor, go_implements
from evalpipe.corpus.qualify import qualified
from evalpipe.corpus.syntax import Extractor, SourceFile, first_error_line
from evalpipe.corpus.ts_src import TsExtractor

DEFAULT_EXCERPT_CHARS = 1200
INSTALL_HINT = "pip install 'evalpipe[treesitter]'"

#: file extension -> (unit language, grammar name)
EXTENSIONS: dict[str, tuple[str, str]] = {
    ".go": ("go", "go"),
    ".ts": ("typescript", "typescript"),
    ".mts": ("typescript", "typescript"),
    ".cts": ("typescript", "typescript"),
    ".tsx": ("typescript", "tsx"),
    ".js": ("javascript", "javascript"),
    ".jsx": ("javascript", "javascript"),
    ".mjs": ("javascript", "javascript"),
    ".cjs": ("javascript", "javascript"),
}
_TS_RESOLVE_EXTS = (".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs")

# grammar name -> (module of the per-language wheel, attribute returning the language pointer)
_GRAMMAR_WHEELS = {
    "go": ("tree_sitter_go", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "javascript": ("tree_sitter_javascript", "language"),
}


class TreeSitterUnavailable(RuntimeError):
    """tree-sitter or a grammar is missing; the message says what to install."""


class TreeSitterParseError(SourceParseError):
    """A file whose syntax tree has errors; `line` is the first error's line."""


_PARSERS: dict[str, Any] = {}


def get_parser(grammar: str) -> Any:
    """A cached tree-sitter parser for `grammar` (go, typescript, tsx, javascript)."""
    if grammar in _PARSERS:
        return _PARSERS[grammar]
    try:
        # lazy: tree_sitter, ~3 ms (in a try)
        import tree_sitter
    except ImportError:
        raise TreeSitterUnavailable(
            f"tree-sitter is not installed (needed for {grammar}): {INSTALL_HINT}"
        ) from None
    module_name, attr = _GRAMMAR_WHEELS[grammar]
    parser = None
    try:
        language = getattr(importlib.import_module(module_name), attr)()
        parser = tree_sitter.Parser(tree_sitter.Language(language))
    except ImportError:
        parser = _pack_parser(grammar)
    _PARSERS[grammar] = parser
    return parser


def _pack_parser(grammar: str) -> Any:
    try:
        # lazy: standard library, <1 ms (in a try)
        import tree_sitter_language_pack as pack
    except ImportError:
        raise TreeSitterUnavailable(
            f"no tree-sitter grammar for {grammar!r}: {INSTALL_HINT} "
            "(or install the grammar wheel tree-sitter-go / tree-sitter-typescript / tree-sitter-javascript)"
        ) from None
    # Pack releases >= 1.0 download grammars on first use; never do that at build time.
    downloaded = getattr(pack, "downloaded_languages", None)
    if downloaded is not None and grammar not in downloaded():
        raise TreeSitterUnavailable(
            f"tree-sitter-language-pack has no local grammar for {grammar!r} and would download it: "
            f"install the grammar wheel (tree-sitter-{'typescript' if grammar == 'tsx' else grammar}) "
            f"or {INSTALL_HINT}"
        )
    return pack.get_parser(grammar)


# ---------------------------------------------------------------------------
# extraction (per language: go_src.GoExtractor, ts_src.TsExtractor)


def extract_tree_sitter(
    source: bytes, path: str, excerpt_chars: int = DEFAULT_EXCERPT_CHARS, strict: bool = False
) -> SourceFile:
    """Parse one Go/TS/JS file into drafts (language chosen by extension).

    tree-sitter recovers from syntax errors, so a broken file still yields units;
    with `strict=True` it raises TreeSitterParseError naming the first error line.
    """
    ext = posixpath.splitext(path)[1].lower()
    if ext not in EXTENSIONS:
        raise ValueError(f"{path}: not a tree-sitter source (extensions: {', '.join(sorted(EXTENSIONS))})")
    language, grammar = EXTENSIONS[ext]
    tree = get_parser(grammar).parse(source)
    if strict and tree.root_node.has_error:
        line = first_error_line(tree.root_node) or 1
        raise TreeSitterParseError(path, line, f"{language} syntax error")
    ex: Extractor = (GoExtractor if language == "go" else TsExtractor)(source, path, language, excerpt_chars)
    ex.extract(tree.root_node)
    go_types = ex.types if isinstance(ex, GoExtractor) else None
    return SourceFile(path, language, ex.drafts, ex.imports_raw, ex.bindings, ex.package, go_types)


# ---------------------------------------------------------------------------
# resolution


def _resolve_ts_spec(spec: str, from_path: str, known: set[str]) -> str | None:
    if not spec.startswith("."):
        return None
    base = posixpath.normpath(posixpath.join(posixpath.dirname(from_path), spec))
    stem, ext = posixpath.splitext(base)
    candidates = [base] if ext else []
    if ext in (".js", ".jsx", ".mjs", ".cjs"):  # TS sources import their compiled names
        candidates += [stem + e for e in _TS_RESOLVE_EXTS]
    candidates += [base + e for e in _TS_RESOLVE_EXTS]
    candidates += [f"{base}/index{e}" for e in _TS_RESOLVE_EXTS]
    return next((c for c in candidates if c in known), None)


def resolve_tree_sitter(files: Sequence[SourceFile], go_module: str = "") -> list[Unit]:
    """Turn drafts into units, resolving calls/imports/inherits across the given files.

    `go_module` is the module path from `go.mod` at the corpus root; Go imports under it
    resolve to the corpus files of that package directory.
    """
    known = {f.path for f in files}
    by_path = {f.path: f for f in files}
    kinds: dict[str, str] = {}
    top: dict[str, dict[str, str]] = {}  # path -> top-level qualname -> id
    go_dirs: dict[str, list[SourceFile]] = {}
    for f in files:
        top[f.path] = {d.qualname: d.id for d in f.drafts if d.kind != "module"}
        for d in f.drafts:
            kinds[d.id] = d.kind
        if f.language == "go":
            go_dirs.setdefault(posixpath.dirname(f.path), []).append(f)

    def go_package_files(f: SourceFile) -> list[SourceFile]:
        return [g for g in go_dirs.get(posixpath.dirname(f.path), []) if g.package == f.package]

    def go_import_dir(spec: str) -> str | None:
        if go_module == "std":  # Go's own src/: `import "net/http"` is the directory net/http
            rel = spec
        elif not go_module or not (spec == go_module or spec.startswith(go_module + "/")):
            return None
        else:
            rel = spec[len(go_module) + 1 :]
        return rel if rel in go_dirs or (rel == "" and "" in go_dirs) else None

    def in_files(candidates: Sequence[SourceFile], qualname: str) -> str | None:
        for g in candidates:
            if qualname in top[g.path]:
                return top[g.path][qualname]
        return None

    def lookup(f: SourceFile, qualname: str) -> str | None:
        if qualname in top[f.path]:
            return top[f.path][qualname]
        if f.language == "go":
            return in_files(go_package_files(f), qualname)
        return None

    def imported(f: SourceFile, local: str, member: str | None) -> str | None:
        spec, name = f.bindings.get(local, ("", ""))
        if not spec:
            return None
        if f.language == "go":
            d = go_import_dir(spec)
            return in_files(go_dirs[d], member) if d is not None and member else None
        target = _resolve_ts_spec(spec, f.path, known)
        if target is None:
            return None
        wanted = member if name == "" else (None if member else name)
        if not wanted or wanted == "default":
            return None
        return top[target].get(wanted)

    def resolve_ref(f: SourceFile, ref: tuple[str, ...]) -> str | None:
        if not ref:
            return None
        if ref[0] == "name":
            return lookup(f, ref[1]) or imported(f, ref[1], None)
        if ref[0] == "member":
            return imported(f, ref[1], ref[2]) or lookup(f, f"{ref[1]}.{ref[2]}")
        return None

    type_kinds = ("class", "interface")

    def resolve_all(
        f: SourceFile, d: Any, refs: Sequence[tuple[str, ...]], wanted: Sequence[str]
    ) -> list[str]:
        ids: list[str] = []
        for ref in refs:
            target = resolve_ref(f, ref)
            if target and target != d.id and kinds.get(target) in wanted and target not in ids:
                ids.append(target)
        return ids

    bases_of: dict[str, list[str]] = {}
    # unit ID -> relation kind -> targets, for edges not stored on the unit whose code names them
    extra: dict[str, dict[str, list[str]]] = {}

    def add_edges(source: str, kind: str, targets: Sequence[str]) -> None:
        known = extra.setdefault(source, {}).setdefault(kind, [])
        known.extend(t for t in targets if t != source and t not in known)

    for f in files:
        for d in f.drafts:
            ids = resolve_all(f, d, d.raw_bases, type_kinds)
            if ids:
                bases_of[d.id] = ids
            add_edges(d.id, "implements", resolve_all(f, d, d.raw_implements, type_kinds))
    go_files = [f for f in files if f.language == "go" and f.go_types is not None]
    if go_files:
        for type_id, interfaces in go_implements(go_files, resolve_ref, kinds).items():
            add_edges(type_id, "implements", interfaces)

    def method_of(f: SourceFile, class_qualname: str, name: str) -> str | None:
        start = lookup(f, class_qualname)
        if start is None:  # Go: the receiver type may be declared outside the corpus files
            return lookup(f, f"{class_qualname}.{name}")

        def on_class(cid: str) -> str | None:
            path, qual = cid.split("::", 1)
            return lookup(by_path[path], f"{qual}.{name}")

        return find_in_bases(start, bases_of, on_class)

    def resolve_value(f: SourceFile, d: Any, ref: tuple[str, ...]) -> str | None:
        if ref[0] == "self":
            return method_of(f, d.class_qualname, ref[1]) if d.class_qualname else None
        return resolve_ref(f, ref)

    func_kinds = ("function", "method")
    for f in files:
        for d in f.drafts:
            refs = [
                t for t in (resolve_value(f, d, r) for r in d.raw_refs) if t and kinds.get(t) in func_kinds
            ]
            add_edges(d.id, "references", refs)
            for parent_ref, child_refs in d.raw_subcommands:
                parent = resolve_ref(f, parent_ref) if parent_ref else None
                if parent is None or kinds.get(parent) not in ("var", "const", "function", "method"):
                    parent = d.id  # a local `cmd := &cobra.Command{}`: the enclosing unit registers
                children = [resolve_value(f, d, r) for r in child_refs]
                add_edges(parent, "subcommands", [c for c in children if c and kinds.get(c) != "module"])

    units = []
    callable_kinds = {"function", "method", "class", "type"}
    for f in files:
        imports: list[str] = []
        for spec in f.imports_raw:
            if f.language == "go":
                d = go_import_dir(spec)
                targets = sorted(g.path for g in go_dirs[d]) if d is not None else []
            else:
                t = _resolve_ts_spec(spec, f.path, known)
                targets = [t] if t else []
            imports.extend(t for t in targets if t != f.path and t not in imports)
        for d in f.drafts:
            calls: list[str] = []
            for ref in d.raw_calls:
                if ref[0] == "self":
                    target = method_of(f, d.class_qualname, ref[1]) if d.class_qualname else None
                else:
                    target = resolve_ref(f, ref)
                if target and target != d.id and kinds.get(target) in callable_kinds and target not in calls:
                    calls.append(target)
            relations = d.relations(calls, imports, bases_of.get(d.id, []), extra.get(d.id))
            meta = dict(d.metadata)
            title = meta.pop("title", d.qualname)
            qualifier = f.package if f.language == "go" else posixpath.splitext(f.path)[0]
            if f.language == "go":
                meta["package"] = f.package
            meta["qualifier"] = qualifier
            meta["qualified_name"] = qualified(qualifier, d.qualname)
            units.append(
                Unit(
                    id=d.id,
                    kind=d.kind,
                    title=title,
                    text=d.text,
                    path=f.path,
                    language=f.language,
                    relations=relations,
                    metadata=meta,
                )
            )
    return units


def build_tree_sitter_units(
    sources: Sequence[tuple[str, bytes]],
    excerpt_chars: int = DEFAULT_EXCERPT_CHARS,
    go_module: str = "",
    on_error: Callable[[str, int, str], None] | None = None,
) -> list[Unit]:
    """Units for `(relative_path, source bytes)` pairs of Go/TS/JS files.

    Files with syntax errors are reported to `on_error(path, line, message)` and
    skipped (a partial tree would give half-right units); without `on_error` they raise.
    """
    files = []
    for path, source in sources:
        try:
            files.append(extract_tree_sitter(source, path, excerpt_chars, strict=True))
        except TreeSitterParseError as exc:
            if on_error is None:
                raise
            on_error(exc.path, exc.line, exc.message)
    return resolve_tree_sitter(files, go_module)
