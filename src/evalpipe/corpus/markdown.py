"""Markdown files -> section units, one per heading, split when a section is long.

IDs are the links a reader would paste: `docs/guide.md#install` with GitHub's
anchor slugs (lowercase, punctuation dropped, spaces to `-`, repeats get `-1`,
`-2`), so gold cases can be written by copying an anchor from the rendered page.

Conventions:
- Text before the first heading is the intro unit `path.md#` (empty slug, as
  `path.md#` links to the top of the page); it is only emitted when non-blank.
  A YAML front-matter block (`---` ... `---` on the first lines) is skipped.
- A section's body runs to the next heading of any level; subsections are their
  own units, linked by `contains`.
- A body longer than `section_chars` is split on paragraph boundaries (a fenced
  code block stays whole when it fits): the first chunk keeps `path.md#slug`,
  later ones are `path.md#slug~2`, `~3`. Every chunk repeats the heading path so
  it stays retrievable on its own.
- ATX (`## x`) and setext (`x` over `===`/`---`) headings are recognised;
  anything inside fenced code blocks is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from evalpipe.core import Unit

DEFAULT_SECTION_CHARS = 1500
LANGUAGE = "markdown"

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_NOT_PARAGRAPH = re.compile(r"^\s*([-*+>|]|\d+[.)]\s|#|<)|^ {4}")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_REF_LINK = re.compile(r"!?\[([^\]]*)\]\[[^\]]*\]")
_TAG = re.compile(r"<[^>]+>")
_SLUG_DROP = re.compile(r"[^\w\- ]", re.UNICODE)


def heading_title(raw: str) -> str:
    """Heading text as shown: links reduced to their label, HTML tags dropped."""
    text = _LINK.sub(r"\1", raw)
    text = _REF_LINK.sub(r"\1", text)
    return _TAG.sub("", text).strip()


class Slugger:
    """GitHub's anchor algorithm (github-slugger), including duplicate numbering."""

    def __init__(self) -> None:
        self.occurrences: dict[str, int] = {}

    @staticmethod
    def base(title: str) -> str:
        return _SLUG_DROP.sub("", title.strip().lower()).replace(" ", "-")

    def slug(self, title: str) -> str:
        original = self.base(title)
        result = original
        while result in self.occurrences:
            self.occurrences[original] += 1
            result = f"{original}-{self.occurrences[original]}"
        self.occurrences[result] = 0
        return result


@dataclass
class _Heading:
    index: int  # 0-based line index of the heading's first line
    body_start: int  # 0-based index of the first body line
    level: int
    title: str
    slug: str = ""
    path: list[str] = field(default_factory=list)
    parent: int | None = None  # index into the headings list


def _front_matter_end(lines: list[str]) -> int:
    if lines and lines[0].strip() == "---":
        for i in range(1, len(lines)):
            if lines[i].strip() in ("---", "..."):
                return i + 1
    return 0


def _closes(m: re.Match | None, fence: str) -> bool:
    return bool(m) and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not m.group(2).strip()


def _opens(m: re.Match | None) -> bool:
    # a backtick fence's info string may not contain backticks (that is inline code)
    return bool(m) and not (m.group(1)[0] == "`" and "`" in m.group(2))


def _find_headings(lines: list[str], start: int) -> list[_Heading]:
    headings: list[_Heading] = []
    fence: str | None = None
    para_run = 0  # consecutive paragraph lines ending at the previous line
    for i in range(start, len(lines)):
        line = lines[i]
        m = _FENCE.match(line)
        if fence is not None:
            if _closes(m, fence):
                fence = None
            para_run = 0
            continue
        if _opens(m):
            fence = m.group(1)
            para_run = 0
            continue
        atx = _ATX.match(line)
        if atx:
            headings.append(_Heading(i, i + 1, len(atx.group(1)), heading_title(atx.group(2) or "")))
            para_run = 0
            continue
        # setext: a one-line paragraph underlined with === (H1) or --- (H2); a
        # longer paragraph over --- is left alone rather than guessed at
        setext = _SETEXT.match(line)
        if setext and para_run == 1:
            level = 1 if setext.group(1)[0] == "=" else 2
            headings.append(_Heading(i - 1, i + 1, level, heading_title(lines[i - 1])))
            para_run = 0
            continue
        para_run = para_run + 1 if line.strip() and not _NOT_PARAGRAPH.match(line) else 0
    return headings


@dataclass
class _Block:
    text: str
    first: int  # 1-based line numbers
    last: int


