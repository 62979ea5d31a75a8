"""What the tree-sitter extractors share: node helpers, the per-file result and the base walk.

Each language has its own extractor (`go_src.GoExtractor`, `ts_src.TsExtractor`) behind one
protocol: construct it with the file's bytes and path, call `extract(root_node)`, read
`drafts`, `imports_raw`, `bindings` and `package`. `treesitter_src` picks the extractor by
file extension and resolves references across files.
"""

from __future__ import annotations

import posixpath
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from evalpipe.corpus.draft import Draft, Part, compose_text, merge_metadata

#: Method names that register a subcommand on a command (cobra `AddCommand`, commander.js
#: `addCommand`): `parent.AddCommand(child, ...)` gives `subcommands` edges parent -> child.
SUBCOMMAND_METHODS = frozenset({"AddCommand", "addCommand"})


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
    # Go: what implicit interface satisfaction needs (see go_src.GoTypes)
    go_types: Any = None


class Extractor(Protocol):
    """The builder protocol every language extractor follows."""

    drafts: list[Draft]
    imports_raw: list[str]
    bindings: dict[str, tuple[str, str]]
    package: str

    def extract(self, root: Any) -> None: ...


def text_of(node: Any) -> str:
    return node.text.decode("utf-8", errors="replace")


def collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def clip(text: str, limit: int) -> str:
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


def doc_before(node: Any, jsdoc_gap: bool = False) -> str:
    """Comments directly above `node` (no blank line in between), oldest first.

    With `jsdoc_gap` (TypeScript/JavaScript), a `/** ... */` block separated from the
    declaration by blank lines only still documents it, as the TypeScript compiler attaches it.
    """
    comments = []
    current = node
    prev = node.prev_sibling
    while prev is not None and prev.type == "comment" and prev.end_point.row >= current.start_point.row - 1:
        comments.append(clean_comment(text_of(prev)))
        current = prev
        prev = prev.prev_sibling
    if not comments and jsdoc_gap and prev is not None and prev.type == "comment":
        raw = text_of(prev)
        if raw.startswith("/**") and not raw.startswith("/**/"):
            comments.append(clean_comment(raw))
    return "\n".join(reversed(comments))


#: Declarations that are nothing but a signature (overloads, abstract and ambient members):
#: all of their text is the signature, however many lines it spans.
SIGNATURE_NODES = frozenset({"function_signature", "method_signature", "abstract_method_signature"})


def signature(node: Any, body: Any | None, prefix: str = "") -> str:
    src = node.text
    if body is not None:
        head = src[: body.start_byte - node.start_byte]
    elif node.type in SIGNATURE_NODES:
        head = src
    else:
        head = src.split(b"\n", 1)[0]
    sig = collapse(head.decode("utf-8", errors="replace"))
    for tail in ("{", "=>", ";"):
        sig = sig.removesuffix(tail).rstrip()
    return prefix + sig


def excerpt(lines: list[str], node: Any, body: Any | None, limit: int) -> str:
    if body is None:
        return clip(textwrap.dedent(text_of(node)), limit)
    start, end = body.start_point.row, body.end_point.row
    if end - start < 2 or not text_of(body).startswith("{"):  # `=> expr`: the whole expression
        return clip(textwrap.dedent(text_of(body)) if end > start else text_of(body), limit)
    return clip(textwrap.dedent("\n".join(lines[start + 1 : end])), limit)


def descendants(node: Any, type_name: str) -> list[Any]:
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if n.type == type_name:
            out.append(n)
        stack.extend(reversed(n.children))
    return out


def string_value(node: Any) -> str:
    frag = [c for c in node.children if c.type == "string_fragment"]
    return text_of(frag[0]) if frag else text_of(node).strip("'\"`")


def first_error_line(root: Any) -> int | None:
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            return node.start_point.row + 1
        if node.has_error:
            stack.extend(reversed(node.children))
    return None


