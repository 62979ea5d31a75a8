"""Go files -> units (tree-sitter), and Go's implicit interface implementations.

IDs: `dir/file.go` (module unit), `dir/file.go::Func`, `dir/file.go::Type.Method` (receiver
type without `*` or type parameters; a method keeps its own file's ID and text even when its
type is declared in another file), `dir/file.go::Name` for types, interfaces and package-level
`var`/`const` (one unit per name in grouped blocks). Several `func init()` in one file are one
unit holding all of them.

Go types satisfy interfaces implicitly, so `implements` edges come from comparing method sets
within the corpus (`go_implements`): a named non-interface type implements an interface when
its methods (value and pointer receivers, plus those promoted from embedded corpus types)
include every method of the interface with the same parameter and result types, compared as
written with package qualifiers dropped. Interfaces whose method set cannot be known (an
embedded interface outside the corpus, type-set constraints such as `~int | ~string`) and
empty interfaces get no edges; an interface with an unexported method is only implemented
inside its own package.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalpipe.corpus.draft import Draft
from evalpipe.corpus.syntax import (
    BaseExtractor,
    clip,
    collapse,
    descendants,
    doc_before,
    signature,
    text_of,
)

_QUALIFIER = re.compile(r"\b[A-Za-z_]\w*\.(?=[A-Za-z_])")


def _type_key(node: Any) -> str:
    """A type as written, without spaces or package qualifiers (`*pkg.T` -> `*T`)."""
    return _QUALIFIER.sub("", re.sub(r"\s+", "", text_of(node)))


def _param_types(params: Any | None) -> tuple[str, ...]:
    """Parameter/result types in order, one per name (`a, b int` -> int, int)."""
    if params is None:
        return ()
    if params.type != "parameter_list":  # a single unnamed result type: `error`
        return (_type_key(params),)
    out: list[str] = []
    for p in params.children:
        if p.type not in ("parameter_declaration", "variadic_parameter_declaration"):
            continue
        t = p.child_by_field_name("type")
        if t is None:
            continue
        key = ("..." if p.type == "variadic_parameter_declaration" else "") + _type_key(t)
        names = [c for c in p.children if c.type == "identifier"]
        out.extend([key] * max(len(names), 1))
    return tuple(out)


def method_key(node: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(parameter types, result types) of a method declaration or interface method."""
    return _param_types(node.child_by_field_name("parameters")), _param_types(
        node.child_by_field_name("result")
    )


def _type_ref(node: Any) -> tuple[str, ...] | None:
    """An embedded type as a raw reference: `T`, `*T`, `pkg.T`, `T[X]`."""
    while node is not None and node.type in ("pointer_type", "generic_type", "type_elem"):
        named = [c for c in node.children if c.is_named and c.type != "type_arguments"]
        node = named[0] if len(named) == 1 else None
    if node is None:
        return None
    if node.type == "type_identifier":
        return ("name", text_of(node))
    if node.type == "qualified_type":
        pkg, name = node.child_by_field_name("package"), node.child_by_field_name("name")
        if pkg is not None and name is not None:
            return ("member", text_of(pkg), text_of(name))
    return None


@dataclass
class GoInterface:
    methods: dict[str, tuple]
    embeds: list[tuple[str, ...]]
    constraint: bool = False  # has type-set elements (`~int | ~string`): not a method set


@dataclass
class GoTypes:
    """Per file: what method-set comparison needs."""

    interfaces: dict[str, GoInterface] = field(default_factory=dict)
    # non-interface named types -> embedded field types (struct embedding promotes methods)
    named: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)
    # receiver type -> method name -> key
    methods: dict[str, dict[str, tuple]] = field(default_factory=dict)


def go_receiver(params: Any) -> tuple[str, str]:
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
        return (text_of(name_node) if name_node is not None else ""), (text_of(t) if t is not None else "")
    return "", ""


