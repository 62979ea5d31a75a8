"""A code-aware tokenizer shared by the lexical rankers.

Code queries name symbols in many spellings (`merge_settings`, `mergeSettings`,
`merge-settings`, `mergesettings`, "merge settings", `Session.merge`), so an identifier is
indexed as its **key** (its word pieces joined and lowercased, then stemmed like any word:
`mergeset`) and as its word pieces (`merg`, `set`). The key is exactly what the all-lowercase
spelling gives when typed as one word, so every spelling meets the index on the same term:
the query side and the index side run the same function, and nothing is stemmed on one side
only. Queries also try runs of adjacent words as keys ("merge settings" -> `mergeset`).

A lowercase compound such as Go's `fileops` has no boundary to split at; with a
`CompoundSplitter` built from the corpus's own words (`CodeTokenizer.with_splitter`), it
also yields `file` and `ops` when both are words of the corpus, on both sides.

With `code_aware=False` the tokenizer is exactly bm25s's default pipeline (lowercase,
`(?u)\\b\\w\\w+\\b`, stopwords, then stem), so BEIR prose benchmarks score the same as
published bm25s numbers.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping

import Stemmer

from evalpipe.rankers.bm25s_loader import import_bm25s

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
# Kept for the fixture checker and the exact ranker's older callers; the tokenizer itself
# also joins kebab-case (TOKEN_PATTERN).
COMPOUND_PATTERN = re.compile(r"\w+(?:(?:::|\.|/|\\)\w+)*")
#: What the code-aware tokenizer treats as one compound: COMPOUND_PATTERN plus `-` joins,
#: so `merge-settings` and `--dry-run` are identifiers like `merge_settings`.
TOKEN_PATTERN = re.compile(r"\w+(?:(?:::|\.|/|\\|-)\w+)*")
#: Separators between the names of a compound (`pkg.Type`, `a::b`, `dir/file.py`).
NAME_SEPARATOR = re.compile(r"::|[./\\]")
# Every separator identifier_pieces splits at: name separators plus `_` and `-`.
_SEPARATOR = re.compile(r"::|[./\\_-]")
_CACHE_SIZE = 1 << 17
#: Queries try runs of up to this many adjacent words as one identifier key.
MAX_JOINED_WORDS = 3
#: Compound splitting: each part has at least this many characters ...
MIN_PART_LENGTH = 3
#: ... and occurs at least this often as a word piece of the corpus.
MIN_PART_COUNT = 2
#: Never a part of a split compound: English function words (bm25s's `en_plus` list, NLTK's).
FUNCTION_WORDS = frozenset(_sw.STOPWORDS_EN_PLUS)
#: Words longer than this are not split (no identifier part is that long; bounds the cost).
MAX_SPLIT_LENGTH = 40


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


#: split_word's boundaries for ASCII letters and digits: an acronym (not the capital that starts
#: the next word), a capitalised or lowercase word, a number.
_ASCII_PIECES = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def split_word(word: str) -> list[str]:
    """Split one word (no separators) at camelCase, acronym and letter/digit boundaries.

    `HTTPServerError` -> HTTP, Server, Error; `parseJSON2xml` -> parse, JSON, 2, xml.
    Works on Unicode letters via str.isupper/isalpha rather than ASCII classes.
    """
    if word.isalpha() and (word.islower() or word.isupper() or word[1:].islower()):
        return [word]  # fast path: most words in prose and code have no inner boundary
    if word.isascii() and word.isalnum():
        return _ASCII_PIECES.findall(word)  # the same boundaries, in C (tests check they agree)
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
    """Lowercased word pieces of an identifier, splitting separators, snake_case, kebab-case
    and camelCase."""
    out: list[str] = []
    for part in _SEPARATOR.split(identifier):
        if part:
            out.extend(p.lower() for p in split_word(part))
    return out


def identifier_key(identifier: str) -> str:
    """The unstemmed key of one name: its pieces joined, lowercased (`merge_settings`,
    `mergeSettings`, `merge-settings` and `MERGE_SETTINGS` all give `mergesettings`)."""
    return "".join(identifier_pieces(identifier))


class CompoundSplitter:
    """Splits a lowercase run-together word into two words of the corpus (`fileops` -> file, ops).

    Nothing in `fileops` marks a boundary, so the corpus decides, by the frequency rule of
    Koehn & Knight (2003, "Empirical methods for compound splitting"): among the splits
    into two corpus words (word pieces seen at least `min_count` times, at least `min_part`
    characters, content words: neither a stopword nor one of FUNCTION_WORDS, as their rule
    splits only into content words, so `output` is never `out` + `put` nor `overall` `over`
    + `all`), take the one with the highest geometric mean of the parts'
    frequencies, and split only if that mean exceeds the frequency of the word itself. A
    compound is rarer than its parts (`fileops`, `setdefault`, `dataclass` split), while an
    ordinary word is more common than the short words it happens to contain (`append` is not
    `app` + `end`, `output` not `out` + `put`). A query word the corpus never uses
    (`loadconfig`) splits whenever both parts are corpus words. Ties go to the leftmost
    split. Only two-part splits, only alphabetic words of at most MAX_SPLIT_LENGTH
    characters: the cost is one dictionary lookup per split point. Deterministic: the same
    corpus gives the same splits at index time and query time.
    """

    def __init__(
        self,
        counts: Mapping[str, int],
        min_part: int = MIN_PART_LENGTH,
        min_count: int = MIN_PART_COUNT,
        stopwords: Iterable[str] = (),
    ):
        stop = frozenset(stopwords) | FUNCTION_WORDS
        self.min_part = int(min_part)
        self.min_count = int(min_count)
        #: how often each word occurs as a piece (the "no split" option's frequency)
        self.counts: dict[str, int] = {w: int(c) for w, c in counts.items() if w.isalpha()}
        self.words: dict[str, int] = {
            w: int(c)
            for w, c in counts.items()
            if c >= self.min_count and len(w) >= self.min_part and w.isalpha() and w not in stop
        }
        self._cache: dict[str, tuple[str, ...]] = {}

    def __repr__(self) -> str:
        words, part, count = len(self.words), self.min_part, self.min_count
        return f"CompoundSplitter({words} words, min_part={part}, min_count={count})"

    def split(self, word: str) -> tuple[str, ...]:
        """The two parts of `word`, or () when it does not split."""
        hit = self._cache.get(word)
        if hit is not None:
            return hit
        parts: tuple[str, ...] = ()
        n = len(word)
        if 2 * self.min_part <= n <= MAX_SPLIT_LENGTH and word.isalpha():
            words = self.words
            whole = self.counts.get(word, 0)
            best = whole * whole  # compare squared geometric means: integers, no rounding
            for i in range(self.min_part, n - self.min_part + 1):
                product = words.get(word[:i], 0) * words.get(word[i:], 0)
                if product > best:
                    best = product
                    parts = (word[:i], word[i:])
        if len(self._cache) >= _CACHE_SIZE:
            self._cache.clear()
        self._cache[word] = parts
        return parts


class CodeTokenizer:
    """Text -> list of index terms; deterministic, and stateless apart from the stemmer and
    the optional corpus splitter.

    code_aware=True: a compound (`Session.merge_settings`, `dir/file.py`, `merge-settings`)
    gives, in order: its whole name when it has several names (`session.mergesettings`:
    each name's key joined by `.`, unstemmed), the key of each name made of several pieces
    (stemmed like a word, never stopped: `mergeset`), then its pieces (stopwords and the
    stemmer apply; with a splitter, a piece that splits is followed by its parts). A plain
    word is its own key, so it gives just its stem. Terms shorter than two characters are
    dropped in both modes, as bm25s does, because single letters carry no retrieval signal.
    `query_terms` adds keys of adjacent-word runs.
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
        self.splitter: CompoundSplitter | None = None
        # compound -> its terms; text repeats the same words, so this avoids re-splitting and
        # re-stemming them (bounded: cleared when full)
        self._cache: dict[str, tuple[str, ...]] = {}
        # word -> stem: a corpus has far fewer distinct words than occurrences, so each word
        # is stemmed once (as bm25s does) instead of at every occurrence (bounded likewise)
        self._stems: dict[str, str] = {}

    def __repr__(self) -> str:
        split = f", splitter={self.splitter!r}" if self.splitter is not None else ""
        return (
            f"CodeTokenizer(stemmer={self.stemmer_name!r}, stopwords={len(self.stopwords)} words, "
            f"code_aware={self.code_aware}{split})"
        )

    def with_splitter(self, splitter: CompoundSplitter | None) -> CodeTokenizer:
        """A copy of this tokenizer that splits compounds with `splitter` (its own term cache)."""
        new = CodeTokenizer.__new__(CodeTokenizer)
        new.__dict__.update(self.__dict__)
        new.splitter = splitter
        new._cache = {}
        return new

    def piece_counts(self, texts: Iterable[str]) -> Counter[str]:
        """How often each lowercase word piece occurs in `texts` (the splitter's vocabulary)."""
        compounds: Counter[str] = Counter()
        for text in texts:
            compounds.update(TOKEN_PATTERN.findall(text))  # counted in C; split once each below
        counts: Counter[str] = Counter()
        for compound, n in compounds.items():
            for piece in identifier_pieces(compound):
                counts[piece] += n
        return counts

    def build_splitter(self, texts: Iterable[str]) -> CompoundSplitter:
        """A CompoundSplitter over the word pieces of `texts` (stopwords are never parts)."""
        return CompoundSplitter(self.piece_counts(texts), stopwords=self.stopwords)

    def _stem_all(self, words: list[str]) -> list[str]:
        if self._stemmer is None or not words:
            return words
        stems = self._stems
        new = [w for w in set(words) if w not in stems]
        if new:
            if len(stems) + len(new) > _CACHE_SIZE:
                stems.clear()
            stems.update(zip(new, self._stemmer.stemWords(new), strict=True))
        return [stems[w] for w in words]

    def _finish(self, pieces: list[str]) -> list[str]:
        """Stopword removal then stemming, in bm25s's order."""
        if self.stopwords:
            pieces = [p for p in pieces if p not in self.stopwords]
        return self._stem_all(pieces)

    def __call__(self, text: str) -> list[str]:
        if not text:
            return []
        if not self.code_aware:
            return self._finish(PLAIN_PATTERN.findall(text.lower()))
        out: list[str] = []
        cache = self._cache
        for compound in TOKEN_PATTERN.findall(text):
            terms = cache.get(compound)
            if terms is None:
                terms = self._compound_terms(compound)
                if len(cache) >= _CACHE_SIZE:
                    cache.clear()
                cache[compound] = terms
            out.extend(terms)
        return out

    def query_terms(self, text: str) -> list[str]:
        """Terms of a query: `self(text)` plus the key of every run of 2..MAX_JOINED_WORDS
        adjacent single-name words ("merge settings" also gives `mergeset`, the key of
        `merge_settings`), so a space-separated spelling meets the identifier's key."""
        terms = self(text)
        if not self.code_aware or MAX_JOINED_WORDS < 2:
            return terms
        runs: list[list[str]] = [[]]
        end = 0
        for match in TOKEN_PATTERN.finditer(text):
            word = match.group(0)
            gap = text[end : match.start()]
            end = match.end()
            if NAME_SEPARATOR.search(word):  # a dotted name or path is no word of a run
                runs.append([])
                continue
            if gap.strip() or not runs[-1]:
                runs.append([])
            runs[-1].append(identifier_key(word))
        joined: list[str] = []
        for run in runs:
            for size in range(2, MAX_JOINED_WORDS + 1):
                for i in range(len(run) - size + 1):
                    key = "".join(run[i : i + size])
                    if len(key) >= 2:
                        joined.append(key)
        return terms + self._stem_all(joined)

    def _compound_terms(self, compound: str) -> tuple[str, ...]:
        names = [identifier_pieces(n) for n in NAME_SEPARATOR.split(compound) if n]
        names = [p for p in names if p]
        head: list[str] = []
        if len(names) > 1:
            whole = ".".join("".join(p) for p in names)
            head.append(whole)
        keys = ["".join(p) for p in names if len(p) > 1]
        pieces = [p for name in names for p in name if len(p) >= 2]
        if self.splitter is not None:
            split = self.splitter.split
            pieces = [q for p in pieces for q in (p, *split(p))]
        return tuple(head + [k for k in self._stem_all(keys) if len(k) >= 2] + self._finish(pieces))
