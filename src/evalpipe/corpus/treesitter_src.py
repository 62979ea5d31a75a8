"""Go and TypeScript/JavaScript files -> symbol units, parsed with tree-sitter.

Same ID convention as Python: `path/file.go` is the file (module) unit,
`path/file.go::Func`, `path/file.go::Type.Method` (receiver type without `*` or
type parameters), `path/file.ts::Class.method`, `path/file.ts::func` (a top-level
`const f = () => ...` counts as function `f`). Kinds: module, function, method,
class (TS/JS classes), interface, type (Go struct/other types, TS type aliases
and enums), var and const (Go package-level `var`/`const`, one unit per name in
grouped `var ( ... )` blocks too; TS/JS top-level non-function declarations).
Every unit records `qualifier` (Go package name, TS/JS module path without
extension) and `qualified_name` (`shapes.Rect.Area`), so `pkg.Name` finds it.

Relations are resolved by name, without type inference: a call `f()` resolves to
a function of the same file (Go: then of the same package directory) or to a
name imported from a corpus file; `this.m()` / a Go receiver's `r.m()` to a
method of the enclosing type (TS: or of a corpus base class); `pkg.F()` /
`ns.f()` through an import of a corpus package/file. Anything else is dropped.
`imports` holds corpus file unit IDs; the raw import strings are kept in the
module unit's `imports_raw` metadata. TS `extends` gives `inherits`.

Grammars come from the per-language wheels (`tree-sitter-go`,
`tree-sitter-typescript`, `tree-sitter-javascript`) or, failing that, from
`tree-sitter-language-pack` when it ships the grammar itself: the builder never
lets the pack download a grammar at run time.
"""

from __future__ import annotations

import importlib
import posixpath
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evalpipe.corpus.draft import Draft, SourceParseError, find_in_bases
from evalpipe.corpus.model import Unit
from evalpipe.corpus.qualify import qualified

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
# extraction


@dataclass
class SourceFile:
    """One parsed file: drafts in source order plus its imports."""

    path: str
    language: str
    drafts: list[Draft]
    imports_raw: list[str]
    # local name -> (import spec, imported name; "" for a namespace/package binding)
    bindings: dict[str, tuple[str, str]]
    package: str = ""


def _text(node: Any) -> str:
    return node.text.decode("utf-8", errors="replace")


