"""The judge's prompt: a versioned text file under conf/judge/prompts/, filled per (query, unit).

The version that keys the cache and labels the report is the file's stem plus a
hash of its text, so editing a prompt in place can never reuse verdicts given to
the old wording.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from string import Template

from evalpipe.core.files import read_json_text
from evalpipe.paths import PROJECT_ROOT, resolve_path
from evalpipe.safety.errors import EvalpipeError

PROMPTS_DIR = PROJECT_ROOT / "conf" / "judge" / "prompts"
MARK = " …"  # ends a cut excerpt
FIELDS = ("query", "unit_id", "title", "path", "excerpt")


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    text: str

    @property
    def version(self) -> str:
        return f"{self.name}@{hashlib.sha256(self.text.encode()).hexdigest()[:8]}"

    def render(self, query: str, unit_id: str, title: str, path: str, excerpt: str) -> str:
        values = {"query": query, "unit_id": unit_id, "title": title, "path": path, "excerpt": excerpt}
        return Template(self.text).safe_substitute(values)


def load_prompt(ref: str) -> PromptTemplate:
    """`relevance_v1` -> conf/judge/prompts/relevance_v1.txt; anything with a suffix or slash is a path."""
    path = Path(ref) if ("/" in ref or Path(ref).suffix) else PROMPTS_DIR / f"{ref}.txt"
    path = resolve_path(path)
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in PROMPTS_DIR.glob("*.txt")))
        raise EvalpipeError(f"judge.prompt={ref!r}: no prompt file {path} (known: {known})")
    text = read_json_text(path, "judge prompt file")  # a regular file, UTF-8, within the size limit
    missing = [f for f in ("query", "excerpt") if f"${f}" not in text and "${" + f + "}" not in text]
    if missing:
        raise EvalpipeError(f"{path}: the prompt must contain ${' and $'.join(missing)} (fields: {FIELDS})")
    return PromptTemplate(path.stem, text)


def excerpt(text: str, max_tokens: int, count: Callable[[str], int]) -> str:
    """The longest prefix of `text` that, marked with '…', stays within `max_tokens` (by the
    run's token counter); cut at a line or word break when one is near."""
    if count(text) <= max_tokens:
        return text
    lo, hi = 0, len(text)  # binary search on length: token counts grow with the prefix
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:mid] + MARK) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    cut = text[:lo]
    brk = max(cut.rfind("\n"), cut.rfind(" "))
    if brk > lo * 0.8:
        cut = cut[:brk]
    return cut.rstrip() + MARK
