"""Chunked corpora cached on disk, keyed by the documents' digest and the chunker's config.

Chunking a few hundred documents is quick, but a sweep over chunk sizes builds the same
corpora again in every job and every re-run; more to the point the cache makes a chunked
corpus a file that can be looked at (`<cache_dir>/<key>.jsonl`, one unit per line, the
format of every other corpus). The key covers everything that changes the chunks: the
bytes and relative paths of every document, the chunker's parameters and this module's
FORMAT version. Files are written with the project's atomic writer, so two sweep jobs
building the same corpus at once never see half a file.

An entry is trusted only when it checks out: beside `<key>.jsonl` the writer puts
`<key>.json` (written second) with the number of chunks and the sha256 of the JSONL's bytes,
and a reader compares both with what it read. A file cut short on a line boundary is valid
JSONL (a truncated entry once gave 3 of 9 chunks, measured and recorded FINISHED); a file
edited, an entry without its record, or a record of another entry is rebuilt, with a warning,
never measured.
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
FORMAT = 2
DEFAULT_CACHE_DIR = ".cache/evalpipe/chunks"


def cache_key(documents: DocumentSet, chunker: Chunker) -> str:
    payload = json.dumps({"documents": documents.sha256, "chunker": chunker.config(), "format": FORMAT})
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def _verified(path: Path, name: str) -> Corpus | None:
    """The cached corpus at `path` if its record (`<key>.json`) vouches for it, else None (and why,
    logged): the chunk count and the sha256 of the bytes must both match."""
    record_path = path.with_suffix(".json")
    if not record_path.is_file():  # absent, or a folder / FIFO in its place (never opened)
        log.warning("chunk cache: %s has no record %s; rebuilding it", path, record_path.name)
        return None
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
        want_units, want_sha = int(record["units"]), str(record["sha256"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("chunk cache: %s has no valid record %s (%s); rebuilding it", path, record_path.name, exc)
        return None
    try:
        cached = load_jsonl_corpus(path, name=name)
    except CorpusError as exc:  # a damaged file is rebuilt, not trusted
        log.warning("chunk cache: %s; rebuilding it", exc)
        return None
    if len(cached) != want_units or cached.sha256 != want_sha:
        log.warning(
            "chunk cache: %s holds %d chunks (sha256 %s) but was written with %d (sha256 %s); rebuilding it",
            path,
            len(cached),
            cached.sha256[:12],
            want_units,
            want_sha[:12],
        )
        return None
    return cached


def chunked_corpus(
    documents: DocumentSet, chunker: Chunker, cache_dir: str | Path | None, name: str
) -> Corpus:
    """The chunked corpus, read from the cache when present and verified, else chunked (and cached)."""
    key = cache_key(documents, chunker)
    path = Path(cache_dir) / f"{key}.jsonl" if cache_dir else None
    if path is not None and path.is_file():
        cached = _verified(path, name)
        if cached is not None:
            return Corpus(cached.units, name=name, source=str(path), sha256=cached.sha256)
    units = chunker.chunk(documents)
    if not units:
        raise CorpusError(f"documents folder {documents.root}: the chunker {chunker!r} produced no chunks")
    lines = "".join(json.dumps(u.to_record(), ensure_ascii=False) + "\n" for u in units).encode()
    digest = hashlib.sha256(lines).hexdigest()
    if path is not None:
        record = json.dumps({"units": len(units), "sha256": digest, "format": FORMAT}).encode() + b"\n"
        try:
            write_atomic(path, lambda fh: fh.write(lines))
            write_atomic(path.with_suffix(".json"), lambda fh: fh.write(record))  # second: vouches
        except OSError as exc:  # a read-only cache must not fail the run
            log.warning("chunk cache: cannot write %s: %s", path, exc)
    # The same digest whether the corpus came from the cache or was just built.
    return Corpus(units, name=name, source=str(path or documents.root), sha256=digest)
