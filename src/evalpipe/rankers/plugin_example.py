"""How to evaluate your own retriever: a complete plug-in ranker in ~50 lines.

A plug-in is any class with

    search(query: str, k: int, constraints: dict | None) -> list[Hit]

(best first, at most k). It does not subclass anything, is given no corpus and
needs no `prepare`/`stats` (the runner calls them only if they exist). Point a
config at it and run:

    # conf/ranker/my_retriever.yaml
    _target_: mypackage.retriever.MyRetriever   # any importable class
    endpoint: http://localhost:8080/search       # every other key is passed to __init__

    evalpipe ranker=my_retriever fixture=...

The `id` of each hit must be the unit id used in the fixture's expected IDs.
This example searches a local JSONL file by keyword overlap; a production plug-in
would instead call its service in `search` (an HTTP request, a database query)
and translate the response into hits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalpipe.core import Hit

_WORD = re.compile(r"\w+")


def _terms(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _allowed(rec: Mapping[str, Any], constraints: Mapping[str, Any]) -> bool:
    """Same semantics as Corpus.allowed_mask: a list means "any of"; path_prefix matches the path start."""
    for key, value in constraints.items():
        options = [str(v) for v in value] if isinstance(value, list | tuple) else [str(value)]
        if key == "path_prefix":
            if not any(str(rec.get("path", "")).startswith(p) for p in options):
                return False
        elif str(rec.get(key, "")) not in options:
            return False
    return True


class KeywordOverlapRanker:
    """Score = fraction of the query's distinct words that appear in the record; zero scores are dropped."""

    def __init__(self, path: str, id_field: str = "id", text_fields: list[str] | None = None):
        # Connect/load once here: the runner builds the object once and then calls search per case.
        self.docs: list[tuple[str, set[str], dict[str, Any]]] = []
        fields = list(text_fields or ["title", "text"])
        with Path(path).open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    rec = json.loads(line)
                    text = " ".join(str(rec.get(f, "")) for f in fields)
                    self.docs.append((str(rec[id_field]), _terms(text), rec))

    def search(self, query: str, k: int, constraints: Mapping[str, Any] | None = None) -> list[Hit]:
        wanted = _terms(query)
        if not wanted:
            return []
        scored = []
        for doc_id, terms, rec in self.docs:
            # Winnow constraints are the caller's filter: honour them before ranking,
            # as a production service would with a filtered query.
            if constraints and not _allowed(rec, constraints):
                continue
            overlap = len(wanted & terms) / len(wanted)
            if overlap > 0:
                scored.append((overlap, doc_id))
        # Sort by score, then id, so equal scores come back in a reproducible order.
        scored.sort(key=lambda s: (-s[0], s[1]))
        return [Hit(doc_id, score) for score, doc_id in scored[:k]]
