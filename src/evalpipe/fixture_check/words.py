"""Content words: the unit of every overlap figure the checker reports.

A *content word* is a word piece as the bm25 ranker's code-aware tokenizer makes it
(`evalpipe.rankers.tokenize`): text is cut into compounds (`Corpus.allowed_mask`, `run.trec`),
each compound into lowercased pieces at separators, snake_case, camelCase and
letter/digit boundaries; pieces shorter than two characters and bm25s's English
stopwords are dropped. The *stemmed* form is the Snowball English stem of each piece,
exactly what BM25 indexes. Whole compounds are not content words (BM25 also indexes
them, but a paraphrase is judged by its words, not by whether it spells an identifier).

Run-together spellings count as copies too (`copied_share`): a query word that is a
target compound written without separators (`mergesettings` for `merge_settings`), or
two consecutive query words that the target writes as one lowercase word (`file ops`
for `fileops`), are words found in the target, however the two sides split them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache

from evalpipe.rankers.tokenize import (
    COMPOUND_PATTERN,
    identifier_pieces,
    make_stemmer,
    resolve_stopwords,
)

_STOPWORDS = resolve_stopwords("en")
_STEMMER = make_stemmer("english")


#: Punctuation that ends a phrase ("a language name, or none" has no phrase "name none"),
#: or a compound identifier as the bm25 tokenizer finds it: one scan finds both.
_SCAN = re.compile(rf"(?P<brk>[,;:!?()\[\]{{}}<>\"|=\n]|\.(?:\s|$))|(?P<word>{COMPOUND_PATTERN.pattern})")


@dataclass(frozen=True)
class Words:
    """A text's content words in order: `surface` (lowercased pieces) and their `stems`.

    `breaks[i]` is True when punctuation (a comma, a sentence end, a bracket, a line
    break) separates word i from word i-1, so a shared phrase never spans it.
    `groups[i]` numbers the compound word i came from: `trec_eval` gives two content
    words but is one written word, so a phrase's length counts it once.
    """

    surface: tuple[str, ...]
    stems: tuple[str, ...]
    breaks: tuple[bool, ...] = ()
    groups: tuple[int, ...] = ()
    #: Run-together forms of the text's multi-piece compounds: every run of >= 2 consecutive
    #: pieces, joined (`get_http_response` -> `gethttp`, `httpresponse`, `gethttpresponse`).
    joined: frozenset[str] = frozenset()

    def span_size(self, start: int, length: int) -> int:
        """How many written words (compounds) the content words [start, start+length) come from."""
        if not self.groups:
            return length
        return len(set(self.groups[start : start + length]))

    @cached_property
    def surface_set(self) -> frozenset[str]:
        return frozenset(self.surface)

    @cached_property
    def stem_set(self) -> frozenset[str]:
        return frozenset(self.stems)


@lru_cache(maxsize=1 << 14)
def _compound_words(compound: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    pieces = [p for p in identifier_pieces(compound) if len(p) >= 2 and p not in _STOPWORDS]
    stems = _STEMMER.stemWords(pieces) if pieces and _STEMMER is not None else pieces
    return tuple(pieces), tuple(stems)


#: Longest run of pieces joined into a run-together form (identifiers rarely have more).
_MAX_JOIN = 6


@lru_cache(maxsize=1 << 14)
def _joined_forms(compound: str) -> tuple[str, ...]:
    pieces = identifier_pieces(compound)
    if len(pieces) < 2:
        return ()
    return tuple(
        "".join(pieces[i:j])
        for i in range(len(pieces))
        for j in range(i + 2, min(len(pieces), i + _MAX_JOIN) + 1)
    )


def content_words(text: str) -> Words:
    """The content words of `text` (see the module docstring for the definition)."""
    surface: list[str] = []
    stems: list[str] = []
    breaks: list[bool] = []
    groups: list[int] = []
    joined: set[str] = set()
    compound = 0
    pending = False
    for _, word in _SCAN.findall(text or ""):
        if not word:
            pending = True
            continue
        joined.update(_joined_forms(word))
        s, t = _compound_words(word)
        if s:
            surface.extend(s)
            stems.extend(t)
            breaks.append(pending)
            breaks.extend([False] * (len(s) - 1))
            groups.extend([compound] * len(s))
            compound += 1
            pending = False
    return Words(tuple(surface), tuple(stems), tuple(breaks), tuple(groups), frozenset(joined))


def share_present(query: frozenset[str], target: frozenset[str]) -> float:
    """Share of the query's distinct words found in the target (0.0 for a query with none)."""
    return len(query & target) / len(query) if query else 0.0


def copied_share(query: Words, target: Words, stemmed: bool = True) -> float:
    """Share of the query's distinct content words (stems, or surface forms) found in the target,
    run-together spellings included (see the module docstring).

    A word the query repeats counts once; a word found through a run-together form counts
    as found in both of its spellings' places. 0.0 for a query with no content word.
    """
    keys = query.stems if stemmed else query.surface
    wanted = set(keys)
    if not wanted:
        return 0.0
    words = target.stem_set if stemmed else target.surface_set
    found = {k for k in wanted if k in words}
    breaks = query.breaks or (False,) * len(keys)
    for i, word in enumerate(query.surface):
        if keys[i] not in found and word in target.joined:
            found.add(keys[i])  # `mergesettings` written for `merge_settings`
        if i + 1 < len(keys) and not breaks[i + 1] and word + query.surface[i + 1] in target.surface_set:
            found.update((keys[i], keys[i + 1]))  # `file ops` written for `fileops`
    return len(found) / len(wanted)


def longest_shared_run(query: Words, target: Words) -> tuple[int, int]:
    """(start in `query`, length) of the longest run of consecutive stemmed content words
    that also occurs, consecutively, in `target`; no run crosses punctuation in either.
    "Longest" counts written words first (`query.span_size`), then content words.

    Only positions where the two share a word are extended, so the cost follows the
    number of matches, not len(query) * len(target): cheap enough to run on every
    evaluation. Ties keep the earliest run in the query.
    """
    q, t = query.stems, target.stems
    qb = query.breaks or (False,) * len(q)
    tb = target.breaks or (False,) * len(t)
    positions: dict[str, list[int]] = {}
    wanted = set(q)
    for i, word in enumerate(t):
        if word in wanted:
            positions.setdefault(word, []).append(i)
    best_start, best_len, best_size = 0, 0, 0
    for j, word in enumerate(q):
        for i in positions.get(word, ()):
            n = 1
            while (
                j + n < len(q) and i + n < len(t) and q[j + n] == t[i + n] and not qb[j + n] and not tb[i + n]
            ):
                n += 1
            size = query.span_size(j, n)
            if (size, n) > (best_size, best_len):
                best_start, best_len, best_size = j, n, size
    return best_start, best_len
