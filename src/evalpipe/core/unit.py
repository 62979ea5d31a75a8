"""One retrievable unit (a declaration, a module, a Markdown section, a BEIR document): the value
corpus builders produce and every ranker, scorer and judge reads, so it lives on the ground floor."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evalpipe.core.testpaths import is_test_path

# Fields stored at the top level of a JSONL record; everything else is metadata.
CORE_FIELDS = ("id", "kind", "title", "text", "path", "language", "relations")
#: Relation kinds a unit may carry (docs/fixtures.md#relations says what each one means).
RELATION_KINDS = ("contains", "calls", "imports", "inherits", "implements", "references", "subcommands")


@dataclass(frozen=True)
class Unit:
    """One retrievable unit.

    `relations` maps a relation kind (RELATION_KINDS) to the IDs of other units in
    the corpus (unresolvable targets are dropped), so graph rankers can walk them.
    """

    id: str
    kind: str
    title: str = ""
    text: str = ""
    path: str = ""
    language: str = ""
    relations: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        """Look a field up among the core fields first, then the metadata."""
        if key in CORE_FIELDS:
            return getattr(self, key)
        if key == "is_test" and key not in self.metadata:  # a corpus built before the field
            return is_test_unit(self)
        return self.metadata.get(key, default)

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "title": self.title,
            "text": self.text,
            "path": self.path,
            "language": self.language,
        }
        record.update(self.metadata)
        record["relations"] = {k: list(v) for k, v in self.relations.items() if v}
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Unit:
        meta = {k: v for k, v in record.items() if k not in CORE_FIELDS}
        rels = record.get("relations") or {}
        return cls(
            id=str(record["id"]),
            kind=str(record.get("kind", "document")),
            title=str(record.get("title") or ""),
            text=str(record.get("text") or ""),
            path=str(record.get("path") or ""),
            language=str(record.get("language") or ""),
            relations={str(k): tuple(str(x) for x in v) for k, v in rels.items()},
            metadata=meta,
        )


def is_test_unit(unit: Unit) -> bool:
    """Whether `unit` is test code. Its recorded `is_test` wins (a bool, or "true"/"false" in a
    hand-written corpus); else the path rule of `evalpipe.core.testpaths`, on the path part of
    the ID when the unit has no path. One answer for the builder, the priors and the graph."""
    flag = unit.metadata.get("is_test")
    if isinstance(flag, bool):
        return flag
    if isinstance(flag, str) and flag.lower() in ("true", "false"):
        return flag.lower() == "true"
    return is_test_path(unit.path or unit.id.split("::", 1)[0], unit.language)