class GoExtractor(BaseExtractor):
    """One Go file: package doc, imports, functions, methods, types, package-level values."""

    def __init__(self, source: bytes, path: str, language: str, excerpt_chars: int):
        super().__init__(source, path, language, excerpt_chars)
        self.types = GoTypes()

    def extract(self, root: Any) -> None:
        mod = self.module_draft()
        self.drafts.append(mod)
        module_doc = ""
        top_level_other = []
        for child in root.children:
            t = child.type
            if t == "package_clause":
                module_doc = doc_before(child)
                for c in child.children:
                    if c.type == "package_identifier":
                        self.package = text_of(c)
            elif t == "import_declaration":
                self._import(child)
            elif t == "function_declaration":
                name = text_of(child.child_by_field_name("name"))
                body = child.child_by_field_name("body")
                d = self.add(mod, "function", name, name, child, child, body, signature(child, body))
                self.collect(d, [body] if body is not None else [])
            elif t == "method_declaration":
                self._method(mod, child)
            elif t == "type_declaration":
                self._types(mod, child)
            elif t in ("var_declaration", "const_declaration"):
                self._values(mod, child, "var" if t == "var_declaration" else "const")
            elif t != "comment":
                top_level_other.append(child)
        self.collect(mod, top_level_other)
        self.finish_module(mod, module_doc, self.package or mod.name)

    def _import(self, decl: Any) -> None:
        for spec in descendants(decl, "import_spec"):
            path_node = spec.child_by_field_name("path")
            if path_node is None:
                continue
            raw = text_of(path_node).strip('"`')
            self.imports_raw.append(raw)
            alias = spec.child_by_field_name("name")
            local = text_of(alias) if alias is not None else raw.rsplit("/", 1)[-1]
            if local not in ("_", "."):
                self.bindings[local] = (raw, "")

    def _method(self, mod: Draft, node: Any) -> None:
        name = text_of(node.child_by_field_name("name"))
        recv_name, recv_type = go_receiver(node.child_by_field_name("receiver"))
        body = node.child_by_field_name("body")
        qual = f"{recv_type}.{name}" if recv_type else name
        # methods may live in another file than their type; they hang off the file
        parent = self.find(recv_type) or mod
        d = self.add(parent, "method", name, qual, node, node, body, signature(node, body), recv_type)
        self.collect(d, [body] if body is not None else [], receiver=recv_name)
        if recv_type:
            self.types.methods.setdefault(recv_type, {})[name] = method_key(node)

    def _types(self, mod: Draft, decl: Any) -> None:
        for spec in decl.children:
            if spec.type not in ("type_spec", "type_alias"):
                continue
            name = text_of(spec.child_by_field_name("name"))
            type_node = spec.child_by_field_name("type")
            is_interface = type_node is not None and type_node.type == "interface_type"
            kind = "interface" if is_interface else "type"
            spec_text = text_of(spec)
            brace = spec_text.find("{")
            sig = "type " + collapse(spec_text[:brace] if brace >= 0 else spec_text.split("\n", 1)[0])
            # a grouped `type ( ... )` documents each spec; a single one, the declaration
            anchor = spec if doc_before(spec) or len(decl.children) > 2 else decl
            body = clip(textwrap.dedent(spec_text), self.limit)
            d = self.add(mod, kind, name, name, spec, anchor, None, sig.rstrip(), excerpt_text=body)
            self.collect(d, [type_node] if type_node is not None else [])
            if spec.type == "type_alias" or type_node is None:
                continue
            if is_interface:
                self.types.interfaces[name] = self._interface(type_node)
                d.raw_bases += self.types.interfaces[name].embeds  # interface embedding: inherits
            else:
                embeds = []
                if type_node.type == "struct_type":
                    for fd in descendants(type_node, "field_declaration"):
                        if fd.child_by_field_name("name") is None:  # an embedded field
                            ref = _type_ref(fd.child_by_field_name("type"))
                            if ref:
                                embeds.append(ref)
                self.types.named[name] = embeds

    def _interface(self, node: Any) -> GoInterface:
        iface = GoInterface(methods={}, embeds=[])
        for elem in node.children:
            if elem.type in ("method_elem", "method_spec"):
                name = elem.child_by_field_name("name")
                if name is not None:
                    iface.methods[text_of(name)] = method_key(elem)
            elif elem.type in ("type_elem", "constraint_elem", "interface_type_name", "qualified_type"):
                ref = _type_ref(elem)
                if ref is None:  # a union or `~T`: a type set, not a method set
                    iface.constraint = True
                else:
                    iface.embeds.append(ref)
        return iface

    def _values(self, mod: Draft, decl: Any, kind: str) -> None:
        """Package-level `var`/`const` (single or grouped `var ( ... )`): one unit per name.

        Real fixtures name them as answers (`var initCmd = &cobra.Command{...}`); calls in
        the value (a `Run: func() { ... }` literal) belong to that unit.
        """
        specs = descendants(decl, f"{kind}_spec")
        grouped = len(specs) > 1 or any(c.type in ("(", "var_spec_list") for c in decl.children)
        for spec in specs:
            names = [c for c in spec.children if c.type == "identifier"]
            value = spec.child_by_field_name("value")
            # a grouped spec documents itself; a single declaration is documented above `var`
            anchor = spec if grouped else decl
            text = clip(textwrap.dedent(text_of(spec)), self.limit)
            sig = f"{kind} " + collapse(text_of(spec).split("\n", 1)[0])
            for ident in names:
                name = text_of(ident)
                if name == "_":
                    continue
                d = self.add(mod, kind, name, name, spec, anchor, None, sig, excerpt_text=text)
                self.collect(d, [value] if value is not None else [])


