"""An on-disk cache of a tokenized corpus, so a new process skips BM25's tokenizing pass.

Tokenizing is most of what building a BM25 index costs (0.55 s of SciFact's 0.75 s;
minutes on a large corpus), and every new process pays it again: a re-run, each job of
a joblib or Ray sweep, CI. The term ids depend only on the corpus, the tokenizer
settings, the indexed fields and the code that tokenizes, and not on k1, b or the
BM25 variant, so one entry serves a whole k1/b grid.

An entry is three files under the ranker's `cache_dir` (`.cache/evalpipe/tokens` by
default; null turns it off): `<key>.ids.npy` (every unit's term ids, concatenated,
int32), `<key>.offsets.npy` (where each unit starts) and `<key>.json` (the vocabulary
in id order, the compound splitter's piece counts, and what went into the key). The
JSON is written last and every file goes in with `os.replace`, so a reader sees a
whole entry or none, and concurrent sweep jobs can share a directory. An entry that
does not load or does not fit together is a miss (rebuilt and overwritten); the cache
never changes a figure, only how soon it is there.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from evalpipe.atomic import write_atomic

#: Bumped when the file layout changes, so old entries simply miss.
CACHE_FORMAT = 1


@dataclass(frozen=True)
class TokenizedCorpus:
    """Term ids per unit (in corpus order), the vocabulary, and the splitter's piece counts."""

    doc_ids: list[list[int]]
    vocab: dict[str, int]
    splitter_counts: Mapping[str, int] | None


def cache_key(parts: Mapping[str, Any]) -> str:
    """A digest of everything the term ids depend on (JSON of `parts`, keys sorted)."""
    blob = json.dumps({"format": CACHE_FORMAT, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


def load(cache_dir: str | Path, key: str, units: int) -> TokenizedCorpus | None:
    """The entry for `key` if it is whole and covers `units` units, else None."""
    folder = Path(cache_dir)
    try:
        meta = json.loads((folder / f"{key}.json").read_text(encoding="utf-8"))
        ids = np.load(folder / f"{key}.ids.npy", allow_pickle=False)
        offsets = np.load(folder / f"{key}.offsets.npy", allow_pickle=False)
    except (OSError, ValueError):
        return None
    terms = meta.get("vocab") if isinstance(meta, dict) else None
    if not isinstance(terms, list) or ids.ndim != 1 or offsets.ndim != 1 or len(offsets) != units + 1:
        return None
    if int(offsets[0]) != 0 or int(offsets[-1]) != len(ids) or np.any(np.diff(offsets) < 0):
        return None
    if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= len(terms)):
        return None
    flat = ids.tolist()
    bounds = offsets.tolist()
    doc_ids = [flat[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    counts = meta.get("splitter_counts")
    return TokenizedCorpus(
        doc_ids=doc_ids,
        vocab={str(t): i for i, t in enumerate(terms)},
        splitter_counts={str(k): int(v) for k, v in counts.items()} if isinstance(counts, dict) else None,
    )


def save(cache_dir: str | Path, key: str, tokenized: TokenizedCorpus, described: Mapping[str, Any]) -> None:
    """Write the entry (ids, offsets, then the JSON that makes it visible); an unwritable cache
    only costs the next process the tokenizing pass."""
    folder = Path(cache_dir)
    try:
        lengths = np.fromiter(map(len, tokenized.doc_ids), dtype=np.int64, count=len(tokenized.doc_ids))
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.fromiter(chain.from_iterable(tokenized.doc_ids), dtype=np.int32, count=int(offsets[-1]))
        write_atomic(folder / f"{key}.ids.npy", lambda fh: np.save(fh, flat, allow_pickle=False))
        write_atomic(folder / f"{key}.offsets.npy", lambda fh: np.save(fh, offsets, allow_pickle=False))
        terms = sorted(tokenized.vocab, key=tokenized.vocab.__getitem__)
        meta = {
            "vocab": terms,
            "splitter_counts": dict(tokenized.splitter_counts) if tokenized.splitter_counts else None,
            "key": dict(described),
        }
        write_atomic(folder / f"{key}.json", lambda fh: fh.write(json.dumps(meta).encode("utf-8")))
    except OSError:
        return


def describe(
    ranker: str, tokenizer: Any, fields: Sequence[str], split_compounds: bool, corpus_sha256: str
) -> dict[str, Any]:
    """What the term ids depend on, readable (kept in the entry's JSON, hashed into its key)."""
    # lazy: evalpipe.core.fingerprint, ~5 ms
    from evalpipe.core.fingerprint import code_fingerprint

    return {
        "ranker": ranker,
        "stemmer": tokenizer.stemmer_name,
        "stopwords": sorted(tokenizer.stopwords),
        "code_aware": tokenizer.code_aware,
        "fields": list(fields),
        "split_compounds": split_compounds,
        "corpus_sha256": corpus_sha256,
        "code": code_fingerprint(),  # the tokenizer's rules change with evalpipe
    }
