"""Chunkers: documents -> retrievable chunks, each mapped back to its document and section.

The three ways RAG pipelines commonly cut documents, as `conf/chunker/*.yaml`:

- `HeadingChunker` (`chunker=heading`): one chunk per section, a long section packed into
  several on paragraph boundaries up to `section_chars` characters, every chunk starting
  with its heading path (the Markdown builder's own rule, `corpus.markdown.chunk_blocks`);
- `TokenChunker` (`chunker=tokens`): fixed windows of `size` tiktoken tokens over the whole
  document, each starting `size - overlap` tokens after the previous one;
- `RecursiveChunker` (`chunker=recursive`): paragraphs, then sentences, then token windows
  for what is still too long, packed greedily into chunks of at most `size` tokens.

What makes the RAG measures comparable across chunkers is that every chunk carries the
document ID and *one* section, read from the document (`corpus.documents`), never from
the chunking: a heading chunk's section is its own; a window or packed chunk that spans
several sections is assigned the section holding most of its tokens (ties: the first),
and lists every section it touches in `sections`. So a big window over three small
sections is a section hit for one of them only: the dilution a larger chunk really has.

Parameters are checked when the chunker is built (before any document is read), so a
`chunker.size=0` or an overlap not below the size stops the run with one line.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from evalpipe.core.tiktoken_offline import _ENCODINGS, load_encoding
from evalpipe.core.unit import Unit
from evalpipe.corpus.documents import Document, DocumentSet
from evalpipe.corpus.markdown import _blocks, chunk_blocks
from evalpipe.safety.errors import EvalpipeError

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


class ChunkerError(EvalpipeError):
    """A chunker parameter that cannot work; the message names `chunker.<param>`."""


def _positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ChunkerError(f"chunker.{name} must be an integer >= {minimum}, got {value!r}")
    return value


class Chunker:
    """Base: `chunk(documents) -> units`; `config()` is the chunker's part of the cache key."""

    name = "chunker"

    def config(self) -> dict[str, Any]:  # pragma: no cover - interface
        raise NotImplementedError

    def chunk(self, documents: DocumentSet) -> list[Unit]:
        units: list[Unit] = []
        for doc in documents.documents:
            units.extend(self.chunk_document(doc))
        return units

    def chunk_document(self, doc: Document) -> list[Unit]:  # pragma: no cover - interface
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items() if k != "chunker")
        return f"{type(self).__name__}({args})"


def _unit(doc: Document, uid: str, index: int, text: str, section: str, sections: Iterable[str], **meta):
    titles = {s.slug: s for s in doc.sections}
    head = titles.get(section)
    return Unit(
        id=uid,
        kind="chunk",
        title=head.title if head and head.title else doc.id,
        text=text,
        path=doc.id,
        language=doc.format,
        metadata={
            "document_id": doc.id,
            "chunk_index": index,
            "section": section,
            "sections": list(dict.fromkeys(sections)),
            "heading_path": list(head.heading_path) if head else [],
            **meta,
        },
    )


class _TokenChunker(Chunker):
    """Shared by the token-based chunkers: the tiktoken encoding, loaded offline."""

    def __init__(self, encoding: str) -> None:
        if not isinstance(encoding, str) or not encoding:
            raise ChunkerError(f"chunker.encoding must be a tiktoken encoding name, got {encoding!r}")
        self.encoding = encoding
        self._enc: Any = None

    @property
    def enc(self) -> Any:
        if self._enc is None:
            if self.encoding not in _ENCODINGS:
                raise ChunkerError(
                    f"chunker.encoding {self.encoding!r} is not available offline; use one of "
                    f"{', '.join(_ENCODINGS)}"
                )
            self._enc = load_encoding(self.encoding)
        return self._enc

    def tokens(self, text: str) -> list[int]:
        return self.enc.encode(text, disallowed_special=())

    def _section_tokens(self, doc: Document) -> tuple[list[int], list[str]]:
        """The document's tokens and, for each, the section it comes from (sections encoded in turn)."""
        tokens: list[int] = []
        owners: list[str] = []
        for section in doc.sections:
            start = section.start if section.title else section.body_start
            text = "\n".join(doc.lines[start : section.end])
            if section is not doc.sections[-1]:
                text += "\n"
            ids = self.tokens(text)
            tokens.extend(ids)
            owners.extend([section.slug] * len(ids))
        return tokens, owners

    @staticmethod
    def majority(owners: list[str]) -> str:
        counts = Counter(owners)
        best = max(counts.values())
        return next(o for o in owners if counts[o] == best)  # ties: the first in the chunk


