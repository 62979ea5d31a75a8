"""A folder of documents (Markdown, reStructuredText, plain text) -> documents with sections.

A RAG fixture may point at the documents people actually index instead of a prepared
corpus; the chunkers (`evalpipe.corpus.chunkers`) then cut them. What must not depend on
the chunker is what a label means, so the section structure is read here, once, from
the document itself:

- a document's ID is its path relative to the folder (POSIX separators), the same
  string whatever the chunking;
- a section is a heading and its body up to the next heading of any level; its name
  (`slug`) is the GitHub-style anchor of its title (`corpus.markdown.Slugger`, repeats
  numbered), for every format, so a label is written the same way for .md and .rst;
- text before the first heading is the section `""` (the top of the page); a plain-text
  file is that one section.

Markdown headings are found by the Markdown builder's own scanner (ATX and setext,
fenced code ignored). reStructuredText headings are a title line underlined, or over-
and underlined, with one repeated punctuation character at least as long as the title;
levels follow the order in which each (character, overline) style first appears, as
docutils assigns them. Literal blocks (`::` paragraphs and directives' indented bodies)
are skipped so a `----` inside code is not a heading.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from evalpipe.core import files as input_files
from evalpipe.corpus.markdown import Slugger, _find_headings, _front_matter_end
from evalpipe.safety.errors import EvalpipeError

#: File suffix -> format. Anything else in the folder is left out (and counted).
FORMATS = {".md": "markdown", ".markdown": "markdown", ".rst": "rst", ".txt": "text"}
_RST_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}\s*$")


class DocumentsError(EvalpipeError):
    """A documents folder that cannot be used; the message names the folder or file."""


@dataclass(frozen=True)
class Section:
    """One heading's span of a document: lines [start, end) (0-based), body from `body_start`."""

    slug: str
    title: str
    level: int
    heading_path: tuple[str, ...]
    start: int
    body_start: int
    end: int


@dataclass(frozen=True)
class Document:
    """A document as read: its ID, format, lines and sections in document order."""

    id: str
    format: str
    lines: tuple[str, ...]
    sections: tuple[Section, ...]

    def section_text(self, section: Section) -> str:
        return "\n".join(self.lines[section.body_start : section.end])


@dataclass(frozen=True)
class DocumentSet:
    """Every document of a folder, plus the digest of their bytes (the chunk cache's key)."""

    root: str
    documents: tuple[Document, ...]
    sha256: str
    skipped: int = 0
    #: Document-named entries left out, by relative path: why each is not a readable file.
    odd: Mapping[str, str] = field(default_factory=dict)

    def sections_of(self) -> dict[str, set[str]]:
        return {d.id: {s.slug for s in d.sections} for d in self.documents}


