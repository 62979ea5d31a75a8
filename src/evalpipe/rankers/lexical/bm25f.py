"""Field-weighted BM25 (BM25F) for code: one scorer that wins both exact-name and concept queries.

Plain BM25 over one concatenated text cannot weigh a name against a body: with bodies
and docstrings indexed it finds concepts but lets a long body that repeats a word beat
the symbol of that name; with names only it finds names but no concepts. BM25F
(Robertson, Zaragoza & Taylor 2004) keeps per-field term frequencies, normalises each
by its own field length, adds them with per-field weights and only then saturates:

    tf~(t, d) = sum_f  w_f * tf_f(t, d) / (1 - b_f + b_f * len_f(d) / avglen_f)
    score(q, d) = sum_{t in q}  idf(t) * tf~ / (k1 + tf~)
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))          (Lucene's, never negative)

`df` counts units having the term in any field. Fields of a unit:

| field | what |
|---|---|
| `name` | the symbol's own name (metadata `name`, else the title) |
| `qualified` | qualname, qualified name (`pkg.Name`, `evalpipe.rankers.base.top_k`) and the ID |
| `signature` | metadata `signature` |
| `docstring` | metadata `docstring` |
| `body` | the unit text (code excerpt, section text) |
| `path` | the file path |

The defaults (`conf/ranker/bm25f.yaml`) were chosen by an Optuna sweep on evalpipe's
own gold fixture (docs/rankers.md says how); they are no claim about other corpora.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from evalpipe.core import Unit
from evalpipe.corpus import Corpus
from evalpipe.corpus.qualify import unit_qualified_name
from evalpipe.rankers.base import CorpusRanker
from evalpipe.rankers.priors.module_prior import ModulePrior
from evalpipe.rankers.priors.module_prior import check_mode as module_prior_mode
from evalpipe.rankers.priors.test_prior import TestPrior, check_mode
from evalpipe.rankers.tokenize import CodeTokenizer

BM25F_FIELDS = ("name", "qualified", "signature", "docstring", "body", "path")
#: Tuned on gold v1 (fixtures/gold_v1.yaml) by `+sweep=bm25f_optuna fixture=gold_v1` (60 TPE
#: trials, seed 0, objective MRR; best trial rounded). Names and qualified names weigh most,
#: docstrings least (a body already repeats its docstring), and short name fields are barely
#: length-normalised.
DEFAULT_WEIGHTS = {
    "name": 2.4,
    "qualified": 4.1,
    "signature": 2.6,
    "docstring": 0.2,
    "body": 0.83,
    "path": 0.73,
}
DEFAULT_B = {
    "name": 0.13,
    "qualified": 0.75,
    "signature": 0.75,
    "docstring": 0.75,
    "body": 0.71,
    "path": 0.75,
}
DEFAULT_K1 = 1.5


def unit_bm25f_fields(unit: Unit) -> dict[str, str]:
    """The text of each BM25F field of a unit (missing metadata gives an empty field)."""
    meta = unit.metadata
    qualified = [str(meta.get("qualname") or ""), unit_qualified_name(unit), unit.id]
    return {
        "name": str(meta.get("name") or unit.title or ""),
        "qualified": "\n".join(dict.fromkeys(q for q in qualified if q)),
        "signature": str(meta.get("signature") or ""),
        "docstring": str(meta.get("docstring") or ""),
        "body": unit.text,
        "path": unit.path,
    }


def _per_field(value: Mapping[str, Any] | None, default: float, what: str) -> dict[str, float]:
    value = dict(value or {})
    unknown = sorted(set(map(str, value)) - set(BM25F_FIELDS))
    if unknown:
        raise ValueError(f"BM25FRanker: unknown field(s) {unknown} in {what}; use {', '.join(BM25F_FIELDS)}")
    out = {}
    for field in BM25F_FIELDS:
        v = value.get(field, default)
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ValueError(f"BM25FRanker: {what}.{field} must be a number, got {v!r}")
        out[field] = float(v)
    return out


class BM25FRanker(CorpusRanker):
    """BM25F over name / qualified name / signature / docstring / body / path fields.

    `weights` and `b` are per field. `weights: null` means DEFAULT_WEIGHTS; a given mapping
    replaces them (missing fields weigh 0 and are not indexed at all). `b` entries override
    DEFAULT_B field by field. `split_compounds`, `test_prior` and `module_prior` are as in `bm25`.
    """

    name = "bm25f"
    drop_nonpositive = True
    query_params = ("min_score", "test_prior", "module_prior")

    def __init__(
        self,
        weights: Mapping[str, float] | None = None,
        b: Mapping[str, float] | None = None,
        k1: float = DEFAULT_K1,
        stemmer: str | None = "english",
        stopwords: str | Iterable[str] | None = "en",
        min_score: float | None = None,
        split_compounds: bool = True,
        test_prior: str | bool = "last",
        module_prior: str | bool = "off",
    ):
        self.weights = _per_field(DEFAULT_WEIGHTS if weights is None else weights, 0.0, "weights")
        self.b = _per_field({**DEFAULT_B, **dict(b or {})}, 0.75, "b")
        if any(w < 0 for w in self.weights.values()) or not any(self.weights.values()):
            raise ValueError(f"BM25FRanker: weights must be >= 0 and not all 0, got {self.weights}")
        if any(not 0.0 <= v <= 1.0 for v in self.b.values()):
            raise ValueError(f"BM25FRanker: every b must be in [0, 1], got {self.b}")
        if k1 < 0:
            raise ValueError(f"BM25FRanker: k1 must be >= 0, got {k1}")
        self.k1 = float(k1)
        self.min_score = None if min_score is None else float(min_score)
        stop = stopwords if stopwords is None or isinstance(stopwords, str) else [str(w) for w in stopwords]
        self.tokenizer = CodeTokenizer(stemmer=stemmer, stopwords=stop, code_aware=True)
        self.split_compounds = bool(split_compounds)
        self.test_prior = check_mode("BM25FRanker", test_prior)
        self.module_prior = module_prior_mode("BM25FRanker", module_prior)
        self._stats: dict[str, Any] = {}

    def __repr__(self) -> str:
        active = {f: w for f, w in self.weights.items() if w}
        return f"BM25FRanker(weights={active}, k1={self.k1})"

    def _build(self, corpus: Corpus) -> None:
        start = time.perf_counter()
        fields = [f for f in BM25F_FIELDS if self.weights[f] > 0]
        vocab: dict[str, int] = {}
        n = len(corpus)
        # pass 1: term counts and length of every field of every unit
        counts: dict[str, list[dict[int, int]]] = {f: [] for f in fields}
        lengths = {f: np.zeros(n, dtype=np.float64) for f in fields}
        all_texts = [unit_bm25f_fields(unit) for unit in corpus]
        if self.split_compounds:
            splitter = self.tokenizer.build_splitter(t[f] for t in all_texts for f in fields)
            self.tokenizer = self.tokenizer.with_splitter(splitter)
        self._prior = TestPrior(corpus)
        self._modules = ModulePrior(corpus)
        for row, texts in enumerate(all_texts):
            for f in fields:
                terms = self.tokenizer(texts[f])
                lengths[f][row] = len(terms)
                tf: dict[int, int] = {}
                for t in terms:
                    tid = vocab.setdefault(t, len(vocab))
                    tf[tid] = tf.get(tid, 0) + 1
                counts[f].append(tf)
        # pass 2: weighted, length-normalised tf~ per (unit, term), stored as postings per term
        scale = {}
        for f in fields:
            avg = float(lengths[f].mean()) if n else 0.0
            norm = 1.0 - self.b[f] + self.b[f] * lengths[f] / (avg if avg > 0 else 1.0)
            scale[f] = self.weights[f] / norm
        post_rows: list[list[int]] = [[] for _ in range(len(vocab))]
        post_vals: list[list[float]] = [[] for _ in range(len(vocab))]
        for row in range(n):
            weighted: dict[int, float] = {}
            for f in fields:
                factor = scale[f][row]
                for tid, c in counts[f][row].items():
                    weighted[tid] = weighted.get(tid, 0.0) + factor * c
            for tid, value in weighted.items():
                post_rows[tid].append(row)
                post_vals[tid].append(value)
        df = np.array([len(r) for r in post_rows], dtype=np.float64)
        self._indptr = np.concatenate([[0], np.cumsum(df)]).astype(np.int64)
        self._indices = np.array([r for rows in post_rows for r in rows], dtype=np.int64)
        self._values = np.array([v for vals in post_vals for v in vals], dtype=np.float64)
        self._idf = np.log1p((n - df + 0.5) / (df + 0.5))
        self._vocab = vocab
        self._stats = {
            "index_units": n,
            "vocab_size": len(vocab),
            "fields": ",".join(fields),
            "test_units": self._prior.count,
            "split_words": len(self.tokenizer.splitter.words) if self.tokenizer.splitter else 0,
            "build_seconds": time.perf_counter() - start,
        }

    def term_ids(self, query: str) -> list[int]:
        """Vocabulary ids of the query's terms; repeats count once, unknown terms are dropped."""
        terms = self.tokenizer.query_terms(query)
        return [self._vocab[t] for t in dict.fromkeys(terms) if t in self._vocab]

    def _scores(self, query: str) -> np.ndarray:
        if not hasattr(self, "corpus"):
            raise RuntimeError("BM25FRanker.search called before prepare(corpus)")
        scores = np.zeros(len(self.corpus), dtype=np.float64)
        for tid in self.term_ids(query):
            lo, hi = self._indptr[tid], self._indptr[tid + 1]
            values = self._values[lo:hi]
            scores[self._indices[lo:hi]] += self._idf[tid] * values / (self.k1 + values)
        scores = self._modules.demote(scores, query, self.module_prior)
        return self._prior.demote(scores, query, self.test_prior)

    def stats(self) -> dict[str, Any]:
        return dict(self._stats)


def idf(n_units: int, df: int) -> float:
    """Lucene's BM25 idf, as used above (exposed for hand-checked tests)."""
    return math.log1p((n_units - df + 0.5) / (df + 0.5))
