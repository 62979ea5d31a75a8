"""An existing FAISS index file as a ranker (`ranker=faiss`), read-only, with an exact search beside it.

A FAISS index holds vectors and nothing else, so a store is two files the application already
keeps: the index (`index_path`, written by `faiss.write_index`) and its records (`records_path`,
JSON Lines, line n describing vector n: its ID and the metadata keys `document_field`,
`section_field`, `chunk_field`). The index is read into memory with `faiss.read_index`; the file is
never opened for writing. The query is embedded by `encoder` (an import path to a function
`list[str] -> float[n, d]`, the application's own) or, when null, by the semantic ranker's model
(`model`, the packaged MiniLM by default): it must be what built the index.

**Why it missed.** With `exact: true` (the default) the vectors are read back from the index
(`reconstruct_n`: lossless for Flat, HNSW-Flat and IVF-Flat indexes; a compressed index is refused,
its codes are not the vectors) and every query is also searched by brute force in numpy. The run
then reports the index's recall against the exact search (`index/recall_vs_exact`) and splits
each document miss into lost by the index or by the embedding (`scoring.misses`, through
`exact_answers`). The index's own search parameters are settings: `ef_search` (HNSW) and `nprobe`
(IVF); one the index does not have is refused, not ignored.

Scores are the index's: the inner product for an inner-product index (cosine when the vectors are
normalised), the negated squared L2 distance for an L2 index (`index.score_scale` says which).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evalpipe.core.hit import Hit
from evalpipe.core.unit import Unit
from evalpipe.corpus import Corpus
from evalpipe.rankers.base import RankerUnavailable
from evalpipe.rankers.dense.semantic import SemanticRanker
from evalpipe.safety.errors import EvalpipeError

INSTALL_HINT = "install with: pip install 'evalpipe[faiss]'"
#: Index types whose stored vectors are the vectors (reconstruct_n gives them back exactly).
LOSSLESS = (
    "IndexFlat",
    "IndexFlatIP",
    "IndexFlatL2",
    "IndexHNSWFlat",
    "IndexIVFFlat",
    "IndexIDMap",
    "IndexIDMap2",
)


class FaissStoreError(EvalpipeError):
    """A FAISS store that cannot be evaluated as configured; the message names the file or setting."""


def _faiss() -> Any:
    try:
        import faiss  # lazy: faiss-cpu (optional extra), ~0.75 s at load 14
    except ImportError as exc:
        raise RankerUnavailable(f"faiss ranker: faiss is not importable ({exc}); {INSTALL_HINT}") from None
    return faiss


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_encoder(path: str) -> Callable[[list[str]], Any]:
    module_name, _, attr = str(path).rpartition(".")
    try:
        fn = getattr(importlib.import_module(module_name), attr, None) if module_name else None
    except ImportError as exc:
        raise FaissStoreError(
            f"faiss ranker: ranker.encoder={path}: cannot import {module_name} ({exc})"
        ) from None
    if not callable(fn):
        raise FaissStoreError(
            f"faiss ranker: ranker.encoder={path} is not a function of a list of texts "
            "(e.g. mypkg.embed.encode)"
        )
    return fn


class FaissRanker:
    """Dense retrieval through an existing FAISS index file, read-only, checked against exact search."""

    name = "faiss"

    def __init__(
        self,
        index_path: str,
        records_path: str,
        id_field: str = "id",
        document_field: str = "document_id",
        section_field: str | None = None,
        chunk_field: str | None = None,
        encoder: str | None = None,
        model: str | None = None,
        query_prefix: str = "",
        ef_search: int | None = None,
        nprobe: int | None = None,
        exact: bool = True,
        min_score: float | None = None,
    ):
        faiss = _faiss()
        self.index_path = Path(str(index_path)).expanduser()
        if not self.index_path.is_file():
            raise FaissStoreError(f"faiss ranker: ranker.index_path {self.index_path} is not a file")
        try:
            self.index = faiss.read_index(str(self.index_path))
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            raise FaissStoreError(
                f"faiss ranker: ranker.index_path {self.index_path} is not a FAISS index ({first}); "
                "give a file "
                "written by faiss.write_index"
            ) from None
        self.kind = type(faiss.downcast_index(self.index)).__name__
        self.score_scale = (
            "inner_product" if self.index.metric_type == faiss.METRIC_INNER_PRODUCT else "neg_l2"
        )
        if self.index.metric_type not in (faiss.METRIC_INNER_PRODUCT, faiss.METRIC_L2):
            raise FaissStoreError(
                f"faiss ranker: {self.index_path}: only inner-product and L2 indexes are supported"
            )
        self.ids, self.units = self._read_records(
            Path(str(records_path)).expanduser(), id_field, document_field, section_field, chunk_field
        )
        self.params = self._set_params(faiss, ef_search, nprobe)
        self.query_prefix, self.min_score, self.model = query_prefix, min_score, model
        self._encode_fn: Callable[[list[str]], Any] | None = load_encoder(encoder) if encoder else None
        self._semantic: SemanticRanker | None = None
        if self._encode_fn is not None:
            dimension = int(np.asarray(self._encode_fn(["evalpipe probe"])).shape[-1])
        else:
            self._semantic = SemanticRanker(model=model, cache_dir=None, test_prior="off")
            # lazy: evalpipe.rankers.dense.chroma, ~1 ms (the model-config reader lives there)
            from evalpipe.rankers.dense.chroma import declared_dimension

            location, _, _ = self._semantic._model_location()
            dimension = declared_dimension(Path(location)) or self.index.d
        if dimension != self.index.d:
            raise FaissStoreError(
                f"faiss ranker: the index {self.index_path} holds {self.index.d}-dimensional vectors but "
                f"the query encoder makes {dimension}-dimensional ones: set ranker.encoder / ranker.model to "
                "what built the index"
            )
        self.exact = bool(exact)
        self._vectors: np.ndarray | None = None
        if self.exact:
            self._vectors = self._read_vectors(faiss)
        self.exact_answers_: dict[str, tuple[str, ...]] = {}
        self._pending: dict[str, tuple[np.ndarray, list[int], int]] = {}
        self._overlap = [0, 0]  # ANN IDs also in the exact top k, exact IDs asked for
        self._lock = threading.Lock()
        self.digest = file_sha256(self.index_path)

    # -- opening ----------------------------------------------------------------------------------

    def _read_records(
        self,
        path: Path,
        id_field: str,
        document_field: str,
        section_field: str | None,
        chunk_field: str | None,
    ) -> tuple[list[str], dict[str, Unit]]:
        if not path.is_file():
            raise FaissStoreError(
                f"faiss ranker: ranker.records_path {path} is not a file (JSON Lines, one per vector)"
            )
        ids: list[str] = []
        units: dict[str, Unit] = {}
        with open(path, encoding="utf-8") as handle:
            for line_no, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    raise FaissStoreError(f"faiss ranker: {path}:{line_no}: not JSON ({exc})") from None
                keys = [k for k in (id_field, document_field, section_field, chunk_field) if k]
                missing = [k for k in keys if not isinstance(record, dict) or k not in record]
                if missing:
                    have = ", ".join(sorted(record)) if isinstance(record, dict) else type(record).__name__
                    raise FaissStoreError(
                        f"faiss ranker: {path}:{line_no}: no key(s) {', '.join(map(repr, missing))} "
                        f"(it has: {have}); "
                        "set ranker.id_field / document_field / section_field / chunk_field"
                    )
                rid = str(record[id_field])
                section = record.get(section_field) if section_field else None
                chunk = record.get(chunk_field) if chunk_field else None
                ids.append(rid)
                units[rid] = Unit(
                    id=rid,
                    kind="chunk",
                    metadata={
                        "document_id": str(record[document_field]),
                        "chunk_index": chunk if isinstance(chunk, int) else 0,
                        **({"section": str(section)} if section not in (None, "") else {}),
                    },
                )
        if len(ids) != self.index.ntotal:
            raise FaissStoreError(
                f"faiss ranker: ranker.records_path {path} describes {len(ids)} vectors but the index "
                f"{self.index_path} holds {self.index.ntotal}: line n must describe vector n"
            )
        return ids, units

    def _set_params(self, faiss: Any, ef_search: int | None, nprobe: int | None) -> dict[str, int]:
        params: dict[str, int] = {}
        space = faiss.ParameterSpace()
        for setting, name, value in (("ef_search", "efSearch", ef_search), ("nprobe", "nprobe", nprobe)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise FaissStoreError(
                    f"faiss ranker: ranker.{setting} must be a whole number >= 1, got {value!r}"
                )
            try:
                space.set_index_parameter(self.index, name, value)
            except RuntimeError:
                raise FaissStoreError(
                    f"faiss ranker: ranker.{setting}={value} does not apply to the index {self.index_path} "
                    f"({self.kind}); leave it null"
                ) from None
            params[setting] = value
        return params

    def _read_vectors(self, faiss: Any) -> np.ndarray:
        inner = faiss.downcast_index(self.index)
        if self.kind not in LOSSLESS:
            raise FaissStoreError(
                f"faiss ranker: the index {self.index_path} is a {self.kind}, whose stored codes are not the "
                "vectors, so there is no exact search over the same vectors: set ranker.exact=false"
            )
        if self.kind == "IndexIVFFlat":
            inner.make_direct_map()  # in memory only: the file is never written
        return np.asarray(self.index.reconstruct_n(0, self.index.ntotal), dtype=np.float32)

    # -- the ranker protocol ----------------------------------------------------------------------

    def prepare(self, corpus: Corpus) -> None:
        """Load the query model (the semantic ranker's) when no encoder function was given."""
        semantic = self._semantic
        if semantic is not None and semantic._encoder is None:
            location, _, fingerprint = semantic._model_location()
            semantic._encoder = semantic._load_encoder(location, fingerprint)

    def _queries(self, queries: Sequence[str]) -> np.ndarray:
        texts = [self.query_prefix + q for q in queries]
        if self._encode_fn is not None:
            vectors = np.asarray(self._encode_fn(texts), dtype=np.float32)
        else:
            assert self._semantic is not None
            if self._semantic._encoder is None:
                raise RuntimeError("faiss ranker: call prepare(corpus) before search()")
            vectors = self._semantic._encode(texts)
        return np.ascontiguousarray(vectors.reshape(len(texts), self.index.d))

    def _exact(self, vectors: np.ndarray, k: int) -> list[list[int]]:
        assert self._vectors is not None
        if self.score_scale == "inner_product":
            scores = vectors @ self._vectors.T
        else:
            scores = -(
                (vectors**2).sum(1, keepdims=True)
                - 2 * vectors @ self._vectors.T
                + (self._vectors**2).sum(1)[None, :]
            )
        rows = np.arange(scores.shape[1])
        return [[int(i) for i in np.lexsort((rows, -row))[:k]] for row in scores]

    def search(self, query: str, k: int, constraints: Mapping[str, Any] | None = None) -> list[Hit]:
        return self.search_batch([query], k, [constraints])[0]

    def search_batch(
        self, queries: Sequence[str], k: int, constraints: Sequence[Mapping[str, Any] | None] | None = None
    ) -> list[list[Hit]]:
        if not queries:
            return []
        depth = min(k, self.index.ntotal)
        vectors = self._queries(queries)
        distances, labels = self.index.search(vectors, depth)
        out: list[list[Hit]] = []
        for n, query in enumerate(queries):
            hits: list[Hit] = []
            for label, distance in zip(labels[n].tolist(), distances[n].tolist(), strict=True):
                if label < 0:  # fewer than k found (an IVF probe that saw too few lists)
                    continue
                score = float(distance) if self.score_scale == "inner_product" else -float(distance)
                if self.min_score is not None and score < self.min_score:
                    continue
                hits.append(Hit(self.ids[label], score))
            if self.exact:  # searched exactly after the run, so no latency includes it
                with self._lock:
                    self._pending[query] = (
                        vectors[n].copy(),
                        [i for i in labels[n].tolist() if i >= 0],
                        depth,
                    )
            out.append(hits)
        return out

    def _settle(self) -> None:
        """The exact search for every query asked since the last call, in one matrix product."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return
        queries = list(pending)
        vectors = np.stack([pending[q][0] for q in queries])
        exact = self._exact(vectors, max(p[2] for p in pending.values()))
        with self._lock:
            for query, rows in zip(queries, exact, strict=True):
                _, ann, depth = pending[query]
                exact_ids = tuple(self.ids[i] for i in rows[:depth])
                self.exact_answers_[query] = exact_ids
                self._overlap[0] += len(set(exact_ids) & {self.ids[i] for i in ann})
                self._overlap[1] += len(exact_ids)

    @property
    def exact_answers(self) -> dict[str, tuple[str, ...]]:
        """query -> the exact search's top k IDs over the index's own vectors (empty with exact=false)."""
        self._settle()
        return self.exact_answers_

    @property
    def foreign_units(self) -> dict[str, Unit]:
        return self.units

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mode": "existing",
            "store": str(self.index_path),
            "index_type": self.kind,
            "score_scale": self.score_scale,
            "vectors": int(self.index.ntotal),
            "dimension": int(self.index.d),
            "store_bytes": self.index_path.stat().st_size,
            **self.params,
        }
        self._settle()
        if self.exact and self._overlap[1]:
            out["recall_vs_exact"] = self._overlap[0] / self._overlap[1]
        if not self.exact:
            out["exact"] = "off (ranker.exact=false): no index-vs-embedding split"
        return out

    def __repr__(self) -> str:
        return f"FaissRanker({self.index_path}, {self.kind})"
