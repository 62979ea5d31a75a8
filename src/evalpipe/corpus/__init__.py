"""Corpus model, loading and building (see `python -m evalpipe.corpus --help`)."""

from evalpipe.corpus.model import (
    RELATION_KINDS,
    Corpus,
    CorpusError,
    Unit,
    file_sha256,
    load_jsonl_corpus,
    write_jsonl_corpus,
)

__all__ = [
    "RELATION_KINDS",
    "Corpus",
    "CorpusError",
    "Unit",
    "file_sha256",
    "load_jsonl_corpus",
    "write_jsonl_corpus",
]