def _collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit + 1)
    return text[: cut if cut >= limit // 2 else limit].rstrip()


def clean_comment(raw: str) -> str:
    """Comment text without `//`, `/* */` or the leading `*` of JSDoc lines."""
    raw = raw.strip()
    if raw.startswith("/*"):
        body = raw[3:] if raw.startswith("/**") else raw[2:]
        body = body[:-2] if body.endswith("*/") else body
        lines = [re.sub(r"^\s*\* ?", "", line) for line in body.split("\n")]
        return "\n".join(lines).strip()
    return re.sub(r"^// ?", "", raw)


def _doc_before(node: Any) -> str:
    """Comments directly above `node` (no blank line in between), oldest first."""
    comments = []
    current = node
    prev = node.prev_sibling
    while prev is not None and prev.type == "comment" and prev.end_point.row >= current.start_point.row - 1:
        comments.append(clean_comment(_text(prev)))
        current = prev
        prev = prev.prev_sibling
    return "\n".join(reversed(comments))


def _signature(node: Any, body: Any | None, prefix: str = "") -> str:
    src = node.text
    head = src[: body.start_byte - node.start_byte] if body is not None else src.split(b"\n", 1)[0]
    sig = _collapse(head.decode("utf-8", errors="replace"))
    for tail in ("{", "=>", ";"):
        sig = sig.removesuffix(tail).rstrip()
    return prefix + sig


def _excerpt(lines: list[str], node: Any, body: Any | None, limit: int) -> str:
    if body is None:
        return _clip(textwrap.dedent(_text(node)), limit)
    start, end = body.start_point.row, body.end_point.row
    if end - start < 2:
        return _clip(_text(body), limit)
    return _clip(textwrap.dedent("\n".join(lines[start + 1 : end])), limit)


class _Extractor:
    """Shared walk for Go and TS/JS; language-specific parts are the `_go_*`/`_ts_*` methods."""

    def __init__(self, source: bytes, path: str, language: str, excerpt_chars: int):
        self.source = source
        self.path = path
        self.language = language
        self.limit = excerpt_chars
        self.lines = source.decode("utf-8", errors="replace").splitlines()
        self.drafts: list[Draft] = []
        self.imports_raw: list[str] = []
        self.bindings: dict[str, tuple[str, str]] = {}
        self.package = ""

    def add(
        self,
        parent: Draft,
        kind: str,
        name: str,
        qualname: str,
        node: Any,
        doc_anchor: Any,
        body: Any | None,
        signature: str,
        class_qualname: str = "",
        excerpt: str | None = None,
    ) -> Draft:
        existing = next((d for d in self.drafts if d.qualname == qualname and d.kind != "module"), None)
        if existing is not None:  # overloads, Go init(): one unit, calls merged by the caller
            existing.metadata["end_line"] = max(existing.metadata["end_line"], node.end_point.row + 1)
            return existing
        doc = _doc_before(doc_anchor)
        body_text = excerpt if excerpt is not None else _excerpt(self.lines, node, body, self.limit)
        draft = Draft(
            id=f"{self.path}::{qualname}",
            kind=kind,
            name=name,
            qualname=qualname,
            text="\n\n".join(t for t in (signature, doc, body_text) if t),
            metadata={
                "name": name,
                "qualname": qualname,
                "signature": signature,
                "docstring": doc,
                "line": node.start_point.row + 1,
                "end_line": node.end_point.row + 1,
                "module": self.path,
                "parent": parent.id,
            },
            class_qualname=class_qualname,
        )
        parent.contains.append(draft.id)
        self.drafts.append(draft)
        return draft

    # -- calls -------------------------------------------------------------

    def calls_in(self, nodes: Sequence[Any], receiver: str = "", skip: Callable[[Any], bool] | None = None):
        out: list[tuple[str, ...]] = []
        stack = list(reversed(nodes))
        while stack:
            node = stack.pop()
            if skip is not None and skip(node):
                continue
            ref = self._call_ref(node, receiver)
            if ref:
                out.append(ref)
            stack.extend(reversed(node.children))
        return out

    def _call_ref(self, node: Any, receiver: str) -> tuple[str, ...] | None:
        if node.type == "call_expression":
            fn = node.child_by_field_name("function")
        elif node.type == "new_expression":
            fn = node.child_by_field_name("constructor")
        else:
            return None
        if fn is None:
            return None
        if fn.type == "identifier":
            return ("name", _text(fn))
        if fn.type == "selector_expression":  # Go: x.F
            operand, fld = fn.child_by_field_name("operand"), fn.child_by_field_name("field")
            if operand is not None and fld is not None and operand.type == "identifier":
                obj = _text(operand)
                return ("self", _text(fld)) if receiver and obj == receiver else ("member", obj, _text(fld))
        if fn.type == "member_expression":  # TS/JS: this.m / ns.f
            obj, prop = fn.child_by_field_name("object"), fn.child_by_field_name("property")
            if obj is not None and prop is not None:
                if obj.type == "this":
                    return ("self", _text(prop))
                if obj.type == "identifier":
                    return ("member", _text(obj), _text(prop))
        return None

    # -- module ------------------------------------------------------------

    def module_draft(self, root: Any) -> Draft:
        title = self.path.rsplit(".", 1)[0]
        return Draft(
            id=self.path,
            kind="module",
            name=posixpath.basename(title),
            qualname="",
            text="",
            metadata={
                "name": posixpath.basename(title),
                "qualname": "",
                "signature": "",
                "docstring": "",
                "line": 1,
                "end_line": max(len(self.lines), 1),
                "module": self.path,
            },
        )

    def finish_module(self, mod: Draft, doc: str, title: str) -> None:
        mod.metadata["docstring"] = doc
        mod.metadata["imports_raw"] = list(dict.fromkeys(self.imports_raw))
        if self.package:
            mod.metadata["package"] = self.package
        defined = [d.name for d in self.drafts if d.metadata.get("parent") == mod.id]
        parts = [f"module {title}", doc]
        if defined:
            parts.append("defines: " + ", ".join(defined))
        if self.imports_raw:
            parts.append("imports: " + ", ".join(dict.fromkeys(self.imports_raw)))
        mod.text = "\n\n".join(p for p in parts if p)
        mod.metadata["title"] = title

    # -- Go ----------------------------------------------------------------

    def go(self, root: Any) -> None:
        mod = self.module_draft(root)
        self.drafts.append(mod)
        module_doc = ""
        top_level_other = []
        for child in root.children:
            t = child.type
            if t == "package_clause":
                module_doc = _doc_before(child)
                for c in child.children:
                    if c.type == "package_identifier":
                        self.package = _text(c)
            elif t == "import_declaration":
                for spec in _descendants(child, "import_spec"):
                    path_node = spec.child_by_field_name("path")
                    if path_node is None:
                        continue
                    raw = _text(path_node).strip('"`')
                    self.imports_raw.append(raw)
                    alias = spec.child_by_field_name("name")
                    local = _text(alias) if alias is not None else raw.rsplit("/", 1)[-1]
                    if local not in ("_", "."):
                        self.bindings[local] = (raw, "")
            elif t == "function_declaration":
                name = _text(child.child_by_field_name("name"))
                body = child.child_by_field_name("body")
                d = self.add(mod, "function", name, name, child, child, body, _signature(child, body))
                d.raw_calls += self.calls_in([body] if body is not None else [])
            elif t == "method_declaration":
                name = _text(child.child_by_field_name("name"))
                recv_name, recv_type = _go_receiver(child.child_by_field_name("receiver"))
                body = child.child_by_field_name("body")
                qual = f"{recv_type}.{name}" if recv_type else name
                # methods may live in another file than their type; they hang off the file
                parent = next((d for d in self.drafts if d.qualname == recv_type and d.kind != "module"), mod)
                d = self.add(
                    parent, "method", name, qual, child, child, body, _signature(child, body), recv_type
                )
                d.raw_calls += self.calls_in([body] if body is not None else [], receiver=recv_name)
            elif t == "type_declaration":
                for spec in child.children:
                    if spec.type not in ("type_spec", "type_alias"):
                        continue
                    name = _text(spec.child_by_field_name("name"))
                    type_node = spec.child_by_field_name("type")
                    kind = (
                        "interface"
                        if type_node is not None and type_node.type == "interface_type"
                        else "type"
                    )
                    spec_text = _text(spec)
                    brace = spec_text.find("{")
                    sig = "type " + _collapse(
                        spec_text[:brace] if brace >= 0 else spec_text.split("\n", 1)[0]
                    )
                    # a grouped `type ( ... )` documents each spec; a single one, the declaration
                    anchor = spec if _doc_before(spec) or len(child.children) > 2 else child
                    excerpt = _clip(textwrap.dedent(_text(spec)), self.limit)
                    d = self.add(mod, kind, name, name, spec, anchor, None, sig.rstrip(), excerpt=excerpt)
                    d.raw_calls += self.calls_in([type_node] if type_node is not None else [])
            elif t in ("var_declaration", "const_declaration"):
                self._go_values(mod, child, "var" if t == "var_declaration" else "const")
            elif t != "comment":
                top_level_other.append(child)
        mod.raw_calls += self.calls_in(top_level_other)
        self.finish_module(mod, module_doc, self.package or mod.name)

    def _go_values(self, mod: Draft, decl: Any, kind: str) -> None:
        """Package-level `var`/`const` (single or grouped `var ( ... )`): one unit per name.

        Real fixtures name them as answers (`var initCmd = &cobra.Command{...}`); calls in
        the value (a `Run: func() { ... }` literal) belong to that unit.
        """
        specs = _descendants(decl, f"{kind}_spec")
        grouped = len(specs) > 1 or any(c.type in ("(", "var_spec_list") for c in decl.children)
        for spec in specs:
            names = [c for c in spec.children if c.type == "identifier"]
            value = spec.child_by_field_name("value")
            # a grouped spec documents itself; a single declaration is documented above `var`
            anchor = spec if grouped else decl
            text = _clip(textwrap.dedent(_text(spec)), self.limit)
            sig = f"{kind} " + _collapse(_text(spec).split("\n", 1)[0])
            for ident in names:
                name = _text(ident)
                if name == "_":
                    continue
                d = self.add(mod, kind, name, name, spec, anchor, None, sig, excerpt=text)
                d.raw_calls += self.calls_in([value] if value is not None else [])

    # -- TypeScript / JavaScript ----------------------------------------------

    _TS_CLASS = ("class_declaration", "abstract_class_declaration", "class")
    _TS_FUNC = ("function_declaration", "generator_function_declaration", "function_signature")
    _TS_FUNC_VALUES = ("arrow_function", "function_expression", "function", "generator_function")

    def ts(self, root: Any) -> None:
        mod = self.module_draft(root)
        self.drafts.append(mod)
        module_doc = ""
        first = next((c for c in root.children if c.type not in ("comment", "hash_bang_line")), None)
        leading = [
            c
            for c in root.children
            if c.type == "comment" and (first is None or c.end_byte <= first.start_byte)
        ]
        if leading and (first is None or leading[-1].end_point.row < first.start_point.row - 1):
            module_doc = "\n".join(clean_comment(_text(c)) for c in leading)
        other: list[Any] = []
        for child in root.children:
            if child.type == "import_statement":
                self._ts_import(child)
                continue
            decl, anchor = child, child
            if child.type == "export_statement":
                decl = child.child_by_field_name("declaration") or child.child_by_field_name("value")
                src = child.child_by_field_name("source")
                if src is not None:  # export { x } from "./y"
                    self.imports_raw.append(_string_value(src))
                if decl is None:
                    continue
            if not self._ts_declaration(mod, decl, anchor):
                other.append(child)
        for node in other:
            self._ts_requires(node)
        mod.raw_calls += self.calls_in(other)
        self.finish_module(mod, module_doc, mod.id.rsplit(".", 1)[0])

    def _ts_import(self, node: Any) -> None:
        src = node.child_by_field_name("source")
        if src is None:
            return
        spec = _string_value(src)
        self.imports_raw.append(spec)
        for clause in (c for c in node.children if c.type == "import_clause"):
            for c in clause.children:
                if c.type == "identifier":  # default import
                    self.bindings[_text(c)] = (spec, "default")
                elif c.type == "namespace_import":
                    ident = next((x for x in c.children if x.type == "identifier"), None)
                    if ident is not None:
                        self.bindings[_text(ident)] = (spec, "")
                elif c.type == "named_imports":
                    for s in (x for x in c.children if x.type == "import_specifier"):
                        name = s.child_by_field_name("name")
                        alias = s.child_by_field_name("alias")
                        if name is not None:
                            self.bindings[_text(alias or name)] = (spec, _text(name))

    def _ts_requires(self, node: Any) -> None:
        """CommonJS `const x = require("./y")` counts as an import of ./y."""
        for call in _descendants(node, "call_expression"):
            fn = call.child_by_field_name("function")
            args = call.child_by_field_name("arguments")
            if fn is not None and _text(fn) == "require" and args is not None:
                strings = [a for a in args.children if a.type == "string"]
                if strings:
                    spec = _string_value(strings[0])
                    self.imports_raw.append(spec)
                    decl = call.parent
                    if decl is not None and decl.type == "variable_declarator":
                        name = decl.child_by_field_name("name")
                        if name is not None and name.type == "identifier":
                            self.bindings[_text(name)] = (spec, "")

    def _ts_declaration(self, mod: Draft, decl: Any, anchor: Any) -> bool:
        t = decl.type
        name_node = decl.child_by_field_name("name")
        if t in self._TS_CLASS and name_node is not None:
            self._ts_class(mod, decl, anchor, _text(name_node))
            return True
        if t in self._TS_FUNC and name_node is not None:
            name = _text(name_node)
            body = decl.child_by_field_name("body")
            d = self.add(mod, "function", name, name, decl, anchor, body, _signature(decl, body))
            d.raw_calls += self.calls_in([body] if body is not None else [])
            return True
        if t == "interface_declaration" and name_node is not None:
            name = _text(name_node)
            d = self.add(
                mod,
                "interface",
                name,
                name,
                decl,
                anchor,
                decl.child_by_field_name("body"),
                _signature(decl, decl.child_by_field_name("body")),
                excerpt=_clip(textwrap.dedent(_text(decl)), self.limit),
            )
            d.raw_bases = [
                r for c in decl.children if c.type == "extends_type_clause" for r in _ts_type_refs(c)
            ]
            return True
        if t in ("type_alias_declaration", "enum_declaration") and name_node is not None:
            name = _text(name_node)
            body = decl.child_by_field_name("body")
            self.add(
                mod,
                "type",
                name,
                name,
                decl,
                anchor,
                body,
                _signature(decl, body),
                excerpt=_clip(textwrap.dedent(_text(decl)), self.limit),
            )
            return True
        if t in ("lexical_declaration", "variable_declaration"):
            declarators = [c for c in decl.children if c.type == "variable_declarator"]
            funcs = [
                d
                for d in declarators
                if (v := d.child_by_field_name("value")) is not None
                and v.type in self._TS_FUNC_VALUES
                and (n := d.child_by_field_name("name")) is not None
                and n.type == "identifier"
            ]
            named = [
                d
                for d in declarators
                if (n := d.child_by_field_name("name")) is not None and n.type == "identifier"
            ]
            requires = any(
                _text(c.child_by_field_name("function") or c) == "require"
                for c in _descendants(decl, "call_expression")
            )
            if not declarators or len(named) != len(declarators) or requires:
                return False  # destructuring or CommonJS `require`: handled with the module's own code
            keyword = _text(decl.children[0])
            for dec in declarators:
                name = _text(dec.child_by_field_name("name"))
                value = dec.child_by_field_name("value")
                if dec in funcs:
                    body = value.child_by_field_name("body")
                    sig = _signature(dec, body, prefix=f"{keyword} ")
                    d = self.add(mod, "function", name, name, dec, anchor, body, sig)
                    d.raw_calls += self.calls_in([body] if body is not None else [])
                else:  # a top-level constant/variable: `export const DEFAULTS = {...}`
                    kind = "const" if keyword == "const" else "var"
                    sig = f"{keyword} " + _collapse(_text(dec).split("\n", 1)[0])
                    excerpt = _clip(textwrap.dedent(_text(dec)), self.limit)
                    d = self.add(mod, kind, name, name, dec, anchor, None, sig, excerpt=excerpt)
                    d.raw_calls += self.calls_in([value] if value is not None else [])
                d.metadata["line"] = decl.start_point.row + 1
            return True
        return False

    def _ts_class(self, parent: Draft, decl: Any, anchor: Any, name: str, prefix: str = "") -> None:
        qual = f"{prefix}.{name}" if prefix else name
        body = decl.child_by_field_name("body")
        members = list(body.children) if body is not None else []
        outline = []
        for m in members:
            if m.type in ("{", "}", ";", "comment"):
                continue
            mb = m.child_by_field_name("body")
            outline.append(_signature(m, mb) if m.type == "method_definition" else _collapse(_text(m)))
        d = self.add(
            parent,
            "class",
            name,
            qual,
            decl,
            anchor,
            body,
            _signature(decl, body),
            excerpt=_clip("\n".join(outline), self.limit),
        )
        for heritage in (c for c in decl.children if c.type == "class_heritage"):
            extends = [c for c in heritage.children if c.type == "extends_clause"]
            if extends:  # TypeScript: class_heritage > extends_clause > value
                for clause in extends:
                    d.raw_bases.extend(_expr_refs(v) for v in clause.children if v.is_named)
            else:  # JavaScript: class_heritage > "extends" expression
                d.raw_bases.extend(_expr_refs(v) for v in heritage.children if v.is_named)
        d.raw_bases = [b for b in d.raw_bases if b]
        other = []
        for m in members:
            if m.type in ("method_definition", "method_signature", "abstract_method_signature"):
                mname_node = m.child_by_field_name("name")
                if mname_node is None:
                    continue
                mname = _text(mname_node)
                mbody = m.child_by_field_name("body")
                md = self.add(d, "method", mname, f"{qual}.{mname}", m, m, mbody, _signature(m, mbody), qual)
                md.raw_calls += self.calls_in([mbody] if mbody is not None else [])
            elif m.type not in ("{", "}", ";", "comment"):
                other.append(m)
        d.raw_calls += self.calls_in(other)


def _string_value(node: Any) -> str:
    frag = [c for c in node.children if c.type == "string_fragment"]
    return _text(frag[0]) if frag else _text(node).strip("'\"`")


def _expr_refs(node: Any) -> tuple[str, ...]:
    if node.type in ("identifier", "type_identifier"):
        return ("name", _text(node))
    if node.type == "member_expression":
        obj, prop = node.child_by_field_name("object"), node.child_by_field_name("property")
        if obj is not None and prop is not None and obj.type == "identifier":
            return ("member", _text(obj), _text(prop))
    if node.type == "generic_type" or node.type == "call_expression":
        inner = node.child_by_field_name("name") or node.child_by_field_name("function") or node.children[0]
        return _expr_refs(inner)
    return ()


def _ts_type_refs(clause: Any) -> list[tuple[str, ...]]:
    return [r for c in clause.children if c.is_named and (r := _expr_refs(c))]


def _descendants(node: Any, type_name: str) -> list[Any]:
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if n.type == type_name:
            out.append(n)
        stack.extend(reversed(n.children))
    return out


def _go_receiver(params: Any) -> tuple[str, str]:
    """(receiver variable, receiver type name) of a Go method: `(r *List[T])` -> ("r", "List")."""
    if params is None:
        return "", ""
    for p in params.children:
        if p.type != "parameter_declaration":
            continue
        name_node = p.child_by_field_name("name")
        t = p.child_by_field_name("type")
        while t is not None and t.type in ("pointer_type", "generic_type", "parenthesized_type"):
            t = t.child_by_field_name("type") or next((c for c in t.children if c.is_named), None)
        return (_text(name_node) if name_node is not None else ""), (_text(t) if t is not None else "")
    return "", ""


def _first_error_line(root: Any) -> int | None:
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            return node.start_point.row + 1
        if node.has_error:
            stack.extend(reversed(node.children))
    return None


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
        line = _first_error_line(tree.root_node) or 1
        raise TreeSitterParseError(path, line, f"{language} syntax error")
    ex = _Extractor(source, path, language, excerpt_chars)
    if language == "go":
        ex.go(tree.root_node)
    else:
        ex.ts(tree.root_node)
    return SourceFile(path, language, ex.drafts, ex.imports_raw, ex.bindings, ex.package)


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
        if not go_module or not (spec == go_module or spec.startswith(go_module + "/")):
            return None
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

    bases_of: dict[str, list[str]] = {}
    for f in files:
        for d in f.drafts:
            ids = []
            for ref in d.raw_bases:
                target = resolve_ref(f, ref)
                if (
                    target
                    and target != d.id
                    and kinds.get(target) in ("class", "interface")
                    and target not in ids
                ):
                    ids.append(target)
            if ids:
                bases_of[d.id] = ids

    def method_of(f: SourceFile, class_qualname: str, name: str) -> str | None:
        start = lookup(f, class_qualname)
        if start is None:  # Go: the receiver type may be declared outside the corpus files
            return lookup(f, f"{class_qualname}.{name}")

        def on_class(cid: str) -> str | None:
            path, qual = cid.split("::", 1)
            return lookup(by_path[path], f"{qual}.{name}")

        return find_in_bases(start, bases_of, on_class)

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
            relations = d.relations(calls, imports, bases_of.get(d.id, []))
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
