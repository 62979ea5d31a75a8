"""A retriever object someone already has, given by import path, as a ranker.

`ranker.retriever=mypkg.rag.make_retriever` names a retriever object or a function that returns one
(called with `ranker.retriever_kwargs`), as a plug-in is named. The subclasses (LangChain,
LlamaIndex, `frameworks.py`) say how to ask it and how to read what it answers; this class loads
it, checks it with one probe query before the first case (a wrong path, an object of another
kind, metadata without the named keys: one line, exit 2), asks for `k` results where the
framework lets a caller set k, maps each answer's metadata to document / section / chunk
(`records.RecordUnits`), and answers many queries from a thread pool.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from evalpipe.core.hit import Hit
from evalpipe.core.unit import Unit
from evalpipe.rankers.external.records import FieldMissing, RecordUnits, dig
from evalpipe.safety.errors import EvalpipeError


class RetrieverObjectError(EvalpipeError):
    """A retriever object that cannot be loaded or read as configured; the message names the setting."""


def load_object(path: str, kwargs: Mapping[str, Any], ranker: str) -> Any:
    """The object at `module.attr` (called with `kwargs` when it is a class or function that is not
    itself usable); errors name `ranker.retriever`."""
    module_name, _, attr = str(path).rpartition(".")
    if not module_name or not attr:
        raise RetrieverObjectError(
            f"{ranker} ranker: ranker.retriever must be an import path like mypkg.rag.make_retriever, "
            f"got {path!r}"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RetrieverObjectError(
            f"{ranker} ranker: ranker.retriever={path}: cannot import {module_name} ({exc})"
        ) from None
    if not hasattr(module, attr):
        raise RetrieverObjectError(f"{ranker} ranker: ranker.retriever={path}: {module_name} has no {attr!r}")
    return getattr(module, attr), dict(kwargs)


class RetrieverObjectRanker:
    """Base of the framework rankers: load, probe, search, map metadata. Subclasses implement
    `_is_retriever`, `_set_k`, `_ask(query) -> list of (id, score, metadata)`."""

    name = "retriever"
    framework = "a retriever"

    def __init__(
        self,
        retriever: Any,
        retriever_kwargs: Mapping[str, Any] | None = None,
        id_field: str | None = None,
        score_field: str | None = None,
        document_field: str | None = "document_id",
        section_field: str | None = None,
        chunk_field: str | None = None,
        concurrency: int = 4,
        probe_query: str = "evalpipe probe",
        min_score: float | None = None,
    ):
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise RetrieverObjectError(
                f"{self.name} ranker: ranker.concurrency must be a whole number >= 1, got {concurrency!r}"
            )
        if (section_field or chunk_field) and not document_field:
            raise RetrieverObjectError(
                f"{self.name} ranker: ranker.section_field / chunk_field need ranker.document_field"
            )
        self.path = retriever if isinstance(retriever, str) else f"{type(retriever).__qualname__} object"
        self.retriever = self._resolve(retriever, retriever_kwargs or {})
        self.id_field, self.score_field = id_field, score_field
        self.records = RecordUnits(document_field, section_field, chunk_field)
        self.concurrency, self.min_score = concurrency, min_score
        self.k_setting = self._k_setting()
        self._probe(probe_query)

    def _resolve(self, retriever: Any, kwargs: Mapping[str, Any]) -> Any:
        obj = retriever
        if isinstance(retriever, str):
            obj, kwargs = load_object(retriever, kwargs, self.name)
        if not self._is_retriever(obj) and callable(obj):
            try:
                obj = obj(**kwargs)
            except Exception as exc:  # the user's factory: any failure is reported as its own
                raise RetrieverObjectError(
                    f"{self.name} ranker: ranker.retriever={self.path} raised {type(exc).__name__}: "
                    f"{' '.join(str(exc).split())}"
                ) from None
        elif kwargs:
            raise RetrieverObjectError(
                f"{self.name} ranker: ranker.retriever_kwargs were given but ranker.retriever={self.path} "
                "is already a retriever, not a function to call with them"
            )
        if not self._is_retriever(obj):
            raise RetrieverObjectError(
                f"{self.name} ranker: ranker.retriever={self.path} gave a {type(obj).__qualname__}, "
                f"not {self.framework}"
            )
        return obj

    # -- subclasses ---------------------------------------------------------------------------------

    def _is_retriever(self, obj: Any) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def _k_setting(self) -> str | None:  # pragma: no cover - interface
        """The attribute through which k is set per query (None: the retriever's own k is kept)."""
        raise NotImplementedError

    def _ask(self, query: str, k: int) -> list[tuple[str | None, float | None, Mapping[str, Any]]]:
        raise NotImplementedError  # pragma: no cover - interface

    # -- shared -------------------------------------------------------------------------------------

    def _hits(self, answers: list[tuple[str | None, float | None, Mapping[str, Any]]], k: int) -> list[Hit]:
        hits: list[Hit] = []
        for n, (own_id, own_score, metadata) in enumerate(answers):
            where = f"result {n}"
            rid: Any = own_id
            if self.id_field:
                try:
                    rid = dig(metadata, self.id_field)
                except FieldMissing as exc:
                    raise FieldMissing(f"{where}: ranker.id_field {self.id_field!r}: {exc}") from None
            if rid in (None, ""):
                raise FieldMissing(
                    f"{where} has no ID of its own: set ranker.id_field to the metadata key holding one"
                )
            score = own_score
            if self.score_field:
                try:
                    raw = dig(metadata, self.score_field)
                except FieldMissing as exc:
                    raise FieldMissing(f"{where}: ranker.score_field {self.score_field!r}: {exc}") from None
                if isinstance(raw, bool) or not isinstance(raw, int | float):
                    raise FieldMissing(f"{where}: ranker.score_field {self.score_field!r} holds {raw!r}")
                score = float(raw)
            if self.min_score is not None and score is not None and score < self.min_score:
                continue
            self.records.unit(str(rid), metadata, where)
            hits.append(Hit(str(rid), score))
            if len(hits) == k:
                break
        return hits

    def _probe(self, query: str) -> None:
        try:
            self._hits(self._ask(query, 1), 1)
        except FieldMissing as exc:
            raise RetrieverObjectError(
                f"{self.name} ranker: the probe query's answer from ranker.retriever={self.path}: {exc}"
            ) from None
        except Exception as exc:  # the user's retriever: whatever it raises is reported as its own
            raise RetrieverObjectError(
                f"{self.name} ranker: the probe query to ranker.retriever={self.path} raised "
                f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            ) from None
        self.records.units.clear()

    def search(self, query: str, k: int, constraints: Mapping[str, Any] | None = None) -> list[Hit]:
        return self._hits(self._ask(query, k), k)

    def search_batch(
        self, queries: Sequence[str], k: int, constraints: Sequence[Mapping[str, Any] | None] | None = None
    ) -> list[list[Hit]]:
        """Up to `concurrency` queries at once, each answered as `search` answers it."""
        if self.concurrency == 1 or len(queries) <= 1:
            return [self.search(q, k) for q in queries]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(queries))) as pool:
            return list(pool.map(lambda q: self.search(q, k), queries))

    @property
    def foreign_units(self) -> dict[str, Unit]:
        return self.records.units

    def stats(self) -> dict[str, Any]:
        return {"mode": self.name, "k_set_by": self.k_setting or "the retriever (not settable)"}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path})"
