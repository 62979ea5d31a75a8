"""BM25 over the corpus with bm25s, scoring every unit so winnow masks apply before top-k.

bm25s's own `retrieve` selects top-k first; a constrained search (language: go) would
then return fewer than k results. We ask bm25s for the full score vector instead and
let `CorpusRanker.search` mask and rank it.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from evalpipe.core import Unit
from evalpipe.corpus import Corpus
from evalpipe.rankers.base import BUILD_MEMOS, BatchScoring, CorpusRanker
from evalpipe.rankers.bm25s_loader import import_bm25s
from evalpipe.rankers.lexical import token_cache
from evalpipe.rankers.priors.module_prior import ModulePrior
from evalpipe.rankers.priors.module_prior import check_mode as module_prior_mode
from evalpipe.rankers.priors.test_prior import TestPrior, check_mode
from evalpipe.rankers.tokenize import CodeTokenizer, CompoundSplitter

bm25s = import_bm25s()

#: Tokenized corpora kept per process (see BM25Ranker._tokenized); a few, as corpora can be large.
TOKENIZED_CACHE_SIZE = 2
_Tokenized = tuple[list[list[int]], dict[str, int], "CompoundSplitter | None"]
_TOKENIZED: OrderedDict[tuple, _Tokenized] = OrderedDict()
BUILD_MEMOS.append(_TOKENIZED)

METHODS = ("robertson", "lucene", "atire", "bm25l", "bm25+")
FIELDS = ("title", "text", "identifiers", "path")
# Methods that add a per-term floor to every document (BM25L, BM25+): a unit that
# shares no term with the query would still score > 0, so we zero those explicitly.
_FLOOR_METHODS = ("bm25l", "bm25+")


def unit_identifiers(unit: Unit) -> list[str]:
    """The names a unit is known by: its id, metadata name/qualname and path (deduplicated)."""
    out: list[str] = []
    for value in (unit.id, unit.metadata.get("name"), unit.metadata.get("qualname"), unit.path):
        if value and str(value) not in out:
            out.append(str(value))
    return out


def unit_field_texts(unit: Unit, fields: Sequence[str]) -> list[str]:
    """The texts to index for a unit, one per configured field, in field order."""
    texts: list[str] = []
    for name in fields:
        if name == "identifiers":
            texts.extend(unit_identifiers(unit))
        else:
            texts.append(str(getattr(unit, name)))
    return texts


class BM25Ranker(BatchScoring, CorpusRanker):
    """Okapi BM25 (bm25s) over title + text + identifiers with a code-aware tokenizer.

    `delta` is only used by bm25l / bm25+. `min_score` drops hits scoring below it.
    `split_compounds` splits lowercase run-together words at corpus words (code-aware only);
    `test_prior` ranks test units last unless the query asks for tests
    (`evalpipe.rankers.priors.test_prior`); `module_prior: below_definitions` ranks a module unit
    just below the best definition of its file (`evalpipe.rankers.priors.module_prior`).
    """

    name = "bm25"
    drop_nonpositive = True
    query_params = ("min_score", "test_prior", "module_prior", "cache_dir")

    def __init__(
        self,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        delta: float = 0.5,
        stemmer: str | None = "english",
        stopwords: str | Iterable[str] | None = "en",
        code_aware: bool = True,
        fields: Iterable[str] = ("title", "text", "identifiers"),
        min_score: float | None = None,
        split_compounds: bool = True,
        test_prior: str | bool = "last",
        module_prior: str | bool = "off",
        cache_dir: str | None = None,
    ):
        if method not in METHODS:
            raise ValueError(f"BM25Ranker: unknown method {method!r}; use one of {', '.join(METHODS)}")
        if k1 < 0:
            raise ValueError(f"BM25Ranker: k1 must be >= 0, got {k1}")
        if not 0.0 <= b <= 1.0:
            raise ValueError(f"BM25Ranker: b must be in [0, 1], got {b}")
        fields = [str(f) for f in fields]
        unknown = [f for f in fields if f not in FIELDS]
        if unknown or not fields:
            raise ValueError(
                f"BM25Ranker: bad fields {fields!r}; use a non-empty list drawn from {', '.join(FIELDS)}"
            )
        self.k1 = float(k1)
        self.b = float(b)
        self.method = method
        self.delta = float(delta)
        self.fields = tuple(fields)
        self.min_score = None if min_score is None else float(min_score)
        stop = stopwords if stopwords is None or isinstance(stopwords, str) else [str(w) for w in stopwords]
        self.tokenizer = CodeTokenizer(stemmer=stemmer, stopwords=stop, code_aware=code_aware)
        self.split_compounds = bool(split_compounds) and self.tokenizer.code_aware
        self.test_prior = check_mode("BM25Ranker", test_prior)
        self.module_prior = module_prior_mode("BM25Ranker", module_prior)
        self.cache_dir = cache_dir
        self._bm25: bm25s.BM25 | None = None
        self._vocab: dict[str, int] = {}
        self._stats: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"BM25Ranker(k1={self.k1}, b={self.b}, method={self.method!r}, {self.tokenizer!r})"

    def tokenize_unit(self, unit: Unit) -> list[str]:
        tokens: list[str] = []
        for text in unit_field_texts(unit, self.fields):
            tokens.extend(self.tokenizer(text))
        return tokens

    def _tokenized(self, corpus: Corpus) -> tuple[list[list[int]], dict[str, int], CompoundSplitter | None]:
        """(term ids per unit, vocabulary, compound splitter), shared by every BM25Ranker in the
        process that tokenizes the same corpus the same way: a k1/b sweep re-tokenizes nothing."""
        tok = self.tokenizer
        key = (type(self).__qualname__, tok.stemmer_name, tuple(sorted(tok.stopwords)), tok.code_aware)
        key += (self.fields, self.split_compounds, corpus.sha256)
        hit = _TOKENIZED.get(key)
        if hit is not None:
            _TOKENIZED.move_to_end(key)
            return hit
        disk = self._disk_key(corpus)
        kept = self._kept(corpus, disk[0]) if disk is not None else None
        if kept is not None:
            doc_ids, vocab, splitter = kept
        else:
            doc_ids, vocab, splitter, counts = self._tokenize(corpus)
            if disk is not None:
                entry = token_cache.TokenizedCorpus(doc_ids, vocab, counts)
                token_cache.save(self.cache_dir, disk[0], entry, disk[1])
        _TOKENIZED[key] = (doc_ids, vocab, splitter)
        while len(_TOKENIZED) > TOKENIZED_CACHE_SIZE:
            _TOKENIZED.popitem(last=False)
        return doc_ids, vocab, splitter

    def _tokenize(
        self, corpus: Corpus
    ) -> tuple[list[list[int]], dict[str, int], CompoundSplitter | None, Any]:
        """Tokenize every unit (with `split_compounds`, after counting the corpus's word pieces):
        (term ids per unit, vocabulary, splitter, the piece counts it was built from)."""
        tok, fields = self.tokenizer, self.fields
        splitter = counts = None
        if self.split_compounds:
            counts = tok.piece_counts(t for u in corpus for t in unit_field_texts(u, fields))
            splitter = CompoundSplitter(counts, stopwords=tok.stopwords)
            self.tokenizer = tok.with_splitter(splitter)
        vocab: dict[str, int] = {}
        doc_ids: list[list[int]] = []
        for unit in corpus:
            doc_ids.append([vocab.setdefault(t, len(vocab)) for t in self.tokenize_unit(unit)])
        return doc_ids, vocab, splitter, counts

    def _disk_key(self, corpus: Corpus) -> tuple[str, dict[str, Any]] | None:
        """(key, what it hashes) of this tokenization in the disk cache; None when it is off."""
        if not self.cache_dir or not corpus.sha256:
            return None
        described = token_cache.describe(
            type(self).__qualname__, self.tokenizer, self.fields, self.split_compounds, corpus.sha256
        )
        return token_cache.cache_key(described), described

    def _kept(self, corpus: Corpus, key: str) -> _Tokenized | None:
        """The tokenized corpus from the disk cache, or None (a miss)."""
        entry = token_cache.load(self.cache_dir, key, len(corpus))
        if entry is None or (self.split_compounds and entry.splitter_counts is None):
            return None
        splitter = None
        if self.split_compounds:
            splitter = CompoundSplitter(entry.splitter_counts or {}, stopwords=self.tokenizer.stopwords)
            self.tokenizer = self.tokenizer.with_splitter(splitter)
        return entry.doc_ids, entry.vocab, splitter

    def _build(self, corpus: Corpus) -> None:
        start = time.perf_counter()
        doc_ids, vocab, splitter = self._tokenized(corpus)
        if splitter is not None and self.tokenizer.splitter is not splitter:
            self.tokenizer = self.tokenizer.with_splitter(splitter)
        self._prior = TestPrior(corpus)
        self._modules = ModulePrior(corpus)
        vocab = dict(vocab)  # bm25s keeps the mapping it is given: each index gets its own
        self._vocab = vocab
        self._bm25 = None
        if vocab:  # bm25s cannot index an empty vocabulary; every query then scores 0
            model = bm25s.BM25(k1=self.k1, b=self.b, delta=self.delta, method=self.method)
            model.index((doc_ids, vocab), create_empty_token=False, show_progress=False)
            self._bm25 = model
        n_tokens = sum(len(d) for d in doc_ids)
        self._stats = {
            "index_units": len(corpus),
            "vocab_size": len(vocab),
            "index_tokens": n_tokens,
            "avg_unit_tokens": n_tokens / len(corpus) if len(corpus) else 0.0,
            "test_units": self._prior.count,
            "split_words": len(splitter.words) if splitter is not None else 0,
            "build_seconds": time.perf_counter() - start,
        }

    def query_ids(self, query: str) -> list[int]:
        """Vocabulary ids of the query's terms; unknown terms are dropped, repeats kept (as bm25s does)."""
        return [self._vocab[t] for t in self.tokenizer.query_terms(query) if t in self._vocab]

    def _scores(self, query: str) -> np.ndarray:
        if not hasattr(self, "corpus"):
            raise RuntimeError("BM25Ranker.search called before prepare(corpus)")
        scores = np.zeros(len(self.corpus), dtype=np.float64)
        ids = self.query_ids(query)
        if not ids or self._bm25 is None:
            return scores
        scores[:] = self._bm25.get_scores_from_ids(ids)
        if self.method in _FLOOR_METHODS:
            index = self._bm25.scores
            matched = np.zeros(len(self.corpus), dtype=bool)
            for tid in set(ids):
                matched[index["indices"][index["indptr"][tid] : index["indptr"][tid + 1]]] = True
            scores[~matched] = 0.0
        scores = self._modules.demote(scores, query, self.module_prior)
        return self._prior.demote(scores, query, self.test_prior)

    def _scores_batch(self, queries: list[str]) -> np.ndarray:
        """`_scores` of many queries at once, bit for bit.

        bm25s scores one query by adding each query term's postings into a float32
        vector in term order (`np.add.at`); here every query's postings go into its own
        row of one flat float32 buffer in one `np.add.at` call, in the same order, so each
        document's sum is accumulated exactly as in the per-query path.
        """
        if not hasattr(self, "corpus"):
            raise RuntimeError("BM25Ranker.search_batch called before prepare(corpus)")
        n_docs = len(self.corpus)
        out = np.zeros((len(queries), n_docs), dtype=np.float64)
        model = self._bm25
        if model is None or not queries:
            return out
        index = model.scores
        data, indices, indptr = index["data"], index["indices"], index["indptr"]
        dtype = np.dtype(model.dtype)
        term_ids = [np.asarray(self.query_ids(q), dtype=np.int64) for q in queries]
        rows = [i for i, ids in enumerate(term_ids) if ids.size]
        if not rows:
            return out
        # Every (query, term) pair's postings slice, in query order then term order, gathered
        # with array arithmetic: position p of pair j is starts[j] + (p - first output slot of j).
        tids = np.concatenate([term_ids[i] for i in rows])
        slots = np.repeat(np.arange(len(rows), dtype=np.int64), [term_ids[i].size for i in rows])
        starts = np.asarray(indptr[tids], dtype=np.int64)
        lengths = np.asarray(indptr[tids + 1], dtype=np.int64) - starts
        offsets = np.cumsum(lengths) - lengths
        postings = np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(starts - offsets, lengths)
        targets = indices[postings].astype(np.int64) + np.repeat(slots * n_docs, lengths)
        flat = np.zeros(len(rows) * n_docs, dtype=dtype)
        np.add.at(flat, targets, data[postings])
        block = flat.reshape(len(rows), n_docs)
        nonoccurrence = getattr(model, "nonoccurrence_array", None)
        for slot, i in enumerate(rows):
            row = block[slot]
            if nonoccurrence is not None:
                row += nonoccurrence[term_ids[i]].sum()
            out[i] = row
            if self.method in _FLOOR_METHODS:
                matched = np.zeros(n_docs, dtype=bool)
                for tid in set(term_ids[i].tolist()):
                    matched[indices[indptr[tid] : indptr[tid + 1]]] = True
                out[i][~matched] = 0.0
            out[i] = self._modules.demote(out[i], queries[i], self.module_prior)
            out[i] = self._prior.demote(out[i], queries[i], self.test_prior)
        return out

    def stats(self) -> dict[str, Any]:
        return dict(self._stats)
