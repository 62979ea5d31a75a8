"""Answers to set questions, read off a corpus's structure (edges, kinds, file scope).

Built once per corpus (`StructureIndex(corpus)`): relation adjacency in both directions,
a name index for anchors (exact, case-insensitive and "squashed" compound spellings:
`ResponseWriter` = "response writer" = `response_writer`), the methods of each type, the
methods that assign to their receiver's fields, and Go interface method sets.

Relation kind names come from one mapping, `EDGE_KINDS`, so they line up with whatever
the corpus builder writes. Edges the builder records are used when present; when a kind
is absent from the whole corpus the index degrades to what it can infer from the units:

* `implements` absent: a Go (or TypeScript) interface's methods are read from its body
  text (embedded interfaces found in the corpus included), and every type whose methods
  (its `contains` members, or units whose `parent` is the type) include them all
  implements it.

Two kinds are always completed from the text, since a builder may resolve only some of them:

* `references` (function values passed as arguments, e.g. `r.GET("/", h.list)`):
  identifiers in argument position that name a function or method of the corpus and are
  not themselves called.
* `subcommands`: `x.AddCommand(a, b)` / `x.addCommand(a)` read from unit text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from evalpipe.core import Unit
from evalpipe.core.unit import is_test_unit
from evalpipe.corpus import Corpus
from evalpipe.rankers.structure.set_questions import SetQuestion

#: Role -> the relation kind name the corpus builder stores on units (forward direction).
EDGE_KINDS = {
    "contains": "contains",  # module -> definitions, type -> methods
    "calls": "calls",  # caller -> callee
    "imports": "imports",  # module -> module
    "inherits": "inherits",  # subclass -> base class
    "implements": "implements",  # type -> interface it implements (TS clause, Go method sets)
    "references": "references",  # unit -> function/method it passes as a value (handlers)
    "subcommands": "subcommands",  # command -> subcommand it registers (AddCommand)
}
TYPE_KINDS = frozenset({"class", "type", "interface", "struct", "enum", "trait", "protocol", "record"})
INTERFACE_KINDS = frozenset({"interface", "protocol", "trait"})
CALLABLE_KINDS = frozenset({"function", "method", "constructor", "func"})
MODULE_KINDS = frozenset({"module", "file"})
VALUE_KINDS = frozenset({"var", "variable", "const", "constant"})
#: Which unit kinds may anchor each relation.
ANCHOR_KINDS = {
    "implementations": TYPE_KINDS,
    "subclasses": TYPE_KINDS,
    "methods": TYPE_KINDS,
    "mutators": TYPE_KINDS,
    "registered": MODULE_KINDS | CALLABLE_KINDS | TYPE_KINDS | VALUE_KINDS,
    "subcommands": CALLABLE_KINDS | VALUE_KINDS | TYPE_KINDS,
    "callers": CALLABLE_KINDS | TYPE_KINDS | VALUE_KINDS,
    "callees": CALLABLE_KINDS | TYPE_KINDS,
    "members": MODULE_KINDS | TYPE_KINDS,
}
#: How deep subclass chains are followed ("subclasses of A" includes A's grandchildren).
INHERIT_DEPTH = 3


def squash(text: str) -> str:
    """A spelling-free key: `ResponseWriter`, "response writer" and `response_writer` agree."""
    return re.sub(r"[\s_\-.`'/]+", "", text).lower()


def unit_name(unit: Unit) -> str:
    name = unit.get("name")
    if name:
        return str(name)
    tail = unit.id.rsplit("::", 1)[-1]
    return tail.rsplit(".", 1)[-1]


def is_public(unit: Unit) -> bool:
    """Exported: Go capitalised names; elsewhere no leading underscore/# and no private modifier."""
    name = unit_name(unit)
    if not name:
        return False
    if unit.language == "go":
        return name[0].isupper()
    if name.startswith(("_", "#")):
        return False
    signature = str(unit.get("signature") or "")
    return not re.match(r"\s*(?:private|protected)\b", signature)


