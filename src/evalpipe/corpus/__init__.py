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
from evalpipe.corpus.stats import CorpusStats, corpus_metrics, corpus_stats

__all__ = [
    "RELATION_KINDS",
    "Corpus",
    "CorpusStats",
    "CorpusError",
    "Unit",
    "corpus_metrics",
    "corpus_stats",
    "file_sha256",
    "load_jsonl_corpus",
    "write_jsonl_corpus",
]
