"""The fixture error for expected IDs that are not in the corpus, written to be acted on.

A fixture written against a newer (or older) corpus usually misses many IDs at once, for
one reason: a renamed symbol, an ID spelt differently from the builder's convention, or a
kind of unit the builder does not emit. So every affected case is listed in one message,
each missing ID with the nearest existing IDs, plus the unit kinds the corpus holds for
that language, which tells "misspelt" apart from "the builder makes no such units".
"""

from __future__ import annotations

import difflib
import unicodedata
from collections import defaultdict
from collections.abc import Sequence
from typing import Protocol

from evalpipe.corpus import Corpus
from evalpipe.corpus.build import language_of
from evalpipe.safety.errors import normalisation_hint, shown

#: Nearest IDs suggested per missing ID.
SUGGESTIONS = 3


class _Case(Protocol):
    id: str
    line: int
    qrels: dict[str, int]


def _file_of(uid: str) -> str:
    return uid.split("::", 1)[0].split("#", 1)[0]


def nearest_ids(uid: str, corpus: Corpus, by_file: dict[str, list[str]]) -> list[str]:
    """Closest existing IDs by difflib ratio: same file first (cheap, and usually right); an ID equal
    once both are NFC-normalised comes first."""
    nfc = unicodedata.normalize("NFC", uid)
    same_form = (
        [i for i in corpus.ids if i != uid and unicodedata.normalize("NFC", i) == nfc]
        if nfc != uid or not uid.isascii()
        else []
    )
    if same_form:
        return same_form[:SUGGESTIONS]
    same_file = by_file.get(_file_of(uid), [])
    near = difflib.get_close_matches(uid, same_file, n=SUGGESTIONS, cutoff=0.5)
    return near or difflib.get_close_matches(uid, corpus.ids, n=SUGGESTIONS, cutoff=0.6)


def missing_ids_message(cases: Sequence[_Case], corpus: Corpus, where: str) -> str | None:
    """One line naming every case with expected IDs missing from `corpus` ("; "-separated), or None."""
    affected = [(c, [d for d in c.qrels if d not in corpus]) for c in cases]
    affected = [(c, m) for c, m in affected if m]
    if not affected:
        return None
    by_file: dict[str, list[str]] = defaultdict(list)
    kinds: dict[str, set[str]] = defaultdict(set)
    for unit in corpus:
        by_file[_file_of(unit.id)].append(unit.id)
        kinds[unit.language].add(unit.kind)
    n_ids = sum(len(m) for _, m in affected)
    source = corpus.source or corpus.name
    head = f"{where}: expected ID(s) not in corpus {source}: {n_ids} in {len(affected)} case(s)"
    lines: list[str] = []
    languages: set[str] = set()
    for case, missing in affected:
        loc = f"line {case.line}, " if case.line else ""
        for uid in missing:
            near = nearest_ids(uid, corpus, by_file)
            hint = f"nearest: {', '.join(map(shown, near))}" if near else "no similar ID"
            if near and uid.strip() in near:
                hint += "; the IDs differ only in surrounding whitespace"
            form = normalisation_hint(uid, near)
            if form:
                hint += f"; {form}"
            lines.append(f"{loc}case {case.id!r}: {shown(uid)} ({hint})")
            languages.add(language_of(_file_of(uid)) or "")
    for lang in sorted(languages - {""}):
        have = ", ".join(sorted(kinds.get(lang, ()))) or "none"
        lines.append(f"{lang} unit kinds the corpus builder produced: {have}")
    lines.append(
        "fix the spelling (IDs are path::Qualname), or rebuild the corpus with "
        "`python -m evalpipe.corpus` if the fixture names units it lacks"
    )
    # one line, as every input error (entries separated by "; ")
    return f"{head}: " + "; ".join(lines)
