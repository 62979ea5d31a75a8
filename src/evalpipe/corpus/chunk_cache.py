"""Chunked corpora cached on disk, keyed by the documents' digest and the chunker's config.

Chunking a few hundred documents is quick, but a sweep over chunk sizes builds the same
corpora again in every job and every re-run; more to the point the cache makes a chunked
corpus a file that can be looked at (`<cache_dir>/<key>.jsonl`, one unit per line, the
format of every other corpus). The key covers everything that changes the chunks: the
bytes and relative paths of every document, the chunker's parameters and this module's
FORMAT version. Files are written with the project's atomic writer, so two sweep jobs
building the same corpus at once never see half a file.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from evalpipe.atomic import write_atomic
from evalpipe.corpus.chunkers import Chunker
from evalpipe.corpus.documents import DocumentSet
from evalpipe.corpus.model import Corpus, CorpusError, load_jsonl_corpus

log = logging.getLogger(__name__)

#: Bump when the chunk records change shape, so old cache files are not read as new ones.
FORMAT = 1
DEFAULT_CACHE_DIR = ".cache/evalpipe/chunks"


def cache_key(documents: DocumentSet, chunker: Chunker) -> str:
    payload = json.dumps({"documents": documents.sha256, "chunker": chunker.config(), "format": FORMAT})
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def chunked_corpus(
    documents: DocumentSet, chunker: Chunker, cache_dir: str | Path | None, name: str
) -> Corpus:
    """The chunked corpus, read from the cache when present, else chunked (and cached)."""
    key = cache_key(documents, chunker)
    path = Path(cache_dir) / f"{key}.jsonl" if cache_dir else None
    if path is not None and path.is_file():
        try:
            cached = load_jsonl_corpus(path, name=name)
            return Corpus(cached.units, name=name, source=str(path), sha256=cached.sha256)
        except CorpusError as exc:  # a damaged file is rebuilt, not trusted
            log.warning("chunk cache: %s; rebuilding it", exc)
    units = chunker.chunk(documents)
    if not units:
        raise CorpusError(f"documents folder {documents.root}: the chunker {chunker!r} produced no chunks")
    lines = "".join(json.dumps(u.to_record(), ensure_ascii=False) + "\n" for u in units).encode()
    if path is not None:
        try:
            write_atomic(path, lambda fh: fh.write(lines))
        except OSError as exc:  # a read-only cache must not fail the run
            log.warning("chunk cache: cannot write %s: %s", path, exc)
    # The same digest whether the corpus came from the cache or was just built.
    return Corpus(
        units, name=name, source=str(path or documents.root), sha256=hashlib.sha256(lines).hexdigest()
    )
