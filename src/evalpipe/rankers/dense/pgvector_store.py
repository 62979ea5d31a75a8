"""An existing pgvector table on a PostgreSQL server as a ranker (`ranker=pgvector`), read-only, with
an exact search beside it.

The table is the application's: one row per chunk, an ID column, a `vector(d)` column and metadata
columns mapped to document / section / chunk. The session is opened with
`SET default_transaction_read_only = on`, so nothing in it can write; evalpipe never creates or
alters anything (no extension, no index, no table). The password comes from the environment variable
named by `password_env` and is never shown (the DSN is printed without it).

The query is embedded like `ranker=faiss` does (an import-path `encoder`, or the semantic ranker's
`model`); its dimension must be the column's. Search is the store's own:
`ORDER BY embedding <op> query LIMIT k` with the operator of `distance` (cosine `<=>`, l2 `<->`,
ip `<#>`), so an HNSW / IVFFlat index on the column is used when the planner picks it.
`ef_search` (HNSW) and `probes` (IVFFlat) are set for the session; one the table has no index for
is refused, not ignored.

**Why it missed.** With `exact: true` the vectors are read once (one SELECT) and every query is
also searched by brute force in numpy; the run reports `index/recall_vs_exact` and splits each
document miss into lost by the index or by the embedding (`scoring.misses`, via `exact_answers`).

Scores: cosine similarity (1 - cosine distance) for `distance: cosine`, the inner product for `ip`,
the negated L2 distance for `l2` (`score_scale` says which).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evalpipe.core.hit import Hit
from evalpipe.core.unit import Unit
from evalpipe.corpus import Corpus
from evalpipe.rankers.base import RankerUnavailable
from evalpipe.rankers.dense.faiss_store import FaissStoreError, load_encoder
from evalpipe.rankers.dense.semantic import SemanticRanker
from evalpipe.safety.errors import EvalpipeError

INSTALL_HINT = "install with: pip install 'evalpipe[pgvector]'"
#: distance -> (pgvector operator, score scale, distance -> score)
DISTANCES: dict[str, tuple[str, str, Callable[[float], float]]] = {
    "cosine": ("<=>", "cosine", lambda d: 1.0 - d),
    "l2": ("<->", "neg_l2_distance", lambda d: -d),
    "ip": ("<#>", "inner_product", lambda d: -d),
}
#: distance -> the operator class an index must be built with for ORDER BY to use it
OPCLASSES = {"cosine": "vector_cosine_ops", "l2": "vector_l2_ops", "ip": "vector_ip_ops"}
#: setting -> (index access method it needs, session variable)
INDEX_SETTINGS = {"ef_search": ("hnsw", "hnsw.ef_search"), "probes": ("ivfflat", "ivfflat.probes")}


class PgvectorStoreError(EvalpipeError):
    """A pgvector table that cannot be evaluated as configured; the message names the setting."""


def _psycopg() -> Any:
    try:
        import psycopg  # lazy: psycopg 3 (optional extra), ~60 ms
    except ImportError as exc:
        raise RankerUnavailable(
            f"pgvector ranker: psycopg is not importable ({exc}); {INSTALL_HINT}"
        ) from None
    return psycopg


def masked_dsn(dsn: str) -> str:
    """The DSN as shown in messages: any password in it replaced by ***."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo  # lazy: psycopg, see _psycopg

        parts = conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001 - an unparsable DSN: psycopg.connect reports it
        return dsn
    if parts.get("password"):
        parts["password"] = "***"
        return make_conninfo(**parts)
    return dsn


