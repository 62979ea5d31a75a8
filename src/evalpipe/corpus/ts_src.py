"""TypeScript/JavaScript files -> units (tree-sitter).

IDs: `dir/file.ts` (module unit), `dir/file.ts::func`, `dir/file.ts::Class.method`,
`dir/file.ts::Name` for interfaces, type aliases, enums, namespaces and top-level
`const`/`let`/`var` (a top-level `const f = () => ...` is function `f`).

A name declared several times is one unit whose text holds every declaration:
overload signatures with their implementation (the doc comment may sit on either), and
TypeScript declaration merging (`interface X` + `const X`, `class X` + `namespace X`, ...),
so the runtime code is never hidden behind the first declaration. Such units record
`overloads` (the signatures) and `merged_kinds` (the kinds merged, in source order); the
unit's `kind` is its first declaration's.
"""

from __future__ import annotations

import textwrap
from typing import Any

from evalpipe.corpus.draft import Draft
from evalpipe.corpus.syntax import (
    BaseExtractor,
    clean_comment,
    clip,
    collapse,
    descendants,
    signature,
    string_value,
    text_of,
)


def expr_refs(node: Any) -> tuple[str, ...]:
    if node.type in ("identifier", "type_identifier"):
        return ("name", text_of(node))
    if node.type in ("member_expression", "nested_type_identifier"):
        obj = node.child_by_field_name("object") or node.child_by_field_name("module")
        prop = node.child_by_field_name("property") or node.child_by_field_name("name")
        if obj is not None and prop is not None and obj.type == "identifier":
            return ("member", text_of(obj), text_of(prop))
    if node.type == "generic_type" or node.type == "call_expression":
        inner = node.child_by_field_name("name") or node.child_by_field_name("function") or node.children[0]
        return expr_refs(inner)
    return ()


def type_refs(clause: Any) -> list[tuple[str, ...]]:
    return [r for c in clause.children if c.is_named and (r := expr_refs(c))]