def _decode(data: bytes, path: Path) -> str:
    """Strict UTF-8 (a BOM dropped): an undecodable file is named with its line, never guessed at."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DocumentsError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "save the file as UTF-8 or remove it from the documents folder"
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def _markdown_headings(lines: list[str]) -> list[tuple[int, int, int, str]]:
    start = _front_matter_end(lines)
    return [(h.index, h.body_start, h.level, h.title) for h in _find_headings(lines, start)]


def _rst_headings(lines: list[str]) -> list[tuple[int, int, int, str]]:
    """(heading line, body start, level, title) of every reStructuredText section title."""
    styles: list[tuple[str, bool]] = []
    out: list[tuple[int, int, int, str]] = []
    literal_indent: int | None = None  # inside an indented literal block / directive body
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        stripped = line.strip()
        if literal_indent is not None:
            if stripped and len(line) - len(line.lstrip()) <= literal_indent:
                literal_indent = None
            else:
                i += 1
                continue
        found = None
        over = _RST_ADORNMENT.match(line)
        if over and i + 2 < n and lines[i + 1].strip() and _RST_ADORNMENT.match(lines[i + 2]):
            under = lines[i + 2].strip()
            title = lines[i + 1].strip()
            if under[0] == over.group(1) and len(under) >= len(title):
                found = (i, i + 3, (under[0], True), title)
        if found is None and stripped and not over and i + 1 < n and not line.startswith((" ", "\t")):
            under_m = _RST_ADORNMENT.match(lines[i + 1])
            if under_m and len(lines[i + 1].rstrip()) >= len(line.rstrip()):
                previous_blank = i == 0 or not lines[i - 1].strip()
                if previous_blank:
                    found = (i, i + 2, (under_m.group(1), False), stripped)
        if found is not None:
            index, body_start, style, title = found
            if style not in styles:
                styles.append(style)
            out.append((index, body_start, styles.index(style) + 1, title))
            i = body_start
            continue
        if stripped.endswith("::") or stripped.startswith(".. "):
            literal_indent = len(line) - len(line.lstrip())
        i += 1
    return out


def _sections(lines: list[str], headings: Sequence[tuple[int, int, int, str]]) -> tuple[Section, ...]:
    slugger = Slugger()
    first = headings[0][0] if headings else len(lines)
    sections: list[Section] = []
    if any(line.strip() for line in lines[:first]) or not headings:
        slugger.occurrences[""] = 0  # the top of the page owns the empty name
        sections.append(Section("", "", 0, (), 0, 0, first))
    stack: list[tuple[int, str]] = []
    for n, (index, body_start, level, title) in enumerate(headings):
        while stack and stack[-1][0] >= level:
            stack.pop()
        path = (*(t for _, t in stack), title)
        stack.append((level, title))
        end = headings[n + 1][0] if n + 1 < len(headings) else len(lines)
        sections.append(Section(slugger.slug(title), title, level, path, index, body_start, end))
    return tuple(sections)


def read_document(path: Path, doc_id: str, data: bytes | None = None) -> Document:
    fmt = FORMATS[path.suffix.lower()]
    if data is None:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise DocumentsError(f"{path}: cannot read ({exc.strerror or exc})") from None
    lines = _decode(data, path).splitlines()
    if fmt == "markdown":
        headings = _markdown_headings(lines)
    elif fmt == "rst":
        headings = _rst_headings(lines)
    else:
        headings = []
    return Document(doc_id, fmt, tuple(lines), _sections(lines, headings))


def odd_file(path: Path) -> str | None:
    """Why a document-named path cannot be read as a document (the words the fixture-path checks
    use: a symbolic link loop, a broken link, a FIFO, ...), or None for a readable regular file.
    Asked with os.stat, never by opening it: opening a FIFO with no writer blocks for ever."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop (it points back at itself)"
        if exc.errno == errno.ENOENT and path.is_symlink():
            return f"a broken symbolic link (to {os.readlink(path)!r})"
        if exc.errno == errno.EACCES:
            return "not reachable (permission denied)"
        return f"not reachable ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in input_files._KINDS if test(st.st_mode)), "not a regular file")
        return f"{kind}, not a regular file"
    if not os.access(path, os.R_OK):
        return "not readable (permission denied)"
    return None


def read_documents(folder: str | Path) -> DocumentSet:
    """Every .md / .rst / .txt file under `folder` (sorted by ID), or a DocumentsError.

    A document-named entry that is not a readable regular file (a symlink loop, a broken link, a
    FIFO, an unreadable file) is left out and listed in `odd` with the reason, so a label naming
    it says what it is instead of "not in the documents folder". A file over the input size limit
    (EVALPIPE_MAX_FILE_MB, the one every input file has) stops the run with one line."""
    root = Path(folder)
    if not root.is_dir():
        what = "is a file, not a folder" if root.exists() else "does not exist"
        raise DocumentsError(f"documents folder {root} {what}; set 'documents:' to a folder of documents")
    digest = hashlib.sha256()
    documents: list[Document] = []
    odd: dict[str, str] = {}
    skipped = 0
    try:
        entries = sorted(root.rglob("*"))
    except OSError as exc:
        raise DocumentsError(f"documents folder {root}: cannot list it ({exc.strerror or exc})") from None
    for path in entries:
        rel = path.relative_to(root).as_posix()
        if any(part.startswith(".") for part in Path(rel).parts):
            skipped += 1
            continue
        if path.suffix.lower() not in FORMATS:
            if not path.is_dir():
                skipped += 1
            continue
        if path.is_dir():
            continue
        why = odd_file(path)
        if why is not None:
            odd[rel] = why
            skipped += 1
            continue
        size = path.stat().st_size
        if size > input_files.MAX_FILE_BYTES:
            raise DocumentsError(
                f"{path}: document of {input_files.size_text(size)} is larger than the input size limit "
                f"of {input_files.size_text(input_files.MAX_FILE_BYTES)} (EVALPIPE_MAX_FILE_MB=... raises "
                "it, or leave the file out)"
            )
        try:
            data = path.read_bytes()
        except OSError as exc:
            odd[rel] = f"not readable ({exc.strerror or exc})"
            skipped += 1
            continue
        doc = read_document(path, rel, data)
        digest.update(rel.encode() + b"\0" + data + b"\0")
        if any(line.strip() for line in doc.lines):
            documents.append(doc)
    if not documents:
        found = f"; left out: {', '.join(f'{k} ({v})' for k, v in sorted(odd.items())[:3])}" if odd else ""
        raise DocumentsError(
            f"documents folder {root} holds no non-empty document ({', '.join(sorted(FORMATS))}){found}; "
            "add documents or point 'documents:' at the right folder"
        )
    return DocumentSet(str(root), tuple(documents), digest.hexdigest(), skipped, odd)