Resolver = Callable[[Any, tuple[str, ...]], "str | None"]


def go_implements(files: Sequence[Any], resolve: Resolver, kinds: Mapping[str, str]) -> dict[str, list[str]]:
    """Type unit ID -> IDs of the corpus interfaces it implements (method sets compared).

    `files` are the parsed Go `SourceFile`s; `resolve(file, ref)` turns a raw type reference
    into a unit ID (same package first, then imported corpus packages).
    """
    # unit ID -> (file, name) for every interface and named type; methods per package type
    pkg_key: dict[str, tuple[str, str]] = {}
    methods: dict[tuple[str, str], dict[str, tuple]] = {}
    for f in files:
        key = (f.path.rsplit("/", 1)[0] if "/" in f.path else "", f.package)
        for recv, ms in f.go_types.methods.items():
            methods.setdefault((*key, recv), {}).update(ms)
        for name in (*f.go_types.interfaces, *f.go_types.named):
            pkg_key[f"{f.path}::{name}"] = key
    by_id = {f"{f.path}::{n}": (f, n) for f in files for n in (*f.go_types.interfaces, *f.go_types.named)}

    iface_cache: dict[str, dict[str, tuple] | None] = {}

    def iface_methods(uid: str, seen: frozenset[str] = frozenset()) -> dict[str, tuple] | None:
        if uid in iface_cache:
            return iface_cache[uid]
        f, name = by_id[uid]
        iface = f.go_types.interfaces[name]
        out: dict[str, tuple] | None = None if iface.constraint else dict(iface.methods)
        for ref in iface.embeds:
            if out is None:
                break
            target = resolve(f, ref)
            if target is None or target in seen or kinds.get(target) != "interface" or target not in by_id:
                out = None  # `io.Reader` outside the corpus: the method set is unknown
                break
            inner = iface_methods(target, seen | {uid})
            out = None if inner is None else {**inner, **out}
        iface_cache[uid] = out
        return out

    type_cache: dict[str, dict[str, tuple]] = {}

    def type_methods(uid: str, seen: frozenset[str] = frozenset()) -> dict[str, tuple]:
        if uid in type_cache:
            return type_cache[uid]
        f, name = by_id[uid]
        out: dict[str, tuple] = {}
        for ref in f.go_types.named.get(name, []):  # promoted from embedded corpus types
            target = resolve(f, ref)
            if target and target not in seen and target in by_id:
                if kinds.get(target) == "interface":
                    out.update(iface_methods(target) or {})
                else:
                    out.update(type_methods(target, seen | {uid}))
        out.update(methods.get((*pkg_key[uid], name), {}))
        type_cache[uid] = out
        return out

    interfaces = [uid for uid, (f, n) in by_id.items() if n in f.go_types.interfaces]
    types = [uid for uid, (f, n) in by_id.items() if n in f.go_types.named]
    by_method: dict[str, set[str]] = {}
    for uid in types:
        for m in type_methods(uid):
            by_method.setdefault(m, set()).add(uid)
    found: dict[str, list[str]] = {}
    for iface in interfaces:
        wanted = iface_methods(iface)
        if not wanted:
            continue
        candidates: set[str] | None = None
        for m in sorted(wanted, key=lambda m: len(by_method.get(m, ()))):
            candidates = (
                set(by_method.get(m, set())) if candidates is None else candidates & by_method.get(m, set())
            )
            if not candidates:
                break
        exported_only = all(m[:1].isupper() for m in wanted)
        for uid in sorted(candidates or ()):
            if not exported_only and pkg_key[uid] != pkg_key[iface]:
                continue
            have = type_methods(uid)
            if all(have.get(m) == sig for m, sig in wanted.items()):
                found.setdefault(uid, []).append(iface)
    return found
