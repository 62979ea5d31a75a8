"""A retriever's own records as units the RAG measures can judge.

A retriever that lives outside evalpipe (an HTTP service, a LangChain or LlamaIndex retriever)
answers with its own record IDs and metadata, not the fixture's chunk IDs. Like an existing
Chroma collection, each record is judged by what it says it is: its document ID, section and
chunk index, read from fields the user names (`document_field`, `section_field`,
`chunk_field`). Without a document field the IDs must be the corpus's own unit IDs.

Field paths are dotted (`metadata.doc`, `hits.0.id`): each part a mapping key, or a list index
when it is a whole number. `""` is the value itself.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from evalpipe.core.unit import Unit

_MISSING = object()


class FieldMissing(LookupError):
    """A dotted path that does not lead anywhere in a record; the message names the part."""


def dig(value: Any, path: str) -> Any:
    """The value at a dotted `path` inside `value` (`""`: the value itself); FieldMissing when a
    part is not there, naming the part and what was there instead."""
    current = value
    for part in [p for p in str(path).split(".") if p != ""] if path else []:
        if isinstance(current, Mapping):
            got = current.get(part, _MISSING)
            if got is _MISSING:
                keys = ", ".join(map(str, list(current)[:12])) or "none"
                raise FieldMissing(f"no key {part!r} (it has: {keys})")
            current = got
        elif (
            isinstance(current, Sequence)
            and not isinstance(current, str | bytes)
            and part.lstrip("-").isdigit()
        ):
            index = int(part)
            if not -len(current) <= index < len(current):
                raise FieldMissing(f"index {index} is outside a list of {len(current)}")
            current = current[index]
        else:
            raise FieldMissing(f"{part!r} cannot be read from a {type(current).__name__}")
    return current


class RecordUnits:
    """Units for the records a retriever returned, filled as it answers (thread-safe).

    `fields` maps the unit metadata keys (`document_id`, `section`, `chunk_index`) to where each is
    in a record; `document_id` absent means the record IDs are the corpus's own."""

    def __init__(self, document_field: str | None, section_field: str | None, chunk_field: str | None):
        self.document_field = document_field
        self.section_field = section_field
        self.chunk_field = chunk_field
        self.units: dict[str, Unit] = {}
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return bool(self.document_field)

    def unit(self, rid: str, record: Any, where: str) -> Unit | None:
        """The unit for record `rid` (None without a document field); FieldMissing names `where`."""
        if not self.document_field:
            return None

        def read(path: str, name: str, required: bool) -> Any:
            try:
                return dig(record, path)
            except FieldMissing as exc:
                if required:
                    raise FieldMissing(f"{where}: ranker.{name} {path!r}: {exc}") from None
                return None

        document = read(self.document_field, "document_field", True)
        section = read(self.section_field, "section_field", True) if self.section_field else None
        chunk = read(self.chunk_field, "chunk_field", True) if self.chunk_field else None
        unit = Unit(
            id=rid,
            kind="chunk",
            metadata={
                "document_id": str(document),
                "chunk_index": chunk if isinstance(chunk, int) else 0,
                **({"section": str(section)} if section not in (None, "") else {}),
            },
        )
        with self._lock:
            self.units[rid] = unit
        return unit