def _blocks(lines: list[str], offset: int) -> list[_Block]:
    """Paragraphs (blank-line separated), with fenced code kept in one block.

    `offset` is the 0-based index of `lines[0]` in the file, for line numbers.
    """
    blocks: list[_Block] = []
    current: list[str] = []
    first = 0
    fence: str | None = None
    for j, line in enumerate(lines):
        m = _FENCE.match(line)
        if fence is None and _opens(m):
            fence = m.group(1)
        elif fence is not None and _closes(m, fence):
            fence = None
        elif not line.strip() and fence is None:
            if current:
                blocks.append(_Block("\n".join(current), first, offset + j))
                current = []
            continue
        if not current:
            first = offset + j + 1
        current.append(line)
    if current:
        blocks.append(_Block("\n".join(current), first, offset + len(lines)))
    return blocks


def _split_long(block: _Block, limit: int) -> list[_Block]:
    """A block over the limit is cut at line ends, and a line over it every `limit` chars."""
    pieces: list[tuple[str, int]] = []
    for k, line in enumerate(block.text.split("\n")):
        pieces.extend((line[p : p + limit], block.first + k) for p in range(0, max(len(line), 1), limit))
    out: list[_Block] = []
    buf: list[tuple[str, int]] = []
    size = 0
    for text, lineno in pieces:
        if buf and size + 1 + len(text) > limit:
            out.append(_Block("\n".join(t for t, _ in buf), buf[0][1], buf[-1][1]))
            buf, size = [], 0
        size += len(text) + (1 if buf else 0)
        buf.append((text, lineno))
    if buf:
        out.append(_Block("\n".join(t for t, _ in buf), buf[0][1], buf[-1][1]))
    return out


def chunk_blocks(blocks: list[_Block], limit: int) -> list[list[_Block]]:
    """Greedy packing of paragraphs into chunks of at most `limit` chars of body."""
    chunks: list[list[_Block]] = []
    current: list[_Block] = []
    size = 0
    for block in blocks:
        pieces = [block] if len(block.text) <= limit else _split_long(block, limit)
        for piece in pieces:
            extra = len(piece.text) + (2 if current else 0)
            if current and size + extra > limit:
                chunks.append(current)
                current, size = [], 0
                extra = len(piece.text)
            current.append(piece)
            size += extra
    if current:
        chunks.append(current)
    return chunks


def parse_markdown(text: str, path: str, section_chars: int = DEFAULT_SECTION_CHARS) -> list[Unit]:
    """Section units of one Markdown document, in document order."""
    if section_chars < 1:
        raise ValueError(f"section_chars must be >= 1, got {section_chars}")
    lines = text.splitlines()
    start = _front_matter_end(lines)
    headings = _find_headings(lines, start)
    slugger = Slugger()

    stack: list[int] = []
    for n, h in enumerate(headings):
        while stack and headings[stack[-1]].level >= h.level:
            stack.pop()
        h.parent = stack[-1] if stack else None
        h.path = [*(headings[s].title for s in stack), h.title]
        stack.append(n)

    first_heading = headings[0].index if headings else len(lines)
    intro_lines = lines[start:first_heading]
    has_intro = any(line.strip() for line in intro_lines)
    if has_intro:
        slugger.occurrences[""] = 0  # the intro owns the empty slug
    for h in headings:
        h.slug = slugger.slug(h.title)

    units: list[Unit] = []
    children: dict[int, list[str]] = {}
    for h in headings:
        if h.parent is not None:
            children.setdefault(h.parent, []).append(f"{path}#{h.slug}")

    def emit(
        slug: str,
        title: str,
        heading_path: list[str],
        level: int,
        line: int,
        body: list[str],
        body_offset: int,
        contains: list[str],
    ) -> None:
        blocks = _blocks(body, body_offset)
        chunks = chunk_blocks(blocks, section_chars) or [[]]
        prefix = " > ".join(heading_path)
        for part, chunk in enumerate(chunks, start=1):
            body_text = "\n\n".join(b.text for b in chunk)
            unit_id = f"{path}#{slug}" if part == 1 else f"{path}#{slug}~{part}"
            first_line = line if part == 1 else chunk[0].first
            end_line = chunk[-1].last if chunk else line
            units.append(
                Unit(
                    id=unit_id,
                    kind="section",
                    title=title,
                    text="\n\n".join(t for t in (prefix, body_text) if t),
                    path=path,
                    language=LANGUAGE,
                    relations={"contains": tuple(contains)} if part == 1 and contains else {},
                    metadata={
                        "heading_path": list(heading_path),
                        "level": level,
                        "line": first_line,
                        "end_line": end_line,
                        "document_id": path,
                        "chunk_index": len(units),
                        "section": slug,
                        "part": part,
                    },
                )
            )

    if has_intro:
        emit("", PurePosixPath(path).name, [], 0, start + 1, intro_lines, start, [])
    for n, h in enumerate(headings):
        end = headings[n + 1].index if n + 1 < len(headings) else len(lines)
        emit(
            h.slug,
            h.title,
            h.path,
            h.level,
            h.index + 1,
            lines[h.body_start : end],
            h.body_start,
            children.get(n, []),
        )
    return units
