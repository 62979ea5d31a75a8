"""Corpus model, loading and building (see `python -m evalpipe.corpus --help`).

The unit itself (`Unit`, `RELATION_KINDS`) is a ground-floor value type: `evalpipe.core`.
"""

from evalpipe.corpus.model import Corpus, CorpusError, file_sha256, load_jsonl_corpus, write_jsonl_corpus
from evalpipe.corpus.stats import CorpusStats, corpus_metrics, corpus_stats

__all__ = [
    "Corpus",
    "CorpusStats",
    "CorpusError",
    "corpus_metrics",
    "corpus_stats",
    "file_sha256",
    "load_jsonl_corpus",
    "write_jsonl_corpus",
]