class TsExtractor(BaseExtractor):
    """One TS/JS file: module doc, imports, classes, functions, interfaces, types, values."""

    _CLASS = ("class_declaration", "abstract_class_declaration", "class")
    _FUNC = ("function_declaration", "generator_function_declaration", "function_signature")
    _FUNC_VALUES = ("arrow_function", "function_expression", "function", "generator_function")
    _METHODS = ("method_definition", "method_signature", "abstract_method_signature")

    def extract(self, root: Any) -> None:
        mod = self.module_draft()
        self.drafts.append(mod)
        module_doc = ""
        first = next((c for c in root.children if c.type not in ("comment", "hash_bang_line")), None)
        leading = [
            c
            for c in root.children
            if c.type == "comment" and (first is None or c.end_byte <= first.start_byte)
        ]
        if leading and (first is None or leading[-1].end_point.row < first.start_point.row - 1):
            module_doc = "\n".join(clean_comment(text_of(c)) for c in leading)
        other: list[Any] = []
        for child in root.children:
            if child.type == "import_statement":
                self._import(child)
                continue
            decl, anchor = child, child
            if child.type == "export_statement":
                decl = child.child_by_field_name("declaration") or child.child_by_field_name("value")
                src = child.child_by_field_name("source")
                if src is not None:  # export { x } from "./y"
                    self.imports_raw.append(string_value(src))
                if decl is None:
                    continue
            if not self._declaration(mod, decl, anchor):
                other.append(child)
        for node in other:
            self._requires(node)
        self.collect(mod, other)
        statements = [n for n in other if n.type not in ("comment", "hash_bang_line")]
        self.finish_module(mod, module_doc, mod.id.rsplit(".", 1)[0], statements)

    def _import(self, node: Any) -> None:
        src = node.child_by_field_name("source")
        if src is None:
            return
        spec = string_value(src)
        self.imports_raw.append(spec)
        for clause in (c for c in node.children if c.type == "import_clause"):
            for c in clause.children:
                if c.type == "identifier":  # default import
                    self.bindings[text_of(c)] = (spec, "default")
                elif c.type == "namespace_import":
                    ident = next((x for x in c.children if x.type == "identifier"), None)
                    if ident is not None:
                        self.bindings[text_of(ident)] = (spec, "")
                elif c.type == "named_imports":
                    for s in (x for x in c.children if x.type == "import_specifier"):
                        name = s.child_by_field_name("name")
                        alias = s.child_by_field_name("alias")
                        if name is not None:
                            self.bindings[text_of(alias or name)] = (spec, text_of(name))

    def _requires(self, node: Any) -> None:
        """CommonJS `const x = require("./y")` counts as an import of ./y."""
        for call in descendants(node, "call_expression"):
            fn = call.child_by_field_name("function")
            args = call.child_by_field_name("arguments")
            if fn is not None and text_of(fn) == "require" and args is not None:
                strings = [a for a in args.children if a.type == "string"]
                if strings:
                    spec = string_value(strings[0])
                    self.imports_raw.append(spec)
                    decl = call.parent
                    if decl is not None and decl.type == "variable_declarator":
                        name = decl.child_by_field_name("name")
                        if name is not None and name.type == "identifier":
                            self.bindings[text_of(name)] = (spec, "")

    def _declaration(self, mod: Draft, decl: Any, anchor: Any) -> bool:
        t = decl.type
        if t == "ambient_declaration":  # `declare function f(): void;`, `declare const x: T;`
            inner = next((c for c in decl.children if c.is_named and c.type != "comment"), None)
            return inner is not None and self._declaration(mod, inner, anchor)
        if t == "expression_statement":  # `namespace X { ... }` outside an export
            inner = decl.named_children[0] if decl.named_child_count == 1 else None
            return (
                inner is not None
                and inner.type == "internal_module"
                and self._declaration(mod, inner, anchor)
            )
        name_node = decl.child_by_field_name("name")
        if t in self._CLASS and name_node is not None:
            self._class(mod, decl, anchor, text_of(name_node))
            return True
        if t in self._FUNC and name_node is not None:
            name = text_of(name_node)
            body = decl.child_by_field_name("body")
            d = self.add(
                mod,
                "function",
                name,
                name,
                decl,
                anchor,
                body,
                signature(decl, body),
                overload=t == "function_signature",
            )
            self.collect(d, [body] if body is not None else [])
            return True
        if t == "interface_declaration" and name_node is not None:
            name = text_of(name_node)
            d = self.add(
                mod,
                "interface",
                name,
                name,
                decl,
                anchor,
                decl.child_by_field_name("body"),
                signature(decl, decl.child_by_field_name("body")),
                excerpt_text=clip(textwrap.dedent(text_of(decl)), self.limit),
            )
            # interface X extends Y, Z: `inherits`
            d.raw_bases += [r for c in decl.children if c.type == "extends_type_clause" for r in type_refs(c)]
            return True
        if t in ("type_alias_declaration", "enum_declaration") and name_node is not None:
            name = text_of(name_node)
            body = decl.child_by_field_name("body")
            self.add(
                mod,
                "type",
                name,
                name,
                decl,
                anchor,
                body,
                signature(decl, body),
                excerpt_text=clip(textwrap.dedent(text_of(decl)), self.limit),
            )
            return True
        if t in ("internal_module", "module") and name_node is not None and name_node.type != "string":
            name = text_of(name_node)
            body = decl.child_by_field_name("body")
            d = self.add(
                mod,
                "namespace",
                name,
                name,
                decl,
                anchor,
                body,
                signature(decl, body),
                excerpt_text=clip(textwrap.dedent(text_of(decl)), self.limit),
            )
            self.collect(d, [body] if body is not None else [])
            return True
        if t in ("lexical_declaration", "variable_declaration"):
            return self._values(mod, decl, anchor)
        return False

    def _values(self, mod: Draft, decl: Any, anchor: Any) -> bool:
        declarators = [c for c in decl.children if c.type == "variable_declarator"]
        funcs = [
            d
            for d in declarators
            if (v := d.child_by_field_name("value")) is not None
            and v.type in self._FUNC_VALUES
            and (n := d.child_by_field_name("name")) is not None
            and n.type == "identifier"
        ]
        named = [
            d
            for d in declarators
            if (n := d.child_by_field_name("name")) is not None and n.type == "identifier"
        ]
        requires = any(
            text_of(c.child_by_field_name("function") or c) == "require"
            for c in descendants(decl, "call_expression")
        )
        if not declarators or len(named) != len(declarators) or requires:
            return False  # destructuring or CommonJS `require`: handled with the module's own code
        keyword = text_of(decl.children[0])
        for dec in declarators:
            name = text_of(dec.child_by_field_name("name"))
            value = dec.child_by_field_name("value")
            if dec in funcs:
                body = value.child_by_field_name("body")
                sig = signature(dec, body, prefix=f"{keyword} ")
                d = self.add(mod, "function", name, name, dec, anchor, body, sig)
                self.collect(d, [body] if body is not None else [])
            else:  # a top-level constant/variable: `export const DEFAULTS = {...}`
                kind = "const" if keyword == "const" else "var"
                sig = f"{keyword} " + collapse(text_of(dec).split("\n", 1)[0])
                body = clip(textwrap.dedent(text_of(dec)), self.limit)
                d = self.add(mod, kind, name, name, dec, anchor, None, sig, excerpt_text=body)
                self.collect(d, [value] if value is not None else [])
            if len(d.parts) == 1:
                d.metadata["line"] = decl.start_point.row + 1
        return True

    def _class(self, parent: Draft, decl: Any, anchor: Any, name: str, prefix: str = "") -> None:
        qual = f"{prefix}.{name}" if prefix else name
        body = decl.child_by_field_name("body")
        members = list(body.children) if body is not None else []
        outline = []
        for m in members:
            if m.type in ("{", "}", ";", "comment"):
                continue
            mb = m.child_by_field_name("body")
            outline.append(signature(m, mb) if m.type == "method_definition" else collapse(text_of(m)))
        d = self.add(
            parent,
            "class",
            name,
            qual,
            decl,
            anchor,
            body,
            signature(decl, body),
            excerpt_text=clip("\n".join(outline), self.limit),
        )
        for heritage in (c for c in decl.children if c.type == "class_heritage"):
            clauses = [c for c in heritage.children if c.type in ("extends_clause", "implements_clause")]
            if clauses:  # TypeScript: class_heritage > extends_clause / implements_clause
                for clause in clauses:
                    refs = [expr_refs(v) for v in clause.children if v.is_named]
                    if clause.type == "extends_clause":
                        d.raw_bases.extend(refs)
                    else:
                        d.raw_implements.extend(refs)
            else:  # JavaScript: class_heritage > "extends" expression
                d.raw_bases.extend(expr_refs(v) for v in heritage.children if v.is_named)
        d.raw_bases = [b for b in d.raw_bases if b]
        d.raw_implements = [b for b in d.raw_implements if b]
        other = []
        for m in members:
            if m.type in self._METHODS:
                mname_node = m.child_by_field_name("name")
                if mname_node is None:
                    continue
                mname = text_of(mname_node)
                mbody = m.child_by_field_name("body")
                md = self.add(
                    d,
                    "method",
                    mname,
                    f"{qual}.{mname}",
                    m,
                    m,
                    mbody,
                    signature(m, mbody),
                    qual,
                    overload=m.type == "method_signature",
                )
                self.collect(md, [mbody] if mbody is not None else [])
            elif m.type not in ("{", "}", ";", "comment"):
                other.append(m)
        self.collect(d, other)