# ---- receiver-field mutation ---------------------------------------------------------------

_GO_RECEIVER = re.compile(r"^\s*func\s*\(\s*(\w+)\s+[^)]*\)")
_PY_FIRST = re.compile(r"^\s*(?:async\s+)?def\s+\w+\s*\(\s*(\w+)")
_PY_MUTATING = r"append|extend|insert|pop|popitem|remove|clear|update|add|discard|setdefault|sort|reverse"
_JS_MUTATING = r"push|pop|shift|unshift|splice|set|delete|clear|add|sort|reverse|fill"


def receiver_name(unit: Unit) -> str:
    """The name a method's body uses for its receiver: Go `func (c *T)`, Python's first
    parameter (`self`), `this` in TypeScript/JavaScript; "" when none is found."""
    signature = str(unit.get("signature") or "") or unit.text.split("\n", 1)[0]
    if unit.language == "go":
        m = _GO_RECEIVER.match(signature)
        return m.group(1) if m and m.group(1) != "_" else ""
    if unit.language == "python":
        m = _PY_FIRST.match(signature)
        return m.group(1) if m and m.group(1) not in ("cls",) else ""
    if unit.language in ("typescript", "javascript", "tsx", "ts", "js"):
        return "this"
    m = _GO_RECEIVER.match(signature) or _PY_FIRST.match(signature)
    return m.group(1) if m else "this"


def mutates_receiver(unit: Unit) -> bool:
    """Whether the method body assigns to a field of its receiver (`c.index = -1`,
    `self.items.append(x)`, `this.cache.set(k, v)`, `c.Keys[k] = v`, `delete(c.Keys, k)`,
    `c.n++`, `*c = T{}`), so "methods that mutate T" can be answered from the code itself."""
    recv = receiver_name(unit)
    if not recv:
        return False
    body = unit.text
    signature = str(unit.get("signature") or "")
    if signature and body.startswith(signature):
        body = body[len(signature) :]
    r = re.escape(recv)
    field = rf"\b{r}(?:\.\w+)+(?:\[[^\]\n]*\])*"
    patterns = [
        rf"{field}\s*(?:[-+*/%&|^]|<<|>>|&\^|\*\*|//)?=(?!=)",  # c.x = / c.x += / c.m[k] =
        rf"{field}\s*(?:\+\+|--)",  # c.n++
        rf"{field}\s*,[^=\n]*?(?<![=!<>:])=(?!=)",  # c.a, c.b = ...
        rf"\bdelete\(\s*{field}",  # Go delete(c.m, k)
        rf"(?<![\w.])\*{r}\s*=(?!=)",  # Go *c = T{}
    ]
    if unit.language == "python":
        patterns.append(rf"{field}\.(?:{_PY_MUTATING})\(")
    else:
        patterns.append(rf"{field}\.(?:{_JS_MUTATING})\(")
    return any(re.search(p, body) for p in patterns)


# ---- interface method sets --------------------------------------------------------------------