class PgvectorRanker:
    """Dense retrieval through an existing pgvector table, read-only, checked against exact search."""

    name = "pgvector"

    def __init__(
        self,
        dsn: str,
        table: str,
        id_column: str = "id",
        embedding_column: str = "embedding",
        document_column: str = "document_id",
        section_column: str | None = None,
        chunk_column: str | None = None,
        password_env: str | None = None,
        distance: str = "cosine",
        encoder: str | None = None,
        model: str | None = None,
        query_prefix: str = "",
        ef_search: int | None = None,
        probes: int | None = None,
        exact: bool = True,
        min_score: float | None = None,
        connect_timeout: int = 10,
    ):
        psycopg = _psycopg()
        from psycopg import sql  # lazy: psycopg, see _psycopg

        self.dsn_shown = masked_dsn(str(dsn))
        if self.dsn_shown != str(dsn):  # a password in the DSN would be written to the run's params
            raise PgvectorStoreError(
                f"pgvector ranker: ranker.dsn={self.dsn_shown} holds a password: remove it and export it in "
                "an environment variable named by ranker.password_env"
            )
        if distance not in DISTANCES:
            raise PgvectorStoreError(
                f"pgvector ranker: ranker.distance={distance!r}: use one of {', '.join(DISTANCES)}"
            )
        self.distance = distance
        self.operator, self.score_scale, self._to_score = DISTANCES[distance]
        password = None
        if password_env:
            password = os.environ.get(str(password_env))
            if not password:
                raise PgvectorStoreError(
                    f"pgvector ranker: ranker.password_env={password_env}: that environment variable is "
                    "not set (export it, or set ranker.password_env=null for a passwordless server)"
                )
        kwargs: dict[str, Any] = {"connect_timeout": int(connect_timeout), "autocommit": True}
        if password:
            kwargs["password"] = password
        try:
            self._conn = psycopg.connect(str(dsn), **kwargs)
            self._conn.execute("SET default_transaction_read_only = on")
        except psycopg.Error as exc:
            raise PgvectorStoreError(
                f"pgvector ranker: cannot connect to ranker.dsn={self.dsn_shown}: {_first_line(exc)}"
            ) from None
        self.table = str(table)
        self._table_sql = sql.SQL(".").join(sql.Identifier(p) for p in self.table.split("."))
        self._columns = self._check_columns(
            id_column, embedding_column, document_column, section_column, chunk_column
        )
        self.dimension = self._check_vector_column(embedding_column)
        self.indexes = self._indexes(embedding_column)
        self.params = self._set_params(ef_search, probes)
        self.query_prefix, self.min_score, self.model = query_prefix, min_score, model
        self._encode_fn: Callable[[list[str]], Any] | None = None
        if encoder:
            try:
                self._encode_fn = load_encoder(encoder)
            except FaissStoreError as exc:
                raise PgvectorStoreError(str(exc).replace("faiss ranker", "pgvector ranker")) from None
        self._semantic: SemanticRanker | None = None
        if self._encode_fn is not None:
            dimension = int(np.asarray(self._encode_fn(["evalpipe probe"])).shape[-1])
        else:
            self._semantic = SemanticRanker(model=model, cache_dir=None, test_prior="off")
            # lazy: evalpipe.rankers.dense.chroma, ~1 ms (the model-config reader lives there)
            from evalpipe.rankers.dense.chroma import declared_dimension

            location, _, _ = self._semantic._model_location()
            dimension = declared_dimension(Path(location)) or self.dimension
        if dimension != self.dimension:
            raise PgvectorStoreError(
                f"pgvector ranker: {self.table}.{embedding_column} holds {self.dimension}-dimensional "
                f"vectors but the query encoder makes {dimension}-dimensional ones: set ranker.encoder / "
                "ranker.model to what filled the table"
            )
        self.exact = bool(exact)
        self.ids, self.units, self._vectors = self._read_rows()
        if not self.ids:
            raise PgvectorStoreError(
                f"pgvector ranker: the table {self.table} at {self.dsn_shown} has 0 rows: nothing to search"
            )
        self._search_sql = sql.SQL(
            "SELECT {id}::text, {emb} {op} %s::vector FROM {table} ORDER BY {emb} {op} %s::vector LIMIT %s"
        ).format(
            id=sql.Identifier(id_column),
            emb=sql.Identifier(embedding_column),
            op=sql.SQL(self.operator),
            table=self._table_sql,
        )
        self.exact_answers_: dict[str, tuple[str, ...]] = {}
        self._pending: dict[str, tuple[np.ndarray, list[str], int]] = {}
        self._overlap = [0, 0]  # ANN IDs also in the exact top k, exact IDs asked for
        self._lock = threading.Lock()

    # -- opening ----------------------------------------------------------------------------------

    def _query(self, statement: Any, params: Sequence[Any] = (), rows: bool = True) -> list[tuple]:
        psycopg = _psycopg()
        try:
            cursor = self._conn.execute(statement, params)
            return cursor.fetchall() if rows else []
        except psycopg.Error as exc:
            raise PgvectorStoreError(f"pgvector ranker: {self.table}: {_first_line(exc)}") from None

    def _check_columns(self, *wanted: str | None) -> dict[str, str]:
        found = self._query("SELECT to_regclass(%s)::text", (self.table,))
        if not found or found[0][0] is None:
            raise PgvectorStoreError(
                f"pgvector ranker: ranker.table={self.table}: no such table at {self.dsn_shown}"
            )
        rows = self._query(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped",
            (self.table,),
        )
        columns = {name: kind for name, kind in rows}
        names = ("id_column", "embedding_column", "document_column", "section_column", "chunk_column")
        missing = [f"ranker.{n}={c}" for n, c in zip(names, wanted, strict=True) if c and c not in columns]
        if missing:
            raise PgvectorStoreError(
                f"pgvector ranker: the table {self.table} has no column {', '.join(missing)} "
                f"(it has: {', '.join(sorted(columns))})"
            )
        self._names = dict(zip(names, wanted, strict=True))
        return columns

    def _check_vector_column(self, column: str) -> int:
        kind = self._columns[column]
        if kind == "vector":  # declared without a dimension: the rows say it
            from psycopg import sql  # lazy: psycopg, see _psycopg

            rows = self._query(
                sql.SQL("SELECT DISTINCT vector_dims({}) FROM {}").format(
                    sql.Identifier(column), self._table_sql
                )
            )
            if len(rows) > 1:
                raise PgvectorStoreError(
                    f"pgvector ranker: ranker.embedding_column={column} of {self.table} holds vectors of "
                    f"{len(rows)} dimensions ({', '.join(str(r[0]) for r in rows)}): one query encoder "
                    "cannot search them all"
                )
            if not rows or rows[0][0] is None:
                raise PgvectorStoreError(
                    f"pgvector ranker: the table {self.table} at {self.dsn_shown} has 0 rows: "
                    "nothing to search"
                )
            return int(rows[0][0])
        if not kind.startswith("vector("):
            raise PgvectorStoreError(
                f"pgvector ranker: ranker.embedding_column={column} of {self.table} is {kind}, not a "
                "pgvector vector(d) column"
            )
        return int(kind[len("vector(") : -1])

    def _indexes(self, column: str) -> list[tuple[str, str, str]]:
        """(name, access method, operator class) of every index on the embedding column."""
        rows = self._query(
            "SELECT c.relname, am.amname, opc.opcname FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam "
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
            "JOIN pg_opclass opc ON opc.oid = i.indclass[0] "
            "WHERE i.indrelid = to_regclass(%s) AND a.attname = %s",
            (self.table, column),
        )
        return [(str(n), str(m), str(o)) for n, m, o in rows]

    def _set_params(self, ef_search: int | None, probes: int | None) -> dict[str, int]:
        params: dict[str, int] = {}
        methods = {m for _, m, _ in self.indexes}
        opclass = OPCLASSES[self.distance]
        for setting, value in (("ef_search", ef_search), ("probes", probes)):
            if value is None:
                continue
            method, variable = INDEX_SETTINGS[setting]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PgvectorStoreError(
                    f"pgvector ranker: ranker.{setting} must be a whole number >= 1, got {value!r}"
                )
            if method not in methods:
                raise PgvectorStoreError(
                    f"pgvector ranker: ranker.{setting}={value} does not apply: {self.table} has no {method} "
                    f"index on its embedding column (indexes: {', '.join(methods) or 'none'}); leave it null"
                )
            usable = [(n, o) for n, m, o in self.indexes if m == method]
            if not any(o == opclass for _, o in usable):
                built = ", ".join(f"{n} ({o})" for n, o in usable)
                raise PgvectorStoreError(
                    f"pgvector ranker: ranker.{setting}={value} would not be used: the {method} index "
                    f"{built} is not built for ranker.distance={self.distance} ({opclass}), so the query "
                    "scans the table; set ranker.distance to the index's, or leave the setting null"
                )
            self._query(f"SET {variable} = {int(value)}", rows=False)  # int() above: no injection
            params[setting] = value
        return params

    def _read_rows(self) -> tuple[list[str], dict[str, Unit], np.ndarray | None]:
        from psycopg import sql  # lazy: psycopg, see _psycopg

        n = self._names
        columns = [n["id_column"], n["document_column"], n["section_column"], n["chunk_column"]]
        parts = [sql.Identifier(c) if c else sql.SQL("NULL") for c in columns]
        if self.exact:
            parts.append(sql.SQL("{}::text").format(sql.Identifier(n["embedding_column"])))
        statement = sql.SQL("SELECT {} FROM {}").format(sql.SQL(", ").join(parts), self._table_sql)
        ids: list[str] = []
        units: dict[str, Unit] = {}
        vectors: list[np.ndarray] = []
        for row in self._query(statement):
            rid, document, section, chunk = str(row[0]), row[1], row[2], row[3]
            ids.append(rid)
            units[rid] = Unit(
                id=rid,
                kind="chunk",
                metadata={
                    "document_id": str(document),
                    "chunk_index": chunk if isinstance(chunk, int) else 0,
                    **({"section": str(section)} if section not in (None, "") else {}),
                },
            )
            if self.exact:
                vectors.append(np.array(row[4].strip("[]").split(","), dtype=np.float32))
        return ids, units, (np.stack(vectors) if self.exact and vectors else None)

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
                raise RuntimeError("pgvector ranker: call prepare(corpus) before search()")
            vectors = self._semantic._encode(texts)
        return np.ascontiguousarray(vectors.reshape(len(texts), self.dimension))

    def _exact(self, vectors: np.ndarray, k: int) -> list[list[int]]:
        assert self._vectors is not None
        if self.distance == "ip":
            scores = vectors @ self._vectors.T
        elif self.distance == "cosine":
            norms = np.linalg.norm(self._vectors, axis=1) * np.linalg.norm(vectors, axis=1)[:, None]
            scores = (vectors @ self._vectors.T) / np.where(norms == 0, 1.0, norms)
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
        depth = min(k, len(self.ids))
        vectors = self._queries(queries)
        out: list[list[Hit]] = []
        for n, query in enumerate(queries):
            literal = "[" + ",".join(repr(float(x)) for x in vectors[n]) + "]"
            with self._lock:  # one connection: its statements run one at a time
                rows = self._query(self._search_sql, (literal, literal, depth))
            hits = []
            for rid, distance in rows:
                score = float(self._to_score(float(distance)))
                if self.min_score is not None and score < self.min_score:
                    continue
                hits.append(Hit(rid, score))
            if self.exact:  # searched exactly after the run, so no latency includes it
                with self._lock:
                    self._pending[query] = (vectors[n].copy(), [r[0] for r in rows], depth)
            out.append(hits)
        return out

    def _settle(self) -> None:
        """The exact search for every query asked since the last call, in one matrix product."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending or self._vectors is None:
            return
        queries = list(pending)
        exact = self._exact(np.stack([pending[q][0] for q in queries]), max(p[2] for p in pending.values()))
        with self._lock:
            for query, rows in zip(queries, exact, strict=True):
                _, ann, depth = pending[query]
                exact_ids = tuple(self.ids[i] for i in rows[:depth])
                self.exact_answers_[query] = exact_ids
                self._overlap[0] += len(set(exact_ids) & set(ann))
                self._overlap[1] += len(exact_ids)

    @property
    def exact_answers(self) -> dict[str, tuple[str, ...]]:
        """query -> the exact search's top k IDs over the table's vectors (empty with exact=false)."""
        self._settle()
        return self.exact_answers_

    @property
    def foreign_units(self) -> dict[str, Unit]:
        return self.units

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mode": "existing",
            "store": f"{self.dsn_shown} {self.table}",
            "index_type": ",".join(f"{n}:{m}:{o}" for n, m, o in self.indexes) or "none (sequential scan)",
            "score_scale": self.score_scale,
            "vectors": len(self.ids),
            "dimension": self.dimension,
            **self.params,
        }
        self._settle()
        if self.exact and self._overlap[1]:
            out["recall_vs_exact"] = self._overlap[0] / self._overlap[1]
        if not self.exact:
            out["exact"] = "off (ranker.exact=false): no index-vs-embedding split"
        return out

    def __repr__(self) -> str:
        return f"PgvectorRanker({self.dsn_shown}, {self.table})"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