class BaseExtractor:
    """Shared walk for Go and TS/JS; subclasses implement `extract(root)`."""

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
        self._by_qualname: dict[str, Draft] = {}

    def extract(self, root: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def find(self, qualname: str) -> Draft | None:
        return self._by_qualname.get(qualname)

    def add(
        self,
        parent: Draft,
        kind: str,
        name: str,
        qualname: str,
        node: Any,
        doc_anchor: Any,
        body: Any | None,
        sig: str,
        class_qualname: str = "",
        excerpt_text: str | None = None,
        overload: bool = False,
    ) -> Draft:
        """A new draft, or another declaration of an existing one (TS overloads, declaration
        merging, several Go `init()`): then the declaration joins the draft's parts and its text."""
        doc = doc_before(doc_anchor, jsdoc_gap=self.language in ("typescript", "javascript"))
        if excerpt_text is not None:
            body_text = excerpt_text
        elif overload and body is None:
            body_text = ""  # an overload signature: the signature is all there is
        else:
            body_text = excerpt(self.lines, node, body, self.limit)
        part = Part(kind=kind, signature=sig, doc=doc, body=body_text, overload=overload)
        existing = self._by_qualname.get(qualname)
        if existing is not None:
            existing.parts.append(part)
            existing.text = compose_text(existing.parts)
            existing.metadata["end_line"] = max(existing.metadata["end_line"], node.end_point.row + 1)
            merge_metadata(existing.metadata, existing.parts)
            return existing
        draft = Draft(
            id=f"{self.path}::{qualname}",
            kind=kind,
            name=name,
            qualname=qualname,
            text=compose_text([part]),
            metadata={
                "name": name,
                "qualname": qualname,
                "signature": sig,
                "docstring": doc,
                "line": node.start_point.row + 1,
                "end_line": node.end_point.row + 1,
                "module": self.path,
                "parent": parent.id,
            },
            class_qualname=class_qualname,
            parts=[part],
        )
        parent.contains.append(draft.id)
        self.drafts.append(draft)
        self._by_qualname[qualname] = draft
        return draft

    # -- references --------------------------------------------------------

    def collect(
        self,
        draft: Draft,
        nodes: Sequence[Any],
        receiver: str = "",
        skip: Callable[[Any], bool] | None = None,
    ) -> None:
        """Calls, function values passed as arguments and subcommand registrations in `nodes`."""
        stack = list(reversed(nodes))
        while stack:
            node = stack.pop()
            if skip is not None and skip(node):
                continue
            if node.type in ("call_expression", "new_expression"):
                ref = self.call_ref(node, receiver)
                if ref:
                    draft.raw_calls.append(ref)
                args = node.child_by_field_name("arguments")
                if args is not None:  # whatever the callee (`s.mux.HandleFunc("/", s.handle)`)
                    values = [a for a in args.children if a.is_named and a.type != "comment"]
                    method = self.method_name(node)
                    if method in SUBCOMMAND_METHODS:
                        parent = self.subcommand_parent(node, receiver)
                        children = tuple(r for r in (self.value_ref(v, receiver, True) for v in values) if r)
                        if children:
                            draft.raw_subcommands.append((parent, children))
                    draft.raw_refs.extend(r for r in (self.value_ref(v, receiver) for v in values) if r)
            elif node.type in ("keyed_element", "literal_element"):  # Go `Run: runServe`
                value = node.children[-1] if node.children else None
                if value is not None and value is not node.children[0]:
                    r = self.value_ref(value, receiver)
                    if r:
                        draft.raw_refs.append(r)
            stack.extend(reversed(node.children))

    @staticmethod
    def method_name(call: Any) -> str:
        """`AddCommand` in `x.y.AddCommand(...)` (Go selector or TS member call), else ""."""
        fn = call.child_by_field_name("function")
        if fn is None:
            return ""
        name = fn.child_by_field_name("field") or fn.child_by_field_name("property")
        return text_of(name) if name is not None else ""

    def subcommand_parent(self, call: Any, receiver: str) -> tuple[str, ...]:
        """The command a subcommand is added to: a named variable or function (`rootCmd`,
        `newRootCmd()`), or () when it is a local or the method's receiver."""
        fn = call.child_by_field_name("function")
        obj = fn.child_by_field_name("operand") or fn.child_by_field_name("object")
        if obj is None or (receiver and text_of(obj) == receiver):
            return ()
        return self.value_ref(obj, receiver, calls_too=True) or ()

    def call_ref(self, node: Any, receiver: str) -> tuple[str, ...] | None:
        if node.type == "call_expression":
            fn = node.child_by_field_name("function")
        elif node.type == "new_expression":
            fn = node.child_by_field_name("constructor")
        else:
            return None
        return self.value_ref(fn, receiver) if fn is not None else None

    def value_ref(self, fn: Any, receiver: str, calls_too: bool = False) -> tuple[str, ...] | None:
        """`f`, `x.f`, `this.f` as a raw reference; with `calls_too`, `newCmd()` names `newCmd`."""
        if fn.type == "literal_element" and fn.named_children:
            fn = fn.named_children[0]
        if calls_too and fn.type in ("call_expression", "unary_expression"):
            inner = fn.child_by_field_name("function") or fn.child_by_field_name("operand")
            return self.value_ref(inner, receiver) if inner is not None else None
        if fn.type == "identifier":
            return ("name", text_of(fn))
        if fn.type == "selector_expression":  # Go: x.F
            operand, fld = fn.child_by_field_name("operand"), fn.child_by_field_name("field")
            if operand is not None and fld is not None and operand.type == "identifier":
                obj = text_of(operand)
                return (
                    ("self", text_of(fld)) if receiver and obj == receiver else ("member", obj, text_of(fld))
                )
        if fn.type == "member_expression":  # TS/JS: this.m / ns.f
            obj, prop = fn.child_by_field_name("object"), fn.child_by_field_name("property")
            if obj is not None and prop is not None:
                if obj.type == "this":
                    return ("self", text_of(prop))
                if obj.type == "identifier":
                    return ("member", text_of(obj), text_of(prop))
        return None

    # -- module ------------------------------------------------------------

    def module_draft(self) -> Draft:
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

    def finish_module(self, mod: Draft, doc: str, title: str, statements: Sequence[Any] = ()) -> None:
        """The module's text: what only the module has (doc comment, imports, top-level code).

        Its definitions are units of their own, linked by `contains`; listing them here made a
        one-definition file a copy of its definition that outranked it.
        """
        mod.metadata["docstring"] = doc
        mod.metadata["imports_raw"] = list(dict.fromkeys(self.imports_raw))
        if self.package:
            mod.metadata["package"] = self.package
        parts = [f"module {title}", doc]
        if self.imports_raw:
            parts.append("imports: " + ", ".join(dict.fromkeys(self.imports_raw)))
        code = "\n".join(textwrap.dedent(text_of(s)) for s in statements)
        parts.append(clip(code, self.limit))
        mod.text = "\n\n".join(p for p in parts if p)
        mod.metadata["title"] = title
