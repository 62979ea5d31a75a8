"""A unit under construction and the parse error, shared by the source-code extractors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field


def find_in_bases(
    class_id: str, bases_of: Mapping[str, list[str]], find: Callable[[str], str | None]
) -> str | None:
    """`find` on a class, then breadth-first on its base classes (a method inherited from a base)."""
    queue, seen = [class_id], set()
    while queue:
        cid = queue.pop(0)
        if cid in seen:
            continue
        seen.add(cid)
        found = find(cid)
        if found:
            return found
        queue.extend(bases_of.get(cid, []))
    return None


class SourceParseError(ValueError):
    """A source file that cannot be parsed; `line` is 1-based (0 when unknown)."""

    def __init__(self, path: str, line: int, message: str):
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line
        self.message = message


@dataclass(frozen=True)
class Part:
    """One declaration of a symbol: an overload signature, the implementation, one side of a
    TypeScript declaration merge (`interface X` + `const X`), a property setter.

    A symbol declared several times is still one unit (its ID is the plain qualified name),
    but its text must hold every declaration, or the implementation's body and doc comment
    are lost behind the first signature.
    """

    kind: str
    signature: str
    doc: str = ""
    body: str = ""
    overload: bool = False  # a signature-only declaration (TS overload, Python @overload stub)
    # comments inside the declaration's header (`# noqa`, a comment on one parameter), which a
    # normalised signature drops
    notes: str = ""


def compose_text(parts: Sequence[Part], head: str = "") -> str:
    """A unit's text from its declarations.

    One declaration: `signature`, doc, body (the format every unit had before). Several: every
    signature, one per line (source order), then every doc comment (wherever it sits),
    then every non-empty body, so signatures, docs and the implementation all stay retrievable.
    """
    if len(parts) == 1:
        p = parts[0]
        sig = "\n".join(t for t in (p.signature, p.notes) if t)
        return "\n\n".join(t for t in (head, sig, p.doc, p.body) if t)
    signatures = "\n".join(t for p in parts for t in (p.signature, p.notes) if t)
    docs = [p.doc for p in parts if p.doc]  # each overload may carry its own (even the same) doc
    bodies = [p.body for p in parts if p.body]
    return "\n\n".join(t for t in (head, signatures, *docs, *bodies) if t)


def merge_metadata(metadata: dict, parts: Sequence[Part]) -> None:
    """Record what a multi-declaration unit is made of (for statistics and readers).

    `overloads`: the overload signatures (when an implementation or several signatures exist);
    `merged_kinds`: the distinct declaration kinds of a TypeScript declaration merge;
    `signature`/`docstring`: the implementation's when there is one, else the first found.
    """
    if len(parts) < 2:
        return
    # a Python signature block starts with its decorators: the metadata keeps the `def` line
    overloads = [
        "\n".join(x for x in p.signature.split("\n") if not x.startswith("@")) for p in parts if p.overload
    ]
    if overloads:
        metadata["overloads"] = overloads
    kinds = list(dict.fromkeys(p.kind for p in parts))
    if len(kinds) > 1:
        metadata["merged_kinds"] = kinds
    implementation = next((p for p in parts if not p.overload), None)
    if overloads and implementation is not None:
        metadata["signature"] = "\n".join(
            x for x in implementation.signature.split("\n") if not x.startswith("@")
        )
    if not metadata.get("docstring"):
        metadata["docstring"] = next((p.doc for p in parts if p.doc), "")


@dataclass
class Draft:
    """A unit being extracted from one file.

    Call and base-class references stay raw (name chains) until every file is
    parsed, because only then can they be resolved to unit IDs across files.
    """

    id: str
    kind: str
    qualname: str
    text: str
    metadata: dict
    title: str = ""
    name: str = ""
    class_qualname: str = ""  # enclosing class for methods (for `self.x` lookups)
    contains: list[str] = field(default_factory=list)
    raw_calls: list[tuple[str, ...]] = field(default_factory=list)
    raw_bases: list[tuple[str, ...]] = field(default_factory=list)
    # TS `implements` clause entries
    raw_implements: list[tuple[str, ...]] = field(default_factory=list)
    # function/method values used without being called (`http.HandleFunc("/", s.handle)`)
    raw_refs: list[tuple[str, ...]] = field(default_factory=list)
    # `parent.AddCommand(child, ...)`: (parent ref or (), child refs...)
    raw_subcommands: list[tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)

    def relations(
        self,
        calls: list[str],
        imports: list[str],
        bases: list[str],
        extra: Mapping[str, Sequence[str]] | None = None,
    ) -> dict[str, tuple[str, ...]]:
        """The finished unit's relations from resolved targets (imports belong to modules only)."""
        found: dict[str, Sequence[str]] = {
            "contains": self.contains,
            "calls": calls,
            "imports": imports if self.kind == "module" else [],
            "inherits": bases,
        }
        for kind, ids in (extra or {}).items():
            found[kind] = list(dict.fromkeys([*found.get(kind, []), *ids]))
        return {kind: tuple(ids) for kind, ids in found.items() if ids}
