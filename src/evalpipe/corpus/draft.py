"""A unit under construction and the parse error, shared by the source-code extractors."""

from __future__ import annotations

from collections.abc import Callable, Mapping
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

    def relations(self, calls: list[str], imports: list[str], bases: list[str]) -> dict[str, tuple[str, ...]]:
        """The finished unit's relations from resolved targets (imports belong to modules only)."""
        found = {
            "contains": self.contains,
            "calls": calls,
            "imports": imports if self.kind == "module" else [],
            "inherits": bases,
        }
        return {kind: tuple(ids) for kind, ids in found.items() if ids}