class HeadingChunker(_TokenChunker):
    """One chunk per section; a section over `section_chars` characters split on paragraphs."""

    name = "heading"

    def __init__(self, section_chars: int = 1500, encoding: str = "cl100k_base"):
        super().__init__(encoding)  # only to count each chunk's tokens
        self.section_chars = _positive_int("section_chars", section_chars)

    def config(self) -> dict[str, Any]:
        return {"chunker": self.name, "section_chars": self.section_chars, "encoding": self.encoding}

    def chunk_document(self, doc: Document) -> list[Unit]:
        units: list[Unit] = []
        for section in doc.sections:
            body = list(doc.lines[section.body_start : section.end])
            chunks = chunk_blocks(_blocks(body, section.body_start), self.section_chars)
            if not chunks and not section.title:
                continue
            prefix = " > ".join(section.heading_path)
            for part, chunk in enumerate(chunks or [[]], start=1):
                text = "\n\n".join(t for t in (prefix, "\n\n".join(b.text for b in chunk)) if t)
                uid = f"{doc.id}#{section.slug}" + (f"~{part}" if part > 1 else "")
                count = len(self.tokens(text))
                units.append(
                    _unit(
                        doc,
                        uid,
                        len(units),
                        text,
                        section.slug,
                        [section.slug],
                        part=part,
                        chunk_tokens=count,
                    )
                )
        return units


class TokenChunker(_TokenChunker):
    """Windows of `size` tokens over each document, `overlap` tokens shared by neighbours."""

    name = "tokens"

    def __init__(self, size: int = 256, overlap: int = 32, encoding: str = "cl100k_base"):
        super().__init__(encoding)
        self.size = _positive_int("size", size)
        self.overlap = _positive_int("overlap", overlap, minimum=0)
        if self.overlap >= self.size:
            raise ChunkerError(
                f"chunker.overlap ({self.overlap}) must be smaller than chunker.size ({self.size}): "
                "each window has to move forward"
            )

    def config(self) -> dict[str, Any]:
        return {"chunker": self.name, "size": self.size, "overlap": self.overlap, "encoding": self.encoding}

    def chunk_document(self, doc: Document) -> list[Unit]:
        tokens, owners = self._section_tokens(doc)
        units: list[Unit] = []
        step = self.size - self.overlap
        start = 0
        while start < len(tokens):
            end = min(start + self.size, len(tokens))
            window = owners[start:end]
            text = self.enc.decode(tokens[start:end])
            if text.strip():
                uid = f"{doc.id}@{len(units)}"
                units.append(
                    _unit(doc, uid, len(units), text, self.majority(window), window, chunk_tokens=end - start)
                )
            if end == len(tokens):
                break
            start += step
        return units


@dataclass
class _Piece:
    tokens: list[int]
    owner: str


class RecursiveChunker(_TokenChunker):
    """Paragraphs, then sentences, then token windows, packed into chunks of <= `size` tokens."""

    name = "recursive"

    def __init__(self, size: int = 256, encoding: str = "cl100k_base"):
        super().__init__(encoding)
        self.size = _positive_int("size", size)

    def config(self) -> dict[str, Any]:
        return {"chunker": self.name, "size": self.size, "encoding": self.encoding}

    def _pieces(self, doc: Document) -> list[_Piece]:
        """Every paragraph of the document as one piece, or as sentences / windows when too long."""
        out: list[_Piece] = []
        for section in doc.sections:
            start = section.start if section.title else section.body_start
            text = "\n".join(doc.lines[start : section.end])
            for para in re.split(r"\n\s*\n", text):
                if not para.strip():
                    continue
                ids = self.tokens(para)
                if len(ids) <= self.size:
                    out.append(_Piece(ids, section.slug))
                    continue
                for sentence in _SENTENCE_END.split(para):
                    sids = self.tokens(sentence)
                    for lo in range(0, len(sids), self.size):
                        out.append(_Piece(sids[lo : lo + self.size], section.slug))
        return out

    def chunk_document(self, doc: Document) -> list[Unit]:
        sep = self.tokens("\n\n")
        units: list[Unit] = []
        current: list[int] = []
        owners: list[str] = []

        def flush() -> None:
            if current:
                text = self.enc.decode(current)
                uid = f"{doc.id}@{len(units)}"
                units.append(
                    _unit(
                        doc, uid, len(units), text, self.majority(owners), owners, chunk_tokens=len(current)
                    )
                )

        for piece in self._pieces(doc):
            extra = (sep if current else []) + piece.tokens
            if current and len(current) + len(extra) > self.size:
                flush()
                current, owners = [], []
                extra = piece.tokens
            current.extend(extra)
            owners.extend([piece.owner] * len(extra))
        flush()
        return units
