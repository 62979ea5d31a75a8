"""A code-aware tokenizer shared by the lexical rankers.

Code queries name symbols in many spellings (`merge_settings`, `mergeSettings`,
`Session.merge`, `src/evalpipe/runner.py`), so an identifier is indexed both whole
(an exact spelling still wins) and split into its word pieces (a prose query
"merge settings" still matches). With `code_aware=False` the tokenizer is exactly
bm25s's default pipeline (lowercase, `(?u)\\b\\w\\w+\\b`, stopwords, then stem), so
BEIR prose benchmarks score the same as published bm25s numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import Stemmer

from evalpipe.bm25s_loader import import_bm25s

_sw = import_bm25s().stopwords

# bm25s's language codes, so `stopwords: en` means the same list bm25s uses.
_STOPWORD_LISTS: dict[str, tuple[str, ...]] = {
    "en": _sw.STOPWORDS_EN,
    "english": _sw.STOPWORDS_EN,
    "en_plus": _sw.STOPWORDS_EN_PLUS,
    "english_plus": _sw.STOPWORDS_EN_PLUS,
    "de": _sw.STOPWORDS_GERMAN,
    "german": _sw.STOPWORDS_GERMAN,
    "nl": _sw.STOPWORDS_DUTCH,
    "dutch": _sw.STOPWORDS_DUTCH,
    "fr": _sw.STOPWORDS_FRENCH,
    "french": _sw.STOPWORDS_FRENCH,
    "es": _sw.STOPWORDS_SPANISH,
    "spanish": _sw.STOPWORDS_SPANISH,
    "pt": _sw.STOPWORDS_PORTUGUESE,
    "portuguese": _sw.STOPWORDS_PORTUGUESE,
    "it": _sw.STOPWORDS_ITALIAN,
    "italian": _sw.STOPWORDS_ITALIAN,
    "ru": _sw.STOPWORDS_RUSSIAN,
    "russian": _sw.STOPWORDS_RUSSIAN,
    "sv": _sw.STOPWORDS_SWEDISH,
    "swedish": _sw.STOPWORDS_SWEDISH,
    "no": _sw.STOPWORDS_NORWEGIAN,
    "norwegian": _sw.STOPWORDS_NORWEGIAN,
    "da": _sw.STOPWORDS_DANISH,
    "danish": _sw.STOPWORDS_DANISH,
}

# bm25s's (and scikit-learn's) default: words of two or more characters.
PLAIN_PATTERN = re.compile(r"(?u)\b\w\w+\b")
# A compound identifier: words joined by `.`, `::`, `/` or `\` (dotted names, C++/Rust
# paths, file paths). A trailing sentence period is not captured (needs a word after it).
COMPOUND_PATTERN = re.compile(r"\w+(?:(?:::|\.|/|\\)\w+)*")
_SEPARATOR = re.compile(r"::|[./\\_]")
_CACHE_SIZE = 1 << 17


def resolve_stopwords(stopwords: str | Iterable[str] | None) -> frozenset[str]:
    """Turn a config value (language code, explicit list, or None) into a stopword set."""
    if stopwords is None or stopwords is False:
        return frozenset()
    if isinstance(stopwords, str):
        try:
            return frozenset(_STOPWORD_LISTS[stopwords.lower()])
        except KeyError:
            raise ValueError(
                f"unknown stopwords {stopwords!r}: use one of {sorted(_STOPWORD_LISTS)}, "
                "a list of words, or null"
            ) from None
    return frozenset(str(w).lower() for w in stopwords)


def make_stemmer(stemmer: str | None) -> Stemmer.Stemmer | None:
    """A PyStemmer (Snowball) stemmer by algorithm name, or None to disable stemming."""
    if stemmer is None:
        return None
    try:
        return Stemmer.Stemmer(stemmer)
    except KeyError:
        raise ValueError(f"unknown stemmer {stemmer!r}: use one of {Stemmer.algorithms()} or null") from None


def _char_class(ch: str) -> str:
    if ch.isdigit():
        return "d"
    if ch.isupper():
        return "u"
    if ch.isalpha():
        return "l"
    return "o"


def split_word(word: str) -> list[str]:
    """Split one word (no separators) at camelCase, acronym and letter/digit boundaries.

    `HTTPServerError` -> HTTP, Server, Error; `parseJSON2xml` -> parse, JSON, 2, xml.
    Works on Unicode letters via str.isupper/isalpha rather than ASCII classes.
    """
    if word.isalpha() and (word.islower() or word.isupper() or word[1:].islower()):
        return [word]  # fast path: most words in prose and code have no inner boundary
    pieces: list[str] = []
    start = 0
    n = len(word)
    for i in range(1, n):
        prev, cur = _char_class(word[i - 1]), _char_class(word[i])
        boundary = (
            (prev == "l" and cur == "u")  # camelCase
            or (prev in "ul") != (cur in "ul")  # letter <-> digit/other
            # acronym end: the last capital of a run starts the next word (HTTPServer)
            or (prev == "u" and cur == "u" and i + 1 < n and _char_class(word[i + 1]) == "l")
        )
        if boundary:
            pieces.append(word[start:i])
            start = i
    pieces.append(word[start:])
    return pieces


def identifier_pieces(identifier: str) -> list[str]:
    """Lowercased word pieces of an identifier, splitting separators, snake_case and camelCase."""
    out: list[str] = []
    for part in _SEPARATOR.split(identifier):
        if part:
            out.extend(p.lower() for p in split_word(part))
    return out


class CodeTokenizer:
    """Text -> list of index terms; deterministic and stateless apart from the stemmer.

    code_aware=True: every compound identifier is emitted whole (lowercased, never
    stemmed or stopped, so `merge_settings` stays an exact key) followed by its pieces,
    to which stopwords and the stemmer apply. Terms shorter than two characters are
    dropped in both modes, as bm25s does, because single letters (loop variables,
    initials) carry no retrieval signal.
    """

    def __init__(
        self,
        stemmer: str | None = "english",
        stopwords: str | Iterable[str] | None = "en",
        code_aware: bool = True,
    ):
        self.stemmer_name = stemmer
        self.code_aware = bool(code_aware)
        self._stemmer = make_stemmer(stemmer)
        self.stopwords = resolve_stopwords(stopwords)
        # compound -> its terms; text repeats the same words, so this avoids re-splitting and
        # re-stemming them (bounded: cleared when full)
        self._cache: dict[str, tuple[str, ...]] = {}
        # word -> stem: a corpus has far fewer distinct words than occurrences, so each word
        # is stemmed once (as bm25s does) instead of at every occurrence (bounded likewise)
        self._stems: dict[str, str] = {}

    def __repr__(self) -> str:
        return (
            f"CodeTokenizer(stemmer={self.stemmer_name!r}, stopwords={len(self.stopwords)} words, "
            f"code_aware={self.code_aware})"
        )

    def _finish(self, pieces: list[str]) -> list[str]:
        """Stopword removal then stemming, in bm25s's order."""
        if self.stopwords:
            pieces = [p for p in pieces if p not in self.stopwords]
        if self._stemmer is not None and pieces:
            stems = self._stems
            new = [p for p in set(pieces) if p not in stems]
            if new:
                if len(stems) + len(new) > _CACHE_SIZE:
                    stems.clear()
                stems.update(zip(new, self._stemmer.stemWords(new), strict=True))
            pieces = [stems[p] for p in pieces]
        return pieces

    def __call__(self, text: str) -> list[str]:
        if not text:
            return []
        if not self.code_aware:
            return self._finish(PLAIN_PATTERN.findall(text.lower()))
        out: list[str] = []
        cache = self._cache
        for compound in COMPOUND_PATTERN.findall(text):
            terms = cache.get(compound)
            if terms is None:
                terms = self._compound_terms(compound)
                if len(cache) >= _CACHE_SIZE:
                    cache.clear()
                cache[compound] = terms
            out.extend(terms)
        return out

    def _compound_terms(self, compound: str) -> tuple[str, ...]:
        whole = compound.lower()
        pieces = identifier_pieces(compound)
        head = [whole] if len(whole) >= 2 and pieces != [whole] else []
        return tuple(head + self._finish([p for p in pieces if len(p) >= 2]))
