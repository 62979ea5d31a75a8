"""Name leakage and name matching: does the query hand the answer over by name?

Two different ways a query can be easier than its tier says:

- *leakage*: a concept query contains the expected unit's own name (`format_arguments`
  -> "format the arguments"), so an identifier match finds it without understanding;
- *name match*: a multi_hop query names an identifier (`what calls top_k`) that occurs in
  the text of every expected unit (each caller's body says `top_k(`), so a lexical
  ranker answers it without following any relation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from evalpipe.core import Unit
from evalpipe.corpus import Corpus
from evalpipe.fixture_check.words import Words, content_words
from evalpipe.rankers.tokenize import COMPOUND_PATTERN, split_word

# File suffixes a query may put on a module name ("the _lines helper in trec.py").
_SOURCE_SUFFIX = re.compile(r"\.(?:py|pyi|md|markdown|go|ts|tsx|js|jsx|mjs|cjs|mts|cts)$")


def unit_name(unit: Unit) -> str:
    """The unit's own short name: metadata `name`, else the last dotted part of its title."""
    name = str(unit.metadata.get("name") or "")
    if name:
        return name
    if unit.kind == "section":
        return unit.title
    return unit.title.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class Leak:
    """How much of `name` the query contains: `full`, `partial` or `none` (stemmed content words)."""

    level: str
    name: str
    words: tuple[str, ...] = ()


def name_leak(query: Words, unit: Unit) -> Leak:
    """Compare the query's stemmed content words with those of the unit's own name.

    A name with no content word (`__init__` has one: `init`; `x` has none) cannot leak.
    """
    name = unit_name(unit)
    name_words = content_words(name)
    wanted = name_words.stem_set
    shared = wanted & query.stem_set
    if len(name_words.surface) >= 2 and "".join(name_words.surface) in query.surface_set:
        # the whole name written run-together (`mergesettings` for `merge_settings`)
        return Leak("full", name, tuple(dict.fromkeys(name_words.surface)))
    if not wanted or not shared:
        return Leak("none", name)
    level = "full" if shared == wanted else "partial"
    leaked = (s for s, t in zip(name_words.surface, name_words.stems, strict=True) if t in shared)
    return Leak(level, name, tuple(dict.fromkeys(leaked)))


def looks_like_identifier(token: str) -> bool:
    """snake_case, dotted/`::`/path names and camelCase spell code, not prose."""
    if any(sep in token for sep in ("_", ".", "::", "/")):
        return True
    return len(split_word(token)) > 1 and any(c.isalpha() for c in token)


def known_names(corpus: Corpus) -> frozenset[str]:
    """Every unit name and qualified name in the corpus (what a query can name)."""
    names: set[str] = set()
    for unit in corpus:
        for value in (unit.metadata.get("name"), unit.metadata.get("qualname")):
            if value:
                names.add(str(value))
    return frozenset(names)


def query_identifiers(query: str, names: Iterable[str] = ()) -> tuple[str, ...]:
    """Identifiers the query names: code-shaped tokens, or plain words that are a unit's name.

    `names` is the corpus's set of names (case-sensitive), so "who calls a ranker's
    prepare" names `prepare` while "prepare the data" would too: the checker reports
    the identifier so a reviewer can see why.
    """
    names = names if isinstance(names, frozenset | set) else frozenset(names)
    out: list[str] = []
    for token in COMPOUND_PATTERN.findall(query):
        token = token.strip("./\\")
        if len(token) < 2:
            continue
        if looks_like_identifier(token) or token in names:
            out.append(token)
    return tuple(dict.fromkeys(out))


def spellings(identifier: str) -> tuple[str, ...]:
    """The ways a unit's text can mention `identifier`: as written, and its last dotted part.

    `Corpus.allowed_mask` is called as `corpus.allowed_mask(...)` or `self.allowed_mask(...)`;
    `trec.py` is imported as `evalpipe.inputs.trec`.
    """
    base = _SOURCE_SUFFIX.sub("", identifier)
    out = [identifier, base]
    for sep in ("::", ".", "/"):
        if sep in base:
            out.append(base.rsplit(sep, 1)[-1])
    return tuple(s for s in dict.fromkeys(out) if len(s) >= 2)


@lru_cache(maxsize=4096)
def _pattern(spelling: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w]){re.escape(spelling)}(?![\w])")


def mentions(identifier: str, text: str) -> bool:
    """True when `text` contains one of the identifier's spellings as a whole word."""
    return any(_pattern(s).search(text) for s in spellings(identifier))


@dataclass(frozen=True)
class NameMatch:
    """Multi_hop: identifiers the query names and the one (if any) found in every expected unit."""

    identifiers: tuple[str, ...]
    matched: str | None

    @property
    def answerable_by_name(self) -> bool:
        return self.matched is not None


def name_match(identifiers: Sequence[str], expected: Sequence[Unit]) -> NameMatch:
    """The first named identifier that occurs in the text of every expected unit, if any."""
    for ident in identifiers:
        if expected and all(mentions(ident, u.text) for u in expected):
            return NameMatch(tuple(identifiers), ident)
    return NameMatch(tuple(identifiers), None)