_IFACE_BODY = re.compile(r"interface\s*\{(?P<body>.*)\}", re.S)
_IFACE_METHOD = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*)\s*\??\s*(?:<[^>\n]*>)?\s*\(", re.M)
_IFACE_EMBED = re.compile(r"^\s*(?P<name>[A-Za-z_][\w.]*)\s*(?://.*)?$", re.M)
_TS_IFACE_BODY = re.compile(r"\binterface\s+\w+[^{]*\{(?P<body>.*)\}", re.S)


def interface_methods(unit: Unit) -> tuple[set[str], list[str]]:
    """(method names, embedded interface names) declared in an interface's body text."""
    m = _IFACE_BODY.search(unit.text) or _TS_IFACE_BODY.search(unit.text)
    if not m:
        return set(), []
    body = m.group("body")
    methods = {x.group("name") for x in _IFACE_METHOD.finditer(body)}
    embeds = [x.group("name") for x in _IFACE_EMBED.finditer(body) if x.group("name") not in methods]
    return methods, embeds


# ---- function values and AddCommand from text ----------------------------------------------

_ARG_VALUE = re.compile(r"[(,]\s*&?(?:[A-Za-z_]\w*\.)*(?P<name>[A-Za-z_]\w*)\s*(?=[,)])")
_ADD_COMMAND = re.compile(r"(?P<parent>[A-Za-z_][\w.]*)\.(?:AddCommand|addCommand)\((?P<args>[^;\n]*)\)")
_IDENT = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class Answer:
    """A set question's answer: the anchor rows it resolved to, and the member rows."""

    anchors: tuple[int, ...]
    members: tuple[int, ...]


class StructureIndex:
    """Relation edges, names and per-unit facts of one corpus, for set questions."""

    def __init__(self, corpus: Corpus):
        self.corpus = corpus
        n = len(corpus)
        self.present: set[str] = set()
        self.fwd: dict[str, list[list[int]]] = {k: [[] for _ in range(n)] for k in EDGE_KINDS}
        self.rev: dict[str, list[list[int]]] = {k: [[] for _ in range(n)] for k in EDGE_KINDS}
        for row, unit in enumerate(corpus):
            for role, kind in EDGE_KINDS.items():
                targets = unit.relations.get(kind, ())
                if targets:
                    self.present.add(role)
                for target in targets:
                    other = corpus.index_of.get(target)
                    if other is not None and other != row:
                        self.fwd[role][row].append(other)
                        self.rev[role][other].append(row)
        self.is_test = [is_test_unit(u) for u in corpus]
        self.names = [unit_name(u) for u in corpus]
        self._exact: dict[str, list[int]] = {}
        self._lower: dict[str, list[int]] = {}
        self._squashed: dict[str, list[int]] = {}
        for row, unit in enumerate(corpus):
            keys = {
                self.names[row],
                str(unit.get("qualname") or ""),
                str(unit.get("qualified_name") or ""),
                unit.id,
            }
            if unit.kind in MODULE_KINDS and unit.path:
                keys |= {unit.path, unit.path.rsplit("/", 1)[-1], unit.path.rsplit(".", 1)[0]}
            for key in filter(None, keys):
                self._exact.setdefault(key, []).append(row)
                self._lower.setdefault(key.lower(), []).append(row)
                self._squashed.setdefault(squash(key), []).append(row)
        self._by_name: dict[str, list[int]] = {}
        for row, name in enumerate(self.names):
            self._by_name.setdefault(name, []).append(row)
        # methods of each type: contains members of kind method, or units whose parent is the type
        self.methods: list[list[int]] = [[] for _ in range(n)]
        for row, unit in enumerate(corpus):
            if unit.kind in TYPE_KINDS:
                self.methods[row] = [
                    c for c in self.fwd["contains"][row] if corpus.units[c].kind in CALLABLE_KINDS
                ]
        for row, unit in enumerate(corpus):
            parent = corpus.index_of.get(str(unit.get("parent") or ""))
            if (
                parent is None
                or unit.kind not in CALLABLE_KINDS
                or corpus.units[parent].kind not in TYPE_KINDS
            ):
                continue
            if row not in self.methods[parent]:
                self.methods[parent].append(row)
        self.mutating = [u.kind in CALLABLE_KINDS and mutates_receiver(u) for u in corpus]
        self._packages: dict[str, list[int]] = {}
        for row, unit in enumerate(corpus):
            for key in {
                str(unit.get("package") or ""),
                unit.path.rsplit("/", 1)[0] if "/" in unit.path else "",
            }:
                if key:
                    self._packages.setdefault(key.lower(), []).append(row)
        if "implements" not in self.present:
            self._infer_implements()
        # function values and AddCommand calls read from the text are added to the builder's
        # edges even when it recorded some: it resolves bare identifiers only (not `s.handleX`)
        self._infer_references()
        self._infer_subcommands()

    # -- inference when the builder recorded no such edges ---------------------------------------

    def _add(self, role: str, src: int, dst: int) -> None:
        if src != dst and dst not in self.fwd[role][src]:
            self.fwd[role][src].append(dst)
            self.rev[role][dst].append(src)

    def _interface_set(self, row: int, seen: set[int] | None = None) -> set[str]:
        seen = seen or set()
        seen.add(row)
        methods, embeds = interface_methods(self.corpus.units[row])
        for name in embeds:
            for other in self._by_name.get(name.rsplit(".", 1)[-1], []):
                if other not in seen and self.corpus.units[other].kind == "interface":
                    methods |= self._interface_set(other, seen)
        return methods

    def _infer_implements(self) -> None:
        units = self.corpus.units
        method_names = {
            row: {self.names[m] for m in ms}
            for row, ms in enumerate(self.methods)
            if ms and units[row].kind != "interface"
        }
        for row, unit in enumerate(units):
            if unit.kind != "interface" or unit.language not in ("go", "typescript", "tsx"):
                continue
            wanted = self._interface_set(row)
            if not wanted:
                continue
            for other, names in method_names.items():
                if units[other].language == unit.language and wanted <= names:
                    self._add("implements", other, row)

    def _infer_references(self) -> None:
        units = self.corpus.units
        for row, unit in enumerate(units):
            if unit.kind in MODULE_KINDS:
                continue
            for m in _ARG_VALUE.finditer(unit.text):
                for other in self._by_name.get(m.group("name"), []):
                    if units[other].kind in CALLABLE_KINDS:
                        self._add("references", row, other)

    def _infer_subcommands(self) -> None:
        units = self.corpus.units
        for row, unit in enumerate(units):
            for m in _ADD_COMMAND.finditer(unit.text):
                parents = self._by_name.get(m.group("parent").rsplit(".", 1)[-1], []) or [row]
                for name in _IDENT.findall(m.group("args")):
                    for child in self._by_name.get(name, []):
                        if units[child].kind not in MODULE_KINDS:
                            for parent in parents:
                                self._add("subcommands", parent, child)

    # -- anchors and scope ------------------------------------------------------------------------

    def resolve(self, phrase: str, kinds: Iterable[str] | None = None) -> list[int]:
        """Rows the phrase names, best spelling first: exact > case-insensitive > compound
        pieces (whole phrase, then word n-grams), limited to `kinds`; non-test units preferred."""
        allowed = None if kinds is None else frozenset(kinds)
        words = phrase.split()
        spans = [
            " ".join(words[i : i + n])
            for n in range(min(len(words), 4), 0, -1)
            for i in range(len(words) - n + 1)
        ]
        best: tuple[tuple[int, int], list[int]] | None = None
        for span in spans:
            candidates = [span]
            if "." in span and " " not in span:
                candidates.append(span.rsplit(".", 1)[-1])  # pkg.Name -> Name
            for ci, cand in enumerate(candidates):
                for grade, rows in (
                    (4, self._exact.get(cand, [])),
                    (3, self._lower.get(cand.lower(), [])),
                    (2, self._squashed.get(squash(cand), []) if len(squash(cand)) >= 3 else []),
                ):
                    fit = [r for r in rows if allowed is None or self.corpus.units[r].kind in allowed]
                    if not fit:
                        continue
                    key = (grade - ci, len(span.split()))
                    if best is None or key > best[0]:
                        best = (key, fit)
                    break
        if best is None:
            return []
        rows = list(dict.fromkeys(best[1]))
        real = [r for r in rows if not self.is_test[r]]
        return real or rows

    def scope_rows(self, scope: str) -> set[int]:
        """Rows inside a file (path or basename), a directory (`dir/`) or a package name."""
        scope = scope.strip().strip("`")
        if not scope:
            return set()
        units = self.corpus.units
        if scope.endswith("/"):
            return {r for r, u in enumerate(units) if u.path.startswith(scope)}
        if "." in scope.rsplit("/", 1)[-1]:
            return {r for r, u in enumerate(units) if u.path == scope or u.path.endswith("/" + scope)}
        return set(self._packages.get(scope.lower(), []))

    # -- answers ----------------------------------------------------------------------------------

    def _closure(self, start: Iterable[int], adj: list[list[int]], depth: int) -> list[int]:
        out: dict[int, None] = {}
        frontier = list(start)
        seen = set(frontier)
        for _ in range(depth):
            nxt = []
            for row in frontier:
                for other in adj[row]:
                    if other not in seen:
                        seen.add(other)
                        out[other] = None
                        nxt.append(other)
            frontier = nxt
        return list(out)

    def _within(self, rows: Iterable[int]) -> list[int]:
        """The rows and what they contain (a file's definitions and its types' methods)."""
        out: dict[int, None] = {}
        for row in rows:
            out[row] = None
            for child in self.fwd["contains"][row]:
                out[child] = None
                for grand in self.fwd["contains"][child]:
                    out[grand] = None
        return list(out)

    def answer(self, q: SetQuestion) -> Answer:
        """The set `q` asks for (empty when its anchor or scope resolves to nothing)."""
        units = self.corpus.units
        scope = self.scope_rows(q.scope) if q.scope else set()
        if q.scope and not scope:
            return Answer((), ())
        anchors = self.resolve(q.anchor, ANCHOR_KINDS[q.relation]) if q.anchor else []
        rel = q.relation
        if rel == "implementations":  # "response writer" spells both an interface and a struct
            interfaces = [a for a in anchors if units[a].kind in INTERFACE_KINDS]
            anchors = interfaces or anchors
        members: list[int] = []
        if rel in ("implementations", "subclasses"):
            sub = self._closure(anchors, self.rev["inherits"], INHERIT_DEPTH if rel == "subclasses" else 1)
            impl = self._closure(anchors, self.rev["implements"], 1)
            members = impl + sub if rel == "implementations" else sub + impl
            if rel == "implementations":
                members += self._closure(impl, self.rev["inherits"], INHERIT_DEPTH)
        elif rel in ("methods", "mutators"):
            if anchors:
                members = [m for a in anchors for m in self.methods[a]]
            elif scope and rel == "mutators":
                members = [r for r in scope if units[r].kind in CALLABLE_KINDS]
            if rel == "mutators":
                members = [m for m in members if self.mutating[m]]
        elif rel == "registered":
            sources = self._within(anchors) if anchors else sorted(scope)
            members = [t for s in sources for t in self.fwd["references"][s]]
            if scope and not anchors:  # handler constructors: callables typed as handlers
                members += [
                    r
                    for r in sorted(scope)
                    if units[r].kind in CALLABLE_KINDS
                    and "handler" in str(units[r].get("signature") or "").lower()
                ]
                scope = set()  # the scope named where they are registered, not where they live
        elif rel == "subcommands":
            sources = self._within(anchors) if anchors else sorted(scope)
            members = [t for s in sources for t in self.fwd["subcommands"][s]]
            if anchors:
                members += self._closure(members, self.fwd["subcommands"], 2)
            scope = set() if not anchors else scope
        elif rel == "callers":
            members = [c for a in anchors for c in self.rev["calls"][a] + self.rev["references"][a]]
        elif rel == "callees":
            members = [c for a in anchors for c in self.fwd["calls"][a] + self.fwd["references"][a]]
        elif rel == "members":
            if scope:
                members = [r for r in sorted(scope) if units[r].kind not in MODULE_KINDS]
                scope = set()
            elif anchors:
                members = [r for r in self._within(anchors) if r not in anchors]
        members = list(dict.fromkeys(m for m in members if m not in anchors))
        if scope:
            members = [m for m in members if m in scope]
        if q.kinds and rel not in ("implementations", "subclasses"):
            narrowed = [m for m in members if units[m].kind in q.kinds]
            members = narrowed if narrowed or rel != "members" else members
        if q.public:
            members = [m for m in members if is_public(units[m])]
        if not q.tests:
            members = [m for m in members if not self.is_test[m]]
        return Answer(tuple(anchors), tuple(members))
